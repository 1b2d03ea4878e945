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
    let faces = ["redraft", "redraft-cli", "redraft-server", "redraft-mcp"];
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

/// The faces: each turns its wire format into a `RunSpec` and hands it to the one entry
/// (`RunSpec::prepare`, `prepare_submitted`, `prepare_call`), then to the runner it gets back.
const FACES: [&str; 3] = ["redraft-server", "redraft-mcp", "redraft-cli"];

/// What in `code` (a face's source, comments left out) goes around the runner: the engine
/// driven by hand, a runner built by hand instead of prepared from a spec, a provider obtained
/// or called directly. Each finding names the offence.
fn bypasses(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    // Types a face has no business holding: the loop's state machine and its inputs, the
    // provider port, a runner built piece by piece.
    for name in ["Engine", "AttemptEnd", "AttemptOutcome", "ChatProvider", "RunnerBuilder"] {
        if identifiers(code).any(|id| id == name) {
            found.push(format!("names `{name}`"));
        }
    }
    // Ways to get a provider or a runner without the one entry.
    for call in ["Runner::builder", "guard().model(", "guard.model(", "Guard::model", ".provider.", ".provider)"] {
        if code.contains(call) {
            found.push(format!("calls `{call}`"));
        }
    }
    // Calls that only a runner may make (on a runner they carry its retries and limits).
    for method in ["complete", "forward", "forward_stream", "list_models", "settle", "next"] {
        let needle = format!(".{method}(");
        for (at, _) in code.match_indices(&needle) {
            let receiver: String = code[..at]
                .chars()
                .rev()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let allowed = receiver == "runner" || (method == "next" && !receiver.contains("engine"));
            if !allowed {
                found.push(format!("calls `{receiver}.{method}(`"));
            }
        }
    }
    found
}

fn identifiers(code: &str) -> impl Iterator<Item = &str> {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty())
}

/// A source file without its comment lines (documentation may name what code must not use).
fn code_of(text: &str) -> String {
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

#[test]
fn faces_go_through_the_runner() {
    for krate in FACES {
        let mut files = Vec::new();
        sources(&crates().join(krate).join("src"), &mut files);
        assert!(!files.is_empty(), "{krate} has no sources");
        for (path, text) in files {
            let found = bypasses(&code_of(&text));
            assert!(
                found.is_empty(),
                "{} bypasses the runner: {}; a face hands a `RunSpec` to `prepare` (or `prepare_submitted`, `prepare_call`) and uses the runner it gets back",
                path.display(),
                found.join(", ")
            );
        }
    }
}

#[test]
fn the_bypass_check_catches_what_it_is_for() {
    // Each of these was, or could be, how a face went around the loop.
    for (code, what) in [
        ("let mut engine = Engine::new(plan)?;", "Engine"),
        ("engine.settle(outcome);", "settle"),
        ("let r = model.provider.complete(&request).await?;", ".provider."),
        ("let p = state.guard().model(config, &name)?;", "guard().model("),
        ("let a = provider.forward(raw).await;", "provider.forward("),
        ("let s = provider.forward_stream(raw).await;", "provider.forward_stream("),
        ("let runner = Runner::builder().model(&m).build()?;", "Runner::builder"),
        ("fn f(p: Arc<dyn ChatProvider>) {}", "ChatProvider"),
        ("let n = engine.next(Duration::ZERO);", "engine.next("),
    ] {
        let found = bypasses(code);
        assert!(found.iter().any(|f| f.contains(what)), "`{code}` was not caught: {found:?}");
    }
    // The runner's own calls are the way through.
    for code in [
        "let answer = runner.forward(raw).await;",
        "let r = runner.call(&request).await?;",
        "let prepared = spec.prepare(&setup)?;",
        "let item = lines.next();",
    ] {
        assert_eq!(bypasses(code), Vec::<String>::new(), "`{code}` is the runner's own way");
    }
}

/// Where `unsafe` code may be, and why: each a thin call the safe libraries do not offer.
const UNSAFE_ALLOWED: [(&str, &str); 4] = [
    ("redraft-sandbox/src/sys.rs", "system calls between fork and exec, and the seccomp filter's memory file"),
    ("redraft-cli/src/main.rs", "giving memory back: mimalloc's `mi_collect` and glibc's `malloc_trim`"),
    ("redraft-store/src/batch.rs", "batched SQLite writes on sqlx's connection handle through rusqlite"),
    ("redraft-sandbox/tests/it/network.rs", "a test leaving a descriptor inheritable, as a careless library would"),
];

#[test]
fn unsafe_code_stays_where_it_is_allowed_and_says_why() {
    let mut files = Vec::new();
    sources(&crates(), &mut files);
    let mut found = Vec::new();
    for (path, text) in &files {
        let rel = path.strip_prefix(crates()).unwrap_or(path).to_string_lossy().replace('\\', "/");
        let code = code_of(text);
        let uses = identifiers(&code).any(|w| w == "unsafe") || code.contains("allow(unsafe_code)");
        // (this file names what it looks for)
        if !uses || rel.contains("/target/") || rel.ends_with("redraft/tests/it/architecture.rs") {
            continue;
        }
        found.push(rel.clone());
        assert!(
            UNSAFE_ALLOWED.iter().any(|(allowed, _)| rel.ends_with(allowed)),
            "{rel} has `unsafe` code: keep it in the sandbox's `sys` module, or add the file to UNSAFE_ALLOWED here and to ARCHITECTURE.md with the reason"
        );
        // Every unsafe block or function is preceded by its SAFETY note.
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let line = line.trim_start();
            if line.starts_with("//") || !identifiers(line).any(|w| w == "unsafe") || line.contains("unsafe_code") {
                continue;
            }
            let noted = lines[..i].iter().rev().take(12).any(|l| l.contains("SAFETY"));
            assert!(noted, "{rel}:{}: `unsafe` without a `SAFETY:` note above it", i + 1);
        }
    }
    for (allowed, why) in UNSAFE_ALLOWED {
        assert!(
            found.iter().any(|f| f.ends_with(allowed)),
            "{allowed} ({why}) has no unsafe code any more: remove it from the list"
        );
    }
}

/// Inside the facade, a provider is built from the config only by the guard (and by
/// `Model::from_name`, the library's local entry): the run's model, its fallbacks and its judges
/// all pass the face's guard, so none can be a command provider the network was not given.
#[test]
fn every_model_a_run_uses_passes_the_guard() {
    let mut files = Vec::new();
    sources(&crates().join("redraft/src"), &mut files);
    for (path, text) in files {
        let rel = path.to_string_lossy().replace('\\', "/");
        if rel.ends_with("src/guard/mod.rs") || rel.ends_with("src/model.rs") {
            continue;
        }
        let code = code_of(&text);
        // Test modules may build models directly.
        let code = code.split("#[cfg(test)]").next().unwrap_or_default();
        for call in [".model(&config.model_name", "config.model(", ".config.model("] {
            assert!(!code.contains(call), "{rel} builds a model with `{call}`: go through `guard.model` instead");
        }
    }
}

/// What in `text` (the file `file` of crate `krate`) writes text out past the redaction of
/// known secrets (`redraft_core::secrets`): each exit has one way out, and this names any other.
fn unredacted_exits(krate: &str, file: &str, text: &str) -> Vec<String> {
    let code = code_of(text);
    let mut found = Vec::new();
    match krate {
        // The binary writes to stdout and stderr only through `redacted` (the crate's `print!`
        // family is shadowed to go there too); it may ask whether stderr is a terminal.
        "redraft-cli" if file != "redacted.rs" => {
            for opener in ["io::stdout()", "io::stderr()", "io::stdout)", "io::stderr)"] {
                for (at, _) in code.match_indices(opener) {
                    let after = &code[at + opener.len()..];
                    if !(after.starts_with(".is_terminal()") || after.starts_with(".flush()")) {
                        found.push(format!("`{opener}` not through `crate::redacted`"));
                    }
                }
            }
            for escape in ["std::print", "std::eprint", "std::println", "std::eprintln"] {
                if code.contains(escape) {
                    found.push(format!("`{escape}!` skips the crate's redacting `print!`"));
                }
            }
        }
        // The router's outermost layer is the redaction of every response.
        "redraft-server" if file == "lib.rs" => {
            let router = code.split("pub fn router(").nth(1).unwrap_or_default();
            let router = router.split("\n}").next().unwrap_or_default();
            let last_layer = router.rsplit(".layer(").next().unwrap_or_default();
            if !last_layer.starts_with("middleware::map_response(redact::response)") {
                found.push("the router's outermost layer is not `redact::response`".into());
            }
        }
        // Every MCP session is served through the redacting writer.
        "redraft-mcp" => {
            for (at, _) in code.match_indices(".serve(") {
                if !code[at..].starts_with(".serve((reader, RedactingWriter::new(writer)))") {
                    found.push("an MCP session served without `RedactingWriter`".into());
                }
            }
        }
        // Every JSON the store writes is made by `json_column`.
        "redraft-store" if file == "rows.rs" => {
            let code = code.split("#[cfg(test)]").next().unwrap_or_default();
            let outside = code
                .split("fn json_column(")
                .enumerate()
                .map(|(i, part)| if i == 0 { part } else { part.split_once("\n}").map_or("", |(_, rest)| rest) })
                .collect::<String>();
            for serializer in
                ["serde_json::to_string(", "serde_json::to_vec(", "serde_json::to_writer(", "value.to_string()"]
            {
                if outside.contains(serializer) {
                    found.push(format!("`{serializer}` in rows.rs outside `json_column`"));
                }
            }
        }
        _ => {}
    }
    found
}

#[test]
fn every_exit_redacts_known_secrets() {
    for krate in ["redraft-cli", "redraft-server", "redraft-mcp", "redraft-store"] {
        let mut files = Vec::new();
        sources(&crates().join(krate).join("src"), &mut files);
        for (path, text) in files {
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            let found = unredacted_exits(krate, &file, &text);
            assert!(found.is_empty(), "{}: {found:?}", path.display());
        }
    }
}

/// A request to a model server is an exit too: every body a provider sends is built by
/// `http::post_json`, which takes known secrets out (and leaves the auth headers alone).
#[test]
fn every_request_to_a_model_goes_through_the_redacting_post() {
    let mut files = Vec::new();
    sources(&crates().join("redraft-providers").join("src"), &mut files);
    for (path, text) in files {
        if path.file_name().is_some_and(|f| f == "http.rs") {
            continue;
        }
        let code = code_of(&text);
        for sender in ["client.post(", "client.put(", "client.request(", ").json("] {
            assert!(
                !code.contains(sender),
                "{} sends with `{sender}`: build the request with `http::post_json`",
                path.display()
            );
        }
    }
}

#[test]
fn the_exit_check_catches_what_it_is_for() {
    for (krate, file, code) in [
        ("redraft-cli", "run.rs", "let mut out = std::io::stdout().lock();"),
        ("redraft-cli", "telemetry.rs", "fmt::layer().with_writer(std::io::stderr)"),
        ("redraft-cli", "run.rs", "std::println!(\"{}\", result);"),
        (
            "redraft-server",
            "lib.rs",
            "pub fn router(state: AppState) -> Router {\n    api.layer(middleware::map_response(redact::response))\n        .layer(other)\n}",
        ),
        ("redraft-mcp", "lib.rs", "let running = server.serve(transport).await;"),
        (
            "redraft-store",
            "rows.rs",
            "fn json_column(v: &V) {\n    serde_json::to_string(v)\n}\nfn encode(a: &A) {\n    serde_json::to_string(a)\n}",
        ),
    ] {
        assert!(!unredacted_exits(krate, file, code).is_empty(), "{krate}/{file}: `{code}` was not caught");
    }
    for (krate, file, code) in [
        ("redraft-cli", "run.rs", "let mut out = crate::redacted::stdout(); let t = std::io::stderr().is_terminal();"),
        (
            "redraft-server",
            "lib.rs",
            "pub fn router(state: AppState) -> Router {\n    api.layer(other)\n        .layer(middleware::map_response(redact::response))\n}",
        ),
        ("redraft-mcp", "lib.rs", "server.serve((reader, RedactingWriter::new(writer))).await"),
        (
            "redraft-store",
            "rows.rs",
            "fn json_column(v: &V) {\n    serde_json::to_string(v)\n}\nfn encode(a: &A) {\n    json_column(a)\n}",
        ),
    ] {
        assert_eq!(unredacted_exits(krate, file, code), Vec::<String>::new(), "{krate}/{file}: `{code}`");
    }
}
