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
