//! What the proposer reads: the first prompt, the feedback after a rejection, and the
//! example skeleton generated from a schema. Templates are minijinja and can be overridden.

use std::sync::{Arc, OnceLock};

use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, UndefinedBehavior};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::diagnostics::bound_issues;
use crate::issue::Issue;
use crate::policy::PlanError;

/// How the expected shape is shown to the proposer: the JSON Schema, an example instance, or
/// both. Small models echo a schema back instead of filling it, so an example helps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptStyle {
    Schema,
    Example,
    /// By default, both.
    #[default]
    Both,
}

/// How feedback reaches the proposer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Chat models: the previous answer stays in the conversation and one user message with
    /// the feedback is added. The default.
    #[default]
    Conversation,
    /// Command proposers: one prompt, rebuilt each attempt with a "Prior attempts" section.
    Fresh,
}

/// Template sources; `None` uses the built-in template.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Templates {
    /// The first user message.
    pub first: Option<String>,
    /// The feedback user message (conversation strategy).
    pub feedback: Option<String>,
    /// The whole prompt (fresh strategy).
    pub fresh: Option<String>,
}

pub const FIRST_TEMPLATE: &str = r#"{{ prompt }}
{% if context %}

Context:
{{ context_text }}
{% endif %}
{% if structured %}
{% if schema %}

Answer with JSON that matches this JSON Schema:
```json
{{ schema }}
```
{% endif %}
{% if example %}

{% if schema %}An example of the expected shape (replace every placeholder with a real value):{% else %}Answer with JSON of this shape (replace every placeholder with a real value):{% endif %}

```json
{{ example }}
```
{% endif %}

Answer with only the JSON value, no explanation.
{% endif %}"#;

pub const FEEDBACK_TEMPLATE: &str = r#"Attempt {{ attempt }} of {{ max_attempts }}.

{% if timed_out %}
Attempt {{ previous }} produced no answer within the time limit. Answer again, more briefly.
{% else %}
{% if repeat_of %}
Your answer is identical to attempt {{ repeat_of }} and was rejected for the same reasons. Do not repeat it: change what the problems below point at.

{% endif %}
Your previous answer (attempt {{ previous }}) was rejected:
{{ fence }}
{{ echo }}
{{ fence }}
{% if echo_truncated %}
[truncated: showing the first {{ echo_shown }} of {{ echo_chars }} characters]
{% endif %}
{% if cut_off %}
It was cut off at the output token limit before it ended.
{% endif %}

Problems ({{ issues | length }}):
{% for issue in issues %}
{{ loop.index }}. {{ issue.path or "(root)" }}: {{ issue.message }} [{{ issue.code }}]
{% if issue.hint is defined and issue.hint %}
   Hint: {{ issue.hint }}
{% endif %}
{% endfor %}
{% if issues_omitted %}
[{{ issues_omitted }} more problems not shown]
{% endif %}
{% endif %}
{% if schema %}

The answer must match this JSON Schema:
```json
{{ schema }}
```
{% endif %}
{% if example %}

The answer must have this shape (replace every placeholder with a real value):
```json
{{ example }}
```
{% endif %}

{% if structured %}Return only the corrected JSON value, with no explanation.{% else %}Return only the corrected answer, with no explanation.{% endif %}{% if cut_off %} Keep it short: nothing repeated.{% endif %}"#;

pub const FRESH_TEMPLATE: &str = r#"{{ first }}
{% if prior %}

Prior attempts:
{% for p in prior %}

Attempt {{ p.iteration }}{% if p.repeat_of %} (identical to attempt {{ p.repeat_of }}){% endif %} was rejected:
{{ p.fence }}
{{ p.echo }}
{{ p.fence }}
{% if p.echo_truncated %}
[truncated: showing the first {{ p.echo_shown }} of {{ p.echo_chars }} characters]
{% endif %}
Problems ({{ p.issues | length }}):
{% for issue in p.issues %}
{{ loop.index }}. {{ issue.path or "(root)" }}: {{ issue.message }} [{{ issue.code }}]
{% if issue.hint is defined and issue.hint %}
   Hint: {{ issue.hint }}
{% endif %}
{% endfor %}
{% if p.issues_omitted %}
[{{ p.issues_omitted }} more problems not shown]
{% endif %}
{% endfor %}

This is attempt {{ attempt }} of {{ max_attempts }}. Fix every problem above. {% if structured %}Return only the corrected JSON value, with no explanation.{% else %}Return only the corrected answer, with no explanation.{% endif %}

{% endif %}"#;

/// One earlier attempt as the templates see it.
#[derive(Debug, Clone, Serialize)]
pub struct PriorAttempt {
    pub iteration: u32,
    pub echo: String,
    pub echo_truncated: bool,
    pub echo_shown: usize,
    pub echo_chars: usize,
    /// A code fence longer than any run of backticks in the echo.
    pub fence: String,
    /// The issues, their text bounded like the echo (see [`PriorAttempt::new`]).
    pub issues: Vec<Issue>,
    /// How many issues were left out to keep within the bound.
    pub issues_omitted: usize,
    pub repeat_of: Option<u32>,
    pub timed_out: bool,
    /// The answer was cut off at the output token limit (set by the engine; `false` by default).
    pub cut_off: bool,
}

impl PriorAttempt {
    /// Describe an attempt whose submission was `echo`, truncating it to `max_chars`. The text of
    /// the issues (whatever evaluator raised them, a verifier's output included) is bounded to
    /// `max_chars` as well: the issue that crosses it is cut in the middle with a marker and the
    /// ones after it are counted in `issues_omitted` (see [`bound_issues`]).
    pub fn new(iteration: u32, echo: &str, max_chars: usize, issues: Vec<Issue>, repeat_of: Option<u32>) -> Self {
        let mut issues = issues;
        // A hint shared by several issues (one bad row fails several rules) is shown once.
        let mut shown: Vec<String> = Vec::new();
        for issue in &mut issues {
            if let Some(hint) = issue.hint.take()
                && !shown.contains(&hint.text)
            {
                shown.push(hint.text.clone());
                issue.hint = Some(hint);
            }
        }
        let issues_omitted = bound_issues(&mut issues, max_chars);
        let echo_chars = echo.chars().count();
        let (echo, echo_truncated) = truncate_chars(echo, max_chars);
        let echo_shown = echo.chars().count();
        let fence = fence_for(&echo);
        Self {
            iteration,
            echo,
            echo_truncated,
            echo_shown,
            echo_chars,
            fence,
            issues,
            issues_omitted,
            repeat_of,
            timed_out: false,
            cut_off: false,
        }
    }
}

/// A backtick fence longer than the longest run of backticks in `text` (at least three).
pub fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

/// The first `max` characters of `text`, and whether anything was cut.
pub fn truncate_chars(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((byte, _)) => (text[..byte].to_owned(), true),
        None => (text.to_owned(), false),
    }
}

/// The compiled templates of one run. The built-in set is compiled once per process and
/// shared: compiling it took ~9% of the loop's CPU when every run did it.
#[derive(Debug, Clone)]
pub struct Prompts {
    env: Arc<Environment<'static>>,
    builtin: bool,
}

/// Everything the first prompt shows.
#[derive(Debug, Clone, Serialize)]
pub struct FirstPrompt<'a> {
    pub prompt: &'a str,
    /// Pretty JSON of the context, when given.
    pub context: Option<String>,
    /// The context as the built-in template shows it ([`render_context`]).
    pub context_text: Option<String>,
    pub structured: bool,
    pub schema: Option<String>,
    pub example: Option<String>,
}

/// Everything a feedback message shows.
#[derive(Debug, Clone, Serialize)]
pub struct Feedback<'a> {
    pub attempt: u32,
    pub max_attempts: u32,
    pub previous: u32,
    pub structured: bool,
    #[serde(flatten)]
    pub prior: &'a PriorAttempt,
    /// The JSON Schema, when the proposer has not seen it yet.
    pub schema: Option<String>,
    /// The example instance, shown again once when the prompt showed the example and not the
    /// schema.
    pub example: Option<String>,
}

/// Everything the fresh-strategy prompt shows.
#[derive(Debug, Clone, Serialize)]
pub struct FreshPrompt<'a> {
    pub first: &'a str,
    pub attempt: u32,
    pub max_attempts: u32,
    pub structured: bool,
    pub prior: &'a [PriorAttempt],
}

fn compile(templates: &Templates) -> Result<Environment<'static>, PlanError> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    let syntax = SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build();
    match syntax {
        Ok(s) => env.set_syntax(s),
        Err(e) => return Err(template_error("syntax", &e)),
    }
    let pairs = [
        ("first", templates.first.clone().unwrap_or_else(|| FIRST_TEMPLATE.to_owned())),
        ("feedback", templates.feedback.clone().unwrap_or_else(|| FEEDBACK_TEMPLATE.to_owned())),
        ("fresh", templates.fresh.clone().unwrap_or_else(|| FRESH_TEMPLATE.to_owned())),
    ];
    for (name, source) in pairs {
        env.add_template_owned(name, source).map_err(|e| template_error(name, &e))?;
    }
    Ok(env)
}

impl Prompts {
    /// Compile the templates, using the built-in one for each that is not overridden.
    pub fn new(templates: &Templates) -> Result<Self, PlanError> {
        static BUILTIN: OnceLock<Option<Arc<Environment<'static>>>> = OnceLock::new();
        if *templates == Templates::default()
            && let Some(env) = BUILTIN.get_or_init(|| compile(&Templates::default()).ok().map(Arc::new))
        {
            return Ok(Self { env: Arc::clone(env), builtin: true });
        }
        Ok(Self { env: Arc::new(compile(templates)?), builtin: false })
    }

    /// Whether these are the built-in templates (known to render every context).
    pub fn builtin(&self) -> bool {
        self.builtin
    }

    fn render(&self, name: &str, ctx: impl Serialize) -> Result<String, PlanError> {
        let tmpl = self.env.get_template(name).map_err(|e| template_error(name, &e))?;
        let text = tmpl.render(minijinja::value::Serde(ctx)).map_err(|e| template_error(name, &e))?;
        Ok(text.trim_end().to_owned())
    }

    /// The first user message.
    pub fn first(&self, ctx: &FirstPrompt<'_>) -> Result<String, PlanError> {
        self.render("first", ctx)
    }

    /// A feedback user message.
    pub fn feedback(&self, ctx: &Feedback<'_>) -> Result<String, PlanError> {
        self.render("feedback", ctx)
    }

    /// The fresh-strategy prompt.
    pub fn fresh(&self, ctx: &FreshPrompt<'_>) -> Result<String, PlanError> {
        self.render("fresh", ctx)
    }
}

/// The context as the first prompt shows it. An object of plain values (text, numbers,
/// booleans) under plain names is written as `name: value` lines — a small model shown a JSON
/// object tends to give that object back as its answer; a value of several lines is indented
/// under its name. Any other context (nested objects or arrays, a name holding a line break or
/// a control character, a list, a number) is pretty JSON in a fence, so nothing in it can pass
/// for another line; a context that is one string is shown as it is.
pub fn render_context(context: &Value) -> String {
    // Line breaks a reader (or a model's tokenizer) may take for one: control characters and
    // Unicode's line and paragraph separators.
    let breaks = |c: char| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}');
    let plain = |(name, value): (&String, &Value)| {
        !name.is_empty() && !name.contains(breaks) && !value.is_object() && !value.is_array()
    };
    match context {
        Value::String(text) => text.clone(),
        Value::Object(map) if !map.is_empty() && map.iter().all(plain) => {
            let mut lines = Vec::with_capacity(map.len());
            for (name, value) in map {
                let text = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                if text.contains(['\n', '\r', '\u{2028}', '\u{2029}']) {
                    let indented: Vec<String> = text
                        .replace("\r\n", "\n")
                        .split(['\n', '\r', '\u{2028}', '\u{2029}'])
                        .map(|line| format!("  {line}"))
                        .collect();
                    lines.push(format!("{name}:\n{}", indented.join("\n")));
                } else {
                    lines.push(format!("{name}: {text}"));
                }
            }
            lines.join("\n")
        }
        _ => format!("```json\n{}\n```", pretty(context)),
    }
}

fn template_error(which: &str, e: &dyn std::fmt::Display) -> PlanError {
    PlanError::Template { which: which.to_owned(), message: e.to_string() }
}

/// Pretty JSON text for prompts.
pub fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// The placeholder strings a generated [`skeleton`] uses. An answer that still holds one
/// copied the example instead of filling it in.
pub const PLACEHOLDERS: [&str; 8] =
    ["<string>", "<date YYYY-MM-DD>", "<date-time>", "<email>", "<uri>", "<integer>", "<number>", "<boolean>"];

/// The placeholders a [`skeleton_text`] shows bare, in place of a number or a boolean.
const BARE: [&str; 3] = ["<integer>", "<number>", "<boolean>"];

/// The placeholders of [`PLACEHOLDERS`] that occur in `example` (a generated skeleton).
pub fn placeholders_in(example: &Value) -> Vec<&'static str> {
    fn walk(v: &Value, found: &mut [bool; PLACEHOLDERS.len()]) {
        match v {
            Value::String(s) => {
                if let Some(i) = PLACEHOLDERS.iter().position(|p| *p == s.as_str()) {
                    found[i] = true;
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, found)),
            Value::Object(map) => map.values().for_each(|item| walk(item, found)),
            _ => {}
        }
    }
    let mut found = [false; PLACEHOLDERS.len()];
    walk(example, &mut found);
    PLACEHOLDERS.into_iter().zip(found).filter_map(|(p, f)| f.then_some(p)).collect()
}

/// Where `value` holds one of `placeholders` as a string: (JSON Pointer, placeholder).
pub fn placeholder_paths(value: &Value, placeholders: &[&'static str]) -> Vec<(String, &'static str)> {
    fn walk(v: &Value, at: &mut String, ps: &[&'static str], out: &mut Vec<(String, &'static str)>) {
        match v {
            Value::String(s) => {
                if let Some(p) = ps.iter().find(|p| **p == s.as_str()) {
                    out.push((at.clone(), p));
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let len = at.len();
                    at.push_str(&format!("/{i}"));
                    walk(item, at, ps, out);
                    at.truncate(len);
                }
            }
            Value::Object(map) => {
                for (k, item) in map {
                    let len = at.len();
                    at.push('/');
                    at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    walk(item, at, ps, out);
                    at.truncate(len);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if !placeholders.is_empty() {
        walk(value, &mut String::new(), placeholders, &mut out);
    }
    out
}

/// An example instance generated from a JSON Schema: every property filled with a
/// placeholder (`"<string>"`, `0`, `false`), the first enum value, or the schema's own
/// example or default. `$ref`s into `$defs`/`definitions` are followed a bounded depth.
pub fn skeleton(schema: &Value) -> Value {
    skeleton_at(schema, schema, 0, false)
}

/// The skeleton shown to a model: like [`skeleton`], but a number or boolean is shown as a
/// bare `<integer>`, `<number>` or `<boolean>` (the text is a pattern, not JSON). Small models
/// copy a `0` or `false` from an example as if it were the answer: with SmolLM2-135M, an age
/// came back `0` in 4 of 5 extractions under `"age": 0` and right in 5 of 5 under
/// `"age": <integer>` (BENCHMARKS.md section 5). Returns the text and the placeholders in it.
pub fn skeleton_text(schema: &Value) -> (String, Vec<&'static str>) {
    let value = bare_skeleton(schema);
    (skeleton_value_text(&value), placeholders_in(&value))
}

/// The skeleton `value` (from [`skeleton`] with bare placeholders) as text shown to a model,
/// with the placeholders still in it.
pub fn skeleton_value_text(value: &Value) -> String {
    let mut text = pretty(value);
    for bare in BARE {
        text = text.replace(&format!("\"{bare}\""), bare);
    }
    text
}

/// The skeleton generated from `schema` with bare placeholders (`"<integer>"` for a number),
/// as a value: what [`skeleton_text`] renders.
pub fn bare_skeleton(schema: &Value) -> Value {
    skeleton_at(schema, schema, 0, true)
}

/// The example `skeleton` with what is known filled in: each placeholder whose place holds a
/// value in one of `known` (earlier answers, most trusted first) that is not itself a
/// placeholder takes that value, if it has the placeholder's JSON type (a number for
/// `<number>`, a string for `<string>`…). Nothing is invented: what no answer gave stays a
/// placeholder. A model that answered in prose or copied the example is shown its own values
/// in the shape, instead of the bare skeleton again.
pub fn fill_known(skeleton: &Value, known: &[&Value]) -> Value {
    match skeleton {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, sub) in map {
                let inner: Vec<&Value> = known.iter().filter_map(|k| k.get(key)).collect();
                out.insert(key.clone(), fill_known(sub, &inner));
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            // A whole array from the first answer that gave one free of placeholders.
            let given = known.iter().find_map(|k| match k {
                Value::Array(a) if !a.is_empty() && !a.iter().any(holds_placeholder) => Some(*k),
                _ => None,
            });
            match (given, items.first()) {
                (Some(array), Some(shape)) if array.as_array().is_some_and(|a| a.iter().all(|v| fits(shape, v))) => {
                    array.clone()
                }
                _ => skeleton.clone(),
            }
        }
        Value::String(s) if PLACEHOLDERS.contains(&s.as_str()) => known
            .iter()
            .find(|k| !holds_placeholder(k) && fits(skeleton, k))
            .map_or_else(|| skeleton.clone(), |k| (*k).clone()),
        _ => skeleton.clone(),
    }
}

/// The `Key: value` lines of a prose answer whose key names a top-level member of the object
/// `skeleton` (case, spaces, `-` and `_` aside), as an object of those members: what a model
/// that answered `Name: Yuki Tanaka` / `Age: 27` gave. A value is read as the placeholder's
/// type asks (a number for `<integer>` or `<number>`, `true`/`false`/`yes`/`no` for
/// `<boolean>`, else the text without its quotes); one that does not read so is left out.
pub fn prose_pairs(raw: &str, skeleton: &Value) -> Value {
    let Some(members) = skeleton.as_object() else {
        return Value::Null;
    };
    let norm = |k: &str| k.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect::<String>();
    let mut out = Map::new();
    for line in raw.lines().take(200) {
        let line = line.trim().trim_start_matches(['-', '*', '•']).trim();
        if line.starts_with(['{', '[']) {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else { continue };
        let key = norm(key.trim().trim_matches(['"', '\'', '*', '`']));
        let Some((name, shape)) = members.iter().find(|(name, _)| norm(name) == key) else { continue };
        if out.contains_key(name) {
            continue;
        }
        let value = value.trim().trim_end_matches(',').trim().trim_matches(['"', '\'', '`']).trim();
        if value.is_empty() {
            continue;
        }
        let read = match shape.as_str() {
            Some("<integer>") => value.parse::<i64>().ok().map(Value::from),
            Some("<number>") => value.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number),
            Some("<boolean>") => match value.to_ascii_lowercase().as_str() {
                "true" | "yes" => Some(Value::Bool(true)),
                "false" | "no" => Some(Value::Bool(false)),
                _ => None,
            },
            Some(p) if PLACEHOLDERS.contains(&p) => Some(Value::String(value.to_owned())),
            _ => None,
        };
        if let Some(read) = read {
            out.insert(name.clone(), read);
        }
    }
    Value::Object(out)
}

/// Whether `value` holds a placeholder string anywhere.
fn holds_placeholder(value: &Value) -> bool {
    match value {
        Value::String(s) => PLACEHOLDERS.contains(&s.as_str()),
        Value::Array(a) => a.iter().any(holds_placeholder),
        Value::Object(m) => m.values().any(holds_placeholder),
        _ => false,
    }
}

/// Whether `value` has the JSON type of the skeleton's `shape` (a placeholder names its type).
fn fits(shape: &Value, value: &Value) -> bool {
    match shape {
        Value::String(p) => match p.as_str() {
            "<integer>" => value.as_i64().is_some() || value.as_u64().is_some(),
            "<number>" => value.is_number(),
            "<boolean>" => value.is_boolean(),
            _ => value.is_string() && !value.as_str().is_some_and(str::is_empty),
        },
        Value::Object(_) => value.is_object(),
        Value::Array(_) => value.is_array(),
        Value::Number(_) => value.is_number(),
        Value::Bool(_) => value.is_boolean(),
        Value::Null => true,
    }
}

fn skeleton_at(node: &Value, root: &Value, depth: usize, bare: bool) -> Value {
    if depth > 8 {
        return Value::Null;
    }
    let Some(obj) = node.as_object() else {
        return Value::Null;
    };
    if let Some(r) = obj.get("$ref").and_then(Value::as_str)
        && let Some(target) = r.strip_prefix('#').and_then(|p| root.pointer(p))
    {
        return skeleton_at(target, root, depth + 1, bare);
    }
    for key in ["const", "default"] {
        if let Some(v) = obj.get(key) {
            return v.clone();
        }
    }
    if let Some(v) = obj.get("examples").and_then(Value::as_array).and_then(|a| a.first()) {
        return v.clone();
    }
    if let Some(v) = obj.get("enum").and_then(Value::as_array).and_then(|a| a.first()) {
        return v.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = obj
            .get(key)
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|s| s.get("type").and_then(Value::as_str) != Some("null")))
        {
            return skeleton_at(first, root, depth + 1, bare);
        }
    }
    let ty = match obj.get("type") {
        Some(Value::String(t)) => Some(t.as_str()),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ if obj.contains_key("properties") => Some("object"),
        _ if obj.contains_key("items") => Some("array"),
        _ => None,
    };
    match ty {
        Some("object") => {
            let mut out = Map::new();
            if let Some(props) = obj.get("properties").and_then(Value::as_object) {
                for (name, sub) in props {
                    out.insert(name.clone(), skeleton_at(sub, root, depth + 1, bare));
                }
            }
            Value::Object(out)
        }
        Some("array") => match obj.get("items") {
            Some(items) if items.is_object() => Value::Array(vec![skeleton_at(items, root, depth + 1, bare)]),
            _ => Value::Array(Vec::new()),
        },
        Some("string") => Value::String(match obj.get("format").and_then(Value::as_str) {
            Some("date") => "<date YYYY-MM-DD>".into(),
            Some("date-time") => "<date-time>".into(),
            Some("email") => "<email>".into(),
            Some("uri") => "<uri>".into(),
            _ => "<string>".into(),
        }),
        Some(t @ ("integer" | "number" | "boolean")) if bare => Value::String(format!("<{t}>")),
        Some("integer") | Some("number") => Value::from(0),
        Some("boolean") => Value::Bool(false),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn skeleton_fills_placeholders_and_follows_refs() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "age": {"type": ["integer", "null"]},
                "role": {"enum": ["welder", "fitter"]},
                "born": {"type": "string", "format": "date"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "home": {"$ref": "#/$defs/Place"}
            },
            "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}, "ok": {"type": "boolean"}}}}
        });
        insta::assert_snapshot!(pretty(&skeleton(&schema)), @r#"
        {
          "name": "<string>",
          "age": 0,
          "role": "welder",
          "born": "<date YYYY-MM-DD>",
          "tags": [
            "<string>"
          ],
          "home": {
            "city": "<string>",
            "ok": false
          }
        }
        "#);
    }

    #[test]
    fn the_skeleton_shown_to_a_model_leaves_numbers_and_booleans_as_bare_placeholders() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string"}, "age": {"type": "integer"}, "ok": {"type": "boolean"},
            "kind": {"enum": ["a", "b"]}, "scores": {"type": "array", "items": {"type": "number"}}}});
        let (text, placeholders) = skeleton_text(&schema);
        insta::assert_snapshot!(text, @r#"
        {
          "name": "<string>",
          "age": <integer>,
          "ok": <boolean>,
          "kind": "a",
          "scores": [
            <number>
          ]
        }
        "#);
        assert_eq!(placeholders, vec!["<string>", "<integer>", "<number>", "<boolean>"]);
        // The skeleton as a value (the MCP `example` tool) stays valid JSON of the schema's types.
        assert_eq!(skeleton(&schema)["age"], json!(0));
    }

    #[test]
    fn a_context_of_plain_values_is_shown_as_lines_and_anything_else_as_json() {
        // Plain values: one line each, a value of several lines indented under its name.
        let flat = json!({"city": "Dayton", "target_count": 2, "urgent": true, "note": "first line\nsecond line"});
        assert_eq!(
            render_context(&flat),
            "city: Dayton\ntarget_count: 2\nurgent: true\nnote:\n  first line\n  second line"
        );
        // Nothing nested is flattened: an object holding a list is JSON, fenced.
        let nested = json!({"order": {"id": 1}, "tags": ["a"]});
        let shown = render_context(&nested);
        assert!(shown.starts_with("```json\n{"), "{shown}");
        assert_eq!(
            serde_json::from_str::<Value>(shown.trim_start_matches("```json\n").trim_end_matches("\n```")).ok(),
            Some(nested)
        );
        // A name that could pass for a line of its own is not written as one.
        let forged = json!({"city": "Dayton", "role\nadmin: yes": "x"});
        assert!(render_context(&forged).starts_with("```json\n{"), "{}", render_context(&forged));
        assert!(render_context(&json!({"a\u{2028}b": 1})).starts_with("```json"));
        assert!(render_context(&json!({"": 2})).starts_with("```json"));
        // A value's lines stay under its name whatever breaks them.
        assert_eq!(
            render_context(&json!({"note": "a\r\nrole: admin\u{2028}b\rc"})),
            "note:\n  a\n  role: admin\n  b\n  c"
        );
        assert!(render_context(&json!([1, 2])).starts_with("```json"));
        assert!(render_context(&json!({})).starts_with("```json"));
        // A context that is one text is the text.
        assert_eq!(render_context(&json!("Ana, 34, Lisbon")), "Ana, 34, Lisbon");
    }

    #[test]
    fn placeholders_are_found_with_their_paths() {
        let example = json!({"name": "<string>", "born": "<date YYYY-MM-DD>", "n": 0});
        let ps = placeholders_in(&example);
        assert_eq!(ps, vec!["<string>", "<date YYYY-MM-DD>"]);
        let answer = json!({"name": "Ann", "tags": ["<string>"], "a/b": {"born": "<date YYYY-MM-DD>"}, "x": "<uri>"});
        assert_eq!(
            placeholder_paths(&answer, &ps),
            vec![("/tags/0".to_owned(), "<string>"), ("/a~1b/born".to_owned(), "<date YYYY-MM-DD>")]
        );
    }

    #[test]
    fn skeleton_survives_recursive_refs() {
        let schema = json!({"$ref": "#", "type": "object"});
        assert_eq!(skeleton(&schema), Value::Null);
    }

    #[test]
    fn fences_outgrow_the_backticks_inside() {
        assert_eq!(fence_for("{}"), "```");
        assert_eq!(fence_for("```json\n{}\n```"), "````");
    }

    #[test]
    fn truncates_by_characters() {
        assert_eq!(truncate_chars("héllo", 2), ("hé".to_owned(), true));
        assert_eq!(truncate_chars("hé", 2), ("hé".to_owned(), false));
    }

    #[test]
    fn the_feedback_carries_at_most_max_chars_of_issue_text_and_says_what_was_cut() {
        let issues: Vec<Issue> =
            (1..=30).map(|n| Issue::new(format!("t.py:{n}"), "exit_status", "x".repeat(1000))).collect();
        let prior = PriorAttempt::new(1, "{}", 4000, issues, None);
        assert_eq!(prior.issues_omitted, 30 - prior.issues.len());
        let prompts = Prompts::new(&Templates::default()).unwrap();
        let feedback = prompts
            .feedback(&Feedback {
                attempt: 2,
                max_attempts: 3,
                previous: 1,
                structured: true,
                prior: &prior,
                schema: None,
                example: None,
            })
            .unwrap();
        let fresh = prompts
            .fresh(&FreshPrompt {
                first: "Fix it.",
                attempt: 2,
                max_attempts: 3,
                structured: true,
                prior: std::slice::from_ref(&prior),
            })
            .unwrap();
        for text in [feedback, fresh] {
            assert!(text.matches('x').count() <= 4000, "{}", text.matches('x').count());
            assert!(text.contains(" characters cut ...]"), "{text}");
            assert!(text.contains(&format!("[{} more problems not shown]", prior.issues_omitted)), "{text}");
        }
    }

    #[test]
    fn a_hint_shared_by_several_issues_is_shown_once() {
        let hint = "workers in Toledo: W-2, W-3";
        let issues = vec![
            Issue::new("/fills/0", "rule:city", "wrong city").with_hint(hint, vec!["workers".into()]),
            Issue::new("/fills/0", "rule:state", "wrong state").with_hint(hint, vec!["workers".into()]),
            Issue::new("/fills/1", "rule:role", "wrong role").with_hint("welders: W-2", vec![]),
        ];
        let prior = PriorAttempt::new(1, "{}", 4000, issues, None);
        let prompts = Prompts::new(&Templates::default()).unwrap();
        let ctx = Feedback {
            attempt: 2,
            max_attempts: 3,
            previous: 1,
            structured: true,
            prior: &prior,
            schema: None,
            example: None,
        };
        let text = prompts.feedback(&ctx).unwrap();
        assert_eq!(text.matches("Hint: workers in Toledo: W-2, W-3").count(), 1, "{text}");
        assert!(text.contains("wrong role [rule:role]\n   Hint: welders: W-2\n"), "{text}");
    }

    #[test]
    fn a_broken_override_is_a_plan_error() {
        let t = Templates { feedback: Some("{% if %}".into()), ..Templates::default() };
        let err = Prompts::new(&t).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("feedback template is invalid"), "{err}");
    }
}
