//! Kinds: registered, named artifact types (`kind:NAME`).
//!
//! A kind is a directory `kinds/NAME/` holding `kind.toml` (description, optional prompt,
//! reference tables, rules, optional LLM check), `schema.json`, an optional `example.json`
//! and the reference tables (CSV with a header row, or JSON Lines of objects).
//!
//! Key design decision: **everything is compiled at load, nothing per artifact.** Every CEL
//! expression (`each`, `when`, `check`, `found`, `expected`) and every template (`path`,
//! `message`) is compiled once by [`Kind::load`], and the variables they use are checked then
//! (an unknown table or variable, `item` in a rule without `each`, `{{ found }}` in a rule
//! without `found`), so a broken kind fails before the first model call, naming the file, the
//! line and the rule (`kind.toml:14: rule `city_matches`: `check` does not compile: …`).
//! Tables are loaded once into CEL maps bound in a root context that every check shares.
//!
//! A rule that fails to *evaluate* on an artifact (a missing field, a type error, an unknown
//! function) is a failed check of that rule — an issue `rule:CODE` at the rule's path whose
//! message says what could not be evaluated and where — not an `evaluator_error`: usually the
//! artifact lacks the data, and the model can act on the message; when the rule or the context
//! is at fault, the same attributed issue on every attempt is what escalation shows.
//!
//! CEL in rules sees `self` (the artifact), `context` (the task's context, `{}` when none),
//! one variable per table (a map key → row; CSV cells are strings, JSON Lines rows keep their
//! JSON types), and `item`/`index` in rules with `each`. Besides the standard library and the
//! `strings`, `lists` and `math` extensions, `lookup(table, key)` gives the row or `null` and
//! `exists(table, key)` whether there is one (`key in table` works too).

mod error;
mod evaluator;
mod expr;
mod manifest;
mod rule;
mod table;

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use redraft_core::{CancelFlag, Issue};
use serde::Deserialize;
use serde_json::Value;

pub use error::KindError;
pub use evaluator::KindEvaluator;

use crate::schema::{Formats, SchemaError, SchemaEvaluator};
use error::line_col;
use manifest::Manifest;
use rule::{Compiler, Rule, Run};
use table::Table;

/// A kind's optional LLM check (`[llm_check]`); the judge that runs it is built elsewhere.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmCheck {
    /// The rubric; by default the kind's description.
    #[serde(default)]
    pub criterion: Option<String>,
}

/// A loaded kind: its schema, example, tables and compiled rules.
pub struct Kind {
    /// The directory name.
    pub name: String,
    /// What the artifact is; also the rubric of the LLM check unless it has a criterion.
    pub description: String,
    /// Added to the task prompt.
    pub prompt: Option<String>,
    /// The JSON Schema (`schema.json`).
    pub schema: Value,
    /// An example artifact (`example.json`), checked against the schema at load.
    pub example: Option<Value>,
    /// The optional LLM check.
    pub llm_check: Option<LlmCheck>,
    dir: PathBuf,
    tables: Vec<Table>,
    rules: Vec<Rule>,
    templates: minijinja::Environment<'static>,
    /// The CEL context with the environment and the tables; each check runs in a child scope.
    root: cel::Context<'static, 'static>,
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kind")
            .field("name", &self.name)
            .field("dir", &self.dir)
            .field("description", &self.description)
            .field("tables", &self.tables)
            .field("rules", &self.rules.iter().map(|r| r.code.as_str()).collect::<Vec<_>>())
            .field("llm_check", &self.llm_check)
            .finish_non_exhaustive()
    }
}

impl Kind {
    /// Load the kind in `dir` (`dir/kind.toml`, `dir/schema.json`, optional `dir/example.json`,
    /// tables relative to `dir`). The kind's name is the directory's name.
    pub fn load(dir: &Path) -> Result<Kind, KindError> {
        let file = dir.join("kind.toml");
        let name =
            dir.file_name().and_then(OsStr::to_str).filter(|n| !n.is_empty()).ok_or_else(|| KindError::Invalid {
                path: dir.to_owned(),
                line: None,
                message: "a kind's directory needs a UTF-8 name: it is the kind's name".into(),
                hint: None,
            })?;
        let text = std::fs::read_to_string(&file).map_err(|source| KindError::Read {
            path: file.clone(),
            source,
            hint: Some("a kind is a directory holding `kind.toml` and `schema.json`"),
        })?;
        let manifest: Manifest = toml::from_str(&text).map_err(|e| {
            let (line, column) = e.span().map(|s| line_col(&text, s.start)).unzip();
            KindError::Toml { path: file.clone(), line, column, message: e.message().trim().to_owned() }
        })?;
        let description = manifest.description.get_ref().trim().to_owned();
        if description.is_empty() {
            return Err(KindError::Invalid {
                path: file.clone(),
                line: Some(line_col(&text, manifest.description.span().start).0),
                message: "`description` is empty".into(),
                hint: Some(
                    "say what the artifact is: it is shown to the model and is the rubric of the LLM check".into(),
                ),
            });
        }

        let schema_path = dir.join("schema.json");
        let schema = read_json(&schema_path, Some("every kind needs a `schema.json` next to its `kind.toml`"))?;
        // The example is checked as answers are by default, formats included: it is what the
        // model is shown as a valid answer.
        let validator = SchemaEvaluator::of(&schema, Formats::Checked).map_err(|e| KindError::Schema {
            path: schema_path.clone(),
            message: match e {
                SchemaError::Invalid { message, .. } => message,
                other => other.to_string(),
            },
        })?;
        let example_path = dir.join("example.json");
        let example = if example_path.exists() { Some(read_json(&example_path, None)?) } else { None };
        if let Some(example) = &example {
            let problems = validator.issues(example);
            if !problems.is_empty() {
                let problems = problems
                    .iter()
                    .map(|i| format!("`{}`: {}", if i.path.is_empty() { "/" } else { &i.path }, i.message))
                    .collect::<Vec<_>>()
                    .join("; ");
                return Err(KindError::Example { path: example_path, problems });
            }
        }

        let env = Arc::new(expr::env().map_err(|e| KindError::Invalid {
            path: file.clone(),
            line: None,
            message: format!("cannot set up CEL: {e}"),
            hint: None,
        })?);
        let mut root = cel::Context::with_env(Arc::clone(&env));
        let mut tables = Vec::new();
        for (table_name, spec) in manifest.tables {
            let line = Some(line_col(&text, spec.file.span().start).0);
            let valid = table_name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && table_name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid || expr::is_reserved(&table_name) {
                return Err(KindError::Invalid {
                    path: file.clone(),
                    line,
                    message: format!("`{table_name}` cannot name a table"),
                    hint: Some(
                        "a table name is a CEL identifier (letters, digits, `_`) other than `self`, `context`, `item`, `index`, a type name or a reserved word"
                            .into(),
                    ),
                });
            }
            let mut table = table::load(&table_name, &dir.join(spec.file.get_ref()), spec.key.get_ref())?;
            root.add_variable_from_value(table_name, std::mem::replace(&mut table.value, cel::Value::Null));
            tables.push(table);
        }

        let table_names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
        let mut templates = minijinja::Environment::new();
        templates.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        let mut compiler =
            Compiler { file: &file, text: &text, env: &env, templates: &mut templates, tables: &table_names };
        let mut rules: Vec<Rule> = Vec::with_capacity(manifest.rules.len());
        for spec in &manifest.rules {
            if rules.iter().any(|r| r.code == *spec.code.get_ref()) {
                return Err(KindError::Invalid {
                    path: file.clone(),
                    line: Some(line_col(&text, spec.code.span().start).0),
                    message: format!("two rules have the code `{}`", spec.code.get_ref()),
                    hint: Some("rule codes name issues (`rule:CODE`) and must be unique within a kind".into()),
                });
            }
            rules.push(compiler.rule(spec)?);
        }

        Ok(Kind {
            name: name.to_owned(),
            description,
            prompt: manifest.prompt.filter(|p| !p.trim().is_empty()),
            schema,
            example,
            llm_check: manifest.llm_check,
            dir: dir.to_owned(),
            tables,
            rules,
            templates,
            root,
        })
    }

    /// The directory the kind was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The rubric of the kind's LLM check: its criterion, else the description.
    pub fn rubric(&self) -> &str {
        self.llm_check.as_ref().and_then(|c| c.criterion.as_deref()).unwrap_or(&self.description)
    }

    /// How many rules the kind has.
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    /// What the kind is, as `redraft kinds show` and `GET /v1/kinds/{name}` show it:
    /// `{name, description, prompt, schema, example, rules, tables, llm_check}`.
    pub fn describe(&self) -> Value {
        let tables: Vec<Value> = self
            .table_names()
            .into_iter()
            .map(|t| serde_json::json!({"name": t, "rows": self.table_rows(t)}))
            .collect();
        serde_json::json!({
            "name": self.name,
            "description": self.description,
            "prompt": self.prompt,
            "schema": self.schema,
            "example": self.example,
            "rules": self.rule_codes(),
            "tables": tables,
            "llm_check": self.llm_check.as_ref().map(|c| serde_json::json!({"criterion": self.rubric(), "custom": c.criterion.is_some()})),
        })
    }

    /// The rule codes, in order.
    pub fn rule_codes(&self) -> Vec<&str> {
        self.rules.iter().map(|r| r.code.as_str()).collect()
    }

    /// The names of the kind's tables (sorted).
    pub fn table_names(&self) -> Vec<&str> {
        self.tables.iter().map(|t| t.name.as_str()).collect()
    }

    /// How many rows the table `name` has.
    pub fn table_rows(&self, name: &str) -> Option<usize> {
        self.tables.iter().find(|t| t.name == name).map(|t| t.rows)
    }

    /// Run the rules (not the schema) over `artifact`, with the task's `context` (`null` means
    /// `{}`). One issue per failed check, in rule order, then element order: the first
    /// [`MAX_ISSUES_PER_ATTEMPT`](redraft_core::MAX_ISSUES_PER_ATTEMPT), then a
    /// `too_many_issues` issue counting the other failures.
    pub fn check_rules(&self, artifact: &Value, context: &Value) -> Vec<Issue> {
        self.check_rules_until(artifact, context, &CancelFlag::new())
    }

    /// [`Kind::check_rules`], stopping between rules and between elements once `cancel` is set
    /// (what was found by then is returned).
    pub fn check_rules_until(&self, artifact: &Value, context: &Value, cancel: &CancelFlag) -> Vec<Issue> {
        let empty = Value::Object(serde_json::Map::new());
        let context = if context.is_null() { &empty } else { context };
        let mut scope = self.root.new_inner_scope();
        scope.add_variable_from_value("self", expr::json_to_cel(artifact));
        scope.add_variable_from_value("context", expr::json_to_cel(context));
        let mut run = Run::new(&self.templates, artifact, context, cancel);
        for rule in &self.rules {
            if run.cancelled() {
                break;
            }
            rule.run(&scope, &mut run);
        }
        run.finish()
    }
}

fn read_json(path: &Path, hint: Option<&'static str>) -> Result<Value, KindError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| KindError::Read { path: path.to_owned(), source, hint })?;
    serde_json::from_str(&text).map_err(|e| KindError::Json {
        path: path.to_owned(),
        line: e.line(),
        column: e.column(),
        message: e.to_string().split(" at line ").next().unwrap_or_default().to_owned(),
    })
}

/// The kinds of a directory, by name.
#[derive(Debug)]
pub struct Kinds {
    dir: PathBuf,
    kinds: Vec<Arc<Kind>>,
}

impl Kinds {
    /// Load every subdirectory of `dir` that holds a `kind.toml` (others are skipped). A missing
    /// directory is an error naming it; so is the first kind that does not load.
    pub fn load(dir: &Path) -> Result<Kinds, KindError> {
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(KindError::Invalid {
                    path: dir.to_owned(),
                    line: None,
                    message: "is not a directory".into(),
                    hint: Some("pass `--kinds DIR` or set `kinds_dir` in the config to the directory of kinds".into()),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(KindError::MissingDir { dir: dir.to_owned() });
            }
            Err(source) => return Err(KindError::Read { path: dir.to_owned(), source, hint: None }),
        }
        let read = |source| KindError::Read { path: dir.to_owned(), source, hint: None };
        let mut dirs = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(read)? {
            let path = entry.map_err(read)?.path();
            let hidden = path.file_name().and_then(OsStr::to_str).is_some_and(|n| n.starts_with('.'));
            if !hidden && path.is_dir() && path.join("kind.toml").is_file() {
                dirs.push(path);
            }
        }
        dirs.sort();
        let kinds = dirs.iter().map(|d| Kind::load(d).map(Arc::new)).collect::<Result<Vec<_>, _>>()?;
        Ok(Kinds { dir: dir.to_owned(), kinds })
    }

    /// The directory the kinds were loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The kind called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Kind>> {
        self.kinds.iter().find(|k| k.name == name).cloned()
    }

    /// The kind called `name`, or [`Kinds::unknown`].
    pub fn require(&self, name: &str) -> Result<Arc<Kind>, KindError> {
        self.get(name).ok_or_else(|| self.unknown(name))
    }

    /// The error for an unknown kind name, listing the kinds there are.
    pub fn unknown(&self, name: &str) -> KindError {
        KindError::Unknown {
            name: name.to_owned(),
            dir: self.dir.clone(),
            available: self.names().into_iter().map(str::to_owned).collect(),
        }
    }

    /// The kinds' names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.kinds.iter().map(|k| k.name.as_str()).collect()
    }

    /// The kinds, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Kind>> {
        self.kinds.iter()
    }

    /// How many kinds there are.
    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }
}

#[cfg(test)]
mod tests;
