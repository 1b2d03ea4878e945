//! Pages in Chromium with `--dump-dom`: one at another origin that tries to make the server run a
//! model, and the viewer at the server's own.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use axum::Router;
use axum::response::Html;
use axum::routing::get;
use redraft_testkit::reply;
use serde_json::Value;

use super::{chromium, serve, serve_logged};
use crate::harness;

/// Load `url` in headless Chromium, let its scripts and requests finish, and return the DOM.
async fn dump_dom(chromium: PathBuf, url: String) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            // Virtual time runs only while no request is pending: the DOM is dumped after the
            // page's requests are answered, however long they take.
            "--virtual-time-budget=20000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let done = tokio::task::spawn_blocking(move || {
        let errors = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let mut dom = String::new();
        stdout.read_to_string(&mut dom).unwrap();
        let status = child.wait().unwrap();
        (status, dom, errors.join().unwrap_or_default())
    });
    let Ok(finished) = tokio::time::timeout(Duration::from_secs(120), done).await else {
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        panic!("Chromium did not finish within 120 s");
    };
    let (status, dom, errors) = finished.unwrap();
    assert!(status.success(), "Chromium failed ({status}):\n{errors}");
    drop(profile);
    dom
}

/// A page at another origin that tries to make the server run a model. It writes what each
/// attempt saw into `#out` when all are done.
fn hostile_page(target: &str) -> String {
    format!(
        r#"<!doctype html><html><body><pre id="out">pending</pre>
<iframe name="sink" id="sink"></iframe>
<form id="form" method="POST" action="{target}/v1/iterate" enctype="text/plain" target="sink">
  <input type="hidden" name='{{"prompt": "Which city?", "schema": {{"type": "object"}}, "system": "' value='"}}'>
</form>
<script>
const target = "{target}";
const spec = JSON.stringify({{prompt: "Which city?", schema: {{type: "object"}}}});
const chat = JSON.stringify({{model: "fake/m", messages: [{{role: "user", content: "Which city?"}}]}});
const out = [];
async function attempt(name, path, init) {{
  try {{
    const r = await fetch(target + path, init);
    out.push(name + "=" + (r.type === "opaque" ? "opaque" : r.status));
  }} catch (e) {{
    out.push(name + "=blocked");
  }}
}}
(async () => {{
  await attempt("cors-text-plain", "/v1/iterate", {{method: "POST", body: spec, headers: {{"content-type": "text/plain"}}}});
  await attempt("no-cors-text-plain", "/v1/iterate", {{method: "POST", body: spec, headers: {{"content-type": "text/plain"}}, mode: "no-cors"}});
  await attempt("no-cors-string", "/v1/runs", {{method: "POST", body: spec, mode: "no-cors"}});
  await attempt("no-cors-untyped-blob", "/v1/runs", {{method: "POST", body: new Blob([spec]), mode: "no-cors"}});
  await attempt("no-cors-proxy", "/v1/chat/completions", {{method: "POST", body: chat, headers: {{"content-type": "text/plain"}}, mode: "no-cors"}});
  await attempt("cors-json", "/v1/iterate", {{method: "POST", body: spec, headers: {{"content-type": "application/json"}}}});
  await attempt("cors-read-runs", "/v1/runs", {{}});
  await new Promise((done) => {{
    document.getElementById("sink").onload = () => {{ out.push("form=posted"); done(); }};
    document.getElementById("form").submit();
  }});
  document.getElementById("out").textContent = out.join(" ");
}})();
</script></body></html>"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_at_another_origin_starts_no_run() {
    let Some(chromium) = chromium("origins::a_page_at_another_origin_starts_no_run") else { return };
    let h = harness(vec![reply(r#"{"city": "Toledo"}"#); 8]).await;
    let (target, log) = serve_logged(&h).await;
    let page = hostile_page(&target);
    let attacker = serve(Router::new().route("/", get(move || async move { Html(page) }))).await;
    assert_ne!(attacker, target);

    let dom = dump_dom(chromium, format!("{attacker}/")).await;
    let out = dom.split("<pre id=\"out\">").nth(1).and_then(|rest| rest.split("</pre>").next()).unwrap_or_default();
    let seen: Vec<&str> = out.split_whitespace().collect();
    // The script ran to its end; the browser let it read nothing of the server's answers.
    assert_eq!(
        seen,
        [
            "cors-text-plain=blocked",
            "no-cors-text-plain=opaque",
            "no-cors-string=opaque",
            "no-cors-untyped-blob=opaque",
            "no-cors-proxy=opaque",
            "cors-json=blocked",
            "cors-read-runs=blocked",
            "form=posted",
        ],
        "{dom}"
    );
    let log = log.lock().unwrap().clone();
    println!("the server saw: {log:?}");
    assert_eq!(h.model.calls().await, 0, "the model was called: {log:?}");
    let runs = h.call("GET", "/v1/runs", None).await;
    assert_eq!(runs.json["runs"], Value::Array(vec![]), "a run was stored: {log:?}");
    // The requests did reach the server, which refused each of them.
    let posts: Vec<_> = log.iter().filter(|(m, _, _)| m == "POST").collect();
    assert_eq!(posts.len(), 6, "{log:?}");
    assert!(log.iter().all(|(_, _, status)| [403, 415].contains(status)), "{log:?}");
    assert!(log.iter().any(|(m, _, s)| m == "OPTIONS" && *s == 403), "the JSON request's preflight: {log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_lists_runs_in_a_browser() {
    let Some(chromium) = chromium("origins::the_viewer_lists_runs_in_a_browser") else { return };
    let h = harness(vec![reply(r#"{"city": "Toledo"}"#)]).await;
    let spec = serde_json::json!({"prompt": "Which city?", "schema": {"type": "object"}});
    let run_id = h.call("POST", "/v1/iterate", Some(spec)).await.json["run_id"].as_str().unwrap().to_owned();
    let (target, log) = serve_logged(&h).await;

    let dom = dump_dom(chromium, format!("{target}/")).await;
    assert!(dom.contains(&format!("data-id=\"{run_id}\"")), "the run is not listed:\n{dom}");
    let log = log.lock().unwrap().clone();
    assert!(log.iter().any(|(m, p, s)| m == "GET" && p == "/v1/runs" && *s == 200), "{log:?}");
    // Every request of the page and its script was served (the browser's own favicon request
    // finds no such endpoint).
    assert!(log.iter().filter(|(_, p, _)| p != "/favicon.ico").all(|(_, _, s)| *s == 200), "{log:?}");
}
