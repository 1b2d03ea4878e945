//! The schema the next requests send, narrowed by the hint schemas of the checks' issues.

use redraft_core::{Engine, HaltReason};
use serde_json::json;

use crate::{answer, finish, plan};

/// A check whose hint carries a schema narrows what the next requests ask a constraining
/// decoder for, at the failed path, and keeps what it learned when a later attempt fails
/// elsewhere; the prompt's schema and the checks are unchanged, and a resumed run asks the same.
#[test]
fn a_hint_schema_narrows_the_next_requests_schema_at_its_path() {
    let mut p = plan();
    p.policy.max_iterations = 5;
    p.schema = Some(std::sync::Arc::new(json!({
        "type": "object",
        "required": ["city", "role"],
        "properties": {"city": {"type": "string"}, "role": {"type": "string"}}
    })));
    let check = |artifact: &serde_json::Value| {
        let mut issues = Vec::new();
        if artifact["city"] != "Toledo" {
            issues.push(
                redraft_core::Issue::new("/city", "rule:city", "not the contract's city")
                    .with_hint("the contract is in Toledo", vec![])
                    .with_hint_schema(json!({"enum": ["Toledo"]})),
            );
        }
        if artifact["role"] != "Welder" {
            issues.push(
                redraft_core::Issue::new("/role", "rule:role", "not the contract's role")
                    .with_hint_schema(json!({"const": "Welder"})),
            );
        }
        redraft_core::Verdict::from_issues(issues)
    };
    let schema_sent = |e: &Engine| e.request().schema.map(|s| (*s).clone()).unwrap();
    let mut e = Engine::new(p.clone()).unwrap();
    assert_eq!(schema_sent(&e), *p.schema.clone().unwrap(), "the first request sends the run's schema");
    answer(&mut e, r#"{"city": "Dayton", "role": "Welder"}"#, check);
    let narrowed = schema_sent(&e);
    assert_eq!(narrowed["properties"]["city"], json!({"type": "string", "enum": ["Toledo"]}));
    assert_eq!(narrowed["properties"]["role"], json!({"type": "string"}));
    // The second attempt fixes the city and breaks the role: both stay narrowed.
    answer(&mut e, r#"{"city": "Toledo", "role": "Pipefitter"}"#, check);
    let narrowed = schema_sent(&e);
    assert_eq!(narrowed["properties"]["city"]["enum"], json!(["Toledo"]));
    assert_eq!(narrowed["properties"]["role"], json!({"type": "string", "const": "Welder"}));
    let prompt = e.request().messages.iter().map(|m| m.content.clone()).collect::<Vec<_>>().join("\n");
    assert!(!prompt.contains("const"), "the prompt shows the run's schema, not the narrowed one:\n{prompt}");

    // Resumed from its records, the run asks the same.
    let mut resumed = Engine::new(p.clone()).unwrap();
    for r in e.history().to_vec() {
        resumed.restore(r);
    }
    assert_eq!(resumed.request(), e.request());
    assert_eq!(schema_sent(&resumed), narrowed);

    answer(&mut e, r#"{"city": "Toledo", "role": "Welder"}"#, check);
    assert_eq!(finish(e).halted_because, HaltReason::Success);

    // Without a schema to send (text mode), nothing is narrowed.
    let mut p = p;
    p.schema = None;
    let mut e = Engine::new(p).unwrap();
    answer(&mut e, r#"{"city": "Dayton", "role": "Welder"}"#, check);
    assert_eq!(e.request().schema, None);
}
