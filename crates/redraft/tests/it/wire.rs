//! The one run request, thrown arbitrary JSON at every field: each request a network face hands
//! over is either refused (it does not parse, or the guard refuses it, and nothing runs) or
//! becomes a run whose every part the guard admitted — a sandbox that passes no variable and
//! keeps the working directory unless the operator named it, no command, URL or file the
//! allow-lists do not admit, no agent, only the configured model.

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use redraft::core::{Ceilings, Directive};
use redraft::guard::{Face, Guard};
use redraft::sandbox::Sandbox;
use redraft::spec::SandboxRequest;
use redraft::{Config, RunSpec, SpecSetup};
use serde_json::{Map, Value, json};

/// Every field the request reads, with the other names it takes: from its own schema, so a
/// field added later is covered too.
fn fields() -> Vec<String> {
    let schema = serde_json::to_value(schemars::schema_for!(RunSpec)).unwrap();
    let mut names: Vec<String> = schema["properties"].as_object().unwrap().keys().cloned().collect();
    // Aliases and fields the schema leaves out.
    names.extend(["target_type", "max_budget", "timeout", "workspace"].map(String::from));
    names
}

/// Strings an attacker would try: inline specs written as text, directives, paths, names.
fn hostile_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(r#"{"env": ["SECRET_X"], "workdir": "/etc"}"#.to_owned()),
        Just(r#" {"network": false}"#.to_owned()),
        Just(r#"{"workdir": "/"}"#.to_owned()),
        Just("trusted".to_owned()),
        Just("private".to_owned()),
        Just("exec:env".to_owned()),
        Just("http://127.0.0.1:9/v".to_owned()),
        Just("schema:creds.json".to_owned()),
        Just("schema:/etc/passwd".to_owned()),
        Just("kind:../../etc".to_owned()),
        Just("mock//etc/passwd".to_owned()),
        Just("command/cmd".to_owned()),
        Just("cmd".to_owned()),
        Just("ok/m".to_owned()),
        Just("../../../../etc/passwd".to_owned()),
        Just("await".to_owned()),
        Just("90s".to_owned()),
        "[ -~]{0,24}",
    ]
}

/// A value of the right type for some field, often hostile: what gets past parsing.
fn plausible() -> impl Strategy<Value = Value> {
    let sandbox_like = (
        prop::option::of(prop::collection::vec(prop_oneof![Just("SECRET_X".to_owned()), "[A-Z_]{1,6}"], 0..2)),
        prop::option::of(prop_oneof![Just("/etc".to_owned()), Just("..".to_owned()), Just("sub".to_owned())]),
        prop::option::of(any::<bool>()),
        prop::option::of(0u64..100),
    )
        .prop_map(|(env, workdir, network, cpu)| {
            let mut o = Map::new();
            if let Some(env) = env {
                o.insert("env".into(), json!(env));
            }
            if let Some(w) = workdir {
                o.insert("workdir".into(), json!(w));
            }
            if let Some(n) = network {
                o.insert("network".into(), json!(n));
            }
            if let Some(c) = cpu {
                o.insert("cpu_seconds".into(), json!(c));
            }
            Value::Object(o)
        });
    prop_oneof![
        3 => hostile_string().prop_map(Value::String),
        2 => (0u64..30).prop_map(|n| json!(n)),
        1 => (0.0f64..2.5).prop_map(|n| json!(n)),
        1 => any::<bool>().prop_map(Value::Bool),
        2 => prop::collection::vec(hostile_string(), 0..3).prop_map(|v| json!(v)),
        3 => sandbox_like,
    ]
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e6f64..1e6).prop_map(|n| json!(n)),
        hostile_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("env".to_owned()),
                        Just("workdir".to_owned()),
                        Just("network".to_owned()),
                        Just("name".to_owned()),
                        Just("parameters".to_owned()),
                        "[a-z_]{1,8}"
                    ],
                    inner
                ),
                0..4
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn config(dir: &Path) -> Config {
    let script = dir.join("script.jsonl");
    std::fs::write(&script, "{\"text\": \"{}\"}\n").unwrap();
    std::fs::write(dir.join("creds.json"), "{\"key\": \"sk-do-not-read\"}").unwrap();
    let text = format!(
        r#"
default_model = "ok/m"
[providers.ok]
type = "mock"
script = "{}"
[providers.cmd]
type = "command"
command = "env"
[sandboxes.trusted]
env = ["SECRET_X"]
workdir = "/tmp"
[sandboxes.private]
env = ["SECRET_X"]
[server]
sandboxes = ["trusted"]
"#,
        script.display()
    );
    Config::parse(&text, Path::new("redraft.toml")).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_request_is_refused_or_checked_by_the_guard(
        picks in prop::collection::vec(
            (any::<prop::sample::Index>(), prop_oneof![4 => plausible(), 1 => arbitrary_json()]),
            1..4,
        )
    ) {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        let names = fields();
        let mut body = Map::new();
        body.insert("prompt".into(), json!("Extract the person."));
        for (index, value) in picks {
            body.insert(index.get(&names).clone(), value);
        }
        let body = Value::Object(body);
        // Refused as it is read: nothing else happens.
        let Ok(spec) = serde_json::from_value::<RunSpec>(body.clone()) else { return Ok(()) };
        for face in [Face::Http, Face::Mcp] {
            let setup = SpecSetup {
                config: &config,
                workdir: dir.path().to_owned(),
                guard: Arc::new(Guard::network(face, &config.server).unwrap()),
                ceilings: Ceilings::default(),
                kinds: None,
            };
            // Refused by the guard (or by the checks beside it): nothing was run.
            let Ok(prepared) = spec.prepare(&setup) else { continue };
            let sandbox = prepared.sandbox.clone().expect("a network run always has a sandbox");
            let named_trusted = spec.sandbox == Some(SandboxRequest::Named("trusted".into()));
            prop_assert!(
                (sandbox.env.is_empty() && sandbox.workdir.is_none()) || (named_trusted && sandbox == config.sandboxes["trusted"]),
                "{body}: the sandbox {sandbox:?} passes variables or moves the working directory"
            );
            prop_assert!(prepared.agent.is_none(), "{body}: an agent command over {face}");
            prop_assert!(spec.workspace.is_none(), "{body}: an agent-mode run over {face}");
            // The only provider a request may use here: the configured mock, whatever model it names.
            let model = prepared.runner.model_name();
            prop_assert!(model.starts_with("ok/"), "{body}: the model `{model}` over {face}");
            for d in spec.directives() {
                prop_assert!(
                    !matches!(d, Directive::Exec(_) | Directive::Http(_) | Directive::Schema(_)),
                    "{body}: `{d}` passed with empty allow-lists and no schema_dir"
                );
            }
        }
    }
}

#[test]
fn a_sandbox_written_as_text_is_only_ever_a_name() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let setup = SpecSetup {
        config: &config,
        workdir: dir.path().to_owned(),
        guard: Arc::new(Guard::network(Face::Http, &config.server).unwrap()),
        ceilings: Ceilings::default(),
        kinds: None,
    };
    for text in [r#"{"env": ["SECRET_X"], "workdir": "/etc"}"#, r#"  {"network": true}"#, "{}"] {
        let spec: RunSpec = serde_json::from_value(json!({"prompt": "p", "sandbox": text})).unwrap();
        let err = spec.prepare(&setup).unwrap_err().to_string();
        assert!(err.contains(&format!("the sandbox `{text}`")) && err.contains("[server] sandboxes"), "{text}: {err}");
    }
    // A configured sandbox is open to requests only when the server lists it.
    let spec: RunSpec = serde_json::from_value(json!({"prompt": "p", "sandbox": "private"})).unwrap();
    let err = spec.prepare(&setup).unwrap_err().to_string();
    assert!(err.contains("the sandbox `private`") && err.contains("over HTTP"), "{err}");
    let spec: RunSpec = serde_json::from_value(json!({"prompt": "p", "sandbox": "trusted"})).unwrap();
    assert_eq!(spec.prepare(&setup).unwrap().sandbox.as_ref(), config.sandboxes.get("trusted"));
    // The same spec as an object is an inline sandbox, which may not pass variables over the
    // network; a harmless one is taken as it is.
    let spec: RunSpec =
        serde_json::from_value(json!({"prompt": "p", "sandbox": {"env": ["SECRET_X"], "workdir": "/etc"}})).unwrap();
    let err = spec.prepare(&setup).unwrap_err().to_string();
    assert!(err.contains("inline sandbox") && err.contains("over HTTP"), "{err}");
    let spec: RunSpec = serde_json::from_value(json!({"prompt": "p", "sandbox": {"cpu_seconds": 5}})).unwrap();
    let sandbox = spec.prepare(&setup).unwrap().sandbox.unwrap();
    assert_eq!(sandbox, Sandbox { cpu_seconds: Some(5), ..Sandbox::default() });
}

#[test]
fn the_judge_and_the_fallbacks_pass_the_guard_too() {
    // A command provider the network was not given, as the judge or as a fallback model.
    let dir = tempfile::tempdir().unwrap();
    let base = config(dir.path());
    let judged = Config { judge_model: Some("cmd/j".into()), ..base.clone() };
    let falling_back = Config { fallback_models: vec!["cmd/f".into()], ..base };
    for (config, spec) in
        [(judged, json!({"prompt": "p", "evaluator": "score:polite"})), (falling_back, json!({"prompt": "p"}))]
    {
        let spec: RunSpec = serde_json::from_value(spec).unwrap();
        for face in [Face::Http, Face::Mcp] {
            let setup = SpecSetup {
                config: &config,
                workdir: dir.path().to_owned(),
                guard: Arc::new(Guard::network(face, &config.server).unwrap()),
                ceilings: Ceilings::default(),
                kinds: None,
            };
            let err = spec.prepare(&setup).unwrap_err().to_string();
            assert!(err.contains("`cmd/") && err.contains("command_providers"), "{face}: {err}");
        }
        // Locally, the user's own config is theirs to use.
        assert!(spec.prepare(&SpecSetup::local(&config, dir.path().to_owned())).is_ok());
    }
}
