//! Property tests for the invariants: valid JSON is never changed, nothing panics, JSON
//! embedded in prose is found, and coercion leaves a value that fits its schema alone.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use proptest::prelude::*;
use redraft_extract::{Extraction, Route, coerce, extract, repair};
use serde_json::{Value, json};

/// Strings: any Unicode, or text made of the characters repair heuristics look at.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[{}\\[\\]\",:'\\\\/*# a\n“”‘’`()]{0,12}",
        "(true|null|, |\"|\\{|\\[|\\}|\\]|:|x){0,6}",
    ]
}

/// Arbitrary JSON values: every scalar kind, adversarial strings and keys, nesting.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// Text made of JSON-ish characters, prose and Unicode, the material damage is made of.
fn jsonish() -> impl Strategy<Value = String> {
    prop_oneof![
        "[{}\\[\\]\",:'\\\\/*#\n tfnaeu0-9.+\\-`“”‘’()<>]{0,64}",
        any::<String>(),
        (json(), 0usize..64, "[{}\\[\\]\",:'\\\\ ]{0,3}").prop_map(|(v, cut, junk)| {
            // valid JSON, cut short and with a little junk spliced in
            let text = v.to_string();
            let mut at = cut.min(text.len());
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            format!("{}{junk}{}", &text[..at], &text[at..])
        }),
    ]
}

/// A schema `value` fits: its types, every member required and no other allowed, each item
/// one of the items' shapes; scalars may be pinned by `enum`.
fn shape_of(value: &Value, pin: bool) -> Value {
    let scalar = |t: &str| if pin { json!({"type": t, "enum": [value.clone(), "other"]}) } else { json!({"type": t}) };
    match value {
        Value::Null => scalar("null"),
        Value::Bool(_) => scalar("boolean"),
        Value::Number(n) if n.is_i64() || n.is_u64() => scalar("integer"),
        Value::Number(_) => scalar("number"),
        Value::String(_) => scalar("string"),
        Value::Array(items) => {
            json!({"type": "array", "items": {"anyOf": items.iter().map(|i| shape_of(i, pin)).collect::<Vec<_>>()}})
        }
        Value::Object(map) => json!({
            "type": "object",
            "properties": map.iter().map(|(k, v)| (k.clone(), shape_of(v, pin))).collect::<serde_json::Map<_, _>>(),
            "required": map.keys().collect::<Vec<_>>(),
            "additionalProperties": false
        }),
    }
}

/// Values with text coercion reads: numbers, currencies, units, booleans, JSON, cases.
fn loose() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        json(),
        "[-+€$ 0-9.,%_'a-zA-Z]{0,10}".prop_map(Value::String),
        r#"(yes|No|TRUE|0|1|\[1\]|\{"a": "2"\}| Open |open)"#.prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-c]", inner), 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Schemas made of what coercion reads, references and branches included.
fn schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({})),
        Just(json!(true)),
        Just(json!(false)),
        "(null|boolean|integer|number|string|array|object)".prop_map(|t| json!({"type": t})),
        Just(json!({"type": ["number", "null"]})),
        Just(json!({"enum": ["Open", "closed", 1, true]})),
        Just(json!({"$ref": "#"})),
        Just(json!({"$ref": "#/$defs/x"})),
    ];
    let tree = leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(("[a-c]", inner.clone()), 0..4).prop_map(|props| {
                let required: Vec<String> = props.iter().map(|(k, _)| k.clone()).take(1).collect();
                json!({"type": "object", "properties": props.into_iter().collect::<serde_json::Map<_, _>>(), "required": required})
            }),
            inner.clone().prop_map(|items| json!({"type": "array", "items": items})),
            prop::collection::vec(inner.clone(), 0..3).prop_map(|b| json!({"anyOf": b})),
            prop::collection::vec(inner.clone(), 0..3).prop_map(|b| json!({"allOf": b})),
            prop::collection::vec(inner, 0..3).prop_map(|p| json!({"type": "array", "prefixItems": p})),
        ]
    });
    (tree.clone(), tree).prop_map(|(root, def)| match root {
        Value::Object(mut map) => {
            map.insert("$defs".into(), json!({"x": def}));
            Value::Object(map)
        }
        other => other,
    })
}

fn check_shape(raw: &str, found: &Extraction) {
    assert!(raw.get(found.span.clone()).is_some(), "span {:?} outside {raw:?}", found.span);
    if found.route != Route::Repaired {
        assert!(found.repairs.is_empty());
    }
}

proptest! {
    // 512 cases by default; `PROPTEST_CASES` raises it for a longer search
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn valid_json_comes_back_unchanged(value in json()) {
        for text in [value.to_string(), serde_json::to_string_pretty(&value).unwrap_or_default()] {
            let strict: Value = serde_json::from_str(&text).unwrap_or_default();
            let found = extract(&text);
            prop_assert!(found.is_ok(), "{text:?}: {found:?}");
            let found = found.unwrap_or_else(|_| unreachable!());
            prop_assert_eq!(&found.value, &strict);
            prop_assert_eq!(found.route, Route::Bare);
            // the lenient parser alone agrees with serde_json and reports no repair
            prop_assert_eq!(repair(&text), Some((strict, Vec::new())), "{:?}", text);
        }
    }

    #[test]
    fn never_panics(text in jsonish()) {
        if let Ok(found) = extract(&text) {
            check_shape(&text, &found);
        }
        let _ = repair(&text);
    }

    #[test]
    fn coercion_leaves_a_fitting_value_alone(value in json(), pin in any::<bool>()) {
        let schema = shape_of(&value, pin);
        let mut coerced = value.clone();
        prop_assert_eq!(coerce(&mut coerced, &schema), Vec::new(), "{} against {}", value, schema);
        prop_assert_eq!(&coerced, &value);
    }

    #[test]
    fn coercion_never_panics_and_records_what_it_changed(value in loose(), schema in schema()) {
        let mut coerced = value.clone();
        let done = coerce(&mut coerced, &schema);
        prop_assert_eq!(done.is_empty(), coerced == value, "{} against {}: {:?}", value, schema, done);
        for c in &done {
            prop_assert!(c.from != c.to, "{:?}", c);
        }
    }

    #[test]
    fn finds_an_object_in_prose(
        value in json(),
        before in "[A-Za-z ,.:!'\n]{0,40}",
        after in "[A-Za-z ,.!'\n]{0,40}",
    ) {
        let object = match value {
            Value::Object(_) => value,
            other => serde_json::json!({ "answer": other }),
        };
        let text = format!("{before}{object}{after}");
        // what strict parsing reads back (floats need not round-trip exactly)
        let object: Value = serde_json::from_str(&object.to_string()).unwrap_or_default();
        let found = extract(&text);
        prop_assert!(found.is_ok(), "{text:?}: {found:?}");
        let found = found.unwrap_or_else(|_| unreachable!());
        check_shape(&text, &found);
        // `{…}, thanks` reads as a document with a trailing comma: same value, route repaired
        prop_assert_eq!(&found.value, &object, "{:?}", text);
    }
}

#[test]
fn refusals_are_not_json() {
    for text in [
        "I cannot help with that.",
        "I'm sorry, but I can't assist with that request.",
        "Sorry",
        "No.",
        "N/A",
        "(I can't do that.)",
        "I can't do [that].",
        "Sorry, I can't produce {that}.",
        "As an AI, I won't share \"that\".",
        "[citation needed] I can't help with that.",
        "{{name}} is not set, so I can't answer.",
        "```json\nSorry, I can't produce that.\n```",
        "Here is some code instead:\n```python\nprint('hi')\n```",
        "<think>The user asks for {\"a\": 1}.</think>\nI won't do that.",
    ] {
        assert!(extract(text).is_err(), "{text:?} became {:?}", extract(text));
    }
}
