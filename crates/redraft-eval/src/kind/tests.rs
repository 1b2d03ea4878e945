use serde_json::json;

use super::*;

const WORKERS: &str = "id,name,city\nW-1,Ada,Louisville\nW-2,Ben,Toledo\n";
const HEAD: &str = "description = \"A fill.\"\n[tables.workers]\nfile = \"workers.csv\"\nkey = \"id\"\n";

/// A kind directory `k/` with `kind_toml`, an object schema and the `workers` table.
fn kind_dir(kind_toml: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("k");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("kind.toml"), kind_toml).unwrap();
    std::fs::write(dir.join("schema.json"), r#"{"type": "object"}"#).unwrap();
    std::fs::write(dir.join("workers.csv"), WORKERS).unwrap();
    root
}

/// Load the kind, or its error with the temp directory shown as `DIR`.
fn load(kind_toml: &str) -> Result<Kind, String> {
    let root = kind_dir(kind_toml);
    Kind::load(&root.path().join("k")).map_err(|e| e.to_string().replace(&root.path().display().to_string(), "DIR"))
}

/// The `(path, code, message)` of each issue of `artifact` under the rules `rules` (after
/// [`HEAD`]).
fn check(rules: &str, artifact: Value, context: Value) -> Vec<(String, String, String)> {
    let kind = load(&format!("{HEAD}{rules}")).unwrap();
    kind.check_rules(&artifact, &context).into_iter().map(|i| (i.path, i.code, i.message)).collect()
}

fn issue(path: &str, code: &str, message: &str) -> (String, String, String) {
    (path.to_owned(), code.to_owned(), message.to_owned())
}

const EACH: &str = r#"
[[rules]]
code = "exists"
each = "self.fills"
check = "exists(workers, item.worker_id)"
path = "/fills/{{ index }}/worker_id"
message = "worker '{{ item.worker_id }}' is not in the roster"

[[rules]]
code = "city"
each = "self.fills"
when = "item.worker_id in workers"
check = "lookup(workers, item.worker_id).city == context.city"
found = "lookup(workers, item.worker_id).city"
expected = "context.city"
path = "/fills/{{ index }}/worker_id"
message = "city '{{ found }}' doesn't match contract city '{{ expected }}'"
"#;

#[test]
fn each_when_lookup_and_found_expected() {
    let fills = json!({"fills": [{"worker_id": "W-2"}, {"worker_id": "W-9"}, {"worker_id": "W-1"}]});
    assert_eq!(
        check(EACH, fills.clone(), json!({"city": "Toledo"})),
        [
            issue("/fills/1/worker_id", "rule:exists", "worker 'W-9' is not in the roster"),
            issue("/fills/2/worker_id", "rule:city", "city 'Louisville' doesn't match contract city 'Toledo'"),
        ]
    );
    let kind = load(&format!("{HEAD}{EACH}")).unwrap();
    let issues = kind.check_rules(&fills, &json!({"city": "Toledo"}));
    assert_eq!(issues[1].found.as_deref(), Some(&json!("Louisville")));
    assert_eq!(issues[1].expected.as_deref(), Some(&json!("Toledo")));
    assert_eq!(issues[0].found, None);
    assert!(check(EACH, json!({"fills": []}), json!({"city": "Toledo"})).is_empty());
}

#[test]
fn rules_without_each_and_templates_over_self_and_context() {
    let rules = r#"
[[rules]]
code = "count"
check = "size(self.fills) == context.target_count"
found = "size(self.fills)"
expected = "context.target_count"
path = "/fills"
message = "{{ expected }} workers were asked for, {{ found }} given for {{ context.city }} ({{ self.fills | length }})"
"#;
    assert_eq!(
        check(rules, json!({"fills": [1]}), json!({"target_count": 2, "city": "Toledo"})),
        [issue("/fills", "rule:count", "2 workers were asked for, 1 given for Toledo (1)")]
    );
}

#[test]
fn a_rule_that_cannot_be_evaluated_is_a_failed_check_saying_why() {
    // the context has no `city`; the artifact's second fill has no `worker_id`
    let got = check(EACH, json!({"fills": [{"worker_id": "W-2"}, {"name": "Ben"}]}), Value::Null);
    assert_eq!(
        got,
        [
            issue(
                "/fills/1/worker_id",
                "rule:exists",
                "could not check rule `exists`: there is no field `worker_id` (in `check`: `exists(workers, item.worker_id)`)"
            ),
            issue(
                "/fills/0/worker_id",
                "rule:city",
                "could not check rule `city`: there is no field `city` (in `check`: `lookup(workers, item.worker_id).city == context.city`)"
            ),
            issue(
                "/fills/1/worker_id",
                "rule:city",
                "could not check rule `city`: there is no field `worker_id` (in `when`: `item.worker_id in workers`)"
            ),
        ]
    );
    let got = check(EACH, json!({"fills": "W-1"}), json!({}));
    assert_eq!(
        got[0],
        issue(
            "",
            "rule:exists",
            "could not check rule `exists`: it gave a string, not a list (in `each`: `self.fills`)"
        )
    );
    let rules = "[[rules]]\ncode = \"x\"\ncheck = \"self.a\"\nmessage = \"m\"\n";
    assert_eq!(
        check(rules, json!({"a": "yes"}), json!({})),
        [issue("", "rule:x", "could not check rule `x`: it gave a string, not a bool (in `check`: `self.a`)")]
    );
}

#[test]
fn severity_and_default_path() {
    let rules = "[[rules]]\ncode = \"soft\"\ncheck = \"false\"\nmessage = \"just saying\"\nseverity = \"warning\"\n";
    let kind = load(&format!("{HEAD}{rules}")).unwrap();
    let issues = kind.check_rules(&json!({}), &json!({}));
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].path, "");
    assert!(!issues[0].is_error());
}

#[test]
fn kind_fields() {
    let kind =
        load(&format!("{HEAD}prompt = \"\"\"\nUse the roster.\"\"\"\n[llm_check]\ncriterion = \"Plausible.\"\n{EACH}"));
    // `prompt` after a table header belongs to the table: an unknown field
    let err = kind.unwrap_err();
    assert!(err.starts_with("DIR/k/kind.toml:5:1: unknown field `prompt`, expected `file` or `key`"), "{err}");
    let kind = load(&format!(
        "description = \"  A fill.  \"\nprompt = \"Use the roster.\"\n[llm_check]\ncriterion = \"Plausible.\"\n{}",
        HEAD.trim_start_matches("description = \"A fill.\"\n")
    ))
    .unwrap();
    assert_eq!(kind.name, "k");
    assert_eq!(kind.description, "A fill.");
    assert_eq!(kind.prompt.as_deref(), Some("Use the roster."));
    assert_eq!(kind.rubric(), "Plausible.");
    assert_eq!(kind.table_names(), ["workers"]);
    assert_eq!(kind.table_rows("workers"), Some(2));
    assert_eq!(kind.rule_count(), 0);
    assert_eq!(kind.example, None);
    let kind = load(HEAD).unwrap();
    assert_eq!(kind.rubric(), "A fill.");
    assert_eq!(kind.llm_check, None);
}

#[test]
fn toml_errors_carry_the_line() {
    let err = load("description = \"x\"\n[[rules]]\ncode = \"a\"\ncheck = \"true\"\nmesage = \"m\"\n").unwrap_err();
    assert!(err.starts_with("DIR/k/kind.toml:5:1: unknown field `mesage`, expected one of"), "{err}");
    assert!(err.contains("\nhint: kind.toml takes `description`"), "{err}");
    let err = load("description = \"x\"\nprompt = \n").unwrap_err();
    assert!(err.starts_with("DIR/k/kind.toml:2:"), "{err}");
    let err = load("[tables.w]\nfile = \"w.csv\"\nkey = \"id\"\n").unwrap_err();
    assert!(err.contains("missing field `description`"), "{err}");
    let err = load("description = \" \"\n").unwrap_err();
    assert!(err.starts_with("DIR/k/kind.toml:1: `description` is empty\nhint:"), "{err}");
}

fn rule_error(rule: &str) -> String {
    load(&format!("{HEAD}\n[[rules]]\n{rule}")).unwrap_err()
}

#[test]
fn rule_errors_name_the_file_line_rule_and_field() {
    let err = rule_error("code = \"city\"\ncheck = \"lookup(workers, item.id).city ==\"\nmessage = \"m\"");
    assert!(
        err.starts_with(
            "DIR/k/kind.toml:8: rule `city`: `check` does not compile: Syntax error: mismatched input '<EOF>'"
        ),
        "{err}"
    );
    assert!(err.contains("at column 33\nhint: the expression is `lookup(workers, item.id).city ==`"), "{err}");

    let err = rule_error("code = \"c\"\neach = \"self.fills\"\ncheck = \"exists(roster, item.id)\"\nmessage = \"m\"");
    assert_eq!(
        err,
        "DIR/k/kind.toml:9: rule `c`: `check` calls `exists` on `roster`, which is not a table\nhint: the tables of this kind are: workers"
    );
    let err = rule_error("code = \"c\"\ncheck = \"item.id != ''\"\nmessage = \"m\"");
    assert!(err.starts_with("DIR/k/kind.toml:8: rule `c`: `check` uses `item`, but the rule has no `each`"), "{err}");
    let err = rule_error("code = \"c\"\neach = \"item.fills\"\ncheck = \"true\"\nmessage = \"m\"");
    assert!(
        err.starts_with("DIR/k/kind.toml:8: rule `c`: `each` uses `item`, which `each` itself cannot see"),
        "{err}"
    );
    let err = rule_error("code = \"c\"\ncheck = \"true\"\nfound = \"slef\"\nmessage = \"m\"");
    assert!(err.starts_with("DIR/k/kind.toml:9: rule `c`: `found` uses `slef`, which is not defined"), "{err}");
}

#[test]
fn template_errors_name_the_rule_and_field() {
    let err = rule_error("code = \"c\"\ncheck = \"true\"\nmessage = \"city {{ found \"");
    assert!(
        err.starts_with("DIR/k/kind.toml:9: rule `c`: `message` is not a valid template: unexpected end of input"),
        "{err}"
    );
    let err = rule_error("code = \"c\"\ncheck = \"true\"\nmessage = \"city '{{ found }}'\"");
    assert_eq!(
        err,
        "DIR/k/kind.toml:9: rule `c`: `message` uses `{{ found }}`, which is not defined for this rule\nhint: add `found = \"…\"` (a CEL expression) to the rule; its value is `{{ found }}`"
    );
    let err = rule_error("code = \"c\"\ncheck = \"true\"\npath = \"/fills/{{ index }}\"\nmessage = \"m\"");
    assert!(err.starts_with("DIR/k/kind.toml:9: rule `c`: `path` uses `{{ index }}`"), "{err}");
    let err = rule_error("code = \"c\"\ncheck = \"true\"\nmessage = \"{{ worker }}\"");
    assert!(err.ends_with("hint: templates see: context, self"), "{err}");
    // filters and globals are not variables
    assert!(
        load(&format!(
            "{HEAD}[[rules]]\ncode = \"c\"\ncheck = \"true\"\nmessage = \"{{{{ range(2) | list | length }}}}\"\n"
        ))
        .is_ok()
    );
}

#[test]
fn other_rule_errors() {
    let err = rule_error("code = \"has space\"\ncheck = \"true\"\nmessage = \"m\"");
    assert!(err.starts_with("DIR/k/kind.toml:7: rule `has space`: `code` must be a short word"), "{err}");
    let err = load(&format!("{HEAD}{EACH}{}", EACH.replace("\"city\"", "\"exists\""))).unwrap_err();
    assert!(err.contains(": two rules have the code `exists`"), "{err}");
}

#[test]
fn table_declarations_are_checked() {
    let err = load("description = \"x\"\n[tables.self]\nfile = \"workers.csv\"\nkey = \"id\"\n").unwrap_err();
    assert!(err.starts_with("DIR/k/kind.toml:3: `self` cannot name a table\nhint:"), "{err}");
    let err = load("description = \"x\"\n[tables.w]\nfile = \"missing.csv\"\nkey = \"id\"\n").unwrap_err();
    assert!(err.starts_with("cannot read `DIR/k/missing.csv`:"), "{err}");
    let err = load("description = \"x\"\n[tables.w]\nfile = \"workers.parquet\"\nkey = \"id\"\n").unwrap_err();
    if cfg!(feature = "parquet") {
        assert!(err.starts_with("cannot read `DIR/k/workers.parquet`"), "{err}");
    } else {
        assert!(err.starts_with("DIR/k/workers.parquet: table `w`: Parquet tables need redraft built with"), "{err}");
    }
    let err = load("description = \"x\"\n[tables.w]\nfile = \"workers.csv\"\nkey = \"worker_id\"\n").unwrap_err();
    assert!(err.starts_with("DIR/k/workers.csv:1: table `w`: the header has no key column `worker_id`"), "{err}");
}

#[test]
fn schema_and_example_are_checked() {
    let root = kind_dir(HEAD);
    let dir = root.path().join("k");
    let shown = |e: KindError| e.to_string().replace(&root.path().display().to_string(), "DIR");

    std::fs::write(dir.join("schema.json"), "{\"type\": \n").unwrap();
    let err = shown(Kind::load(&dir).unwrap_err());
    assert!(err.starts_with("DIR/k/schema.json:2:0: not valid JSON: EOF while parsing a value"), "{err}");

    std::fs::write(dir.join("schema.json"), r#"{"type": "objec"}"#).unwrap();
    let err = shown(Kind::load(&dir).unwrap_err());
    assert!(err.starts_with("`DIR/k/schema.json` is not a valid JSON Schema:"), "{err}");

    std::fs::write(dir.join("schema.json"), r#"{"type": "object", "required": ["fills"]}"#).unwrap();
    std::fs::write(dir.join("example.json"), r#"{"fill": []}"#).unwrap();
    let err = shown(Kind::load(&dir).unwrap_err());
    assert!(
        err.starts_with("`DIR/k/example.json` does not match the kind's schema: `/`: \"fills\" is a required property"),
        "{err}"
    );

    std::fs::write(dir.join("example.json"), r#"{"fills": []}"#).unwrap();
    assert_eq!(Kind::load(&dir).unwrap().example, Some(json!({"fills": []})));

    std::fs::remove_file(dir.join("schema.json")).unwrap();
    let err = shown(Kind::load(&dir).unwrap_err());
    assert!(err.starts_with("cannot read `DIR/k/schema.json`:") && err.contains("hint: every kind needs"), "{err}");
}

#[test]
fn kinds_load_every_directory_with_a_kind_toml() {
    let root = kind_dir(HEAD);
    std::fs::create_dir(root.path().join("tables")).unwrap();
    std::fs::create_dir(root.path().join(".hidden")).unwrap();
    std::fs::write(root.path().join(".hidden/kind.toml"), "broken").unwrap();
    std::fs::write(root.path().join("README.md"), "hi").unwrap();
    let kinds = Kinds::load(root.path()).unwrap();
    assert_eq!(kinds.names(), ["k"]);
    assert_eq!(kinds.len(), 1);
    assert!(kinds.get("k").is_some() && kinds.get("x").is_none());
    assert_eq!(kinds.iter().count(), 1);
    let err = kinds.unknown("fil").to_string().replace(&root.path().display().to_string(), "DIR");
    assert_eq!(
        err,
        "unknown kind `fil`; the kinds in `DIR` are: k\nhint: a kind is a directory `NAME/` holding `kind.toml` and `schema.json`"
    );

    let err = Kinds::load(&root.path().join("nope")).unwrap_err().to_string();
    assert!(
        err.ends_with(
            "/nope` does not exist\nhint: pass `--kinds DIR` or set `kinds_dir` in the config (default `./kinds`)"
        ),
        "{err}"
    );
    let err = Kinds::load(&root.path().join("README.md")).unwrap_err().to_string();
    assert!(err.contains("README.md: is not a directory"), "{err}");

    // a broken kind stops the load, naming its file
    std::fs::create_dir(root.path().join("bad")).unwrap();
    std::fs::write(root.path().join("bad/kind.toml"), "description = 1\n").unwrap();
    let err = Kinds::load(root.path()).unwrap_err().to_string();
    assert!(err.contains("bad/kind.toml:1:15: invalid type: integer `1`, expected a string"), "{err}");
}

#[tokio::test]
async fn the_evaluator_runs_rules_only_when_the_schema_passes() {
    use redraft_core::{EvalInput, Evaluator};
    let root = kind_dir(&format!("{HEAD}{EACH}"));
    std::fs::write(
        root.path().join("k/schema.json"),
        r#"{"type": "object", "required": ["fills"], "properties": {"fills": {"type": "array"}}}"#,
    )
    .unwrap();
    let kinds = Kinds::load(root.path()).unwrap();
    let ev = KindEvaluator::new(kinds.get("k").unwrap(), Formats::Checked).unwrap();
    assert_eq!(ev.name(), "kind:k");
    let context = json!({"city": "Toledo"});
    let eval = |artifact: Value| {
        let ev = &ev;
        let context = &context;
        async move {
            ev.evaluate(EvalInput {
                artifact: &artifact,
                context,
                iteration: 1,
                cancel: &redraft_core::CancelFlag::new(),
            })
            .await
            .unwrap()
        }
    };
    let v = eval(json!({"fills": "W-1"})).await;
    assert_eq!(v.issues.iter().map(|i| i.code.as_str()).collect::<Vec<_>>(), ["type"]);
    let v = eval(json!({"fills": [{"worker_id": "W-1"}]})).await;
    assert_eq!(v.issues.iter().map(|i| i.code.as_str()).collect::<Vec<_>>(), ["rule:city"]);
    assert!(!v.passed);
    assert!(eval(json!({"fills": [{"worker_id": "W-2"}]})).await.passed);
}

const HINTED: &str = r#"
[[rules]]
code = "city"
each = "self.fills"
check = "lookup(workers, item.worker_id).city == context.city"
path = "/fills/{{ index }}/worker_id"
message = "worker '{{ item.worker_id }}' is not in {{ context.city }}"
[rules.hint]
value = "workers.filter(id, workers[id].city == context.city).map(id, id + ' ' + workers[id].name).sort()"
message = "{% if hint %}in {{ context.city }}: {{ hint | join(', ') }}{% endif %}"
"#;

fn hints(rules: &str, artifact: Value, context: Value) -> Vec<(Option<String>, Vec<String>)> {
    let kind = load(&format!("{HEAD}{rules}")).unwrap();
    kind.check_rules(&artifact, &context)
        .into_iter()
        .map(|i| i.hint.map_or((None, Vec::new()), |h| (Some(h.text), h.tables)))
        .collect()
}

#[test]
fn a_hint_is_computed_when_its_rule_fails_and_names_its_tables() {
    let fills = json!({"fills": [{"worker_id": "W-1"}, {"worker_id": "W-2"}]});
    assert_eq!(
        hints(HINTED, fills.clone(), json!({"city": "Toledo"})),
        [(Some("in Toledo: W-2 Ben".to_owned()), vec!["workers".to_owned()])],
        "one failure (W-1), one hint; W-2 passes"
    );
    // A message that renders empty gives no hint; the issue stays.
    assert_eq!(hints(HINTED, fills.clone(), json!({"city": "Akron"})), [(None, vec![]), (None, vec![])]);
    // A value that cannot be computed gives no hint; the issue stays.
    let broken = HINTED.replace("workers[id].city == context.city)", "workers[id].town == context.city)");
    assert_eq!(hints(&broken, fills, json!({"city": "Toledo"})), [(None, vec![])]);
}

#[test]
fn a_long_hint_is_cut_and_says_by_how_much() {
    let rules = HINTED
        .replace("message = \"{% if hint %}", "message = \"{{ range(600) | map('string') | join('') }}{% if hint %}");
    let got = hints(&rules, json!({"fills": [{"worker_id": "W-1"}]}), json!({"city": "Toledo"}));
    let hint = got[0].0.clone().unwrap();
    assert!(hint.chars().count() < 1100, "{}", hint.len());
    assert!(hint.ends_with(" more characters)"), "{hint}");
}

#[test]
fn a_hint_schema_narrows_the_value_at_the_rules_path() {
    let rules = HINTED.replace(
        "message = \"{% if hint %}in",
        "schema = \"{'enum': workers.filter(id, workers[id].city == context.city).sort()}\"\nmessage = \"{% if hint %}in",
    );
    let kind = load(&format!("{HEAD}{rules}")).unwrap();
    let fills = json!({"fills": [{"worker_id": "W-2"}, {"worker_id": "W-1"}]});
    let issues = kind.check_rules(&fills, &json!({"city": "Toledo"}));
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].path, "/fills/1/worker_id");
    assert_eq!(issues[0].hint_schema(), Some(&json!({"enum": ["W-2"]})));
    assert_eq!(issues[0].hint_text(), Some("in Toledo: W-2 Ben"));
    // No worker there: an empty `enum` would let a decoder write nothing, so the issue carries
    // no schema; the words say so, or nothing.
    let issues = kind.check_rules(&fills, &json!({"city": "Akron"}));
    assert_eq!(issues[0].hint_schema(), None);
    assert_eq!(issues[0].hint_text(), None);
    // Not an object, or not computable: no schema; the issue and its words stay.
    for schema in ["'W-2'", "{'enum': workers.map(id, workers[id].town)}"] {
        let rules = HINTED
            .replace("message = \"{% if hint %}in", &format!("schema = \"{schema}\"\nmessage = \"{{% if hint %}}in"));
        let kind = load(&format!("{HEAD}{rules}")).unwrap();
        let issues = kind.check_rules(&fills, &json!({"city": "Toledo"}));
        assert_eq!(issues[0].hint_schema(), None, "{schema}");
        assert_eq!(issues[0].hint_text(), Some("in Toledo: W-2 Ben"), "{schema}");
    }
    // An unknown name is refused when the kind loads.
    let rules =
        HINTED.replace("message = \"{% if hint %}in", "schema = \"{'enum': roster}\"\nmessage = \"{% if hint %}in");
    let err = load(&format!("{HEAD}{rules}")).unwrap_err().to_string();
    assert!(err.contains("`hint.schema` uses `roster`, which is not defined"), "{err}");
}

#[test]
fn hint_errors_name_the_rule_and_field() {
    let err = rule_error(
        "code = \"c\"\ncheck = \"true\"\nmessage = \"m\"\n[rules.hint]\nvalue = \"roster.size()\"\nmessage = \"{{ hint }}\"",
    );
    assert!(err.starts_with("DIR/k/kind.toml:11: rule `c`: `hint.value` uses `roster`, which is not defined"), "{err}");
    let err = rule_error(
        "code = \"c\"\ncheck = \"true\"\nmessage = \"m\"\n[rules.hint]\nvalue = \"1\"\nmessage = \"{{ hints }}\"",
    );
    assert!(err.starts_with("DIR/k/kind.toml:12: rule `c`: `hint.message` uses `{{ hints }}`"), "{err}");
    let err = rule_error("code = \"c\"\ncheck = \"true\"\nmessage = \"m\"\n[rules.hint]\nvalue = \"1\"\n");
    assert!(err.contains("missing field `message`"), "{err}");
}

#[test]
fn a_kind_checks_formats_unless_told_they_are_annotations() {
    let root = kind_dir(HEAD);
    let dir = root.path().join("k");
    let schema = r#"{"type": "object", "properties": {"start": {"type": "string", "format": "date"}}}"#;
    std::fs::write(dir.join("schema.json"), schema).unwrap();
    // The example is what the model is shown as valid: its formats are checked at load.
    std::fs::write(dir.join("example.json"), r#"{"start": "July 4th"}"#).unwrap();
    let err = Kind::load(&dir).unwrap_err().to_string();
    assert!(err.contains(r#"`/start`: "July 4th" is not a "date""#), "{err}");
    std::fs::write(dir.join("example.json"), r#"{"start": "2024-07-04"}"#).unwrap();
    let kind = Arc::new(Kind::load(&dir).unwrap());
    let bad = json!({"start": "July 4th"});
    let checked = KindEvaluator::new(kind.clone(), Formats::Checked).unwrap();
    let codes: Vec<String> = checked.issues(&bad, &json!({})).into_iter().map(|i| i.code).collect();
    assert_eq!(codes, ["format"]);
    let annotated = KindEvaluator::new(kind, Formats::Annotation).unwrap();
    assert!(annotated.issues(&bad, &json!({})).is_empty());
}

#[test]
fn a_rule_failing_for_every_element_keeps_the_first_thousand_and_counts_the_rest() {
    let kind = load(&format!("{HEAD}{EACH}")).unwrap();
    let fills: Vec<Value> = (0..5_000).map(|i| json!({"worker_id": format!("X-{i}")})).collect();
    let artifact = json!({"fills": fills});
    let issues = kind.check_rules(&artifact, &json!({"city": "Toledo"}));
    assert_eq!(issues.len(), redraft_core::MAX_ISSUES_PER_ATTEMPT + 1);
    assert_eq!(issues[999].message, "worker 'X-999' is not in the roster");
    assert_eq!(issues[1000].code, redraft_core::codes::TOO_MANY_ISSUES);
    assert_eq!(issues[1000].found.as_deref(), Some(&json!(4_000)));

    // Cancelled, the rules stop where they are.
    let cancel = redraft_core::CancelFlag::new();
    cancel.cancel();
    assert_eq!(kind.check_rules_until(&artifact, &json!({"city": "Toledo"}), &cancel), []);
}
