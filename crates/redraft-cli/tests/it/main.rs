//! The `redraft` binary, run as a user would: in a temp directory, against a fake
//! OpenAI-compatible server on 127.0.0.1 or a scripted mock, with a clean environment.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_debug_implementations)] // test code

mod chaos;
mod decide;
mod escape;
mod evaluators;
mod exec;
mod extract_validate;
mod faces;
mod help;
mod kinds;
mod logs;
mod mcp;
mod private;
mod run;
mod runs;
mod secrets;
mod serve;
mod telemetry;
mod until;
mod until_store;

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The repository root (for `examples/`).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// `redraft` in `dir` with no config, key or model from the outside world.
pub fn redraft(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("redraft").unwrap();
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env("NO_COLOR", "1");
    cmd
}

pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Run a command off the async runtime (the fake server lives on it) and collect its output.
pub async fn output(mut cmd: Command) -> Output {
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}
