//! Measures checking hostile answers (run it under `/usr/bin/time -v`):
//! - `hostile_check array N`: a model answers `[1,1,…]` (N ones) against
//!   `{"type":"array","items":{"type":"string"}}`, twice;
//! - `hostile_check http URL [BYTES]`: an `http:` validator at URL judges `{"a": 1}`, twice,
//!   its answer read up to BYTES (by default, the validator's default limit);
//! - `hostile_check small N`: N runs of one small answer against a small schema (the cost of
//!   checking off the request threads, per attempt).
//!
//! `bench/hostile.sh` runs it against the hostile answers, with a hostile validator.
use std::sync::Arc;
use std::time::{Duration, Instant};

use redraft::eval::HttpEvaluator;
use redraft::providers::MockProvider;
use redraft::{Model, Runner};
use serde_json::json;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    let arg = args.next().unwrap_or_default();
    if mode == "small" {
        let n: usize = arg.parse()?;
        let schema = json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}});
        let t0 = Instant::now();
        for _ in 0..n {
            let model = Model::new(MockProvider::texts("mock/small", [r#"{"city": "Toledo"}"#]));
            let runner = Runner::builder().model(&model).schema(schema.clone()).max_iterations(1).build()?;
            runner.run("city?").await?;
        }
        eprintln!("small: runs={n} took={:?} per run={:?}", t0.elapsed(), t0.elapsed() / u32::try_from(n)?);
        return Ok(());
    }
    let runner = match mode.as_str() {
        "array" => {
            let n: usize = arg.parse()?;
            let mut text = String::with_capacity(2 * n + 2);
            text.push('[');
            for i in 0..n {
                if i > 0 {
                    text.push(',');
                }
                text.push('1');
            }
            text.push(']');
            let model = Model::new(MockProvider::texts("mock/hostile", [text.clone(), text]));
            Runner::builder().model(&model).schema(json!({"type": "array", "items": {"type": "string"}}))
        }
        "http" => {
            let model = Model::new(MockProvider::texts("mock/hostile", [r#"{"a": 1}"#, r#"{"a": 2}"#]));
            let mut http = HttpEvaluator::new(arg, None, Duration::from_secs(600))?;
            if let Some(bytes) = args.next() {
                http = http.max_body_bytes(bytes.parse()?);
            }
            Runner::builder().model(&model).evaluator(Arc::new(http))
        }
        other => return Err(format!("unknown mode `{other}`: `array N` or `http URL`").into()),
    };
    let runner = runner.max_iterations(2).build()?;
    let t0 = Instant::now();
    let result = runner.run("numbers please").await?;
    let issues: Vec<usize> = result.history.iter().map(|a| a.issues.len()).collect();
    let bytes = serde_json::to_string(&result)?.len();
    let last = result.history.last().and_then(|a| a.issues.last()).map(|i| i.code.clone());
    eprintln!(
        "{mode}: attempts={} issues={issues:?} last_code={last:?} result_bytes={bytes} took={:?}",
        result.history.len(),
        t0.elapsed()
    );
    Ok(())
}
