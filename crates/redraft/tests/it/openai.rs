use std::sync::Arc;
use std::time::Duration;

use redraft::providers::{OpenAiConfig, OpenAiProvider};
use redraft::{HaltReason, Model, Policy, Price, Runner, Task};
use serde_json::{Value, json};

use redraft_testkit::*;

fn model(server: &FakeOpenAi) -> Model {
    model_with(server, "fake", false)
}

/// The model `name` on `server`. A server that refuses `response_format` is remembered for the
/// process by address and model: a test of that uses a name of its own, since another test's
/// server may get the same port later.
fn model_with(server: &FakeOpenAi, name: &str, native_response_format: bool) -> Model {
    Model::new(
        OpenAiProvider::new(OpenAiConfig {
            name: format!("openai/{name}"),
            model: name.into(),
            base_url: server.base_url(),
            api_key: Some("sk-test".into()),
            api_key_env: "OPENAI_API_KEY".into(),
            request_timeout: Duration::from_secs(10),
            max_response_bytes: redraft::providers::DEFAULT_MAX_RESPONSE_BYTES,
            native_response_format,
        })
        .unwrap(),
    )
}

fn schema() -> Value {
    json!({
        "type": "object",
        "required": ["city", "state"],
        "properties": {"city": {"type": "string"}, "state": {"type": "string", "minLength": 2, "maxLength": 2}}
    })
}

fn runner(model: &Model) -> Runner {
    Runner::builder()
        .model(model)
        .schema(schema())
        .check("city_matches", |a: &Value| match a["city"].as_str() {
            Some("Toledo") => Ok(()),
            Some(other) => Err(redraft::Issue::new(
                "/city",
                "rule:city_matches",
                format!("city '{other}' doesn't match contract city 'Toledo'"),
            )),
            None => Ok(()),
        })
        .retry(redraft::core::RetryPolicy { base_delay: Duration::from_millis(1), ..Default::default() })
        .build()
        .unwrap()
}

#[tokio::test]
async fn converges_on_invalid_then_wrong_then_damaged_but_repairable() {
    let server = FakeOpenAi::start(vec![
        reply("I'm sorry, I think the contract is in Toledo, Ohio."),
        reply("```json\n{\"city\": \"Louisville\", \"state\": \"KY\"}\n```"),
        reply("Here you go: {city: 'Toledo', state: 'OH',}"),
    ])
    .await;
    let result = runner(&model(&server)).run("Where is contract C-7?").await.unwrap();
    let statuses: Vec<_> = result.history.iter().map(|a| a.status.as_str()).collect();
    assert_eq!(statuses, ["invalid_json", "rejected", "accepted"]);
    assert_eq!(result.halted_because, HaltReason::Success);
    assert_eq!(result.artifact, Some(json!({"city": "Toledo", "state": "OH"})));
    assert_eq!(result.history[2].extraction, Some(redraft::core::extract::Route::Repaired));
    assert_eq!((result.metrics.tokens_in, result.metrics.tokens_out), (300, 60));
    assert!(!result.metrics.tokens_estimated);

    let bodies = server.bodies().await;
    assert_eq!(bodies.len(), 3);
    assert_eq!(bodies[0]["model"], "fake");
    let second = last_user_message(&bodies[1]);
    assert!(second.starts_with("Attempt 2 of 3."), "{second}");
    assert!(second.contains("[invalid_json]"), "{second}");
    let third = last_user_message(&bodies[2]);
    assert!(
        third.contains("1. /city: city 'Louisville' doesn't match contract city 'Toledo' [rule:city_matches]"),
        "{third}"
    );
    // conversation strategy: the previous answers stay in the conversation
    assert_eq!(bodies[2]["messages"].as_array().unwrap().len(), 5);
}

#[tokio::test]
async fn a_server_error_then_a_good_reply_costs_no_attempt() {
    let server = FakeOpenAi::start(vec![status(500), status(503), reply(r#"{"city": "Toledo", "state": "OH"}"#)]).await;
    let result = runner(&model(&server)).run("Where?").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::Success);
    assert_eq!(result.iterations, 1);
    assert_eq!(server.bodies().await.len(), 3);
}

#[tokio::test]
async fn rate_limits_are_retried_honouring_retry_after() {
    let server = FakeOpenAi::start(vec![rate_limited(0), reply(r#"{"city": "Toledo", "state": "OH"}"#)]).await;
    let result = runner(&model(&server)).run("Where?").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::Success);
    assert_eq!(result.iterations, 1);
}

#[tokio::test]
async fn persistent_failure_halts_with_provider_error_and_keeps_history() {
    let server =
        FakeOpenAi::start(vec![reply(r#"{"city": "Dayton", "state": "OH"}"#), status(500), status(500), status(500)])
            .await;
    let result = runner(&model(&server)).run("Where?").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::ProviderError);
    assert_eq!(result.iterations, 1, "transport failures are not attempts");
    assert_eq!(server.bodies().await.len(), 4, "1 attempt + 1 try + 2 retries");
    let error = result.error.unwrap();
    assert_eq!(error.code, "provider_error");
    assert!(error.message.contains("HTTP 500") && error.message.contains("scripted 500"), "{}", error.message);
    assert_eq!(result.artifact, Some(json!({"city": "Dayton", "state": "OH"})));
}

#[tokio::test]
async fn refused_credentials_are_not_retried() {
    let server = FakeOpenAi::start(vec![status(401)]).await;
    let result = runner(&model(&server)).run("Where?").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::ProviderError);
    assert_eq!(server.bodies().await.len(), 1);
    assert!(result.error.unwrap().message.contains("OPENAI_API_KEY"));
}

#[tokio::test]
async fn usage_less_replies_are_estimated_and_flagged() {
    let raw = r#"{"city": "Toledo", "state": "OH"}"#;
    let server = FakeOpenAi::start(vec![reply_without_usage(raw)]).await;
    let result = runner(&model(&server)).run("Where?").await.unwrap();
    assert!(result.metrics.tokens_estimated);
    assert!(result.history[0].tokens_estimated);
    assert_eq!(result.history[0].tokens_out, (raw.len() as u64).div_ceil(4));
}

#[tokio::test]
async fn the_same_wrong_answer_twice_halts_with_stagnation() {
    let wrong = r#"{"city": "Louisville", "state": "KY"}"#;
    let server = FakeOpenAi::start(vec![reply(wrong), reply(wrong)]).await;
    let result = runner(&model(&server)).run("Where?").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::Stagnation);
    assert_eq!(result.iterations, 2);
    assert_eq!(result.artifact, Some(serde_json::from_str::<Value>(wrong).unwrap()));
    let escalation = result.escalation.unwrap();
    assert_eq!(escalation.attempts[1], "2: identical to 1");
}

#[tokio::test]
async fn a_price_table_and_a_budget_halt_with_budget() {
    let wrong = |c: &str| reply(&format!(r#"{{"city": "{c}", "state": "KY"}}"#));
    let server = FakeOpenAi::start(vec![wrong("A"), wrong("B"), wrong("C")]).await;
    // 100 in + 20 out per attempt at $1000/$1000 per Mtok = $0.12 per attempt.
    let m = model(&server).with_price(Price { input_usd_per_mtok: 1000.0, output_usd_per_mtok: 1000.0 });
    let policy = Policy { max_budget_usd: Some(0.2), ..Policy::default() };
    let result = Runner::builder()
        .model(&m)
        .schema(schema())
        .check("city", |a: &Value| if a["city"] == "Toledo" { Ok(()) } else { Err("wrong city") })
        .policy(policy)
        .max_tokens(20)
        .build()
        .unwrap()
        .run("Where?")
        .await
        .unwrap();
    assert_eq!(result.halted_because, HaltReason::Budget);
    assert_eq!(result.iterations, 1);
    assert!((result.metrics.cost_usd.unwrap() - 0.12).abs() < 1e-9);
}

#[tokio::test]
async fn a_slow_reply_within_the_limit_is_fine_and_a_broken_evaluator_is_an_issue() {
    #[derive(Debug)]
    struct Crashing;
    #[async_trait::async_trait]
    impl redraft::Evaluator for Crashing {
        fn name(&self) -> &str {
            "crashing"
        }
        async fn evaluate(&self, _: redraft::EvalInput<'_>) -> Result<redraft::Verdict, redraft::core::EvaluatorError> {
            Err(redraft::core::EvaluatorError::Failed { evaluator: "crashing".into(), message: "disk on fire".into() })
        }
    }
    let server = FakeOpenAi::start(vec![slow(r#"{"city": "Toledo", "state": "OH"}"#, Duration::from_millis(50))]).await;
    let result = Runner::builder()
        .model(&model(&server))
        .evaluator(Arc::new(Crashing))
        .max_iterations(1)
        .build()
        .unwrap()
        .run(Task::new("Where?"))
        .await
        .unwrap();
    assert_eq!(result.history[0].status.as_str(), "rejected");
    assert_eq!(result.history[0].issues[0].code, "evaluator_error");
    assert!(result.history[0].issues[0].message.contains("disk on fire"));
    assert!(result.history[0].wall_ms >= 50);
}

#[tokio::test]
async fn the_result_json_has_exactly_the_spec_shape() {
    let server = FakeOpenAi::start(vec![reply("no json"), reply(r#"{"city": "Toledo", "state": "OH"}"#)]).await;
    let result = runner(&model(&server)).run("Where?").await.unwrap();
    let value = serde_json::to_value(&result).unwrap();
    insta::assert_json_snapshot!(value, {
        ".run_id" => "[run_id]",
        ".best_ref" => "[run_id]/2",
        ".metrics.wall_ms" => "[ms]",
        ".history[].wall_ms" => "[ms]",
        ".history[].started_at" => insta::dynamic_redaction(|v, _| { assert!(redraft_testkit::is_utc_time(v.as_str().unwrap_or_default()), "{v:?}"); "[time]" }),
        ".history[].finished_at" => insta::dynamic_redaction(|v, _| { assert!(redraft_testkit::is_utc_time(v.as_str().unwrap_or_default()), "{v:?}"); "[time]" }),
    }, @r#"
    {
      "run_id": "[run_id]",
      "status": "succeeded",
      "halted_because": "success",
      "artifact": {
        "city": "Toledo",
        "state": "OH"
      },
      "validation": {
        "score": 1.0,
        "passed": true,
        "issues": []
      },
      "iterations": 2,
      "best_iteration": 2,
      "best_score": 1.0,
      "best_ref": "[run_id]/2",
      "artifact_sha256": "055c4307005e0febe997fd85761a483f876bc84d016a23b2478dbb1d7a20c510",
      "metrics": {
        "wall_ms": "[ms]",
        "tokens_in": 200,
        "tokens_out": 40,
        "tokens_estimated": false,
        "cost_usd": null
      },
      "history": [
        {
          "iteration": 1,
          "status": "invalid_json",
          "raw": "no json",
          "artifact": null,
          "extraction": null,
          "score": 0.0,
          "issues": [
            {
              "path": "",
              "code": "invalid_json",
              "message": "no JSON value was found in the answer; answer with only the JSON value"
            }
          ],
          "tokens_in": 100,
          "tokens_out": 20,
          "cost_usd": null,
          "wall_ms": "[ms]",
          "started_at": "[time]",
          "finished_at": "[time]",
          "finish_reason": "stop",
          "model": "openai/fake",
          "prompt": "Where?\n\nAnswer with JSON that matches this JSON Schema:\n```json\n{\n  \"type\": \"object\",\n  \"required\": [\n    \"city\",\n    \"state\"\n  ],\n  \"properties\": {\n    \"city\": {\n      \"type\": \"string\"\n    },\n    \"state\": {\n      \"type\": \"string\",\n      \"minLength\": 2,\n      \"maxLength\": 2\n    }\n  }\n}\n```\n\nAn example of the expected shape (replace every placeholder with a real value):\n```json\n{\n  \"city\": \"<string>\",\n  \"state\": \"<string>\"\n}\n```\n\nAnswer with only the JSON value, no explanation."
        },
        {
          "iteration": 2,
          "status": "accepted",
          "raw": "{\"city\": \"Toledo\", \"state\": \"OH\"}",
          "artifact": {
            "city": "Toledo",
            "state": "OH"
          },
          "extraction": "bare",
          "score": 1.0,
          "issues": [],
          "tokens_in": 100,
          "tokens_out": 20,
          "cost_usd": null,
          "wall_ms": "[ms]",
          "started_at": "[time]",
          "finished_at": "[time]",
          "finish_reason": "stop",
          "model": "openai/fake",
          "prompt": "Attempt 2 of 3.\n\nYour previous answer (attempt 1) was rejected:\n```\nno json\n```\n\nProblems (1):\n1. (root): no JSON value was found in the answer; answer with only the JSON value [invalid_json]\n\nThe answer must have this shape (replace every placeholder with a real value):\n```json\n{\n  \"city\": \"<string>\",\n  \"state\": \"<string>\"\n}\n```\n\nReturn only the corrected JSON value, with no explanation."
        }
      ],
      "escalation": null
    }
    "#);
    assert_eq!(
        result.artifact_sha256.unwrap(),
        redraft::core::canonical::sha256_hex(r#"{"city":"Toledo","state":"OH"}"#)
    );
}

/// `native_response_format`: the schema goes as `response_format` with every attempt (the
/// decoder's shape), and the loop's own checks still run on what comes back.
#[tokio::test]
async fn the_schema_goes_as_response_format_and_every_check_still_runs() {
    let server = FakeOpenAi::start(vec![
        reply(r#"{"city": "Louisville", "state": "KY"}"#),
        reply(r#"{"city": "Toledo", "state": "OH"}"#),
    ])
    .await;
    let result = runner(&model_with(&server, "fake", true)).run("Where is contract C-7?").await.unwrap();
    let statuses: Vec<_> = result.history.iter().map(|a| a.status.as_str()).collect();
    assert_eq!(statuses, ["rejected", "accepted"], "the rule still runs");
    for body in server.bodies().await {
        assert_eq!(body["response_format"]["type"], "json_schema", "{body}");
        assert_eq!(body["response_format"]["json_schema"]["schema"], schema(), "{body}");
    }
    // Off by default.
    let server = FakeOpenAi::start(vec![reply(r#"{"city": "Toledo", "state": "OH"}"#)]).await;
    runner(&model(&server)).run("Where is contract C-7?").await.unwrap();
    assert!(server.bodies().await[0].get("response_format").is_none());
}

/// A server that refuses `response_format` is asked again without it, and not sent it again:
/// the run goes on by prompting.
#[tokio::test]
async fn a_server_that_refuses_response_format_is_asked_without_it_from_then_on() {
    let refused = Reply::new(400).set_body_json(json!({"error": {"message": "response_format is not supported"}}));
    let server = FakeOpenAi::start(vec![
        refused,
        reply(r#"{"city": "Louisville", "state": "KY"}"#),
        reply(r#"{"city": "Toledo", "state": "OH"}"#),
        reply(r#"{"city": "Toledo", "state": "OH"}"#),
    ])
    .await;
    let model = model_with(&server, "fake-without-response-format", true);
    let result = runner(&model).run("Where is contract C-7?").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::Success);
    assert_eq!(result.iterations, 2, "the refusal cost no attempt");
    let asked = |b: &Value| b.get("response_format").is_some();
    let bodies = server.bodies().await;
    assert_eq!(bodies.iter().map(asked).collect::<Vec<_>>(), [true, false, false]);
    // Another run on the same server: asked without it at once.
    runner(&model).run("Where is contract C-7?").await.unwrap();
    assert!(!asked(&server.bodies().await[3]));
}
