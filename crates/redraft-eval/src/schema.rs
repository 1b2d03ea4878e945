//! `schema:PATH` and inline schemas: JSON Schema (2020-12 by default, the draft named by
//! `$schema` otherwise). A schema is compiled once per process: a gateway sees the same few
//! schemas on every request, and compiling one (its `pattern`s most of all) costs far more
//! than checking an answer against it.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use redraft_core::{EvalInput, Evaluator, EvaluatorError, Issue, Verdict};
use serde_json::Value;

/// A compiled JSON Schema (cheap to clone: the compiled form is shared).
#[derive(Clone)]
pub struct SchemaEvaluator {
    compiled: Arc<Compiled>,
}

struct Compiled {
    schema: Arc<Value>,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for SchemaEvaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaEvaluator").field("schema", &self.compiled.schema).finish_non_exhaustive()
    }
}

/// The schemas compiled so far, by their JSON text: at most [`CACHED_SCHEMAS`], the oldest
/// dropped first; a schema longer than [`CACHED_SCHEMA_BYTES`] is compiled every time.
struct Cache {
    by_text: HashMap<String, Arc<Compiled>>,
    order: VecDeque<String>,
}

const CACHED_SCHEMAS: usize = 256;
/// With [`CACHED_SCHEMAS`], bounds what requests sending distinct schemas can make the cache
/// hold to 16 MiB of text (and the validators compiled from it).
const CACHED_SCHEMA_BYTES: usize = 64 * 1024;

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(Cache { by_text: HashMap::new(), order: VecDeque::new() }))
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
}

impl SchemaEvaluator {
    /// Compile an inline schema.
    pub fn new(schema: Value) -> Result<Self, SchemaError> {
        Self::compile(std::borrow::Cow::Owned(schema), "given inline".to_owned())
    }

    /// Like [`SchemaEvaluator::new`], copying `schema` only when it was not compiled before.
    pub fn of(schema: &Value) -> Result<Self, SchemaError> {
        Self::compile(std::borrow::Cow::Borrowed(schema), "given inline".to_owned())
    }

    /// Read and compile a schema file.
    pub fn from_file(path: &Path) -> Result<Self, SchemaError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| SchemaError::Read { path: path.to_owned(), source })?;
        let schema: Value =
            serde_json::from_str(&text).map_err(|source| SchemaError::Parse { path: path.to_owned(), source })?;
        Self::compile(std::borrow::Cow::Owned(schema), format!("in `{}`", path.display()))
    }

    fn compile(schema: std::borrow::Cow<'_, Value>, origin: String) -> Result<Self, SchemaError> {
        if !(schema.is_object() || schema.is_boolean()) {
            return Err(SchemaError::Invalid { origin, message: "a schema must be a JSON object or a boolean".into() });
        }
        // The text is the key: the same schema from another request or file shares the
        // compiled form. A schema that does not compile is not cached (its error is cheap).
        let text = serde_json::to_string(&schema).ok().filter(|t| t.len() <= CACHED_SCHEMA_BYTES);
        if let Some(text) = &text
            && let Some(compiled) = lock(cache()).by_text.get(text)
        {
            return Ok(Self { compiled: Arc::clone(compiled) });
        }
        let validator =
            jsonschema::validator_for(&schema).map_err(|e| SchemaError::Invalid { origin, message: describe(&e) })?;
        let compiled = Arc::new(Compiled { schema: Arc::new(schema.into_owned()), validator });
        if let Some(text) = text {
            let mut cache = lock(cache());
            if !cache.by_text.contains_key(&text) {
                if cache.order.len() >= CACHED_SCHEMAS
                    && let Some(oldest) = cache.order.pop_front()
                {
                    cache.by_text.remove(&oldest);
                }
                cache.order.push_back(text.clone());
                cache.by_text.insert(text, Arc::clone(&compiled));
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

    /// One issue per error, with its instance path (a JSON Pointer) and keyword.
    pub fn issues(&self, artifact: &Value) -> Vec<Issue> {
        self.compiled.validator.iter_errors(artifact).map(|e| issue(&e)).collect()
    }
}

fn describe(e: &jsonschema::ValidationError<'_>) -> String {
    let at = e.instance_path().as_str();
    if at.is_empty() { e.to_string() } else { format!("{e} (at `{at}`)") }
}

fn issue(e: &jsonschema::ValidationError<'_>) -> Issue {
    let mut issue = Issue::new(e.instance_path().as_str(), e.kind().keyword(), e.to_string());
    let found = e.instance();
    if !(found.is_object() || found.is_array()) {
        issue.found = Some(Box::new(found.clone().into_owned()));
    }
    issue
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
        Ok(Verdict::from_issues(self.issues(input.artifact)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(schema: Value, artifact: Value) -> Vec<(String, String, String)> {
        let ev = SchemaEvaluator::new(schema).unwrap();
        ev.issues(&artifact).into_iter().map(|i| (i.path, i.code, i.message)).collect()
    }

    #[test]
    fn one_issue_per_error_with_pointer_and_keyword() {
        let schema = json!({
            "type": "object",
            "required": ["name", "fills"],
            "properties": {
                "name": {"type": "string"},
                "fills": {"type": "array", "items": {"type": "object", "properties": {"age": {"type": "integer", "minimum": 18}}}}
            }
        });
        let got = check(schema, json!({"fills": [{"age": 30}, {"age": 12}, {"age": "x"}]}));
        assert_eq!(
            got,
            [
                ("".into(), "required".into(), "\"name\" is a required property".into()),
                ("/fills/1/age".into(), "minimum".into(), "12 is less than the minimum of 18".into()),
                ("/fills/2/age".into(), "type".into(), "\"x\" is not of type \"integer\"".into()),
            ]
        );
    }

    #[test]
    fn the_same_schema_is_compiled_once_and_the_cache_is_bounded() {
        let schema =
            json!({"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-\\d+$"}}});
        let a = SchemaEvaluator::new(schema.clone()).unwrap();
        let b = SchemaEvaluator::new(schema.clone()).unwrap();
        assert!(Arc::ptr_eq(&a.compiled, &b.compiled), "the second request reuses the compiled schema");
        assert_eq!(b.issues(&json!({"code": "abc"})).len(), 1, "the shared form still checks");
        assert_eq!(b.schema_value(), &schema);
        // Another schema is another entry; a schema that does not compile is never cached.
        let other = SchemaEvaluator::new(json!({"type": "integer"})).unwrap();
        assert!(!Arc::ptr_eq(&a.compiled, &other.compiled));
        assert!(SchemaEvaluator::new(json!({"type": 12})).is_err());
        assert!(SchemaEvaluator::new(json!({"type": 12})).is_err());
        // Past the bound the oldest entries go: the cache never holds more than its bound.
        for i in 0..(CACHED_SCHEMAS + 10) {
            SchemaEvaluator::new(json!({"type": "object", "title": format!("bounded-{i}")})).unwrap();
        }
        let cache = lock(cache());
        assert!(cache.by_text.len() <= CACHED_SCHEMAS && cache.order.len() == cache.by_text.len());
        assert!(!cache.by_text.contains_key(r#"{"title":"bounded-0","type":"object"}"#));
        assert!(!cache.by_text.contains_key(r#"{"type":"object","title":"bounded-0"}"#));
    }

    #[test]
    fn the_draft_comes_from_dollar_schema() {
        // Draft 4 reads `exclusiveMaximum` as a boolean modifier; 2020-12 as a number.
        let d4 = json!({"$schema": "http://json-schema.org/draft-04/schema#", "maximum": 5, "exclusiveMaximum": true});
        assert_eq!(check(d4, json!(5)).len(), 1);
        let d2020 = json!({"exclusiveMaximum": 5});
        assert_eq!(check(d2020, json!(5)).len(), 1);
        assert_eq!(check(json!({"exclusiveMaximum": 5}), json!(4)).len(), 0);
    }

    #[test]
    fn invalid_schemas_are_refused_at_construction() {
        let err = SchemaEvaluator::new(json!({"type": "strin"})).unwrap_err().to_string();
        assert!(err.starts_with("the schema given inline is not a valid JSON Schema"), "{err}");
        assert!(SchemaEvaluator::new(json!([1])).is_err());
        let err = SchemaEvaluator::from_file(Path::new("/nonexistent/s.json")).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/s.json") && err.contains("hint:"), "{err}");
    }

    #[test]
    fn remote_refs_are_not_fetched() {
        let err = SchemaEvaluator::new(json!({"$ref": "https://example.com/s.json"}));
        assert!(err.is_err());
    }

    #[tokio::test]
    async fn evaluates_as_an_evaluator() {
        let ev = SchemaEvaluator::new(json!({"type": "integer"})).unwrap();
        let ctx = Value::Null;
        let v = ev.evaluate(EvalInput { artifact: &json!(3), context: &ctx, iteration: 1 }).await.unwrap();
        assert!(v.passed);
        let v = ev.evaluate(EvalInput { artifact: &json!("3"), context: &ctx, iteration: 1 }).await.unwrap();
        assert!(!v.passed);
        assert_eq!(v.issues[0].found.as_deref(), Some(&json!("3")));
    }
}
