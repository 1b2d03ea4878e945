#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The staffing example pack (`examples/staffing/kinds`), evaluated through the `Evaluator` trait.

use std::path::PathBuf;

use redraft_core::{EvalInput, Evaluator, Verdict};
use redraft_eval::{KindEvaluator, Kinds};
use serde_json::{Value, json};

fn pack() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/staffing")
}

fn contract(name: &str) -> Value {
    let text = std::fs::read_to_string(pack().join("contexts").join(format!("{name}.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn evaluator(kind: &str) -> KindEvaluator {
    let kinds = Kinds::load(&pack().join("kinds")).unwrap();
    KindEvaluator::new(kinds.get(kind).unwrap(), redraft_eval::Formats::Checked).unwrap()
}

async fn evaluate(kind: &str, artifact: Value, context: &Value) -> Verdict {
    let ev = evaluator(kind);
    ev.evaluate(EvalInput { artifact: &artifact, context, iteration: 1, cancel: &redraft_core::CancelFlag::new() })
        .await
        .unwrap()
}

/// `(path, code, message)` of each issue.
async fn check(kind: &str, artifact: Value, context: &Value) -> Vec<(String, String, String)> {
    let verdict = evaluate(kind, artifact, context).await;
    assert_eq!(verdict.passed, verdict.issues.is_empty(), "{verdict:?}");
    verdict.issues.into_iter().map(|i| (i.path, i.code, i.message)).collect()
}

fn issue(path: &str, code: &str, message: &str) -> (String, String, String) {
    (path.to_owned(), code.to_owned(), message.to_owned())
}

fn fill(ids: &[&str]) -> Value {
    json!({"fills": ids.iter().map(|id| json!({"worker_id": id})).collect::<Vec<_>>()})
}

#[test]
fn loads_the_three_kinds() {
    let kinds = Kinds::load(&pack().join("kinds")).unwrap();
    assert_eq!(kinds.names(), ["email", "fill", "playbook"]);
    let fill = kinds.get("fill").unwrap();
    assert_eq!(fill.table_names(), ["workers"]);
    assert!(fill.table_rows("workers").unwrap() >= 12);
    assert_eq!(
        fill.rule_codes(),
        ["worker_exists", "city_matches", "state_matches", "role_matches", "count", "no_duplicates"]
    );
    assert!(fill.prompt.as_deref().unwrap().contains("roster"));
    assert!(fill.rubric().starts_with("Each fill names a worker"));
    assert_eq!(kinds.get("email").unwrap().rubric(), kinds.get("email").unwrap().description);
    for kind in kinds.iter() {
        assert!(kind.example.is_some(), "{} has an example", kind.name);
        assert!(kind.rule_count() >= 3, "{}", kind.name);
    }
    let err = kinds.require("fil").unwrap_err().to_string();
    assert!(err.contains("unknown kind `fil`") && err.contains("email, fill, playbook"), "{err}");
}

#[tokio::test]
async fn the_examples_pass_on_the_toledo_contract() {
    let toledo = contract("toledo-welders");
    let kinds = Kinds::load(&pack().join("kinds")).unwrap();
    for kind in kinds.iter() {
        let example = kind.example.clone().unwrap();
        let got = check(&kind.name, example, &toledo).await;
        assert_eq!(got, [], "{}", kind.name);
    }
}

#[tokio::test]
async fn a_louisville_welder_on_a_toledo_contract() {
    let got = check("fill", fill(&["W-1", "W-2"]), &contract("toledo-welders")).await;
    assert_eq!(
        got,
        [
            issue("/fills/0/worker_id", "rule:city_matches", "city 'Louisville' doesn't match contract city 'Toledo'"),
            issue("/fills/0/worker_id", "rule:state_matches", "state 'KY' doesn't match contract state 'OH'"),
        ]
    );
    let verdict = evaluate("fill", fill(&["W-1", "W-2"]), &contract("toledo-welders")).await;
    assert!(!verdict.passed);
    assert_eq!(verdict.issues[0].found.as_deref(), Some(&json!("Louisville")));
    assert_eq!(verdict.issues[0].expected.as_deref(), Some(&json!("Toledo")));
}

#[tokio::test]
async fn a_good_fill_passes() {
    let verdict = evaluate("fill", fill(&["W-2", "W-3"]), &contract("toledo-welders")).await;
    assert!(verdict.passed, "{verdict:?}");
    assert_eq!(verdict.score.get(), 1.0);
    let verdict = evaluate("fill", fill(&["W-5"]), &contract("louisville-electrician")).await;
    assert!(verdict.passed, "{verdict:?}");
}

#[tokio::test]
async fn each_fill_rule_has_its_own_message() {
    let toledo = contract("toledo-welders");
    assert_eq!(
        check("fill", fill(&["W-99", "W-2"]), &toledo).await,
        [issue("/fills/0/worker_id", "rule:worker_exists", "worker 'W-99' is not in the roster")]
    );
    assert_eq!(
        check("fill", fill(&["W-2", "W-4"]), &toledo).await,
        [issue("/fills/1/worker_id", "rule:role_matches", "role 'Electrician' doesn't match contract role 'Welder'")]
    );
    assert_eq!(
        check("fill", fill(&["W-2"]), &toledo).await,
        [issue("/fills", "rule:count", "2 workers were asked for, 1 given")]
    );
    assert_eq!(
        check("fill", fill(&["W-2", "W-2"]), &toledo).await,
        [issue("/fills/1/worker_id", "rule:no_duplicates", "worker 'W-2' is listed more than once")]
    );
    // Toledo, WA: the city matches, the state does not.
    assert_eq!(
        check("fill", fill(&["W-2", "W-13"]), &toledo).await,
        [issue("/fills/1/worker_id", "rule:state_matches", "state 'WA' doesn't match contract state 'OH'")]
    );
    assert_eq!(
        check("fill", fill(&["W-2", "W-3", "W-7"]), &toledo).await,
        [
            issue("/fills/2/worker_id", "rule:city_matches", "city 'Columbus' doesn't match contract city 'Toledo'"),
            issue("/fills", "rule:count", "2 workers were asked for, 3 given"),
        ]
    );
    assert_eq!(
        check("fill", fill(&[]), &contract("louisville-electrician")).await,
        [issue("/fills", "rule:count", "1 worker was asked for, 0 given")]
    );
}

#[tokio::test]
async fn a_schema_invalid_fill_gets_schema_issues_and_no_rule_issues() {
    let artifact = json!({"fills": [{"worker_id": 2}, {"name": "Ben"}, {"worker_id": "W-1"}]});
    let got = check("fill", artifact, &contract("toledo-welders")).await;
    assert_eq!(
        got.iter().map(|(p, c, _)| (p.as_str(), c.as_str())).collect::<Vec<_>>(),
        [("/fills/0/worker_id", "type"), ("/fills/1", "required")]
    );
    let got = check("fill", json!({"workers": ["W-2"]}), &contract("toledo-welders")).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, "required");
}

#[tokio::test]
async fn the_evaluator_shows_the_kind_schema() {
    let ev = evaluator("fill");
    assert_eq!(ev.name(), "kind:fill");
    assert_eq!(ev.schema().unwrap()["required"], json!(["fills"]));
    assert!(!ev.scoring());
}

fn email(worker_id: &str, to: &str, subject: &str, body: &str) -> Value {
    json!({"worker_id": worker_id, "to": to, "subject": subject, "body": body})
}

#[tokio::test]
async fn emails() {
    let toledo = contract("toledo-welders");
    let good = email(
        "W-3",
        "carla.diaz@example.com",
        "Welding in Toledo",
        "Hi Carla, a welder contract in Toledo starts on July 7. Interested?",
    );
    assert_eq!(check("email", good, &toledo).await, []);

    let bad = email("W-3", "carla@example.org", "  ", "Hello, we have work for a welder in Detroit.");
    assert_eq!(
        check("email", bad, &toledo).await,
        [
            issue(
                "/to",
                "rule:to_matches_roster",
                "the email goes to 'carla@example.org', but the roster has 'carla.diaz@example.com' for W-3"
            ),
            issue("/subject", "rule:subject_not_empty", "the subject is empty"),
            issue("/body", "rule:greets_by_name", "the body doesn't greet the worker by first name ('Carla')"),
            issue("/body", "rule:names_city", "the body doesn't name the contract city 'Toledo'"),
        ]
    );

    let unknown = email("W-42", "x@example.com", "Work", "Hi, welders wanted in Toledo.");
    assert_eq!(
        check("email", unknown, &toledo).await,
        [issue("/worker_id", "rule:worker_exists", "worker 'W-42' is not in the roster")]
    );

    let wrong_role = email("W-2", "ben.carter@example.com", "Work", "Hi Ben, electricians wanted in Toledo.");
    assert_eq!(
        check("email", wrong_role, &toledo).await,
        [issue("/body", "rule:names_role", "the body doesn't name the contract role 'Welder'")]
    );
}

#[tokio::test]
async fn playbooks() {
    let toledo = contract("toledo-welders");
    let good = json!({"contract_id": "C-7", "steps": [
        {"owner": "recruiter", "action": "Call the Toledo welders on the roster"},
        {"owner": "account_manager", "action": "Confirm start date with the client"}
    ]});
    assert_eq!(check("playbook", good, &toledo).await, []);

    let bad = json!({"contract_id": "C-8", "steps": [
        {"owner": "recruiter", "action": "Call the Toledo welders"},
        {"owner": "intern", "action": "Order pizza"}
    ]});
    assert_eq!(
        check("playbook", bad, &toledo).await,
        [
            issue("/contract_id", "rule:contract_matches", "the playbook is for contract 'C-8', not 'C-7'"),
            issue(
                "/steps/1/owner",
                "rule:known_owner",
                "step 2: 'intern' is not one of the team's roles (recruiter, account_manager, compliance, site_supervisor)"
            ),
            issue(
                "/steps/1/action",
                "rule:ends_with_confirmation",
                "the last step must confirm the placement with the client; it is 'Order pizza'"
            ),
        ]
    );

    let empty = json!({"contract_id": "C-7", "steps": []});
    let got = check("playbook", empty, &toledo).await;
    assert_eq!(got, [issue("/steps", "minItems", "[] has less than 1 item")]);
}

#[tokio::test]
async fn a_failed_fill_rule_hints_at_the_roster_rows_that_would_satisfy_it() {
    // W-1 is a Louisville welder, W-9 a Dayton pipefitter; W-2 twice is a duplicate (no hint).
    let verdict = evaluate("fill", fill(&["W-1", "W-9", "W-2", "W-2"]), &contract("toledo-welders")).await;
    let toledo = "workers in Toledo, OH with role Welder: W-2 Ben Carter, W-3 Carla Diaz";
    let got: Vec<(&str, &str, Option<&str>, Vec<&str>)> = verdict
        .issues
        .iter()
        .map(|i| {
            (
                i.path.as_str(),
                i.code.as_str(),
                i.hint_text(),
                i.hint.iter().flat_map(|h| &h.tables).map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("/fills/0/worker_id", "rule:city_matches", Some(toledo), vec!["workers"]),
            ("/fills/1/worker_id", "rule:city_matches", Some(toledo), vec!["workers"]),
            ("/fills/0/worker_id", "rule:state_matches", Some(toledo), vec!["workers"]),
            ("/fills/1/worker_id", "rule:role_matches", Some(toledo), vec!["workers"]),
            ("/fills", "rule:count", Some(toledo), vec!["workers"]),
            ("/fills/3/worker_id", "rule:no_duplicates", None, vec![]),
        ]
    );

    // For constrained decoding: the worker rules' schemas allow only those ids, the count's
    // only that many workers; the duplicate has none.
    let schemas: Vec<(&str, Option<Value>)> =
        verdict.issues.iter().map(|i| (i.code.as_str(), i.hint_schema().cloned())).collect();
    let ids = Some(json!({"enum": ["W-2", "W-3"]}));
    assert_eq!(
        schemas,
        [
            ("rule:city_matches", ids.clone()),
            ("rule:city_matches", ids.clone()),
            ("rule:state_matches", ids.clone()),
            ("rule:role_matches", ids),
            ("rule:count", Some(json!({"minItems": 2, "maxItems": 2}))),
            ("rule:no_duplicates", None),
        ]
    );

    // Another contract, another hint; when no row would do, the hint says so.
    let verdict = evaluate("fill", fill(&["W-2"]), &contract("detroit-electrician")).await;
    assert_eq!(verdict.issues[0].hint_text(), Some("workers in Detroit, MI with role Electrician: W-11 Kay Lopez"));
    assert_eq!(verdict.issues[0].hint_schema(), Some(&json!({"enum": ["W-11"]})));
    let nobody = json!({"contract_id": "C-99", "target_count": 1, "city": "Akron", "state": "OH", "role": "Welder"});
    let verdict = evaluate("fill", fill(&["W-2"]), &nobody).await;
    assert_eq!(verdict.issues[0].hint_text(), Some("no worker in the roster is in Akron, OH with role Welder"));
}

/// The contracts of the pack: each has a right answer, found here from the roster itself (not
/// through the rules), that passes the rules; at least six differ from the kind's example, so
/// that a model cannot pass by copying it.
#[tokio::test]
async fn every_contract_has_a_right_answer_and_six_differ_from_the_example() {
    let roster = std::fs::read_to_string(pack().join("tables/workers.csv")).unwrap();
    let rows: Vec<Vec<&str>> = roster.lines().skip(1).map(|l| l.split(',').collect()).collect();
    let kinds = Kinds::load(&pack().join("kinds")).unwrap();
    let example = kinds.get("fill").unwrap().example.clone().unwrap();
    let mut names: Vec<String> = std::fs::read_dir(pack().join("contexts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().trim_end_matches(".json").to_owned())
        .collect();
    names.sort();
    let mut differ = 0;
    for name in &names {
        let c = contract(name);
        let right: Vec<&str> = rows
            .iter()
            .filter(|r| r[3] == c["city"] && r[4] == c["state"] && r[2] == c["role"])
            .map(|r| r[0])
            .collect();
        let wanted = c["target_count"].as_u64().unwrap() as usize;
        assert!(right.len() >= wanted, "{name}: {right:?}");
        let answer = fill(&right[..wanted]);
        assert_eq!(check("fill", answer.clone(), &c).await, [], "{name}");
        let copied = check("fill", example.clone(), &c).await;
        if !copied.is_empty() {
            differ += 1;
        }
    }
    assert!(names.len() >= 8, "{names:?}");
    assert!(differ >= 6, "only {differ} contracts differ from the example");
}
