//! The transport floor of the loop benchmarks: runs of three (`--requests-per-run`) chat-completion POSTs with
//! reqwest alone (one shared client, as redraft's provider has), the conversation grown by
//! the replies, and nothing else: no loop, no prompts, no extraction, no validation. Its CPU
//! and RSS are what any Rust client pays for the HTTP part.
//!
//! ```text
//! http-floor --base-url URL --prompt FILE [--runs N] [--warmup W] [--concurrent]
//!            [--requests-per-run K]
//! ```
//!
//! Sequential by default; `--concurrent` spawns every run at once as a tokio task. Prints
//! one JSON line in loop-bench's shape.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

#[allow(unsafe_code)]
fn usage() -> (f64, i64) {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime) + secs(ru.ru_stime), ru.ru_maxrss)
}

async fn one(client: &reqwest::Client, url: &str, prompt: &str, requests: u32) -> Result<u32, reqwest::Error> {
    let mut messages = vec![json!({"role": "user", "content": prompt})];
    for _ in 0..requests {
        let body = json!({"model": "fake", "messages": messages});
        let reply: Value = client.post(url).json(&body).send().await?.error_for_status()?.json().await?;
        messages.push(reply["choices"][0]["message"].clone());
        messages.push(json!({"role": "user", "content": "Attempt 2 of 3. Fix it."}));
    }
    Ok(requests)
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let url = format!("{}/chat/completions", get("--base-url").ok_or("--base-url is required")?);
    let prompt = std::fs::read_to_string(get("--prompt").ok_or("--prompt is required")?).map_err(|e| e.to_string())?;
    let runs: u64 = get("--runs").map_or(Ok(100), |v| v.parse()).map_err(|e| format!("--runs: {e}"))?;
    let warmup: u64 = get("--warmup").map_or(Ok(0), |v| v.parse()).map_err(|e| format!("--warmup: {e}"))?;
    let requests: u32 =
        get("--requests-per-run").map_or(Ok(3), |v| v.parse()).map_err(|e| format!("--requests-per-run: {e}"))?;
    let concurrent = args.iter().any(|a| a == "--concurrent");
    let client = reqwest::Client::builder().build().map_err(|e| e.to_string())?;
    let shared = Arc::new((client, url, prompt, requests));
    let mut warm_ok = 0u64;
    for _ in 0..warmup {
        warm_ok += u64::from(one(&shared.0, &shared.1, &shared.2, shared.3).await.is_ok());
    }
    let (cpu0, _) = usage();
    let t0 = Instant::now();
    let (mut ok, mut attempts, mut errors) = (0u64, 0u64, 0u64);
    let mut tally = |r: Result<u32, String>| match r {
        Ok(n) => (ok, attempts) = (ok + 1, attempts + u64::from(n)),
        Err(_) => errors += 1,
    };
    if concurrent {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..runs {
            let shared = Arc::clone(&shared);
            set.spawn(async move { one(&shared.0, &shared.1, &shared.2, shared.3).await });
        }
        while let Some(joined) = set.join_next().await {
            tally(joined.map_err(|e| e.to_string()).and_then(|r| r.map_err(|e| e.to_string())));
        }
    } else {
        for _ in 0..runs {
            tally(one(&shared.0, &shared.1, &shared.2, shared.3).await.map_err(|e| e.to_string()));
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let (cpu1, rss) = usage();
    println!(
        "{}",
        json!({"client": "http-floor", "mode": if concurrent { "concurrent" } else { "sequential" },
               "runs": runs, "succeeded": ok, "attempts": attempts, "errors": errors, "sequences": {},
               "warmup_runs": warmup, "warmup_succeeded": warm_ok, "loop_cpu_s": cpu1 - cpu0, "loop_wall_s": wall, "process_cpu_s": cpu1,
               "max_rss_kib": rss})
    );
    Ok(())
}
