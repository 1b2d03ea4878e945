//! `schema:PATH` and inline schemas: JSON Schema (2020-12 by default, the draft named by
//! `$schema` otherwise). `format` is checked (`"date"` rejects `"July 4th"`) unless the caller
//! asks for [`Formats::Annotation`]. A `$ref` to another file is read from the schema file's
//! directory and never from the network ([`refs`]).
//!
//! A schema is compiled once per process: a gateway sees the same few schemas on every
//! request, and compiling one (its `pattern`s most of all) costs far more than checking an
//! answer against it.

mod expansion;
pub mod refs;
mod stop;

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use redraft_core::issue::json_within;
use redraft_core::{BoundedIssues, CancelFlag, EvalInput, Evaluator, EvaluatorError, Issue, Verdict};
use serde_json::Value;

pub use self::refs::RefError;
use self::refs::{LocalFiles, Retriever};

/// What the `format` keyword does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Formats {
    /// A value must have its format: `date`, `date-time`, `time`, `duration`, `email`,
    /// `hostname`, `ipv4`, `ipv6`, `uri`, `uri-reference`, `uuid`, `regex`, `json-pointer`
    /// and the draft's other formats are checked; a format unknown here is not.
    #[default]
    Checked,
    /// `format` is an annotation only, as JSON Schema 2020-12 has it by default.
    Annotation,
}

impl Formats {
    /// [`Formats::Checked`] when `check` (the `check_formats` setting), else
    /// [`Formats::Annotation`].
    pub fn checked(check: bool) -> Self {
        if check { Formats::Checked } else { Formats::Annotation }
    }
}

/// A compiled JSON Schema (cheap to clone: the compiled form is shared).
#[derive(Clone)]
pub struct SchemaEvaluator {
    compiled: Arc<Compiled>,
}

struct Compiled {
    schema: Arc<Value>,
    validator: jsonschema::Validator,
    /// The files its `$ref`s read (canonical paths), with the text they had.
    files: Vec<(PathBuf, String)>,
}

impl Compiled {
    /// Whether every file the schema's `$ref`s read still holds what it held.
    fn is_fresh(&self) -> bool {
        self.files.iter().all(|(path, text)| std::fs::read_to_string(path).is_ok_and(|now| now == *text))
    }
}

impl std::fmt::Debug for SchemaEvaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaEvaluator").field("schema", &self.compiled.schema).finish_non_exhaustive()
    }
}

/// What a compiled schema is found by: its JSON text, what `format` does, and the directory
/// its `$ref`s resolve in (the same text elsewhere may name other files).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    text: String,
    formats: Formats,
    dir: Option<PathBuf>,
}

/// The schemas compiled so far: at most [`CACHED_SCHEMAS`], the oldest dropped first; a schema
/// longer than [`CACHED_SCHEMA_BYTES`] (the files it refers to included) is compiled every
/// time.
struct Cache {
    by_key: HashMap<Key, Arc<Compiled>>,
    order: VecDeque<Key>,
}

const CACHED_SCHEMAS: usize = 256;
/// With [`CACHED_SCHEMAS`], bounds what requests sending distinct schemas can make the cache
/// hold to 16 MiB of text (and the validators compiled from it).
const CACHED_SCHEMA_BYTES: usize = 64 * 1024;

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(Cache { by_key: HashMap::new(), order: VecDeque::new() }))
}

fn lock(cache: &Mutex<Cache>) -> std::sync::MutexGuard<'_, Cache> {
    // The cache holds no invariant a panic elsewhere could break: a poisoned lock is usable.
    cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A schema cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    #[error("cannot read the schema file `{path}`: {source}\nhint: check the path given to `--schema`")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the schema file `{path}` is not valid JSON: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("the schema {origin} is not a valid JSON Schema: {message}")]
    Invalid { origin: String, message: String },
    /// A `$ref` names something that is not read: a URL, a file outside the schema file's
    /// directory, a file from an inline schema, a file that cannot be read.
    #[error("the schema {origin} has a `$ref` that cannot be followed: {source}")]
    Ref {
        origin: String,
        #[source]
        source: RefError,
    },
}

/// Where a schema came from, for messages and for its `$ref`s.
struct Origin {
    /// `given inline`, ``in `schema.json` ``.
    text: String,
    /// The schema file's canonical path and directory, when it came from one.
    file: Option<(url::Url, PathBuf)>,
}

impl SchemaEvaluator {
    /// Compile an inline schema, checking `format`s.
    pub fn new(schema: Value) -> Result<Self, SchemaError> {
        Self::compile(Cow::Owned(schema), Formats::Checked, inline())
    }

    /// Compile an inline schema with `formats`, copying `schema` only when it was not compiled
    /// before.
    pub fn of(schema: &Value, formats: Formats) -> Result<Self, SchemaError> {
        Self::compile(Cow::Borrowed(schema), formats, inline())
    }

    /// Read and compile a schema file with `formats`. Its `$ref`s to other files resolve
    /// against its directory (symbolic links resolved) and may not leave it.
    pub fn from_file(path: &Path, formats: Formats) -> Result<Self, SchemaError> {
        Self::from_file_shown_as(path, path, formats)
    }

    /// Like [`SchemaEvaluator::from_file`], with messages naming the file `shown` (the path as a
    /// request gave it) rather than `path` (where it was found, which a network client need not
    /// learn).
    pub fn from_file_shown_as(path: &Path, shown: &Path, formats: Formats) -> Result<Self, SchemaError> {
        let read = |source| SchemaError::Read { path: shown.to_owned(), source };
        let canonical = path.canonicalize().map_err(read)?;
        let text = std::fs::read_to_string(&canonical).map_err(read)?;
        let schema: Value =
            serde_json::from_str(&text).map_err(|source| SchemaError::Parse { path: shown.to_owned(), source })?;
        let file = match (url::Url::from_file_path(&canonical), canonical.parent()) {
            (Ok(uri), Some(dir)) => Some((uri, dir.to_owned())),
            _ => None,
        };
        Self::compile(Cow::Owned(schema), formats, Origin { text: format!("in `{}`", shown.display()), file })
    }

    fn compile(schema: Cow<'_, Value>, formats: Formats, origin: Origin) -> Result<Self, SchemaError> {
        if !(schema.is_object() || schema.is_boolean()) {
            return Err(SchemaError::Invalid {
                origin: origin.text,
                message: "a schema must be a JSON object or a boolean".into(),
            });
        }
        let expanded = expansion::expanded_size(&schema, expansion::MAX_EXPANDED_SUBSCHEMAS).map_err(|reference| {
            SchemaError::Invalid {
                origin: origin.text.clone(),
                message: format!(
                    "`$ref` `{reference}` names no subschema (a value under `default`, `enum`, `const` or a keyword JSON Schema does not know)\nhint: put the schema it refers to under `$defs` and refer to it there"
                ),
            }
        })?;
        if expanded > expansion::MAX_EXPANDED_SUBSCHEMAS {
            return Err(SchemaError::Invalid {
                origin: origin.text,
                message: format!(
                    "with its `$ref`s expanded it holds more than {} subschemas (a reference used more than once at each of many levels), so checking a single value could take hours\nhint: refer to each definition once per level, or merge the definitions",
                    expansion::MAX_EXPANDED_SUBSCHEMAS
                ),
            });
        }
        // The text is the key: the same schema from another request or file shares the
        // compiled form. A schema that does not compile is not cached (its error is cheap).
        let dir = origin.file.as_ref().map(|(_, dir)| dir.clone());
        let key = serde_json::to_string(&schema).ok().filter(|t| t.len() <= CACHED_SCHEMA_BYTES).map(|text| Key {
            text,
            formats,
            dir: dir.clone(),
        });
        if let Some(key) = &key {
            let cached = lock(cache()).by_key.get(key).cloned();
            if let Some(compiled) = cached.filter(|c| c.is_fresh()) {
                return Ok(Self { compiled });
            }
        }
        let files = LocalFiles::new(dir);
        // Patterns are matched by a linear-time engine: no pattern and no string can make a
        // check backtrack for minutes. Lookaround and backreferences, which need backtracking,
        // are refused when the schema is compiled.
        let mut options = jsonschema::options()
            .with_pattern_options(jsonschema::PatternOptions::regex().size_limit(PATTERN_SIZE_LIMIT))
            .with_keyword(stop::KEYWORD, stop::probe)
            .should_validate_formats(formats == Formats::Checked)
            .with_retriever(Retriever(Arc::clone(&files)));
        if let Some((uri, _)) = &origin.file {
            options = options.with_base_uri(uri.as_str());
        }
        let validator = options.build(&stop::probed(&schema)).map_err(|e| match files.take_refusal() {
            Some(source) => SchemaError::Ref { origin: origin.text.clone(), source },
            None => SchemaError::Invalid { origin: origin.text.clone(), message: describe(&e) },
        })?;
        let files = files.take_files();
        let size = key.as_ref().map_or(0, |k| k.text.len()) + files.iter().map(|(_, t)| t.len()).sum::<usize>();
        let compiled = Arc::new(Compiled { schema: Arc::new(schema.into_owned()), validator, files });
        if let Some(key) = key.filter(|_| size <= CACHED_SCHEMA_BYTES) {
            let mut cache = lock(cache());
            // A stale entry (a file it read has changed) is replaced where it stands.
            if cache.by_key.insert(key.clone(), Arc::clone(&compiled)).is_none() {
                if cache.order.len() >= CACHED_SCHEMAS
                    && let Some(oldest) = cache.order.pop_front()
                {
                    cache.by_key.remove(&oldest);
                }
                cache.order.push_back(key);
            }
        }
        Ok(Self { compiled })
    }

    /// The schema as given.
    pub fn schema_value(&self) -> &Value {
        &self.compiled.schema
    }

    /// The schema as given, shared.
    pub fn shared_schema(&self) -> Arc<Value> {
        Arc::clone(&self.compiled.schema)
    }

    /// One issue per error, with its instance path (a JSON Pointer) and keyword: the first
    /// [`MAX_ISSUES_PER_ATTEMPT`](redraft_core::MAX_ISSUES_PER_ATTEMPT), then a
    /// `too_many_issues` issue counting the others, which are not made into issues.
    pub fn issues(&self, artifact: &Value) -> Vec<Issue> {
        self.issues_until(artifact, &CancelFlag::new())
    }

    /// [`SchemaEvaluator::issues`], stopped soon after `cancel` is set (every subschema looks
    /// at it: see `stop.rs`); then one `check_timeout` issue says the check did not end.
    pub fn issues_until(&self, artifact: &Value, cancel: &CancelFlag) -> Vec<Issue> {
        let validator = &self.compiled.validator;
        let checked = stop::under(cancel, || {
            // Far cheaper than gathering errors, and most answers that reach here pass.
            if validator.is_valid(artifact) {
                return Vec::new();
            }
            let mut issues = BoundedIssues::new();
            let mut errors = validator.iter_errors(artifact);
            for error in errors.by_ref() {
                issues.push(issue(&error));
                if issues.is_full() {
                    break;
                }
            }
            issues.count(u64::try_from(errors.count()).unwrap_or(u64::MAX), None);
            issues.finish()
        });
        checked.unwrap_or_else(|| {
            vec![Issue::new("", redraft_core::codes::CHECK_TIMEOUT, "the schema check was stopped before it ended")]
        })
    }
}

/// The most memory one compiled pattern may take (the regex engine's own default is 10 MiB; a
/// schema of a thousand such patterns would hold 10 GiB).
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

fn inline() -> Origin {
    Origin { text: "given inline".to_owned(), file: None }
}

fn describe(e: &jsonschema::ValidationError<'_>) -> String {
    let at = e.instance_path().as_str();
    let mut text = if at.is_empty() { e.to_string() } else { format!("{e} (at `{at}`)") };
    if matches!(e.kind(), jsonschema::error::ValidationErrorKind::Format { format } if format == "regex") {
        text.push_str(
            "\nhint: patterns are matched in linear time, so lookaround (`(?=`, `(?!`, `(?<=`, `(?<!`) and backreferences (`\\1`) are not supported: rewrite the pattern without them",
        );
    }
    text
}

/// Values whose JSON is longer than this are described in an issue's message, not written out:
/// an answer of megabytes failing many keywords would otherwise be copied into each message.
const SHOWN_VALUE_BYTES: usize = 1_000;

fn issue(e: &jsonschema::ValidationError<'_>) -> Issue {
    let found = e.instance();
    let shown = json_within(found, SHOWN_VALUE_BYTES);
    let message = if shown { e.to_string() } else { e.masked_with(described(found)).to_string() };
    let mut issue = Issue::new(e.instance_path().as_str(), e.kind().keyword(), message);
    if shown && !(found.is_object() || found.is_array()) {
        issue.found = Some(Box::new(found.clone().into_owned()));
    }
    issue
}

/// A value too long to show, in words: `a string of 5000 characters`.
fn described(value: &Value) -> String {
    let count = |n: usize, one: &str| if n == 1 { format!("1 {one}") } else { format!("{n} {one}s") };
    match value {
        Value::String(s) => format!("a string of {}", count(s.chars().count(), "character")),
        Value::Array(items) => format!("an array of {}", count(items.len(), "item")),
        Value::Object(members) => format!("an object of {}", count(members.len(), "member")),
        other => other.to_string(),
    }
}

#[async_trait::async_trait]
impl Evaluator for SchemaEvaluator {
    fn name(&self) -> &str {
        "schema"
    }

    fn schema(&self) -> Option<Arc<Value>> {
        Some(Arc::clone(&self.compiled.schema))
    }

    async fn evaluate(&self, input: EvalInput<'_>) -> Result<Verdict, EvaluatorError> {
        Ok(Verdict::from_issues(self.issues_until(input.artifact, input.cancel)))
    }
}

#[cfg(test)]
mod tests;
