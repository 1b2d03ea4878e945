//! The other evaluators and the varied retries, through `redraft run`.

use redraft_testkit::{FakeOpenAi, Reply, last_user_message, reply};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::{output, redraft, write};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_validators_422_issues_reach_the_feedback() {
    let dir = tempfile::tempdir().unwrap();
    let validator = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(422).set_body_json(json!({
            "error": "city 'Louisville' doesn't match contract city 'Toledo'", "path": "/city", "code": "city_matches"
        })))
        .up_to_n_times(1)
        .mount(&validator)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
        .mount(&validator)
        .await;
    let model = FakeOpenAi::start(vec![reply(r#"{"city": "Louisville"}"#), reply(r#"{"city": "Toledo"}"#)]).await;
    let mut c = redraft(dir.path());
    c.env("OPENAI_BASE_URL", model.base_url()).args([
        "run",
        "--model",
        "openai/fake",
        "--prompt",
        "Which city?",
        "--context",
        r#"{"city": "Toledo"}"#,
        "--eval",
        &format!("http:{}/validate", validator.uri()),
        "--json",
    ]);
    let out = output(c).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    let issue = &result["history"][0]["issues"][0];
    assert_eq!(issue["code"], "city_matches");
    assert_eq!(issue["evaluator"], "http");
    let feedback = last_user_message(&model.bodies().await[1]);
    assert!(
        feedback.contains("1. /city: city 'Louisville' doesn't match contract city 'Toledo' [city_matches]"),
        "{feedback}"
    );
    let sent: Vec<Value> =
        validator.received_requests().await.unwrap().iter().map(|r| r.body_json::<Value>().unwrap()).collect();
    assert_eq!(sent[0]["artifact"], json!({"city": "Louisville"}));
    assert_eq!(sent[0]["context"], json!({"city": "Toledo"}));
}

fn answer(text: &str, input: u64, output: u64) -> String {
    json!({"text": text, "usage": {"input_tokens": input, "output_tokens": output}}).to_string() + "\n"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_judge_scores_and_the_run_halts_at_the_threshold() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "proposer.jsonl",
        &(answer("{\"body\": \"Send it.\"}", 50, 10)
            + &answer("{\"body\": \"Dear Ada, could you please send it? Thanks!\"}", 80, 20)),
    );
    write(
        dir.path(),
        "judge.jsonl",
        &(answer(
            r#"{"score": 0.4, "issues": [{"path": "/body", "message": "curt: greet the reader and say please"}]}"#,
            200,
            30,
        ) + &answer(r#"{"score": 0.92, "issues": [{"path": "/body", "message": "could be warmer"}]}"#, 220, 20)),
    );
    write(
        dir.path(),
        "redraft.toml",
        "judge_model = \"mock/judge.jsonl\"\n[models.\"mock/judge.jsonl\"]\ninput_usd_per_mtok = 1000\noutput_usd_per_mtok = 1000\n",
    );
    let mut c = redraft(dir.path());
    c.args([
        "run",
        "--model",
        "mock/proposer.jsonl",
        "--prompt",
        "Ask Ada for the report.",
        "--eval",
        "score:the email is polite",
        "--json",
    ]);
    let out = output(c).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["iterations"], 2);
    assert_eq!(result["history"][0]["status"], "rejected");
    assert_eq!(result["history"][0]["score"], 0.4);
    assert_eq!(result["history"][1]["status"], "accepted", "0.92 ≥ the 0.9 default for scoring evaluators");
    assert_eq!(result["history"][1]["issues"][0]["severity"], "warning");
    // 230 + 240 judge tokens at $1000/Mtok
    assert!((result["metrics"]["judge_cost_usd"].as_f64().unwrap() - 0.47).abs() < 1e-9, "{}", result["metrics"]);
    assert_eq!(result["metrics"]["cost_usd"], Value::Null, "the proposer has no price");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_judge_without_a_judge_model_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.jsonl", "\"x\"\n");
    let mut c = redraft(dir.path());
    c.args(["run", "--model", "mock/p.jsonl", "--prompt", "x", "--eval", "score:good"]);
    let out = output(c).await;
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("`score:` needs a judge model") && out.stderr.contains("judge_model"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeat_raises_the_temperature_and_switches_to_the_fallback_model() {
    let dir = tempfile::tempdir().unwrap();
    let wrong = Reply::new(200).set_body_json(json!({
        "choices": [{"message": {"role": "assistant", "content": "{\"n\": 1}"}, "finish_reason": "stop"}]
    }));
    let primary = FakeOpenAi::start(vec![wrong.clone(), wrong]).await;
    write(dir.path(), "fallback.jsonl", "\"{\\\"n\\\": 2}\"\n");
    write(dir.path(), "s.json", r#"{"type": "object", "properties": {"n": {"const": 2}}}"#);
    write(dir.path(), "redraft.toml", "fallback_models = [\"mock/fallback.jsonl\"]\n[policy]\nrepeat_limit = 3\n");
    let mut c = redraft(dir.path());
    c.env("OPENAI_BASE_URL", primary.base_url()).args([
        "run",
        "--model",
        "openai/fake",
        "--prompt",
        "n?",
        "--schema",
        "s.json",
        "--temperature",
        "0.2",
        "--json",
    ]);
    let out = output(c).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    let models: Vec<&str> =
        result["history"].as_array().unwrap().iter().map(|a| a["model"].as_str().unwrap()).collect();
    assert_eq!(models, ["openai/fake", "openai/fake", "mock/fallback.jsonl"]);
    let temps: Vec<f64> =
        result["history"].as_array().unwrap().iter().map(|a| a["temperature"].as_f64().unwrap()).collect();
    assert!(
        (temps[0] - 0.2).abs() < 1e-6 && (temps[1] - 0.2).abs() < 1e-6 && (temps[2] - 0.5).abs() < 1e-6,
        "{temps:?}"
    );
    assert_eq!(primary.bodies().await[1]["temperature"].as_f64().map(|t| (t * 10.0).round()), Some(2.0));
}

#[tokio::test]
async fn config_default_is_the_commented_default_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = output({
        let mut c = redraft(dir.path());
        c.args(["config", "default"]);
        c
    })
    .await;
    assert_eq!(out.code, 0);
    assert!(out.stdout.starts_with("# redraft.toml"), "{}", out.stdout);
    write(dir.path(), "redraft.toml", &out.stdout);
    write(
        dir.path(),
        "redraft.toml",
        &format!("{}\n[models.\"x/y\"]\ninput_usd_per_mtok = 1\noutput_usd_per_mtok = 2\n", out.stdout),
    );
    let out = output({
        let mut c = redraft(dir.path());
        c.args(["config", "show"]).env("REDRAFT_MAX_ITERATIONS", "6");
        c
    })
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("max_iterations = 6"), "{}", out.stdout);
    assert!(out.stdout.contains("[models.\"x/y\"]"), "{}", out.stdout);

    // Where each value came from: the file, or the variable above it.
    let out = output({
        let mut c = redraft(dir.path());
        c.args(["config", "show", "--origins"]).env("REDRAFT_MAX_ITERATIONS", "6");
        c
    })
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines.contains(&"policy.max_iterations = 6  # $REDRAFT_MAX_ITERATIONS"), "{}", out.stdout);
    assert!(lines.contains(&"models.\"x/y\".input_usd_per_mtok = 1.0  # redraft.toml"), "{}", out.stdout);
    assert!(!out.stdout.contains("(unset)"), "{}", out.stdout);

    // A bad value in a variable is blamed on the variable, not on the config file beside it,
    // and nothing runs.
    let out = output({
        let mut c = redraft(dir.path());
        c.args(["run", "--model", "mock/none", "--prompt", "hi"]).env("REDRAFT_MAX_ITERATIONS", "abc");
        c
    })
    .await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("`REDRAFT_MAX_ITERATIONS` is invalid: `abc`"), "{}", out.stderr);
    assert!(!out.stderr.contains("redraft.toml"), "{}", out.stderr);
}
