//! The artifact the engine finds in a proposer's text: the text itself in text mode, extracted
//! JSON coerced toward the schema in structured mode.

use redraft_core::{Engine, Verdict};
use serde_json::json;

use crate::{answer, finish, plan};

#[test]
fn text_mode_evaluates_the_raw_text() {
    let mut p = plan();
    p.mode = redraft_core::Mode::Text;
    p.schema = None;
    let mut e = Engine::new(p).unwrap();
    let check = |a: &serde_json::Value| {
        if a.as_str().is_some_and(|s| s.contains("haiku")) {
            Verdict::pass()
        } else {
            Verdict::from_issues(vec![redraft_core::Issue::new("", "check", "no haiku")])
        }
    };
    answer(&mut e, "a poem", check);
    answer(&mut e, "a haiku", check);
    let r = finish(e);
    assert_eq!(r.artifact, Some(json!("a haiku")));
    assert_eq!(r.history[1].extraction, None);
}

/// The engine coerces what it extracts toward the plan's schema (each change a repair), leaves
/// an echoed schema as it was written for the `schema_echo` check to see, and with `coerce`
/// off gives the evaluators the answer as extracted.
#[test]
fn an_extracted_answer_is_coerced_toward_the_schema_unless_the_plan_says_not() {
    let mut p = plan();
    p.schema = Some(std::sync::Arc::new(json!({
        "type": "object",
        "required": ["city", "zip", "open"],
        "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}, "open": {"type": "boolean"}}
    })));
    let e = Engine::new(p.clone()).unwrap();
    let c = e.read_artifact(r#"Here: {"city": "Toledo", "zip": "43604", "open": "Yes"}"#);
    assert_eq!(c.artifact, Some(json!({"city": "Toledo", "zip": 43604, "open": true})));
    let repairs = serde_json::to_value(&c.repairs).unwrap();
    assert_eq!(
        repairs,
        json!([{"path": "/zip", "from": "43604", "to": 43604}, {"path": "/open", "from": "Yes", "to": true}])
    );

    // A repaired text and a coercion are both recorded, the text's repair first.
    let c = e.read_artifact(r#"{'city': 'Toledo', 'zip': '43604', 'open': true,}"#);
    assert_eq!(c.artifact, Some(json!({"city": "Toledo", "zip": 43604, "open": true})));
    let repairs = serde_json::to_value(&c.repairs).unwrap();
    assert_eq!(repairs[0], "single_quotes");
    assert_eq!(repairs.as_array().unwrap().last().unwrap(), &json!({"path": "/zip", "from": "43604", "to": 43604}));

    // The schema given back instead of an answer is not bent toward itself.
    let echo = serde_json::to_string(p.schema.as_deref().unwrap()).unwrap();
    let c = e.read_artifact(&echo);
    assert_eq!(c.artifact.as_ref(), p.schema.as_deref());
    assert!(c.repairs.is_empty(), "{:?}", c.repairs);

    p.coerce = false;
    let e = Engine::new(p).unwrap();
    let c = e.read_artifact(r#"{"city": "Toledo", "zip": "43604", "open": "Yes"}"#);
    assert_eq!(c.artifact, Some(json!({"city": "Toledo", "zip": "43604", "open": "Yes"})));
    assert!(c.repairs.is_empty());
}
