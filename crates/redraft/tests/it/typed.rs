//! Typed extraction: `extract::<T>()` and `Extractor`.

use redraft::providers::MockProvider;
use redraft::{ExtractionError, Extractor, HaltReason, Model, extract};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema, PartialEq)]
struct Order {
    sku: String,
    quantity: u32,
}

#[tokio::test]
async fn extracts_a_typed_value_after_feedback() {
    let model = Model::new(MockProvider::texts(
        "mock/t",
        [r#"{"sku": "A-1", "quantity": -2}"#, r#"{"sku": "A-1", "quantity": 2}"#],
    ));
    let (order, metrics) = extract::<Order>(&model, "Two of A-1, please.").await.unwrap();
    assert_eq!(order, Order { sku: "A-1".into(), quantity: 2 });
    assert!(metrics.tokens_in > 0);
}

#[tokio::test]
async fn a_closure_rejection_is_an_ordinary_failed_attempt() {
    let model = Model::new(MockProvider::texts(
        "mock/t",
        [r#"{"sku": "A-1", "quantity": 2000}"#, r#"{"sku": "A-1", "quantity": 3000}"#],
    ));
    let err = Extractor::<Order>::new(&model)
        .max_iterations(2)
        .check("sane_quantity", |o: &Order| {
            if o.quantity <= 100 { Ok(()) } else { Err(format!("quantity {} is over 100", o.quantity)) }
        })
        .run("Lots of A-1")
        .await
        .unwrap_err();
    match err {
        ExtractionError::MaxRetriesExceeded { attempts, halted_because, history, raw_output, .. } => {
            assert_eq!(attempts, 2);
            assert_eq!(halted_because, HaltReason::MaxIterations);
            assert_eq!(history[0].issues[0].message, "quantity 2000 is over 100");
            assert_eq!(raw_output, r#"{"sku": "A-1", "quantity": 3000}"#);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn a_failing_provider_is_a_typed_provider_error() {
    let model = Model::new(MockProvider::texts("mock/t", Vec::<String>::new()));
    let err = extract::<Order>(&model, "x").await.unwrap_err();
    assert!(
        matches!(err, ExtractionError::Provider { source: redraft::core::ProviderError::ScriptExhausted { .. }, .. }),
        "{err:?}"
    );
}
