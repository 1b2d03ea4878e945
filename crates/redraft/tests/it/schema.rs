//! The builder's schema: a file's `$ref`s resolve in its directory, and `format` is checked
//! unless the builder is told it is an annotation.

use redraft::eval::Formats;
use redraft::providers::MockProvider;
use redraft::{HaltReason, Model, Policy, Runner};

fn model() -> Model {
    Model::new(MockProvider::texts("mock/dates", [r#"{"on": "July 4th"}"#, r#"{"on": "2024-07-04"}"#]))
}

#[tokio::test]
async fn a_schema_file_reads_its_refs_and_checks_formats_unless_told_not_to() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("day.json"), r#"{"type": "string", "format": "date"}"#).unwrap();
    let schema = dir.path().join("s.json");
    std::fs::write(&schema, r#"{"type": "object", "required": ["on"], "properties": {"on": {"$ref": "day.json"}}}"#)
        .unwrap();
    let policy = Policy { max_iterations: 2, ..Policy::default() };

    let runner = Runner::builder().model(&model()).schema_file(&schema).policy(policy.clone()).build().unwrap();
    let result = runner.run("When?").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::Success);
    assert_eq!(result.history.len(), 2, "the first answer's date was fed back");
    assert_eq!(result.history[0].issues[0].message, r#""July 4th" is not a "date""#);

    let runner = Runner::builder()
        .model(&model())
        .schema_file(&schema)
        .formats(Formats::Annotation)
        .policy(policy)
        .build()
        .unwrap();
    let result = runner.run("When?").await.unwrap();
    assert_eq!(result.history.len(), 1, "accepted at once: {:?}", result.history[0].issues);

    // A reference that leaves the directory stops the build, before any model is called.
    std::fs::write(&schema, r#"{"$ref": "../elsewhere.json"}"#).unwrap();
    let err = Runner::builder().model(&model()).schema_file(&schema).build().unwrap_err().to_string();
    assert!(err.contains("`../elsewhere.json` is outside the schema file's directory"), "{err}");
}
