//! redraft as a library in the loop benchmarks: N runs of one `Runner` against the fake
//! OpenAI-compatible server, on one multi-threaded tokio runtime (`#[tokio::main]`).
//!
//! ```text
//! loop-bench --base-url URL --schema FILE --prompt FILE [--runs N] [--warmup W]
//!            [--concurrent] [--max-iterations 3] [--request-timeout-s 120]
//! ```
//!
//! Sequential by default (one run after another, as the Python peers are driven);
//! `--concurrent` spawns all N runs at once as tokio tasks. Warm-up runs (sequential) come
//! first and are not in the loop figures. Prints one JSON line: runs, succeeded, attempts,
//! the status sequences seen, the loop's CPU seconds (getrusage of this process, user+sys,
//! around the measured runs only), its wall time and the peak RSS of the process.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redraft::providers::{OpenAiConfig, OpenAiProvider};
use redraft::{Model, RunResult, Runner};
use serde_json::{Value, json};

/// (user+sys CPU seconds, peak RSS in KiB) of this process so far.
#[allow(unsafe_code)]
fn usage() -> (f64, i64) {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime) + secs(ru.ru_stime), ru.ru_maxrss)
}

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(String::as_str)
}

fn num(args: &[String], name: &str, default: u64) -> Result<u64, String> {
    arg(args, name).map_or(Ok(default), |v| v.parse().map_err(|e| format!("{name}: {e}")))
}

#[derive(Default)]
struct Tally {
    runs: u64,
    succeeded: u64,
    attempts: u64,
    errors: u64,
    sequences: BTreeMap<String, u64>,
}

impl Tally {
    fn add(&mut self, result: Result<RunResult, String>) {
        self.runs += 1;
        match result {
            Ok(r) => {
                self.succeeded += u64::from(r.succeeded());
                self.attempts += r.history.len() as u64;
                let seq: Vec<&str> = r.history.iter().map(|a| a.status.as_str()).collect();
                *self.sequences.entry(seq.join(",")).or_default() += 1;
            }
            Err(e) => {
                self.errors += 1;
                *self.sequences.entry(format!("error: {e}")).or_default() += 1;
            }
        }
    }
}

async fn main_inner() -> Result<Value, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let base_url = arg(&args, "--base-url").ok_or("--base-url is required")?.to_owned();
    let schema_path = arg(&args, "--schema").ok_or("--schema is required")?;
    let prompt_path = arg(&args, "--prompt").ok_or("--prompt is required")?;
    let runs = num(&args, "--runs", 100)?;
    let warmup = num(&args, "--warmup", 0)?;
    let max_iterations = u32::try_from(num(&args, "--max-iterations", 3)?).map_err(|e| e.to_string())?;
    let timeout = Duration::from_secs(num(&args, "--request-timeout-s", 120)?);
    let concurrent = args.iter().any(|a| a == "--concurrent");

    let schema: Value = serde_json::from_str(&std::fs::read_to_string(schema_path).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let prompt = std::fs::read_to_string(prompt_path).map_err(|e| e.to_string())?;
    let provider = OpenAiProvider::new(OpenAiConfig {
        name: "openai/fake".into(),
        model: "fake".into(),
        base_url,
        api_key: Some("sk-bench".into()),
        api_key_env: "OPENAI_API_KEY".into(),
        request_timeout: timeout,
        max_response_bytes: redraft::providers::DEFAULT_MAX_RESPONSE_BYTES,
        native_response_format: false,
    })
    .map_err(|e| e.to_string())?;
    let model = Model::new(provider);
    let runner = Runner::builder()
        .model(&model)
        .schema(schema)
        .max_iterations(max_iterations)
        .build()
        .map_err(|e| e.to_string())?;

    let mut warm = Tally::default();
    for _ in 0..warmup {
        warm.add(runner.run(prompt.as_str()).await.map_err(|e| e.to_string()));
    }

    let (cpu0, _) = usage();
    let t0 = Instant::now();
    let mut tally = Tally::default();
    if concurrent {
        let runner = Arc::new(runner);
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..runs {
            let (runner, prompt) = (Arc::clone(&runner), prompt.clone());
            set.spawn(async move { runner.run(prompt).await.map_err(|e| e.to_string()) });
        }
        while let Some(joined) = set.join_next().await {
            tally.add(joined.map_err(|e| e.to_string()).and_then(|r| r));
        }
    } else {
        for _ in 0..runs {
            tally.add(runner.run(prompt.as_str()).await.map_err(|e| e.to_string()));
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let (cpu1, max_rss_kib) = usage();
    Ok(json!({
        "client": "redraft-lib",
        "mode": if concurrent { "concurrent" } else { "sequential" },
        "runs": tally.runs, "succeeded": tally.succeeded, "attempts": tally.attempts, "errors": tally.errors,
        "sequences": tally.sequences,
        "warmup_runs": warm.runs, "warmup_succeeded": warm.succeeded, "warmup_attempts": warm.attempts,
        "loop_cpu_s": cpu1 - cpu0, "loop_wall_s": wall,
        "process_cpu_s": cpu1, "max_rss_kib": max_rss_kib,
    }))
}

#[tokio::main]
async fn main() -> ExitCode {
    match main_inner().await {
        Ok(v) => {
            println!("{v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("loop-bench: {e}");
            ExitCode::from(2)
        }
    }
}
