//! Rules: compiled once at load (CEL expressions and minijinja templates), run per artifact.

use std::collections::BTreeSet;
use std::path::Path;

use cel::{Context, Env, Value};
use minijinja::Environment;
use redraft_core::{BoundedIssues, CancelFlag, Issue, Severity};
use serde::Serialize;
use toml::Spanned;

use super::KindError;
use super::error::line_col;
use super::expr::{self, Expression, Scope, cel_to_json, describe, type_name};
use super::manifest::RuleSpec;

/// A compiled rule.
#[derive(Debug)]
pub(super) struct Rule {
    pub code: String,
    issue_code: String,
    each: Option<Expression>,
    when: Option<Expression>,
    check: Expression,
    found: Option<Expression>,
    expected: Option<Expression>,
    /// Template names in the kind's template environment.
    path: Option<String>,
    message: String,
    severity: Option<Severity>,
    hint: Option<Hint>,
}

/// A rule's hint: what would satisfy it, from the reference data, told when it fails.
#[derive(Debug)]
struct Hint {
    value: Expression,
    /// The template's name in the kind's template environment; it sees the value as `hint`.
    message: String,
    /// The JSON Schema (an object) the value at the rule's path must also match.
    schema: Option<Expression>,
}

/// The most characters of a hint kept in an issue (a hint listing a whole table would crowd out
/// the rest of the feedback).
const HINT_MAX_CHARS: usize = 1000;

/// Where a rule is compiled: the file (for errors), its text (for lines), the CEL environment,
/// the kind's templates and its table names.
pub(super) struct Compiler<'a> {
    pub file: &'a Path,
    pub text: &'a str,
    pub env: &'a Env,
    pub templates: &'a mut Environment<'static>,
    pub tables: &'a [&'a str],
}

impl Compiler<'_> {
    fn line<T>(&self, spanned: &Spanned<T>) -> usize {
        line_col(self.text, spanned.span().start).0
    }

    pub fn rule(&mut self, spec: &RuleSpec) -> Result<Rule, KindError> {
        let code = spec.code.get_ref().clone();
        let bad = |field: &'static str, line: usize, message: String, hint: Option<String>| KindError::Rule {
            path: self.file.to_owned(),
            line,
            code: code.clone(),
            field,
            message,
            hint,
        };
        if code.is_empty() || !code.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
            return Err(bad(
                "code",
                self.line(&spec.code),
                "must be a short word of letters, digits, `_`, `-` or `.`".into(),
                Some("the issue code is `rule:CODE`, e.g. `rule:city_matches`".into()),
            ));
        }
        let has_each = spec.each.is_some();
        let whole = Scope { tables: self.tables, per_item: false, has_each };
        let item = Scope { tables: self.tables, per_item: has_each, has_each };
        let compile = |field: &'static str, s: &Spanned<String>, scope: &Scope<'_>| {
            expr::compile(self.env, s.get_ref(), scope)
                .map_err(|(message, hint)| bad(field, self.line(s), message, hint))
        };
        let each = spec.each.as_ref().map(|s| compile("each", s, &whole)).transpose()?;
        let when = spec.when.as_ref().map(|s| compile("when", s, &item)).transpose()?;
        let check = compile("check", &spec.check, &item)?;
        let found = spec.found.as_ref().map(|s| compile("found", s, &item)).transpose()?;
        let expected = spec.expected.as_ref().map(|s| compile("expected", s, &item)).transpose()?;
        let hint_value = spec.hint.as_ref().map(|h| compile("hint.value", &h.value, &item)).transpose()?;
        let hint_schema =
            spec.hint.as_ref().and_then(|h| h.schema.as_ref()).map(|s| compile("hint.schema", s, &item)).transpose()?;

        let mut allowed: BTreeSet<&str> = ["self", "context"].into();
        if has_each {
            allowed.extend(["item", "index"]);
        }
        if found.is_some() {
            allowed.insert("found");
        }
        if expected.is_some() {
            allowed.insert("expected");
        }
        let path = match &spec.path {
            Some(s) => {
                Some(self.template(&code, "path", s, &allowed).map_err(|(m, h)| bad("path", self.line(s), m, h))?)
            }
            None => None,
        };
        let message = self
            .template(&code, "message", &spec.message, &allowed)
            .map_err(|(m, h)| bad("message", self.line(&spec.message), m, h))?;
        let hint = match (&spec.hint, hint_value) {
            (Some(h), Some(value)) => {
                let mut allowed = allowed.clone();
                allowed.insert("hint");
                let message = self
                    .template(&code, "hint", &h.message, &allowed)
                    .map_err(|(m, hint)| bad("hint.message", self.line(&h.message), m, hint))?;
                Some(Hint { value, message, schema: hint_schema })
            }
            _ => None,
        };
        Ok(Rule {
            issue_code: format!("rule:{code}"),
            code,
            each,
            when,
            check,
            found,
            expected,
            path,
            message,
            severity: spec.severity,
            hint,
        })
    }

    /// Add the template and check the names it uses; returns its name.
    fn template(
        &mut self,
        code: &str,
        field: &str,
        source: &Spanned<String>,
        allowed: &BTreeSet<&str>,
    ) -> Result<String, (String, Option<String>)> {
        let name = format!("{code}/{field}");
        self.templates.add_template_owned(name.clone(), source.get_ref().clone()).map_err(|e| {
            let at = e.line().map(|l| format!(" (line {l} of the template)")).unwrap_or_default();
            (format!("is not a valid template: {}{at}", e.detail().unwrap_or("syntax error")), None)
        })?;
        let template = self.templates.get_template(&name).map_err(|e| (e.to_string(), None))?;
        let globals: BTreeSet<String> = self.templates.globals().map(|(k, _)| k.to_owned()).collect();
        let mut unknown: Vec<String> = template
            .undeclared_variables(false)
            .into_iter()
            .filter(|v| !allowed.contains(v.as_str()) && !globals.contains(v))
            .collect();
        unknown.sort();
        let Some(first) = unknown.first() else {
            return Ok(name);
        };
        let hint = match first.as_str() {
            "found" | "expected" => {
                format!("add `{first} = \"…\"` (a CEL expression) to the rule; its value is `{{{{ {first} }}}}`")
            }
            "item" | "index" => "add `each = \"self.LIST\"` to run the rule once per element".to_owned(),
            _ => format!("templates see: {}", allowed.iter().copied().collect::<Vec<_>>().join(", ")),
        };
        Err((format!("uses `{{{{ {first} }}}}`, which is not defined for this rule"), Some(hint)))
    }
}

/// What templates see. The artifact and the context are converted for the templates once per
/// run, not for every issue (a failing rule over each of a large artifact's elements would
/// convert the whole artifact once per element).
#[derive(Clone, Serialize)]
struct Vars<'a> {
    #[serde(rename = "self")]
    artifact: &'a minijinja::Value,
    context: &'a minijinja::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    item: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    found: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<&'a serde_json::Value>,
}

/// One run of a kind's rules over one artifact.
pub(super) struct Run<'a> {
    templates: &'a Environment<'static>,
    artifact: minijinja::Value,
    context: minijinja::Value,
    /// The issues so far; once it is full, failures are counted, not rendered.
    issues: BoundedIssues,
    cancel: &'a CancelFlag,
}

impl<'a> Run<'a> {
    pub fn new(
        templates: &'a Environment<'static>,
        artifact: &serde_json::Value,
        context: &serde_json::Value,
        cancel: &'a CancelFlag,
    ) -> Self {
        let artifact = minijinja::Value::from(minijinja::value::Serde(artifact));
        let context = minijinja::Value::from(minijinja::value::Serde(context));
        Self { templates, artifact, context, issues: BoundedIssues::new(), cancel }
    }

    /// The issues found (bounded).
    pub fn finish(self) -> Vec<Issue> {
        self.issues.finish()
    }

    /// Whether the checking was cancelled: the rules stop.
    pub fn cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    fn render(&self, name: &str, vars: &Vars<'_>) -> Result<String, minijinja::Error> {
        self.templates.get_template(name)?.render(minijinja::value::Serde(vars))
    }
}

impl Rule {
    pub fn run(&self, ctx: &Context<'_, '_>, run: &mut Run<'_>) {
        let Some(each) = &self.each else {
            self.run_one(ctx, None, run);
            return;
        };
        match each.eval(ctx) {
            Ok(Value::List(items)) => {
                for (index, item) in items.iter().enumerate() {
                    if run.cancelled() {
                        return;
                    }
                    let mut inner = ctx.new_inner_scope();
                    inner.add_variable_from_value("item", item.clone());
                    inner.add_variable_from_value("index", Value::Int(i64::try_from(index).unwrap_or(i64::MAX)));
                    self.run_one(&inner, Some((index, item)), run);
                }
            }
            Ok(other) => {
                let what = format!("it gave {}, not a list", type_name(&other));
                self.broken("each", each, what, None, run);
            }
            Err(e) => self.broken("each", each, describe(&e), None, run),
        }
    }

    fn run_one(&self, ctx: &Context<'_, '_>, item: Option<(usize, &Value)>, run: &mut Run<'_>) {
        if let Some(when) = &self.when {
            match when.eval(ctx) {
                Ok(Value::Bool(true)) => {}
                Ok(Value::Bool(false)) => return,
                Ok(other) => {
                    let what = format!("it gave {}, not a bool", type_name(&other));
                    return self.broken("when", when, what, item, run);
                }
                Err(e) => return self.broken("when", when, describe(&e), item, run),
            }
        }
        match self.check.eval(ctx) {
            Ok(Value::Bool(true)) => {}
            Ok(Value::Bool(false)) if run.issues.is_full() => run.issues.count(1, self.severity),
            Ok(Value::Bool(false)) => {
                let eval = |e: &Option<Expression>| e.as_ref().and_then(|e| e.eval(ctx).ok()).map(|v| cel_to_json(&v));
                let found = eval(&self.found);
                let expected = eval(&self.expected);
                let vars = Vars {
                    artifact: &run.artifact,
                    context: &run.context,
                    item: item.map(|(_, v)| cel_to_json(v)),
                    index: item.map(|(i, _)| i),
                    found: found.as_ref(),
                    expected: expected.as_ref(),
                    hint: None,
                };
                let path = self.path(&vars, run);
                let message = run.render(&self.message, &vars).unwrap_or_else(|e| {
                    format!(
                        "rule `{}` failed (its message does not render: {})",
                        self.code,
                        e.detail().unwrap_or("error")
                    )
                });
                let mut issue = Issue::new(path, &self.issue_code, message);
                if let Some(hint) = self.hint(ctx, &vars, run) {
                    issue =
                        issue.with_hint(hint, self.hint.as_ref().map(|h| h.value.tables.clone()).unwrap_or_default());
                }
                if let Some(schema) = self.hint_schema(ctx) {
                    issue = issue.with_hint_schema(schema);
                }
                self.push(issue.with_values(expected, found), run);
            }
            Ok(other) => {
                let what = format!("it gave {}, not a bool", type_name(&other));
                self.broken("check", &self.check, what, item, run);
            }
            Err(e) => self.broken("check", &self.check, describe(&e), item, run),
        }
    }

    /// The hint for a failure: `None` when the rule has none, when its value cannot be
    /// computed, or when its message renders empty (a template may say nothing when nothing
    /// matches). Kept to [`HINT_MAX_CHARS`].
    fn hint(&self, ctx: &Context<'_, '_>, vars: &Vars<'_>, run: &Run<'_>) -> Option<String> {
        let hint = self.hint.as_ref()?;
        let value = cel_to_json(&hint.value.eval(ctx).ok()?);
        let vars = Vars { hint: Some(&value), ..vars.clone() };
        let text = run.render(&hint.message, &vars).ok()?;
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        let total = text.chars().count();
        Some(match text.char_indices().nth(HINT_MAX_CHARS) {
            Some((cut, _)) => format!("{}… ({} more characters)", &text[..cut], total - HINT_MAX_CHARS),
            None => text.to_owned(),
        })
    }

    /// The hint's schema for a failure: `None` when the rule has none, when it cannot be
    /// computed, or when the narrowing would not place it ([`redraft_core::narrow::fits`]: not
    /// an object, too large, or an empty `enum`), so that an issue carries none it cannot use.
    fn hint_schema(&self, ctx: &Context<'_, '_>) -> Option<serde_json::Value> {
        let expression = self.hint.as_ref()?.schema.as_ref()?;
        let schema = cel_to_json(&expression.eval(ctx).ok()?);
        redraft_core::narrow::fits(&schema).then_some(schema)
    }

    fn path(&self, vars: &Vars<'_>, run: &Run<'_>) -> String {
        self.path.as_deref().and_then(|p| run.render(p, vars).ok()).unwrap_or_default()
    }

    /// The rule could not be evaluated (a missing field, a type error): a failed check whose
    /// message says what failed, at the rule's path.
    fn broken(&self, field: &str, e: &Expression, what: String, item: Option<(usize, &Value)>, run: &mut Run<'_>) {
        if run.issues.is_full() {
            return run.issues.count(1, self.severity);
        }
        let vars = Vars {
            artifact: &run.artifact,
            context: &run.context,
            item: item.map(|(_, v)| cel_to_json(v)),
            index: item.map(|(i, _)| i),
            found: None,
            expected: None,
            hint: None,
        };
        // without an element, a per-element path cannot be rendered
        let path = if self.each.is_some() && item.is_none() { String::new() } else { self.path(&vars, run) };
        let message = format!("could not check rule `{}`: {what} (in `{field}`: `{}`)", self.code, e.source);
        self.push(Issue::new(path, &self.issue_code, message), run);
    }

    fn push(&self, mut issue: Issue, run: &mut Run<'_>) {
        if let Some(severity) = self.severity {
            issue = issue.with_severity(severity);
        }
        run.issues.push(issue);
    }
}
