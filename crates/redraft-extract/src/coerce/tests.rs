//! Data-driven checks of coercion: a schema, a value, and the value and coercions expected
//! (`(path, from, to)`, in order).

use serde_json::{Value, json};

use super::{Coercion, coerce};

fn check(schema: &Value, value: Value, expect: Value, coercions: &[(&str, Value, Value)]) {
    let mut got = value.clone();
    let done = coerce(&mut got, schema);
    let want: Vec<Coercion> =
        coercions.iter().map(|(p, f, t)| Coercion { path: (*p).to_owned(), from: f.clone(), to: t.clone() }).collect();
    assert_eq!((&got, &done), (&expect, &want), "{value} against {schema}");
}

/// `value` is left exactly as it is.
fn untouched(schema: &Value, value: Value) {
    check(schema, value.clone(), value, &[]);
}

fn object(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

#[test]
fn numbers_written_as_text() {
    let s = object(json!({"unit_price": {"type": "number"}, "qty": {"type": "integer"}}));
    check(
        &s,
        json!({"unit_price": "€77.08", "qty": "3"}),
        json!({"unit_price": 77.08, "qty": 3}),
        &[("/unit_price", json!("€77.08"), json!(77.08)), ("/qty", json!("3"), json!(3))],
    );
    check(&s, json!({"qty": "12.0"}), json!({"qty": 12}), &[("/qty", json!("12.0"), json!(12))]);
    check(
        &s,
        json!({"unit_price": "$1,234.50"}),
        json!({"unit_price": 1234.5}),
        &[("/unit_price", json!("$1,234.50"), json!(1234.5))],
    );
    // valid values stay, whatever they look like
    untouched(&s, json!({"unit_price": 77, "qty": 3}));
    untouched(&s, json!({"qty": 12.0}));
    // nothing invented, nothing rounded, nothing guessed
    untouched(&s, json!({"qty": "12.5"}));
    untouched(&s, json!({"qty": 12.5}));
    untouched(&s, json!({"unit_price": "1.234"}));
    untouched(&s, json!({"unit_price": "12,5"}));
    untouched(&s, json!({"unit_price": "about 12"}));
    untouched(&s, json!({"unit_price": null}));
    untouched(&s, json!({"unit_price": true}));
    // a string where a string may stand stays a string
    untouched(&json!({"type": ["string", "number"]}), json!("12"));
}

#[test]
fn units_only_where_the_field_names_them() {
    let s = object(json!({
        "weight_kg": {"type": "number"},
        "weight": {"type": "number"},
        "discount": {"type": "number", "description": "Discount in percent (0-100)."},
        "rate": {"type": "number"}
    }));
    check(
        &s,
        json!({"weight_kg": "12 kg", "discount": "5%"}),
        json!({"weight_kg": 12, "discount": 5}),
        &[("/weight_kg", json!("12 kg"), json!(12)), ("/discount", json!("5%"), json!(5))],
    );
    untouched(&s, json!({"weight": "12 kg", "rate": "5%"}));
}

#[test]
fn booleans_written_as_text() {
    let s = object(json!({"ok": {"type": "boolean"}, "maybe": {"type": ["boolean", "null"]}}));
    check(
        &s,
        json!({"ok": "Yes", "maybe": "false"}),
        json!({"ok": true, "maybe": false}),
        &[("/ok", json!("Yes"), json!(true)), ("/maybe", json!("false"), json!(false))],
    );
    check(&s, json!({"ok": "0"}), json!({"ok": false}), &[("/ok", json!("0"), json!(false))]);
    untouched(&s, json!({"ok": true, "maybe": null}));
    untouched(&s, json!({"ok": "sure"}));
    untouched(&s, json!({"ok": 1}));
    untouched(&s, json!({"maybe": "null"}));
    // "1" could be the integer or the boolean: left alone
    untouched(&json!({"type": ["integer", "boolean"]}), json!("1"));
}

#[test]
fn enum_members_in_another_case() {
    let s = json!({"enum": ["pending", "Shipped", "in transit"]});
    check(&s, json!(" PENDING "), json!("pending"), &[("", json!(" PENDING "), json!("pending"))]);
    check(&s, json!("shipped"), json!("Shipped"), &[("", json!("shipped"), json!("Shipped"))]);
    untouched(&s, json!("pending"));
    untouched(&s, json!("in_transit"));
    untouched(&s, json!("pend"));
    // two members match: ambiguous
    untouched(&json!({"enum": ["a", "A"]}), json!(" a "));
    // a number written as text, in a numeric enum
    check(&json!({"type": "integer", "enum": [1, 2, 3]}), json!("2"), json!(2), &[("", json!("2"), json!(2))]);
    untouched(&json!({"type": "integer", "enum": [1, 2, 3]}), json!("5"));
    untouched(&json!({"enum": [1, 2]}), json!(1.0));
    check(&json!({"const": "EUR"}), json!("eur"), json!("EUR"), &[("", json!("eur"), json!("EUR"))]);
}

#[test]
fn one_value_where_an_array_is_expected() {
    let s = object(
        json!({"tags": {"type": "array", "items": {"type": "string"}}, "ns": {"type": "array", "items": {"type": "integer"}}}),
    );
    check(&s, json!({"tags": "urgent"}), json!({"tags": ["urgent"]}), &[("/tags", json!("urgent"), json!(["urgent"]))]);
    check(
        &s,
        json!({"ns": "7"}),
        json!({"ns": [7]}),
        &[("/ns", json!("7"), json!(["7"])), ("/ns/0", json!("7"), json!(7))],
    );
    untouched(&s, json!({"tags": ["a"], "ns": []}));
    untouched(&s, json!({"tags": null}));
    untouched(&s, json!({"ns": "seven"}));
    untouched(&s, json!({"ns": {"n": 1, "m": 2}}));
    // an integer or a list of them: "7" could be either
    untouched(&json!({"type": ["integer", "array"], "items": {"type": "integer"}}), json!("7"));
    check(
        &json!({"type": "array", "prefixItems": [{"type": "number"}]}),
        json!(1.5),
        json!([1.5]),
        &[("", json!(1.5), json!([1.5]))],
    );
}

#[test]
fn json_inside_a_string() {
    let s = object(json!({
        "address": {"type": "object", "properties": {"zip": {"type": "integer"}}, "required": ["zip", "city"]},
        "items": {"type": "array", "items": {"type": "string"}}
    }));
    check(
        &s,
        json!({"address": "{\"zip\": \"10115\", \"city\": \"Berlin\"}"}),
        json!({"address": {"zip": 10115, "city": "Berlin"}}),
        &[
            (
                "/address",
                json!("{\"zip\": \"10115\", \"city\": \"Berlin\"}"),
                json!({"zip": "10115", "city": "Berlin"}),
            ),
            ("/address/zip", json!("10115"), json!(10115)),
        ],
    );
    // the JSON is read even when it misses something, for the evaluator to name it
    check(
        &s,
        json!({"address": " {\"zip\": 1} "}),
        json!({"address": {"zip": 1}}),
        &[("/address", json!(" {\"zip\": 1} "), json!({"zip": 1}))],
    );
    // a list of strings as JSON text is that list, not a list of one string
    check(
        &s,
        json!({"items": "[\"a\", \"b\"]"}),
        json!({"items": ["a", "b"]}),
        &[("/items", json!("[\"a\", \"b\"]"), json!(["a", "b"]))],
    );
    check(
        &s,
        json!({"items": "[\"a\", 1]"}),
        json!({"items": ["a", 1]}),
        &[("/items", json!("[\"a\", 1]"), json!(["a", 1]))],
    );
    untouched(&s, json!({"address": "{zip: 1}"}));
    untouched(&s, json!({"address": "[1]"}));
    untouched(&json!({"type": ["object", "string"]}), json!("{\"a\": 1}"));
}

#[test]
fn wrappers_around_the_value() {
    let person = json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name"]
    });
    check(
        &person,
        json!({"person": {"name": "Ada", "age": "36"}}),
        json!({"name": "Ada", "age": 36}),
        &[
            ("", json!({"person": {"name": "Ada", "age": "36"}}), json!({"name": "Ada", "age": "36"})),
            ("/age", json!("36"), json!(36)),
        ],
    );
    check(
        &person,
        json!({"data": {"name": "Ada"}}),
        json!({"name": "Ada"}),
        &[("", json!({"data": {"name": "Ada"}}), json!({"name": "Ada"}))],
    );
    untouched(&person, json!({"name": "Ada"}));
    // the inner object lacks a required property, or the wrapper's name is a property
    untouched(&person, json!({"person": {"age": 36}}));
    untouched(&person, json!({"age": {"name": "Ada"}}));
    // the wrapper has more than one member
    untouched(&person, json!({"person": {"name": "Ada"}, "note": "x"}));
    // without `required`: only where other properties are forbidden
    let closed = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false});
    check(&closed, json!({"result": {"a": 1}}), json!({"a": 1}), &[("", json!({"result": {"a": 1}}), json!({"a": 1}))]);
    untouched(&json!({"type": "object", "properties": {"a": {"type": "integer"}}}), json!({"result": {"a": 1}}));
    untouched(&closed, json!({"result": {"b": 1}}));
    // a name the patterns might admit is not taken for a wrapper
    untouched(
        &json!({"type": "object", "properties": {"a": {}}, "required": ["a"], "patternProperties": {"^x-": {}}}),
        json!({"x-a": {"a": 1}}),
    );
    // where no object can stand
    let list = json!({"type": "array", "items": {"type": "integer"}});
    check(
        &list,
        json!({"items": [1, "2"]}),
        json!([1, 2]),
        &[("", json!({"items": [1, "2"]}), json!([1, "2"])), ("/1", json!("2"), json!(2))],
    );
    check(
        &json!({"type": "number"}),
        json!({"result": "12"}),
        json!(12),
        &[("", json!({"result": "12"}), json!("12")), ("", json!("12"), json!(12))],
    );
    untouched(&list, json!({"count": 3}));
    untouched(&json!({"type": "number"}), json!({"result": null}));
}

#[test]
fn refs_and_branches() {
    let s = json!({
        "type": "object",
        "properties": {
            "price": {"$ref": "#/$defs/money"},
            "old": {"$ref": "#/definitions/flag"},
            "maybe": {"anyOf": [{"type": "number"}, {"type": "null"}]},
            "either": {"oneOf": [{"type": "integer"}, {"type": "boolean"}]},
            "shape": {"anyOf": [{"$ref": "#/$defs/point"}, {"type": "string", "enum": ["none"]}]},
            "wrapped": {"allOf": [{"$ref": "#/$defs/money"}], "description": "schemars wraps refs so"},
            "both": {"allOf": [{"$ref": "#/$defs/money"}, {"type": "integer"}]},
            "bounded": {"allOf": [{"$ref": "#/$defs/money"}, {"minimum": 0}]}
        },
        "$defs": {
            "money": {"type": "number"},
            "point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x", "y"]}
        },
        "definitions": {"flag": {"type": "boolean"}}
    });
    check(
        &s,
        json!({"price": "€5", "old": "no", "maybe": "1,234", "wrapped": "7", "shape": "NONE", "bounded": "-1"}),
        json!({"price": 5, "old": false, "maybe": 1234, "wrapped": 7, "shape": "none", "bounded": -1}),
        &[
            ("/price", json!("€5"), json!(5)),
            ("/old", json!("no"), json!(false)),
            ("/maybe", json!("1,234"), json!(1234)),
            ("/wrapped", json!("7"), json!(7)),
            ("/shape", json!("NONE"), json!("none")),
            // what only the evaluator checks (`minimum`) does not stop a coercion
            ("/bounded", json!("-1"), json!(-1)),
        ],
    );
    untouched(&s, json!({"maybe": null, "either": true, "shape": {"x": 1, "y": 2}}));
    // the integer or the boolean branch: ambiguous
    untouched(&s, json!({"either": "1"}));
    check(&s, json!({"either": "12"}), json!({"either": 12}), &[("/either", json!("12"), json!(12))]);
    // the one branch that reaches inside a value fitting none
    check(&s, json!({"shape": {"x": "1.5"}}), json!({"shape": {"x": 1.5}}), &[("/shape/x", json!("1.5"), json!(1.5))]);
    // several parts at once are not coerced toward
    untouched(&s, json!({"both": "5"}));
}

#[test]
fn items_and_members() {
    let s = json!({
        "type": "object",
        "properties": {
            "rows": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]},
            "old_pair": {"type": "array", "items": [{"type": "boolean"}], "additionalItems": {"type": "integer"}}
        },
        "additionalProperties": {"type": "number"}
    });
    check(
        &s,
        json!({"rows": [{"n": "1"}, {"n": 2}], "pair": ["a", "2.5"], "old_pair": ["yes", "3"], "extra": "4", "a/b~": "5"}),
        json!({"rows": [{"n": 1}, {"n": 2}], "pair": ["a", 2.5], "old_pair": [true, 3], "extra": 4, "a/b~": 5}),
        &[
            ("/rows/0/n", json!("1"), json!(1)),
            ("/pair/1", json!("2.5"), json!(2.5)),
            ("/old_pair/0", json!("yes"), json!(true)),
            ("/old_pair/1", json!("3"), json!(3)),
            ("/extra", json!("4"), json!(4)),
            ("/a~1b~0", json!("5"), json!(5)),
        ],
    );
    untouched(&s, json!({"pair": ["1", 2]}));
}

#[test]
fn schemas_that_say_nothing_coerce_nothing() {
    for schema in
        [json!(true), json!({}), json!({"description": "anything"}), json!(false), json!({"$ref": "#/nowhere"})]
    {
        untouched(&schema, json!({"a": "1", "b": ["x"], "c": "{\"d\": 1}"}));
    }
}

#[test]
fn deep_values_and_hostile_schemas_are_left_alone() {
    // a value nested deeper than followed: nothing coerced, nothing overflowed
    let mut deep = json!("1");
    let mut schema = json!({"type": "integer"});
    for _ in 0..200 {
        deep = json!([deep]);
        schema = json!({"type": "array", "items": schema});
    }
    untouched(&schema, deep);
    // a schema referring to itself without end
    let looping =
        json!({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"});
    untouched(&looping, json!("1"));
    let cycle = json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"});
    untouched(&cycle, json!("1"));
    // too many branches to try
    let wide = json!({"anyOf": (0..100).map(|i| json!({"const": i})).collect::<Vec<_>>()});
    untouched(&wide, json!("5"));
}

#[test]
fn huge_values_are_bounded() {
    // within the bound: every item
    let s = json!({"type": "array", "items": {"type": "integer"}});
    let some: Vec<Value> = (0..1000).map(|i| json!(i.to_string())).collect();
    let mut value = Value::Array(some);
    assert_eq!(coerce(&mut value, &s).len(), 1000);
    assert_eq!(value.get(999), Some(&json!(999)));
    // past it: nothing, not even the one item to coerce at the end
    let mut many: Vec<Value> = (0..200_000).map(|i| json!(i)).collect();
    many.push(json!("1"));
    let original = Value::Array(many);
    let mut value = original.clone();
    assert!(coerce(&mut value, &s).is_empty());
    assert_eq!(value, original);
    // branches over a large value do not multiply the work past the bound
    let branches = json!({"anyOf": [s.clone(), s.clone(), {"type": "array", "items": {"type": "number"}}]});
    let mut value = original.clone();
    assert!(coerce(&mut value, &branches).is_empty());
}

#[test]
fn a_typed_schema_from_schemars_is_followed() {
    // the shape `schemars` gives a struct with an optional nested struct and an enum
    let s = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Order",
        "type": "object",
        "properties": {
            "sku": {"type": "string"},
            "quantity": {"type": "integer", "format": "uint32", "minimum": 0},
            "status": {"$ref": "#/$defs/Status"},
            "ship_to": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]}
        },
        "required": ["sku", "quantity", "status"],
        "$defs": {
            "Status": {"type": "string", "enum": ["Open", "Closed"]},
            "Address": {"type": "object", "properties": {"zip": {"type": "string"}}, "required": ["zip"]}
        }
    });
    check(
        &s,
        json!({"order": {"sku": "A-1", "quantity": "2", "status": "open", "ship_to": null}}),
        json!({"sku": "A-1", "quantity": 2, "status": "Open", "ship_to": null}),
        &[
            (
                "",
                json!({"order": {"sku": "A-1", "quantity": "2", "status": "open", "ship_to": null}}),
                json!({"sku": "A-1", "quantity": "2", "status": "open", "ship_to": null}),
            ),
            ("/quantity", json!("2"), json!(2)),
            ("/status", json!("open"), json!("Open")),
        ],
    );
    untouched(&s, json!({"sku": "A-1", "quantity": 2, "status": "Open", "ship_to": {"zip": "10115"}}));
}

#[test]
fn coercions_serialise_as_path_from_to() {
    let c = Coercion { path: "/unit_price".into(), from: json!("€77.08"), to: json!(77.08) };
    let text = serde_json::to_string(&c).unwrap_or_default();
    assert_eq!(text, r#"{"path":"/unit_price","from":"€77.08","to":77.08}"#);
    assert_eq!(serde_json::from_str::<Coercion>(&text).ok(), Some(c));
}
