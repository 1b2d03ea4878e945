//! The invariants ARCHITECTURE.md promises, checked against the source tree.

use std::path::{Path, PathBuf};

fn crates() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn dependencies(krate: &str) -> Vec<String> {
    let text = std::fs::read_to_string(crates().join(krate).join("Cargo.toml")).unwrap();
    let value: toml::Value = toml::from_str(&text).unwrap();
    value.get("dependencies").and_then(|d| d.as_table()).map(|t| t.keys().cloned().collect()).unwrap_or_default()
}

fn sources(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push((path.clone(), std::fs::read_to_string(&path).unwrap()));
        }
    }
}

#[test]
fn core_does_no_io() {
    // (redraft-sandbox runs processes: it is a shared mechanism of adapters, never of core)
    for krate in ["redraft-core", "redraft-extract"] {
        for dep in dependencies(krate) {
            assert!(
                !["tokio", "reqwest", "sqlx", "hyper", "axum", "fastrand", "rand", "redraft-sandbox", "libc"]
                    .contains(&dep.as_str()),
                "{krate} must not depend on the IO/runtime crate `{dep}`"
            );
        }
        let mut files = Vec::new();
        sources(&crates().join(krate).join("src"), &mut files);
        for (path, text) in files {
            for forbidden in [
                "std::fs",
                "std::env",
                "std::process",
                "std::net",
                "Instant::now",
                "SystemTime",
                "thread::sleep",
                "now_v7",
            ] {
                assert!(
                    !text.contains(forbidden),
                    "{} uses `{forbidden}`: core decides, the runner acts",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn adapters_depend_on_core_never_on_each_other_or_a_face() {
    let adapters = ["redraft-providers", "redraft-eval"];
    let faces = ["redraft", "redraft-cli"];
    for adapter in adapters {
        let deps = dependencies(adapter);
        assert!(deps.iter().any(|d| d == "redraft-core"), "{adapter} implements core's ports");
        for other in adapters.iter().chain(faces.iter()) {
            assert!(!deps.iter().any(|d| d == other), "{adapter} must not depend on {other}");
        }
    }
}

#[test]
fn the_sandbox_knows_nothing_of_redraft() {
    let deps = dependencies("redraft-sandbox");
    assert!(!deps.iter().any(|d| d.starts_with("redraft")), "redraft-sandbox is a leaf: {deps:?}");
}

#[test]
fn only_the_cli_knows_exit_codes_and_terminals() {
    for krate in ["redraft-core", "redraft-extract", "redraft-providers", "redraft-eval", "redraft"] {
        let mut files = Vec::new();
        sources(&crates().join(krate).join("src"), &mut files);
        for (path, text) in files {
            for forbidden in ["ExitCode", "process::exit", "IsTerminal", "is_terminal"] {
                assert!(
                    !text.contains(forbidden),
                    "{} mentions `{forbidden}`: only faces know about it",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn network_faces_hold_no_guard_of_their_own() {
    // The HTTP face (JSON API, proxy, /v1/chat) and MCP turn requests into runs through
    // `RunSpec::prepare` and model names into providers through `Guard::model`: they never build
    // a provider from a request's model name themselves, nor match allow-lists, nor build
    // evaluators from directives without the guard. (Behaviour: `redraft-cli/tests/it/faces.rs`.)
    for krate in ["redraft-server", "redraft-mcp"] {
        let mut files = Vec::new();
        sources(&crates().join(krate).join("src"), &mut files);
        for (path, text) in files {
            // Code only: documentation may name the keys.
            let code: String =
                text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
            for forbidden in [
                "config().model(",
                "config.model(",
                ".config.model(",
                "Config::model",
                "exec_allow",
                "http_allow",
                "ExecEvaluator",
                "HttpEvaluator",
                "SchemaEvaluator::from_file",
                "MockProvider",
                "CommandProvider",
            ] {
                assert!(
                    !code.contains(forbidden),
                    "{} uses `{forbidden}`: a face hands requests to the guard (`redraft::guard`) instead",
                    path.display()
                );
            }
        }
    }
}
