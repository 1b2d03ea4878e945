use redraft_testkit::{FakeOpenAi, Reply, reply, status};
use serde_json::{Value, json};

use crate::{output, redraft, repo, write};

const SCHEMA: &str = r#"{
  "type": "object",
  "required": ["city", "state"],
  "properties": {"city": {"type": "string"}, "state": {"enum": ["OH", "KY"]}}
}"#;

struct Setup {
    dir: tempfile::TempDir,
    server: FakeOpenAi,
}

async fn setup(replies: Vec<Reply>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "schema.json", SCHEMA);
    Setup { dir, server: FakeOpenAi::start(replies).await }
}

impl Setup {
    fn cmd(&self, extra: &[&str]) -> assert_cmd::Command {
        let mut cmd = redraft(self.dir.path());
        cmd.env("OPENAI_BASE_URL", self.server.base_url())
            .env("OPENAI_API_KEY", "sk-test")
            .args(["run", "--model", "openai/fake", "--schema", "schema.json", "--prompt", "Where is contract C-7?"])
            .args(extra);
        cmd
    }

    async fn requests(&self) -> usize {
        self.server.calls().await
    }
}

fn statuses(result: &Value) -> Vec<String> {
    result["history"].as_array().unwrap().iter().map(|a| a["status"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converges_on_invalid_wrong_then_damaged_in_three_attempts() {
    let s = setup(vec![
        reply("The contract is in Toledo, Ohio."),
        reply("```json\n{\"city\": \"Toledo\", \"state\": \"Ohio\"}\n```"),
        reply("{city: 'Toledo', state: 'OH',}"),
    ])
    .await;
    let out = output(s.cmd(&["--json"])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(statuses(&result), ["invalid_json", "rejected", "accepted"]);
    assert_eq!(result["status"], "succeeded");
    assert_eq!(result["halted_because"], "success");
    assert_eq!(result["artifact"], json!({"city": "Toledo", "state": "OH"}));
    assert_eq!(result["history"][1]["issues"][0]["path"], "/state");
    assert_eq!(result["history"][2]["extraction"], "repaired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_json_stdout_is_just_the_artifact() {
    let s = setup(vec![reply("Here: {\"city\": \"Toledo\", \"state\": \"OH\"} — done")]).await;
    let out = output(s.cmd(&[])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(serde_json::from_str::<Value>(&out.stdout).unwrap(), json!({"city": "Toledo", "state": "OH"}));
    assert!(!out.stderr.contains("attempt 1/3"), "no progress lines when stderr is not a terminal: {}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_wrong_answer_twice_is_stagnation_exit_1_with_escalation() {
    let wrong = r#"{"city": "Toledo", "state": "Ohio"}"#;
    let s = setup(vec![reply(wrong), reply(wrong), reply(wrong), reply(wrong)]).await;
    let out = output(s.cmd(&[])).await;
    assert_eq!(out.code, 1);
    assert_eq!(out.stdout, "", "a failed run prints no artifact on stdout");
    assert!(out.stderr.contains("halted because stagnation"), "{}", out.stderr);
    assert!(out.stderr.contains("2: identical to 1"), "{}", out.stderr);
    assert!(out.stderr.contains("pattern: the same answer was proposed twice"), "{}", out.stderr);
    assert!(
        out.stderr.contains(r#"best so far (attempt 2, score 0): {"city":"Toledo","state":"Ohio"}"#),
        "{}",
        out.stderr
    );

    let out = output(s.cmd(&["--json"])).await;
    assert_eq!(out.code, 1);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["halted_because"], "stagnation");
    assert_eq!(result["artifact"], serde_json::from_str::<Value>(wrong).unwrap());
    assert_eq!(result["escalation"]["attempts"], json!(["1: /state enum", "2: identical to 1"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_error_then_a_good_reply_costs_no_attempt() {
    let s = setup(vec![status(500), reply(r#"{"city": "Toledo", "state": "OH"}"#)]).await;
    let out = output(s.cmd(&["--json"])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["iterations"], 1);
    assert_eq!(s.requests().await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_price_table_and_max_budget_halt_with_budget() {
    let wrong = |c: &str| reply(&format!(r#"{{"city": "{c}", "state": "Ohio"}}"#));
    let s = setup(vec![wrong("A"), wrong("B"), wrong("C")]).await;
    // $0.12 per attempt (100 in + 20 out at $1000/Mtok); the second would pass $0.20.
    write(
        s.dir.path(),
        "redraft.toml",
        "[models.\"openai/fake\"]\ninput_usd_per_mtok = 1000\noutput_usd_per_mtok = 1000\n",
    );
    let out = output(s.cmd(&["--json", "--max-budget", "0.2", "--max-tokens", "20"])).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["halted_because"], "budget");
    assert_eq!(result["iterations"], 1);
    assert!((result["metrics"]["cost_usd"].as_f64().unwrap() - 0.12).abs() < 1e-9);
    assert_eq!(s.requests().await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_without_a_price_is_a_usage_error() {
    let s = setup(vec![]).await;
    let out = output(s.cmd(&["--max-budget", "1"])).await;
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("price of `openai/fake` is unknown"), "{}", out.stderr);
    assert!(out.stderr.contains("[models.\"openai/fake\"]"), "{}", out.stderr);
    assert_eq!(s.requests().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_no_attempt_can_fit_is_a_usage_error_that_shows_the_estimate() {
    let s = setup(vec![]).await;
    write(
        s.dir.path(),
        "redraft.toml",
        "[models.\"openai/fake\"]\ninput_usd_per_mtok = 1000\noutput_usd_per_mtok = 1000\n",
    );
    let out = output(s.cmd(&["--max-budget", "0.0001", "--max-tokens", "20"])).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("a budget of $0.0001 (`max_budget_usd`) cannot pay for one attempt"), "{}", out.stderr);
    assert!(out.stderr.contains("characters per token, at $1000 per million"), "{}", out.stderr);
    assert!(out.stderr.contains("20 output tokens: `max_tokens`"), "{}", out.stderr);
    assert!(out.stderr.contains("hint: raise `max_budget_usd` to at least $0.1"), "{}", out.stderr);
    assert!(!out.stderr.contains("after 0 attempts"), "{}", out.stderr);
    assert_eq!(s.requests().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_settings_out_of_range_are_usage_errors() {
    let s = setup(vec![]).await;
    for (args, expected) in [
        (&["--temperature", "99"][..], "`temperature` = `99` is invalid: it must be a number from 0 to 2"),
        (&["--temperature=-1"][..], "`temperature` = `-1` is invalid: it must be a number from 0 to 2"),
        (&["--max-tokens", "0"][..], "`max_tokens` = `0` is invalid: it must be at least 1"),
    ] {
        let out = output(s.cmd(args)).await;
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(expected), "{args:?}: {}", out.stderr);
    }
    assert_eq!(s.requests().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_invalid_schema_exits_2_naming_the_file_and_sends_nothing() {
    let s = setup(vec![]).await;
    let mut cmd = s.cmd(&[]);
    cmd.args(["--schema", "missing.json"]);
    let out = output(cmd).await;
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("`missing.json`"), "{}", out.stderr);

    write(s.dir.path(), "broken.json", "{\"type\": ");
    let mut cmd = s.cmd(&[]);
    cmd.args(["--eval", "schema:broken.json"]);
    let out = output(cmd).await;
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("`broken.json` is not valid JSON"), "{}", out.stderr);

    write(s.dir.path(), "wrong.json", r#"{"type": "strnig"}"#);
    let mut cmd = s.cmd(&[]);
    cmd.args(["--schema", "wrong.json"]);
    let out = output(cmd).await;
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("in `wrong.json` is not a valid JSON Schema"), "{}", out.stderr);
    assert_eq!(s.requests().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_errors_name_the_problem_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--prompt", "x"], "no model is named"),
        (&["run", "--prompt", "x", "--model", "gpt-4o"], "write the model as `provider/model`"),
        (&["run", "--prompt", "x", "--model", "nope/x"], "unknown provider `nope`"),
        (&["run", "--prompt", "x", "--model", "openai/x", "--threshold", "2"], "`success_threshold` = `2` is invalid"),
        (&["run", "--prompt", "x", "--model", "openai/x", "--max-wall-time", "soon"], "`--max-wall-time`"),
        (&["run", "--prompt", "x", "--model", "openai/x", "--context", "[1]"], "must be a JSON object"),
        (&["run", "--prompt", "x", "--model", "openai/x", "--eval", "sql:x"], "not an evaluator directive"),
        (&["run", "--prompt", "@nothere.txt", "--model", "openai/x"], "cannot read the prompt file `nothere.txt`"),
        (&["run", "--prompt", "x", "--model", "mock/nothere.jsonl"], "cannot read the mock script `nothere.jsonl`"),
        (
            &["run", "--prompt", "x", "--model", "openai/x", "--config", "nothere.toml"],
            "cannot read the config file `nothere.toml`",
        ),
        (&["run"], "--prompt"),
    ];
    for (args, expected) in cases {
        let out = output({
            let mut c = redraft(dir.path());
            c.args(*args);
            c
        })
        .await;
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(expected), "{args:?}: {}", out.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_demo_converges_with_the_scripted_model() {
    let mut cmd = redraft(&repo());
    cmd.args([
        "run",
        "--config",
        "examples/demo/redraft.toml",
        "--model",
        "mock/examples/demo/replies.jsonl",
        "--schema",
        "examples/demo/schema.json",
        "--prompt",
        "@examples/demo/prompt.txt",
        "--progress",
        "always",
    ]);
    let out = output(cmd).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let artifact: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(artifact["total"], json!(501.5));
    let lines: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("attempt ")).collect();
    assert_eq!(lines.len(), 3, "{}", out.stderr);
    assert!(
        lines[0].contains("invalid_json") && lines[1].contains("rejected") && lines[2].contains("accepted"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_loop_works_with_anthropic_and_ollama() {
    use redraft_testkit::{anthropic, ollama};
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "schema.json", SCHEMA);
    let wrong = r#"{"city": "Toledo", "state": "Ohio"}"#;
    let right = "Sure: {\"city\": \"Toledo\", \"state\": \"OH\"}";

    let claude = anthropic::FakeAnthropic::start(vec![anthropic::reply(wrong), anthropic::reply(right)]).await;
    let mut c = redraft(dir.path());
    c.env("ANTHROPIC_BASE_URL", claude.base_url()).env("ANTHROPIC_API_KEY", "sk-ant-test").args([
        "run",
        "--model",
        "anthropic/claude-test",
        "--schema",
        "schema.json",
        "--system",
        "Be exact.",
        "--prompt",
        "Where?",
        "--json",
    ]);
    let out = output(c).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(statuses(&result), ["rejected", "accepted"]);
    assert_eq!(result["metrics"]["tokens_estimated"], false);
    let second = &claude.bodies().await[1];
    assert_eq!(second["system"], "Be exact.", "the system prompt is sent natively");
    assert_eq!(second["messages"].as_array().unwrap().len(), 3);

    let llama = ollama::FakeOllama::start(vec![ollama::reply(wrong), ollama::reply(right)]).await;
    let host = llama.base_url().trim_start_matches("http://").to_owned();
    let mut c = redraft(dir.path());
    c.env("OLLAMA_HOST", &host).args([
        "run",
        "--model",
        "ollama/llama-test",
        "--schema",
        "schema.json",
        "--prompt",
        "Where?",
        "--json",
    ]);
    let out = output(c).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(statuses(&result), ["rejected", "accepted"]);
    assert_eq!(result["history"][0]["tokens_in"], 100);
    assert_eq!(llama.bodies().await[0]["stream"], false);
}

#[tokio::test]
async fn a_bare_model_name_goes_to_openai_when_only_its_base_url_is_set() {
    let s = setup(vec![reply(r#"{"city": "Toledo", "state": "OH"}"#)]).await;
    let mut cmd = redraft(s.dir.path());
    cmd.env("OPENAI_BASE_URL", s.server.base_url()).env("OPENAI_API_KEY", "sk-test").args([
        "run",
        "--model",
        "gpt-4o-mini",
        "--schema",
        "schema.json",
        "--prompt",
        "Where is contract C-7?",
    ]);
    let out = output(cmd).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(s.server.bodies().await[0]["model"], "gpt-4o-mini");

    // Without that variable nothing names a provider: a usage error that says how to name one.
    let mut cmd = redraft(s.dir.path());
    cmd.args(["run", "--model", "gpt-4o-mini", "--schema", "schema.json", "--prompt", "p"]);
    let out = output(cmd).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("openai/gpt-4o-mini") && out.stderr.contains("default_provider"), "{}", out.stderr);

    // `default_provider` in the config names it.
    write(s.dir.path(), "redraft.toml", "default_provider = \"local\"\n[providers.local]\ntype = \"openai\"\n");
    let mut cmd = redraft(s.dir.path());
    cmd.env("LOCAL_API_KEY", "x").args(["config", "show"]);
    let out = output(cmd).await;
    assert!(out.stdout.contains("default_provider = \"local\""), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(s.requests().await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_format_check_lets_a_badly_formatted_answer_pass_and_is_kept_for_resuming() {
    let dated = || async {
        let s = setup(vec![reply(r#"{"city": "Toledo", "since": "July 4th"}"#)]).await;
        let schema = r#"{"required": ["city"], "properties": {"since": {"type": "string", "format": "date"}}}"#;
        write(s.dir.path(), "schema.json", schema);
        s
    };
    let s = dated().await;
    let out = output(s.cmd(&["--json", "--max-iterations", "1"])).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["history"][0]["issues"][0]["code"], "format", "{result}");
    assert_eq!(result["history"][0]["issues"][0]["message"], r#""July 4th" is not a "date""#);

    let s = dated().await;
    let out = output(s.cmd(&["--json", "--max-iterations", "1", "--no-format-check"])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "succeeded");
    // The run is stored with the setting, so `runs resume` checks the same way.
    let database_url = Some(s.dir.path().join(".redraft/redraft.db").display().to_string());
    let config = redraft::config::Config { database_url, ..Default::default() };
    let store = redraft::store::open(&config).await.unwrap();
    let run = store.run(result["run_id"].as_str().unwrap()).await.unwrap().unwrap();
    assert_eq!(run.spec["check_formats"], false, "{}", run.spec);
}

/// By default the schema goes as `response_format` with every attempt (constrained decoding),
/// and every check still runs: a decoder-shaped answer that breaks the schema's enum is still
/// rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constrained_sends_the_schema_as_response_format_and_still_checks() {
    let s = setup(vec![reply(r#"{"city": "Toledo", "state": "Ohio"}"#), reply(r#"{"city": "Toledo", "state": "OH"}"#)])
        .await;
    let out = output(s.cmd(&["--json"])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(statuses(&result), ["rejected", "accepted"]);
    let bodies = s.server.bodies().await;
    assert_eq!(bodies.len(), 2);
    for body in &bodies {
        assert_eq!(body["response_format"]["type"], "json_schema", "{body}");
        assert_eq!(body["response_format"]["json_schema"]["schema"]["required"], json!(["city", "state"]), "{body}");
    }

    // `--no-constrained`, or `constrained = false` in the config, only prompts for the shape;
    // `--constrained` on the command line wins over the config.
    let s = setup(vec![reply(r#"{"city": "Toledo", "state": "OH"}"#)]).await;
    let out = output(s.cmd(&["--no-constrained"])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(s.server.bodies().await[0].get("response_format").is_none());
    let s =
        setup(vec![reply(r#"{"city": "Toledo", "state": "OH"}"#), reply(r#"{"city": "Toledo", "state": "OH"}"#)]).await;
    write(s.dir.path(), "redraft.toml", "constrained = false\n");
    let out = output(s.cmd(&[])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = output(s.cmd(&["--constrained"])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let bodies = s.server.bodies().await;
    assert!(bodies[0].get("response_format").is_none(), "{}", bodies[0]);
    assert_eq!(bodies[1]["response_format"]["type"], "json_schema", "{}", bodies[1]);
}

/// By default a value the schema plainly meant is coerced before it is checked, and each change
/// is recorded among the attempt's repairs; `--strict` checks the answer as extracted, so the
/// same answer is fed back and asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_coerced_toward_the_schema_unless_strict() {
    const ORDER: &str = r#"{"type": "object", "required": ["sku", "unit_price", "qty", "paid", "status"],
        "properties": {"sku": {"type": "string"}, "unit_price": {"type": "number"}, "qty": {"type": "integer"},
                       "paid": {"type": "boolean"}, "status": {"enum": ["pending", "shipped"]}}}"#;
    let sloppy = r#"{"sku": "00042", "unit_price": "€77.08", "qty": "2", "paid": "yes", "status": "Shipped "}"#;
    let exact = r#"{"sku": "00042", "unit_price": 77.08, "qty": 2, "paid": true, "status": "shipped"}"#;
    let s = setup(vec![reply(sloppy), reply(sloppy), reply(exact)]).await;
    write(s.dir.path(), "order.json", ORDER);
    let run = |extra: &[&str]| {
        let mut cmd = redraft(s.dir.path());
        cmd.env("OPENAI_BASE_URL", s.server.base_url())
            .env("OPENAI_API_KEY", "sk-test")
            .args(["run", "--model", "openai/fake", "--schema", "order.json", "--prompt", "Order 42?", "--json"])
            .args(extra);
        cmd
    };

    let out = output(run(&[])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(statuses(&result), ["accepted"]);
    assert_eq!(result["artifact"], serde_json::from_str::<Value>(exact).unwrap());
    let mut repairs = result["history"][0]["repairs"].as_array().unwrap().clone();
    repairs.sort_by_key(|r| r["path"].as_str().unwrap_or_default().to_owned());
    assert_eq!(
        repairs,
        [
            json!({"path": "/paid", "from": "yes", "to": true}),
            json!({"path": "/qty", "from": "2", "to": 2}),
            json!({"path": "/status", "from": "Shipped ", "to": "shipped"}),
            json!({"path": "/unit_price", "from": "€77.08", "to": 77.08}),
        ],
        "the string `00042` fits its schema and is left alone"
    );
    assert_eq!(s.requests().await, 1);

    let out = output(run(&["--strict"])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(statuses(&result), ["rejected", "accepted"]);
    assert!(result["history"][0].get("repairs").is_none(), "{}", result["history"][0]);
    let paths: Vec<&str> =
        result["history"][0]["issues"].as_array().unwrap().iter().map(|i| i["path"].as_str().unwrap()).collect();
    assert_eq!(paths.len(), 4, "{paths:?}");
    assert_eq!(s.requests().await, 3);
}

/// `--strategy fresh` asks a model again with one prompt that carries the earlier attempts and
/// their issues, instead of continuing the conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategy_fresh_asks_again_with_one_prompt_carrying_the_prior_attempts() {
    let s = setup(vec![reply(r#"{"city": "Toledo", "state": "Ohio"}"#), reply(r#"{"city": "Toledo", "state": "OH"}"#)])
        .await;
    let out = output(s.cmd(&["--strategy", "fresh", "--json"])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let bodies = s.server.bodies().await;
    let messages = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{messages:?}");
    let prompt = messages[0]["content"].as_str().unwrap();
    assert!(prompt.contains("Prior attempts:\n\nAttempt 1 was rejected:"), "{prompt}");
    assert!(prompt.contains("\"state\": \"Ohio\"") && prompt.contains("/state"), "{prompt}");
    assert!(prompt.contains("This is attempt 2 of"), "{prompt}");

    // The default continues the conversation: the answer, then the feedback.
    let s = setup(vec![reply(r#"{"city": "Toledo", "state": "Ohio"}"#), reply(r#"{"city": "Toledo", "state": "OH"}"#)])
        .await;
    let out = output(s.cmd(&["--json"])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let roles: Vec<String> = s.server.bodies().await[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(roles.last().map(String::as_str), Some("user"));
    assert!(roles.contains(&"assistant".to_owned()), "{roles:?}");
}
