//! A run's result holds no known secret, for a library caller as for every face: a model that
//! repeats a key, and the issues and escalation quoting it, come back with `[redacted]`.

use redraft::core::secrets;
use redraft::providers::MockProvider;
use redraft::{Issue, Model, Runner};
use serde_json::{Value, json};

const KEY: &str = "sk-runner-test-6a5b4c3d2e1f";

#[tokio::test]
async fn a_result_never_holds_a_known_secret() {
    secrets::register(KEY);
    let answer = json!({"city": format!("Bearer {KEY}")}).to_string();
    let model = Model::new(MockProvider::texts("mock/echo", [answer.clone(), answer]));
    let runner = Runner::builder()
        .model(&model)
        .schema(json!({"type": "object", "required": ["city"]}))
        .check("no_keys", |a: &Value| {
            Err(Issue::new("/city", "leak", format!("`{}` is not a city", a["city"].as_str().unwrap_or_default())))
        })
        .max_iterations(2)
        .build()
        .unwrap();
    let result = runner.run("Which city?").await.unwrap();
    assert!(!result.succeeded());
    let text = serde_json::to_string(&result).unwrap();
    assert!(!text.contains(KEY), "{text}");
    assert_eq!(result.history[0].raw, json!({"city": "Bearer [redacted]"}).to_string());
    assert_eq!(result.history[1].issues[0].message, "`Bearer [redacted]` is not a city");
    assert!(result.escalation.is_some() && text.matches("[redacted]").count() >= 4, "{text}");
}

#[tokio::test]
async fn evaluators_never_see_a_known_secret_the_model_repeats() {
    const ECHOED: &str = "sk-runner-echoed-9f8e7d6c5b";
    secrets::register(ECHOED);
    // Escaped as a JSON encoder may write it: the artifact holds the key itself once parsed.
    let escaped: String = ECHOED.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
    let answer = format!(r#"{{"city": "Paris {escaped}"}}"#);
    let model = Model::new(MockProvider::texts("mock/echo", [answer]));
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let record = seen.clone();
    let runner = Runner::builder()
        .model(&model)
        .check("records", move |a: &Value| {
            record.lock().unwrap().push(a.to_string());
            Ok::<(), Issue>(())
        })
        .max_iterations(1)
        .build()
        .unwrap();
    let result = runner.run("Which city?").await.unwrap();
    assert!(result.succeeded());
    assert_eq!(*seen.lock().unwrap(), [json!({"city": "Paris [redacted]"}).to_string()]);
    assert!(!result.history[0].raw.contains("\\u0073\\u006b"), "{}", result.history[0].raw);
}

#[test]
fn a_credential_in_a_url_the_user_gives_is_a_known_secret() {
    redraft::Guard::local().url("http://127.0.0.1:9/check?token=ValQueryToken-test-31").unwrap();
    assert_eq!(secrets::redact("path was /check?token=ValQueryToken-test-31"), "path was /check?token=[redacted]");
}
