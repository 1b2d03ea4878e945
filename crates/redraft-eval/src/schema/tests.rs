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
fn a_million_errors_give_the_first_thousand_issues_and_a_count_of_the_rest() {
    let ones = Value::Array(vec![json!(1); 1_000_000]);
    let issues = SchemaEvaluator::new(json!({"type": "array", "items": {"type": "string"}})).unwrap().issues(&ones);
    assert_eq!(issues.len(), redraft_core::MAX_ISSUES_PER_ATTEMPT + 1);
    assert_eq!((issues[999].path.as_str(), issues[999].message.as_str()), ("/999", "1 is not of type \"string\""));
    let last = &issues[1000];
    assert_eq!(last.code, redraft_core::codes::TOO_MANY_ISSUES);
    assert!(last.message.starts_with("999000 more issues"), "{}", last.message);
}

#[test]
fn a_value_too_long_to_show_is_described_in_the_message() {
    let long = "x".repeat(5_000);
    let got = check(json!({"type": "object", "properties": {"n": {"type": "number"}}}), json!({"n": long}));
    assert_eq!(got, [("/n".into(), "type".into(), "a string of 5000 characters is not of type \"number\"".into())]);
    let big = json!({"a": long});
    let got = check(json!({"type": "string"}), big);
    assert_eq!(got, [("".into(), "type".into(), "an object of 1 member is not of type \"string\"".into())]);
}

#[test]
fn the_same_schema_is_compiled_once_and_the_cache_is_bounded() {
    let schema = json!({"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-\\d+$"}}});
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
    assert!(cache.by_key.len() <= CACHED_SCHEMAS && cache.order.len() == cache.by_key.len());
    assert!(!cache.by_key.keys().any(|k| k.text.contains("bounded-0\"")));
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
    let err = SchemaEvaluator::from_file(Path::new("/nonexistent/s.json"), Formats::Checked).unwrap_err().to_string();
    assert!(err.contains("/nonexistent/s.json") && err.contains("hint:"), "{err}");
}

#[test]
fn remote_refs_are_not_fetched() {
    let err = SchemaEvaluator::new(json!({"$ref": "https://example.com/s.json"})).unwrap_err();
    assert!(matches!(err, SchemaError::Ref { source: RefError::Remote { .. }, .. }), "{err}");
    let err = err.to_string();
    assert!(err.contains("`https://example.com/s.json` is not fetched") && err.contains("hint:"), "{err}");
    // From a file too, and through a nested `$id` that makes a relative reference remote.
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.json", json!({"properties": {"a": {"$ref": "http://127.0.0.1:9/a.json"}}}));
    assert!(matches!(from_file(&s), Err(SchemaError::Ref { source: RefError::Remote { .. }, .. })));
    let s = write(dir.path(), "id.json", json!({"$id": "https://example.com/root.json", "$ref": "a.json"}));
    let err = from_file(&s).unwrap_err().to_string();
    assert!(err.contains("`https://example.com/a.json` is not fetched"), "{err}");
}

/// One valid and one invalid value of each format redraft promises to check.
const FORMATS: &[(&str, &str, &str)] = &[
    ("date", "2024-07-04", "July 4th"),
    ("date-time", "2024-07-04T12:30:00Z", "2024-07-04 noon"),
    ("time", "12:30:00Z", "half past noon"),
    ("duration", "P1DT2H", "1 day"),
    ("email", "ada@example.com", "not an email"),
    ("hostname", "api.example.com", "not a host!"),
    ("ipv4", "192.168.0.1", "256.1.1.1"),
    ("ipv6", "2001:db8::1", "2001:db8::g"),
    ("uri", "https://example.com/a?b=c", "not a uri"),
    ("uri-reference", "../a?b#c", "\\\\server\\share"),
    ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567"),
    ("regex", "^[a-z]+$", "[unclosed"),
    ("json-pointer", "/a/b~0c", "a/b"),
];

#[test]
fn every_listed_format_is_checked_by_default() {
    for (format, valid, invalid) in FORMATS {
        let schema = json!({"type": "object", "properties": {"v": {"type": "string", "format": format}}});
        assert_eq!(check(schema.clone(), json!({"v": valid})), [], "{format}: `{valid}` is valid");
        let message = format!("{} is not a {}", json!(invalid), json!(format));
        assert_eq!(
            check(schema, json!({"v": invalid})),
            [("/v".to_owned(), "format".to_owned(), message)],
            "{format}: `{invalid}` is not"
        );
    }
}

#[test]
fn formats_are_annotations_when_asked() {
    for (format, valid, invalid) in FORMATS {
        let schema = json!({"properties": {"v": {"format": format}}});
        let ev = SchemaEvaluator::of(&schema, Formats::Annotation).unwrap();
        assert!(ev.issues(&json!({"v": invalid})).is_empty(), "{format}: `{invalid}` passes");
        assert!(ev.issues(&json!({"v": valid})).is_empty());
        // The same schema checked is another compiled form: the cache keys on the setting.
        let checked = SchemaEvaluator::of(&schema, Formats::Checked).unwrap();
        assert!(!Arc::ptr_eq(&ev.compiled, &checked.compiled));
        assert_eq!(checked.issues(&json!({"v": invalid})).len(), 1, "{format}");
    }
    // Older drafts, which the validator would check by default, follow the setting too.
    let d7 = json!({"$schema": "http://json-schema.org/draft-07/schema#", "format": "email"});
    assert!(SchemaEvaluator::of(&d7, Formats::Annotation).unwrap().issues(&json!("nope")).is_empty());
    assert_eq!(SchemaEvaluator::of(&d7, Formats::Checked).unwrap().issues(&json!("nope")).len(), 1);
    // A format the validator does not know stays an annotation (schemars writes `uint32`).
    assert!(check(json!({"format": "uint32"}), json!(7)).is_empty());
    assert!(check(json!({"format": "x-custom"}), json!("anything")).is_empty());
}

fn write(dir: &Path, name: &str, schema: Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, serde_json::to_string_pretty(&schema).unwrap()).unwrap();
    path
}

fn from_file(path: &Path) -> Result<SchemaEvaluator, SchemaError> {
    SchemaEvaluator::from_file(path, Formats::Checked)
}

fn codes(ev: &SchemaEvaluator, artifact: Value) -> Vec<(String, String)> {
    ev.issues(&artifact).into_iter().map(|i| (i.path, i.code)).collect()
}

#[test]
fn a_ref_to_a_sibling_file_resolves_against_the_schema_directory() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "address.json", json!({"type": "object", "required": ["street"]}));
    let s = write(dir.path(), "order.json", json!({"properties": {"ship_to": {"$ref": "address.json"}}}));
    // The file's directory counts, not the process's (tests run in the crate's).
    let ev = from_file(&s).unwrap();
    assert_eq!(codes(&ev, json!({"ship_to": {}})), [("/ship_to".into(), "required".into())]);
    assert_eq!(codes(&ev, json!({"ship_to": {"street": "Main St"}})), []);
}

#[test]
fn a_ref_to_a_definition_in_a_sibling_file() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "defs.json", json!({"$defs": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}}));
    let s = write(dir.path(), "s.json", json!({"properties": {"zip": {"$ref": "defs.json#/$defs/zip"}}}));
    let ev = from_file(&s).unwrap();
    assert_eq!(codes(&ev, json!({"zip": "1234"})), [("/zip".into(), "pattern".into())]);
    assert_eq!(codes(&ev, json!({"zip": "43604"})), []);
}

#[test]
fn nested_refs_resolve_against_the_file_they_are_in() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "common/address.json", json!({"properties": {"zip": {"$ref": "zip.json"}}}));
    write(dir.path(), "common/zip.json", json!({"type": "string", "format": "date"}));
    // A decoy next to the root schema: read only if `zip.json` resolved against the wrong file.
    write(dir.path(), "zip.json", json!({"type": "integer"}));
    let s = write(dir.path(), "s.json", json!({"$ref": "common/address.json"}));
    let ev = from_file(&s).unwrap();
    assert_eq!(codes(&ev, json!({"zip": "not a date"})), [("/zip".into(), "format".into())]);
    assert_eq!(codes(&ev, json!({"zip": "2024-07-04"})), []);
}

#[test]
fn refs_cannot_leave_the_schema_directory() {
    let dir = tempfile::tempdir().unwrap();
    let secret = write(dir.path(), "secret.json", json!({"type": "object"}));
    write(dir.path(), "schemas/inside.json", json!({"type": "object"}));
    std::os::unix::fs::symlink(&secret, dir.path().join("schemas/link.json")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("schemas/inside.json"), dir.path().join("schemas/alias.json")).unwrap();
    let refused = |reference: &str| {
        let s = write(dir.path(), "schemas/s.json", json!({"properties": {"a": {"$ref": reference}}}));
        match from_file(&s) {
            Err(SchemaError::Ref { source: RefError::Outside { reference }, .. }) => reference,
            other => panic!("`{reference}` must be refused as outside: {other:?}"),
        }
    };
    assert_eq!(refused("../secret.json"), "../secret.json");
    assert_eq!(refused("inside/../../secret.json"), "../secret.json");
    assert_eq!(refused("%2e%2e/secret.json"), "../secret.json");
    assert_eq!(refused(secret.to_str().unwrap()), "../secret.json", "an absolute path");
    assert_eq!(refused(url::Url::from_file_path(&secret).unwrap().as_str()), "../secret.json");
    assert_eq!(refused("link.json"), "link.json", "a symbolic link leading out");
    assert_eq!(refused("../missing.json"), "../missing.json", "outside, whether or not it exists");
    // A symbolic link that stays inside is followed.
    let s = write(dir.path(), "schemas/s.json", json!({"properties": {"a": {"$ref": "alias.json"}}}));
    assert_eq!(codes(&from_file(&s).unwrap(), json!({"a": 1})), [("/a".into(), "type".into())]);
    // The message names the reference and what to do.
    let s = write(dir.path(), "schemas/s.json", json!({"$ref": "../secret.json"}));
    let err = from_file(&s).unwrap_err().to_string();
    assert!(err.contains("`../secret.json` is outside the schema file's directory") && err.contains("hint:"), "{err}");
}

#[test]
fn an_inline_schema_cannot_refer_to_files() {
    for reference in ["address.json", "defs.json#/$defs/zip"] {
        let err = SchemaEvaluator::new(json!({"$ref": reference})).unwrap_err();
        assert!(matches!(err, SchemaError::Ref { source: RefError::NeedsFile { .. }, .. }), "{err}");
        let err = err.to_string();
        let file = reference.split('#').next().unwrap();
        assert!(err.contains(&format!("`{file}` names a file")) && err.contains("need a schema file"), "{err}");
        assert!(err.contains("hint: save the schema to a file"), "{err}");
    }
    // References inside the schema itself need no file.
    let ev = SchemaEvaluator::new(json!({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"})).unwrap();
    assert_eq!(ev.issues(&json!("x")).len(), 1);
}

#[test]
fn missing_or_broken_referenced_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.json", json!({"$ref": "missing.json"}));
    let err = from_file(&s).unwrap_err().to_string();
    assert!(err.contains("cannot read `missing.json`") && err.contains("hint:"), "{err}");
    std::fs::write(dir.path().join("broken.json"), "{").unwrap();
    let s = write(dir.path(), "s.json", json!({"$ref": "broken.json"}));
    let err = from_file(&s).unwrap_err().to_string();
    assert!(err.contains("`broken.json` is not valid JSON"), "{err}");
}

#[test]
fn a_cached_schema_is_compiled_again_when_a_file_it_refers_to_changes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "n.json", json!({"type": "integer"}));
    let s = write(dir.path(), "s.json", json!({"$ref": "n.json"}));
    let a = from_file(&s).unwrap();
    let b = from_file(&s).unwrap();
    assert!(Arc::ptr_eq(&a.compiled, &b.compiled), "unchanged files: the compiled form is reused");
    assert_eq!(b.issues(&json!("x")).len(), 1);
    write(dir.path(), "n.json", json!({"type": "string"}));
    let c = from_file(&s).unwrap();
    assert!(c.issues(&json!("x")).is_empty() && c.issues(&json!(1)).len() == 1, "the edited file is read");
    // The same text in another directory names other files: it is another schema.
    let other = tempfile::tempdir().unwrap();
    write(other.path(), "n.json", json!({"type": "boolean"}));
    let s = write(other.path(), "s.json", json!({"$ref": "n.json"}));
    assert!(from_file(&s).unwrap().issues(&json!(true)).is_empty());
}

#[tokio::test]
async fn evaluates_as_an_evaluator() {
    let ev = SchemaEvaluator::new(json!({"type": "integer"})).unwrap();
    let ctx = Value::Null;
    let v = ev
        .evaluate(EvalInput {
            artifact: &json!(3),
            context: &ctx,
            iteration: 1,
            cancel: &redraft_core::CancelFlag::new(),
        })
        .await
        .unwrap();
    assert!(v.passed);
    let v = ev
        .evaluate(EvalInput {
            artifact: &json!("3"),
            context: &ctx,
            iteration: 1,
            cancel: &redraft_core::CancelFlag::new(),
        })
        .await
        .unwrap();
    assert!(!v.passed);
    assert_eq!(v.issues[0].found.as_deref(), Some(&json!("3")));
}

#[test]
fn patterns_that_need_backtracking_are_refused_and_others_match_in_linear_time() {
    for pattern in ["^(a|a)+$(?<!x0)", "^(?=.*[A-Z]).{8,}$", "(?!abc)x", r"^(\w)\1$"] {
        let schema = json!({"type": "string", "pattern": pattern});
        let error = SchemaEvaluator::of(&schema, Formats::Checked).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("hint: patterns are matched in linear time"), "{pattern}: {error}");
    }
    // ECMA-262 patterns without those keep their meaning; a pattern that would backtrack
    // exponentially in a backtracking engine is answered at once.
    let schema = json!({"type": "object", "properties": {
        "code": {"type": "string", "pattern": r"^[A-Z]{2}-\d{3}$"},
        "word": {"type": "string", "pattern": r"^\p{L}+$"},
        "nested": {"type": "string", "pattern": "^(a+)+$"}
    }, "patternProperties": {"^x-": {"type": "integer"}}});
    let evaluator = SchemaEvaluator::of(&schema, Formats::Checked).unwrap();
    let long = format!("{}!", "a".repeat(10_000));
    assert!(evaluator.issues(&json!({"code": "AB-123", "word": "Zoë", "nested": "aaa", "x-n": 1})).is_empty());
    let issues = evaluator.issues(&json!({"code": "AB-12", "word": "Zoë1", "nested": long, "x-n": "1"}));
    let mut paths: Vec<_> = issues.iter().map(|i| i.path.as_str()).collect();
    paths.sort_unstable();
    assert_eq!(paths, ["/code", "/nested", "/word", "/x-n"]);
}

#[test]
fn a_schema_check_under_way_stops_when_its_flag_is_set() {
    // 13 levels of a definition used twice: every string is checked 2^13 times, so the whole
    // answer takes long — unless the check stops.
    let mut defs = serde_json::Map::new();
    for i in 0..13 {
        let next = json!({"$ref": format!("#/$defs/a{}", i + 1)});
        defs.insert(format!("a{i}"), json!({"allOf": [next.clone(), next]}));
    }
    defs.insert("a13".into(), json!({"type": "string"}));
    let schema = json!({"$defs": defs, "type": "array", "items": {"$ref": "#/$defs/a0"}});
    let evaluator = SchemaEvaluator::of(&schema, Formats::Checked).unwrap();
    let answer = Value::Array((0..3_000).map(|i| json!(format!("value {i}"))).collect());
    let cancel = redraft_core::CancelFlag::new();
    let started = std::sync::Arc::new(std::sync::Barrier::new(2));
    let check = {
        let (cancel, started) = (cancel.clone(), started.clone());
        std::thread::spawn(move || {
            started.wait();
            evaluator.issues_until(&answer, &cancel)
        })
    };
    started.wait();
    cancel.cancel();
    let issues = check.join().unwrap();
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].code, "check_timeout");
    // Not cancelled, the same schema still checks (a small answer).
    let small = SchemaEvaluator::of(&schema, Formats::Checked).unwrap();
    assert!(small.issues(&json!(["a", "b"])).is_empty());
    assert_eq!(small.issues(&json!([1]))[0].code, "type");
}
