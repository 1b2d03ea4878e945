//! Kinds through the CLI: the staffing example end to end.

use redraft_testkit::{FakeOpenAi, last_user_message, reply};
use serde_json::{Value, json};

use crate::{output, redraft, repo};

/// `redraft run --json` of `kind` (from the repository's `kinds` directory) with `context`,
/// against `model`, nothing stored.
fn run_kind(model: &FakeOpenAi, kinds: &str, kind: &str, context: &str, prompt: &str) -> assert_cmd::Command {
    let mut c = redraft(&repo());
    c.env("OPENAI_BASE_URL", model.base_url()).args(["run", "--no-store", "--model", "openai/fake", "--json"]).args([
        "--kinds",
        kinds,
        "--kind",
        kind,
        "--context",
        context,
        "--prompt",
        prompt,
    ]);
    c
}

const TOLEDO: &str = r#"{"contract_id": "C-7", "target_count": 2, "city": "Toledo", "state": "OH", "role": "Welder"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fill_naming_a_louisville_worker_is_fed_back_and_the_loop_converges() {
    let model = FakeOpenAi::start(vec![
        reply(r#"{"contract_id": "C-7", "fills": [{"worker_id": "W-1"}, {"worker_id": "W-2"}]}"#),
        reply(r#"{"contract_id": "C-7", "fills": [{"worker_id": "W-3"}, {"worker_id": "W-2"}]}"#),
    ])
    .await;
    let out = output(run_kind(&model, "examples/staffing/kinds", "fill", TOLEDO, "Staff contract C-7.")).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["iterations"], 2);
    let first: Vec<(String, String)> = result["history"][0]["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["code"].as_str().unwrap().to_owned(), i["message"].as_str().unwrap().to_owned()))
        .collect();
    assert!(
        first.contains(&("rule:city_matches".into(), "city 'Louisville' doesn't match contract city 'Toledo'".into())),
        "{first:?}"
    );
    assert_eq!(result["history"][0]["issues"][0]["evaluator"], "kind:fill");
    assert_eq!(result["artifact"]["fills"][0]["worker_id"], "W-3");
    // The proposer saw the kind's schema, its example and prompt, and the context.
    let bodies = model.bodies().await;
    let first_prompt = last_user_message(&bodies[0]);
    assert!(first_prompt.contains("\"worker_id\""), "{first_prompt}");
    assert!(first_prompt.contains("\ncity: Toledo\n"), "{first_prompt}");
    let feedback = last_user_message(&bodies[1]);
    assert!(
        feedback.contains("city 'Louisville' doesn't match contract city 'Toledo' [rule:city_matches]"),
        "{feedback}"
    );
}

#[tokio::test]
async fn validate_checks_a_document_against_a_kind_with_its_context() {
    let dir = repo();
    let run = |doc: &str| {
        let mut c = redraft(&dir);
        c.args([
            "validate",
            "--kinds",
            "examples/staffing/kinds",
            "--kind",
            "fill",
            "--context",
            "@examples/staffing/contexts/toledo-welders.json",
        ])
        .write_stdin(doc.to_owned());
        output(c)
    };
    let out = run(r#"{"contract_id": "C-7", "fills": [{"worker_id": "W-99"}, {"worker_id": "W-4"}]}"#).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stdout.contains("worker 'W-99' is not in the roster"), "{}", out.stdout);
    assert!(out.stdout.contains("role 'Electrician' doesn't match contract role 'Welder'"), "{}", out.stdout);
    // What would satisfy the rule, from the roster the writer may not have seen.
    assert!(
        out.stdout.contains("\n   hint: workers in Toledo, OH with role Welder: W-2 Ben Carter, W-3 Carla Diaz\n"),
        "{}",
        out.stdout
    );
    let out = run(r#"{"contract_id": "C-7", "fills": [{"worker_id": "W-2"}, {"worker_id": "W-3"}]}"#).await;
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

#[tokio::test]
async fn kinds_list_and_show() {
    let dir = repo();
    let out = output({
        let mut c = redraft(&dir);
        c.args(["kinds", "list", "--kinds", "examples/staffing/kinds"]);
        c
    })
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let names: Vec<&str> = out.stdout.lines().map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(names, ["email", "fill", "playbook"]);
    let out = output({
        let mut c = redraft(&dir);
        c.args(["kinds", "show", "fill", "--kinds", "examples/staffing/kinds"]);
        c
    })
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let shown: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(shown["name"], "fill");
    assert!(shown["rules"].as_array().unwrap().contains(&json!("city_matches")));
    assert_eq!(shown["example"]["contract_id"], "C-7");
    let out = output({
        let mut c = redraft(&dir);
        c.args(["kinds", "show", "nope", "--kinds", "examples/staffing/kinds"]);
        c
    })
    .await;
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("nope") && out.stderr.contains("fill"), "{}", out.stderr);
    let out = output({
        let mut c = redraft(&dir);
        c.args(["kinds", "list"]);
        c
    })
    .await;
    assert_eq!(out.code, 2, "no ./kinds in the repository root");
    assert!(out.stderr.contains("--kinds DIR"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_checks_a_kind_with_a_judge_after_its_rules() {
    let dir = tempfile::tempdir().unwrap();
    let kinds = repo().join("examples/staffing/kinds");
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write(
        "proposer.jsonl",
        "\"{\\\"contract_id\\\": \\\"C-7\\\", \\\"fills\\\": [{\\\"worker_id\\\": \\\"W-2\\\"}, {\\\"worker_id\\\": \\\"W-3\\\"}]}\"\n",
    );
    write("judge.jsonl", "\"{\\\"score\\\": 0.95, \\\"issues\\\": []}\"\n");
    write("redraft.toml", "judge_model = \"mock/judge.jsonl\"\n");
    let mut c = redraft(dir.path());
    c.args([
        "run",
        "--no-store",
        "--model",
        "mock/proposer.jsonl",
        "--kinds",
        kinds.to_str().unwrap(),
        "--eval",
        "llm:fill",
        "--context",
        TOLEDO,
        "--prompt",
        "Staff C-7",
        "--json",
    ]);
    let out = output(c).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["history"][0]["score"], 0.95, "the judge's score is the run's (the rules passed)");
    assert_eq!(result["history"][0]["status"], "accepted", "0.95 passes the 0.9 default of a scoring evaluator");
}

/// The person kind of the local demo checks what a schema cannot: every value is written in the
/// sentence it was extracted from, and a wrong occupation is told which one the text names.
#[tokio::test]
async fn the_person_kind_checks_each_value_against_the_sentence() {
    let dir = repo();
    let run = |doc: &str| {
        let mut c = redraft(&dir);
        c.args([
            "validate",
            "--kinds",
            "examples/person/kinds",
            "--kind",
            "person",
            "--context",
            r#"{"text": "Carlos Mendez, a 41-year-old electrician, lives in Monterrey."}"#,
        ])
        .write_stdin(doc.to_owned());
        output(c)
    };
    let out = run(r#"{"name": "Carlos Mendez", "age": 44, "city": "Mexico", "occupation": "nurse"}"#).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "1. /age: the age 44 is not written in the text [rule:age_in_text]\n   \
         hint: the text holds: 41\n\
         2. /city: the city 'Mexico' is not written in the text [rule:city_in_text]\n   \
         hint: the capitalised words of the text: Carlos, Mendez, Monterrey\n\
         3. /occupation: the text does not name the occupation 'nurse' [rule:occupation_in_text]\n   \
         hint: the text names: electrician\n"
    );
    let out = run(r#"{"name": "Carlos Mendez", "age": 41, "city": "Monterrey", "occupation": "electrician"}"#).await;
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

/// With constrained decoding (the default), a rule's hint schema narrows the next request's
/// `response_format` where the rule failed: after "the text names: electrician", the decoder
/// may only write `electrician` there. The rules still judge the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_rule_narrows_the_next_requests_response_format_to_its_hint() {
    let model = FakeOpenAi::start(vec![
        reply(r#"{"name": "Carlos Mendez", "age": 41, "city": "Monterrey", "occupation": "nurse"}"#),
        reply(r#"{"name": "Carlos Mendez", "age": 41, "city": "Monterrey", "occupation": "electrician"}"#),
    ])
    .await;
    let context = r#"{"text": "Carlos Mendez, a 41-year-old electrician, lives in Monterrey."}"#;
    let out = output(run_kind(&model, "examples/person/kinds", "person", context, "Extract the person.")).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    let issue = &result["history"][0]["issues"][0];
    assert_eq!(issue["code"], "rule:occupation_in_text", "{result}");
    assert_eq!(issue["hint"], "the text names: electrician");
    assert_eq!(issue["hint_schema"], json!({"enum": ["electrician"]}));
    assert_eq!(result["artifact"]["occupation"], "electrician");

    let bodies = model.bodies().await;
    let occupation =
        |i: usize| bodies[i]["response_format"]["json_schema"]["schema"]["properties"]["occupation"].clone();
    assert_eq!(occupation(0)["enum"], json!(["nurse", "electrician", "pilot", "teacher", "other"]), "{}", bodies[0]);
    assert_eq!(occupation(1), json!({"type": "string", "enum": ["electrician"]}), "{}", bodies[1]);
    // Only the decoder is narrowed: the prompt shows the kind's schema, all five occupations.
    assert!(last_user_message(&bodies[0]).contains("\"pilot\""));
}
