//! A real browser against the real server: headless Chromium loads a page from another
//! 127.0.0.1 port whose script tries every request a page can send without asking (CORS
//! "simple requests", `no-cors` fetches, a form posted into a frame); none may start a run or
//! call the model. And the run viewer keeps working from its own origin.
//!
//! The viewer is driven over the DevTools protocol ([`crate::cdp`]): a run's own URL opens it
//! with its task, attempts, diffs and chart; an answer typed into the page continues a run
//! awaiting one; nothing overlaps from 800 to 1920 px; what a reader opened stays open while
//! the run goes on; and the page asks for a token when the server wants one.
//!
//! Needs Chromium: `$REDRAFT_CHROMIUM`, else `/usr/bin/chromium`. Without it the tests print a
//! SKIP line and pass, unless `REDRAFT_CHROMIUM` is set (CI sets it, so there a missing browser
//! fails).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use redraft::config::Config;
use redraft_testkit::reply;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::cdp::{Browser, Page, js_string};
use crate::{CITY_SCHEMA, Harness, harness, harness_with};

/// The browser, or `None` after printing why the test is skipped.
fn chromium(test: &str) -> Option<PathBuf> {
    let (path, required) = match std::env::var_os("REDRAFT_CHROMIUM").filter(|p| !p.is_empty()) {
        Some(p) => (PathBuf::from(p), true),
        None => (PathBuf::from("/usr/bin/chromium"), false),
    };
    if path.is_file() {
        return Some(path);
    }
    assert!(!required, "REDRAFT_CHROMIUM names `{}`, which does not exist", path.display());
    // Straight to stderr: the test harness captures `eprintln!` of passing tests.
    let _ = writeln!(
        std::io::stderr(),
        "SKIP browser::{test}: Chromium is not installed at {} (install the `chromium` package or set REDRAFT_CHROMIUM)",
        path.display()
    );
    None
}

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

/// Every request that reaches the server under test: method, path, status.
type Log = Arc<Mutex<Vec<(String, String, u16)>>>;

async fn record(State(log): State<Log>, request: Request, next: Next) -> Response {
    let (method, path) = (request.method().to_string(), request.uri().path().to_owned());
    let response = next.run(request).await;
    log.lock().unwrap().push((method, path, response.status().as_u16()));
    response
}

/// Serve `app` on 127.0.0.1, on a port of its own; its address.
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// The server under test, with every request it gets logged.
async fn serve_logged(h: &Harness) -> (String, Log) {
    let log = Log::default();
    let app = h.app.clone().layer(middleware::from_fn_with_state(log.clone(), record));
    (serve(app).await, log)
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
    let Some(chromium) = chromium("a_page_at_another_origin_starts_no_run") else { return };
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
    let Some(chromium) = chromium("the_viewer_lists_runs_in_a_browser") else { return };
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

// ---------------------------------------------------------------------------------------------
// The viewer, driven over the DevTools protocol.

/// A test config's tweak: `fake/m` has a price, so attempts and runs have a cost.
fn priced(c: &mut Config) {
    c.models.insert("fake/m".into(), redraft::Price { input_usd_per_mtok: 2.5, output_usd_per_mtok: 10.0 });
}

/// Chromium with one tab, `width` px wide, on `url` once it loaded.
async fn open(chromium: &std::path::Path, url: &str, width: u32) -> (Browser, Page) {
    let browser = Browser::launch(chromium);
    let page = browser.page().await;
    page.set_width(width).await;
    page.navigate(url).await;
    (browser, page)
}

/// How many requests the server saw for `method path`, and whether all were answered `status`.
fn seen(log: &Log, method: &str, path: &str) -> Vec<u16> {
    log.lock().unwrap().iter().filter(|(m, p, _)| m == method && p == path).map(|(_, _, s)| *s).collect()
}

/// The stored run, as `GET /v1/runs/{id}` has it.
async fn stored(h: &Harness, run_id: &str) -> Value {
    h.call("GET", &format!("/v1/runs/{run_id}"), None).await.json
}

/// Start a run in the background; its id.
async fn start_run(h: &Harness, spec: Value) -> String {
    let a = h.call("POST", "/v1/runs", Some(spec)).await;
    assert_eq!(a.status, 202, "{}", a.text);
    a.json["run_id"].as_str().unwrap().to_owned()
}

/// The page must not have thrown or logged an error.
fn assert_no_page_errors(page: &Page) {
    let errors = page.errors();
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
}

const DETAIL_STATE: &str = "document.querySelector('#detail').dataset.state";

fn attempts_shown(n: usize) -> String {
    format!("document.querySelectorAll('#detail .attempt').length === {n}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_url_opens_it_with_its_task_diff_and_chart() {
    let Some(chromium) = chromium("a_runs_url_opens_it_with_its_task_diff_and_chart") else { return };
    let hostile = r#"Which city? <script>window.pwned = "prompt script"</script><img src=x onerror="window.pwned = 'prompt img'">"#;
    let h = harness_with(
        vec![
            reply("The contract is governed by the laws of Ohio; the courts of Toledo have jurisdiction.\n{\"town\": \"Toledo\"}"),
            reply(r#"{"city": ["Toledo", "Ohio"]}"#),
            reply(r#"{"city": "Toledo"}"#),
            reply(r#"Sure! <img src=x onerror="window.pwned = 'raw img'"><script>window.pwned = 'raw script'</script> {"city": "Toledo"}"#),
        ],
        vec![],
        priced,
    )
    .await;
    let schema = serde_json::from_str::<Value>(CITY_SCHEMA).unwrap();
    let spec = json!({
        "prompt": "Which city's courts have jurisdiction over this contract? Answer with the city alone.",
        "system": "You extract fields from contracts and answer with one JSON object.",
        "context": {"contract": "C-17", "clause_12": "This Agreement is governed by the laws of the State of Ohio. Any dispute shall be brought before the courts of Toledo."},
        "schema": schema,
        "max_iterations": 3,
        "patience": 3,
    });
    let done = h.call("POST", "/v1/iterate", Some(spec)).await;
    assert_eq!(done.status, 200, "{}", done.text);
    let run_id = done.json["run_id"].as_str().unwrap().to_owned();
    let history = done.json["history"].as_array().unwrap().clone();
    assert_eq!(history.len(), 3, "{}", done.text);
    let spec = json!({
        "prompt": hostile,
        "system": "You answer with one JSON object. <b onmouseover=alert(1)>bold</b>",
        "context": {"note": "<img src=x onerror=\"window.pwned = 'context'\">"},
        "schema": schema,
    });
    let bad = h.call("POST", "/v1/iterate", Some(spec)).await;
    assert_eq!(bad.status, 200, "{}", bad.text);
    let bad_id = bad.json["run_id"].as_str().unwrap().to_owned();
    let (target, log) = serve_logged(&h).await;

    let (_browser, page) = open(&chromium, &format!("{target}/runs/{run_id}"), 1400).await;
    page.wait_for(&format!("{} && {DETAIL_STATE} === 'succeeded'", attempts_shown(3))).await;
    // The task and the evaluators and policy.
    let task = page.eval("document.querySelector('#task').textContent").await;
    let task = task.as_str().unwrap();
    for part in ["Which city's courts have jurisdiction", "You extract fields from contracts", "courts of Toledo"] {
        assert!(task.contains(part), "`{part}` is not in the task: {task}");
    }
    let evaluators = page.eval("document.querySelector('#evaluators').textContent").await;
    let evaluators = evaluators.as_str().unwrap();
    for word in ["schema", "max attempts", "patience"] {
        assert!(evaluators.contains(word), "`{word}` is not in the evaluators: {evaluators}");
    }
    // Each attempt: what the model was told (the prompt, then the feedback), its issues, its diff.
    for (i, attempt) in history.iter().enumerate() {
        let told = attempt["prompt"].as_str().unwrap_or_else(|| panic!("attempt {} has no prompt: {attempt}", i + 1));
        let shown = page
            .eval(&format!(
                "(() => {{ const p = document.querySelector('.attempt[data-iteration=\"{}\"] pre.prompt');
                   return p && p.closest('details').open && p.getBoundingClientRect().height > 0 ? p.textContent : null; }})()",
                i + 1
            ))
            .await;
        assert_eq!(shown.as_str(), Some(told), "attempt {}'s prompt is not shown", i + 1);
    }
    assert_ne!(history[1]["prompt"], history[0]["prompt"], "attempt 2 was told the feedback");
    let issues = page.eval("document.querySelector('.attempt[data-iteration=\"2\"] .issues').textContent").await;
    let first_issue = history[1]["issues"][0]["message"].as_str().unwrap();
    assert!(issues.as_str().unwrap().contains(first_issue), "{issues} lacks {first_issue}");
    let diffs = page
        .eval("[...document.querySelectorAll('.diff')].filter((d) => d.querySelector('.add') && d.querySelector('.del')).length")
        .await;
    assert!(diffs.as_u64() >= Some(2), "diffs with added and removed lines: {diffs}");
    let last = page
        .eval("[...document.querySelectorAll('.attempt[data-iteration=\"3\"] .diff .line')].map((l) => l.className + ' ' + l.textContent)")
        .await;
    let last: Vec<&str> = last.as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(
        last.contains(&"line del -   \"city\": [") && last.contains(&"line add +   \"city\": \"Toledo\""),
        "{last:?}"
    );
    // The chart: a point and a bar per attempt, and the cost known.
    let chart = page
        .eval("[document.querySelectorAll('#chart circle.point.score').length, document.querySelectorAll('#chart rect.bar').length, document.querySelectorAll('#chart .point.cost').length]")
        .await;
    assert_eq!(chart, json!([3, 3, 3]));
    // It is selected in the list beside it.
    page.wait_for(&format!("document.querySelector('tr.run.selected')?.dataset.id === {}", js_string(&run_id))).await;
    if let Some(path) = std::env::var_os("REDRAFT_VIEWER_SCREENSHOT").filter(|p| !p.is_empty()) {
        page.eval("window.scrollTo(0, 0)").await;
        page.screenshot_page(std::path::Path::new(&path), 2200).await;
    }

    // Another run, from the list: its own URL, hostile markup shown as text.
    page.click(&format!("tr.run[data-id={}] a", js_string(&bad_id))).await;
    page.wait_for(&format!(
        "location.pathname === {} && document.querySelector('#detail').dataset.runId === {} && {} && {DETAIL_STATE} === 'succeeded'",
        js_string(&format!("/runs/{bad_id}")),
        js_string(&bad_id),
        attempts_shown(1)
    ))
    .await;
    let task = page.eval("document.querySelector('#task').textContent").await;
    let task = task.as_str().unwrap();
    assert!(task.contains(hostile) && task.contains("<b onmouseover=alert(1)>bold</b>"), "not shown as given: {task}");
    let raw = page.eval("document.querySelector('.attempt[data-iteration=\"1\"] pre.raw').textContent").await;
    assert!(raw.as_str().unwrap().contains(r#"<img src=x onerror="window.pwned = 'raw img'">"#), "{raw}");
    page.click(".attempt[data-iteration=\"1\"] details.raw-box > summary").await;
    let injected = page.eval("document.querySelectorAll('main img, main script, main b[onmouseover]').length").await;
    assert_eq!(injected, json!(0), "markup from the run made it into the page");
    assert_eq!(page.eval("typeof window.pwned").await, json!("undefined"), "a script from the run ran");
    // Back: the first run again, at its URL.
    page.eval("history.back()").await;
    page.wait_for(&format!(
        "location.pathname === {} && document.querySelector('#detail').dataset.runId === {} && {}",
        js_string(&format!("/runs/{run_id}")),
        js_string(&run_id),
        attempts_shown(3)
    ))
    .await;
    assert_no_page_errors(&page);
    // A halted run needs no events: one read each time it is opened, and every request answered.
    assert_eq!(seen(&log, "GET", &format!("/v1/runs/{run_id}")), [200, 200]);
    assert_eq!(seen(&log, "GET", &format!("/v1/runs/{bad_id}")), [200]);
    assert!(seen(&log, "GET", &format!("/v1/runs/{run_id}/events")).is_empty());
    let log = log.lock().unwrap().clone();
    assert!(log.iter().all(|(_, _, s)| *s == 200), "{log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_filters_searches_and_pages() {
    let Some(chromium) = chromium("the_list_filters_searches_and_pages") else { return };
    let right = reply(r#"{"city": "Toledo"}"#);
    let h = harness_with(
        vec![right.clone(), right.clone(), right.clone(), reply(r#"{"town": "Toledo"}"#), right],
        vec![],
        |_| {},
    )
    .await;
    let schema = serde_json::from_str::<Value>(CITY_SCHEMA).unwrap();
    let mut ids = Vec::new();
    for (prompt, extra) in [
        ("Which city? (alpha)", json!({})),
        ("Which city? (bravo)", json!({})),
        ("Which city? (zebra crossing)", json!({})),
        ("Which city? (failing)", json!({"max_iterations": 1})),
        ("Which city? (by kind)", json!({"kind": "city", "context": {"city": "Toledo"}})),
    ] {
        let mut spec = json!({"prompt": prompt, "schema": schema});
        if extra.get("kind").is_some() {
            spec = json!({"prompt": prompt});
        }
        spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let a = h.call("POST", "/v1/iterate", Some(spec)).await;
        assert!([200, 422].contains(&a.status), "{}", a.text);
        ids.push(a.json["run_id"].as_str().unwrap().to_owned());
    }
    let (target, _log) = serve_logged(&h).await;
    let rows = "[...document.querySelectorAll('#runs tr.run')].map((r) => r.dataset.id)";
    let newest: Vec<String> = ids.iter().rev().cloned().collect();

    // Two a page, newest first.
    let (_browser, page) = open(&chromium, &format!("{target}/?limit=2"), 1400).await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!(newest[..2]).to_string()))).await;
    assert_eq!(
        page.eval("[document.querySelector('#prev').disabled, document.querySelector('#next').disabled]").await,
        json!([true, false])
    );
    page.click("#next").await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!(newest[2..4]).to_string()))).await;
    assert_eq!(page.eval("location.search").await, json!("?offset=2&limit=2"));
    page.click("#next").await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!(newest[4..]).to_string()))).await;
    assert_eq!(
        page.eval("[document.querySelector('#prev').disabled, document.querySelector('#next').disabled]").await,
        json!([false, true])
    );
    page.click("#prev").await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!(newest[2..4]).to_string()))).await;

    // Filters start again from the first page.
    page.eval("document.querySelector('#status').value = 'failed'; document.querySelector('#status').dispatchEvent(new Event('change'))").await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!([ids[3]]).to_string()))).await;
    assert_eq!(page.eval("location.search").await, json!("?status=failed&limit=2"));
    page.eval("document.querySelector('#status').value = ''; document.querySelector('#status').dispatchEvent(new Event('change'))").await;
    page.type_into("#q", "ZEBRA").await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!([ids[2]]).to_string()))).await;
    page.eval("document.querySelector('#q').value = ''").await;
    page.type_into("#kind", "city").await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!([ids[4]]).to_string()))).await;
    page.eval("document.querySelector('#kind').value = ''").await;
    page.type_into("#model", "fake/nope").await;
    page.wait_for("document.querySelector('#runs tr.empty')").await;

    // A row opens its run at its URL, filters kept; the browser's back button closes it.
    page.eval("document.querySelector('#model').value = ''; document.querySelector('#filters').requestSubmit()").await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!(newest[..2]).to_string()))).await;
    page.click(&format!("tr.run[data-id={}] td:nth-child(4)", js_string(&ids[4]))).await;
    page.wait_for(&format!("{} && {DETAIL_STATE} === 'succeeded'", attempts_shown(1))).await;
    assert_eq!(page.eval("location.pathname + location.search").await, json!(format!("/runs/{}?limit=2", ids[4])));
    page.eval("history.back()").await;
    page.wait_for("location.pathname === '/' && !document.querySelector('#detail .attempt') && !document.querySelector('tr.run.selected')").await;
    page.eval("history.forward()").await;
    page.wait_for(&format!(
        "location.pathname === {} && {}",
        js_string(&format!("/runs/{}", ids[4])),
        attempts_shown(1)
    ))
    .await;
    assert_no_page_errors(&page);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_typed_in_the_box_continues_an_awaiting_run() {
    let Some(chromium) = chromium("an_answer_typed_in_the_box_continues_an_awaiting_run") else { return };
    let h = harness(vec![reply(r#"{"town": "Toledo"}"#), reply(r#"{"city": "Toledo"}"#)]).await;
    let spec = json!({
        "prompt": "Which city is the contract in?",
        "schema": serde_json::from_str::<Value>(CITY_SCHEMA).unwrap(),
        "max_iterations": 1,
        "on_escalation": "await",
    });
    let run_id = start_run(&h, spec).await;
    let waiting = h.finished(&run_id).await;
    assert_eq!(waiting["status"], "awaiting_input", "{waiting}");
    let (target, log) = serve_logged(&h).await;

    let (_browser, page) = open(&chromium, &format!("{target}/runs/{run_id}"), 1400).await;
    page.wait_for(&format!("{DETAIL_STATE} === 'awaiting_input' && document.querySelector('#answer')")).await;
    let question = waiting["escalation"]["question"].as_str().unwrap();
    let escalation = page.eval("document.querySelector('#escalation').textContent").await;
    assert!(escalation.as_str().unwrap().contains(question), "{escalation}");
    let answer = "The contract says Toledo: answer {\"city\": \"Toledo\"}.";
    page.type_into("#answer", answer).await;
    // What is typed survives the list refreshing around it.
    page.eval("loadRuns()").await;
    page.wait_for("document.querySelector('#runs tr.run')").await;
    assert_eq!(page.eval("document.querySelector('#answer').value").await, json!(answer));
    page.click("#answer-send").await;

    page.wait_for(&format!("{DETAIL_STATE} === 'succeeded' && {}", attempts_shown(2))).await;
    let reply = page.eval("document.querySelector('.attempt[data-iteration=\"2\"] .reply-answer').textContent").await;
    assert_eq!(reply, json!(answer));
    assert_eq!(page.eval("document.querySelector('#answer')").await, Value::Null, "the answer box is gone");
    // The store agrees.
    let run = stored(&h, &run_id).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["history"].as_array().map(Vec::len), Some(2), "{run}");
    assert_eq!(run["history"][1]["reply"]["answer"], answer, "{run}");
    assert_eq!(seen(&log, "POST", &format!("/v1/runs/{run_id}/answer")), [202]);
    assert!(
        seen(&log, "GET", &format!("/v1/runs/{run_id}/events")).contains(&200),
        "the page followed the run's events"
    );
    assert_no_page_errors(&page);
}

/// Every pair of boxes among the page's main elements that overlap, and what sticks out.
const OVERLAPS: &str = r##"(() => {
  const shown = (e) => { const s = getComputedStyle(e); return s.display !== "none" && s.visibility !== "hidden"; };
  // The part of an element its scrolling or clipping ancestors let show.
  const visible = (e) => {
    const r = e.getBoundingClientRect();
    const box = { l: r.left, t: r.top, r: r.right, b: r.bottom };
    for (let p = e.parentElement; p; p = p.parentElement) {
      const s = getComputedStyle(p), q = p.getBoundingClientRect();
      if (s.overflowX !== "visible") { box.l = Math.max(box.l, q.left); box.r = Math.min(box.r, q.right); }
      if (s.overflowY !== "visible") { box.t = Math.max(box.t, q.top); box.b = Math.min(box.b, q.bottom); }
    }
    return box;
  };
  const name = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
    (typeof e.className === "string" && e.className.trim() ? "." + e.className.trim().split(/\s+/).join(".") : "") +
    (e.closest("tr") ? "[row " + e.closest("tr").rowIndex + "]" : "");
  const selectors = ["header#top", "header#top > *", "#list", "#filters > *", "#pager > *", "#runs-table th", "#runs-table td",
    "#detail", "#detail > *", "#detail .pair > *", "#run-head .facts > div", "#chart", ".attempt", ".attempt-head > *",
    "#answer-form", "#answer-form > *", "#answer-form .answer-row > *"];
  const els = [...new Set(selectors.flatMap((s) => [...document.querySelectorAll(s)]))].filter(shown);
  const boxes = els.map((e) => [e, visible(e)]).filter(([, b]) => b.r - b.l > 0.5 && b.b - b.t > 0.5);
  const out = [];
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, p] = boxes[i], [b, q] = boxes[j];
      if (a.contains(b) || b.contains(a)) continue;
      const w = Math.min(p.r, q.r) - Math.max(p.l, q.l), h = Math.min(p.b, q.b) - Math.max(p.t, q.t);
      if (w > 1 && h > 1) out.push(`${name(a)} overlaps ${name(b)} by ${w.toFixed(0)}x${h.toFixed(0)}`);
    }
  }
  const root = document.documentElement;
  if (root.scrollWidth > innerWidth + 1) out.push(`the page scrolls sideways: ${root.scrollWidth} > ${innerWidth}`);
  for (const [outer, inner] of [["#detail", "#detail .card, #detail .attempt, #detail pre, #detail svg, #detail textarea, #detail button"],
                                ["#list", "#list table, #filters, #pager, #list button"]]) {
    const o = document.querySelector(outer).getBoundingClientRect();
    for (const e of document.querySelectorAll(inner)) {
      const r = e.getBoundingClientRect();
      if (shown(e) && r.width > 0 && (r.left < o.left - 1 || r.right > o.right + 1)) out.push(`${name(e)} sticks out of ${outer}`);
    }
  }
  return out;
})()"##;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_overlaps_from_800_to_1920_px() {
    let Some(chromium) = chromium("nothing_overlaps_from_800_to_1920_px") else { return };
    let long_word = "Springfield-".repeat(150);
    let long_prompt = format!(
        "Which city is the contract in? {} And one word that never breaks: {long_word}",
        "Read the whole contract, clause by clause, and the annexes too. ".repeat(40)
    );
    let long_raw = format!(
        "{} {{\"town\": \"{}\"}}",
        "Let me think about where this contract was signed...".repeat(60),
        "T".repeat(600)
    );
    let h = harness_with(
        vec![reply(r#"{"city": "Toledo"}"#), reply(r#"{"town": "Toledo"}"#), reply(&long_raw)],
        vec![],
        priced,
    )
    .await;
    let schema = serde_json::from_str::<Value>(CITY_SCHEMA).unwrap();
    let ok = h.call("POST", "/v1/iterate", Some(json!({"prompt": "Which city?", "schema": schema}))).await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    let failed = h
        .call("POST", "/v1/iterate", Some(json!({"prompt": "Which city?", "schema": schema, "max_iterations": 1})))
        .await;
    assert_eq!(failed.status, 422, "{}", failed.text);
    let spec = json!({"prompt": long_prompt, "schema": schema, "max_iterations": 1, "on_escalation": "await",
                      "context": {"contract": long_word}});
    let run_id = start_run(&h, spec).await;
    assert_eq!(h.finished(&run_id).await["status"], "awaiting_input");
    let (target, log) = serve_logged(&h).await;

    let (_browser, page) = open(&chromium, &format!("{target}/runs/{run_id}"), 800).await;
    page.wait_for(&format!("{DETAIL_STATE} === 'awaiting_input' && document.querySelector('#answer')")).await;
    page.wait_for("document.querySelectorAll('#runs tr.run').length === 3").await;
    let dir = crate::cdp::artifacts_dir("viewer");
    for width in [800, 1400, 1920] {
        page.set_width(width).await;
        page.eval("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))").await;
        let stacked = page
            .eval("document.querySelector('#list').getBoundingClientRect().bottom <= document.querySelector('#detail').getBoundingClientRect().top")
            .await;
        assert_eq!(stacked, json!(width < 1100), "at {width} px the list is above the detail only below 1100 px");
        let overlaps = page.eval(OVERLAPS).await;
        page.screenshot(&dir.join(format!("viewer-{width}.png"))).await;
        assert_eq!(overlaps, json!([]), "at {width} px (see {})", dir.display());
    }
    // Aborting takes two clicks; then the run has failed, here and in the store.
    page.click("#abort").await;
    page.wait_for("document.querySelector('#abort').textContent.includes('again')").await;
    assert_eq!(stored(&h, &run_id).await["state"], "awaiting_input");
    page.click("#abort").await;
    page.wait_for(&format!("{DETAIL_STATE} === 'failed' && !document.querySelector('#answer')")).await;
    assert_eq!(seen(&log, "POST", &format!("/v1/runs/{run_id}/abort")), [200]);
    assert_eq!(stored(&h, &run_id).await["status"], "failed");
    assert_no_page_errors(&page);
}

/// An answer of a [`Gated`] model, and what it waits for (`None`: nothing).
type GatedAnswer = (String, Option<Arc<Notify>>);

/// A model whose answers come in order, each when the test lets it.
#[derive(Clone)]
struct Gated(Arc<Mutex<VecDeque<GatedAnswer>>>);

async fn gated_answer(State(script): State<Gated>) -> Response {
    let next = script.0.lock().unwrap().pop_front();
    let Some((text, gate)) = next else {
        return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "unexpected call: the script is exhausted")
            .into_response();
    };
    if let Some(gate) = gate {
        gate.notified().await;
    }
    Json(redraft_testkit::completion(&text)).into_response()
}

/// Serve `answers` as an OpenAI-compatible model; its base URL (ending in `/v1`).
async fn gated_model(answers: Vec<GatedAnswer>) -> String {
    let app = Router::new()
        .route("/v1/chat/completions", post(gated_answer))
        .with_state(Gated(Arc::new(Mutex::new(answers.into()))));
    format!("{}/v1", serve(app).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opened_sections_stay_open_while_the_run_goes_on() {
    let Some(chromium) = chromium("opened_sections_stay_open_while_the_run_goes_on") else { return };
    let second = Arc::new(Notify::new());
    let wrong = format!("{} {{\"town\": \"Toledo\"}}", "A long preamble that scrolls sideways. ".repeat(40));
    let model = gated_model(vec![(wrong, None), (r#"{"city": "Toledo"}"#.into(), Some(second.clone()))]).await;
    let h = harness_with(vec![], vec![], |c| {
        c.providers.get_mut("fake").unwrap().base_url = Some(model);
    })
    .await;
    let spec = json!({"prompt": "Which city is the contract in?", "schema": serde_json::from_str::<Value>(CITY_SCHEMA).unwrap()});
    let run_id = start_run(&h, spec).await;
    // Attempt 1 is recorded; attempt 2 waits for the gate.
    let mut tick = tokio::time::interval(Duration::from_millis(25));
    for n in 0.. {
        tick.tick().await;
        let run = stored(&h, &run_id).await;
        if run["history"].as_array().is_some_and(|h| h.len() == 1) {
            break;
        }
        assert!(n < 800, "attempt 1 was not recorded: {run}");
    }
    let (target, log) = serve_logged(&h).await;

    let (_browser, page) = open(&chromium, &format!("{target}/runs/{run_id}"), 1400).await;
    page.wait_for(&format!("{} && {DETAIL_STATE} === 'running'", attempts_shown(1))).await;
    page.wait_for("!document.querySelector('#progress').hidden && document.querySelector('#progress').textContent.includes('Attempt 2')").await;
    // A reader opens attempt 1's raw output, scrolls it sideways, and scrolls the page to it.
    let raw = ".attempt[data-iteration=\"1\"] details.raw-box";
    assert_eq!(page.eval(&format!("document.querySelector({}).open", js_string(raw))).await, json!(false));
    page.click(&format!("{raw} > summary")).await;
    page.wait_for(&format!("document.querySelector({}).open", js_string(raw))).await;
    let before = page
        .eval(&format!(
            "(() => {{ const d = document.querySelector({}); const pre = d.querySelector('pre');
               pre.scrollLeft = 120; window.kept = {{ d, pre, task: document.querySelector('#task'), head: document.querySelector('#run-head') }};
               d.scrollIntoView({{block: 'start'}}); return [pre.scrollLeft, scrollY, d.getBoundingClientRect().top]; }})()",
            js_string(raw)
        ))
        .await;
    assert!(before[0].as_f64() > Some(0.0) && before[1].as_f64() > Some(0.0), "{before}");

    second.notify_one();
    page.wait_for(&format!("{} && {DETAIL_STATE} === 'succeeded'", attempts_shown(2))).await;
    let after = page
        .eval(&format!(
            "(() => {{ const k = window.kept, d = document.querySelector({});
               return [k.d === d && d.isConnected && d.open, k.pre.isConnected && k.pre.scrollLeft, k.task.isConnected && k.head.isConnected,
                       scrollY, d.getBoundingClientRect().top]; }})()",
            js_string(raw)
        ))
        .await;
    assert_eq!(after[0], json!(true), "attempt 1's raw output closed or was rebuilt: {after}");
    assert_eq!(after[1], before[0], "its sideways scroll was reset: {after}");
    assert_eq!(after[2], json!(true), "the panel was rebuilt: {after}");
    let moved = (after[4].as_f64().unwrap() - before[2].as_f64().unwrap()).abs();
    assert!(after[3].as_f64() > Some(0.0) && moved < 40.0, "the page jumped: before {before}, after {after}");
    // The new attempt came from the run's events, not from reading the run again and again.
    assert!(seen(&log, "GET", &format!("/v1/runs/{run_id}/events")).contains(&200));
    assert!(seen(&log, "GET", &format!("/v1/runs/{run_id}")).len() <= 2, "{:?}", log.lock().unwrap());
    assert_eq!(stored(&h, &run_id).await["status"], "succeeded");
    assert_no_page_errors(&page);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_works_behind_token_auth() {
    let Some(chromium) = chromium("the_viewer_works_behind_token_auth") else { return };
    let h = harness_with(vec![reply(r#"{"city": "Toledo"}"#)], vec!["s3cret".into()], |_| {}).await;
    let spec = json!({"prompt": "Which city?", "schema": serde_json::from_str::<Value>(CITY_SCHEMA).unwrap()});
    let mut request = crate::request("POST", "/v1/iterate", Some(&spec));
    request.headers_mut().insert("authorization", "Bearer s3cret".parse().unwrap());
    let done = h.send(request).await;
    assert_eq!(done.status, 200, "{}", done.text);
    let run_id = done.json["run_id"].as_str().unwrap().to_owned();
    let (target, log) = serve_logged(&h).await;

    let (_browser, page) = open(&chromium, &format!("{target}/runs/{run_id}"), 1400).await;
    page.wait_for("!document.querySelector('#auth').hidden && document.querySelector('#token').getBoundingClientRect().width > 0 && !document.querySelector('#run-error').hidden").await;
    assert_eq!(seen(&log, "GET", &format!("/v1/runs/{run_id}")), [401]);
    assert_eq!(page.eval("document.querySelectorAll('#detail .attempt').length").await, json!(0));
    page.type_into("#token", "s3cret").await;
    page.click("#save").await;
    page.wait_for(&format!("{} && {DETAIL_STATE} === 'succeeded'", attempts_shown(1))).await;
    page.wait_for(&format!("document.querySelector('tr.run[data-id={}]')", js_string(&run_id))).await;
    assert_eq!(page.eval("localStorage.getItem('redraft-token')").await, json!("s3cret"));
    assert_eq!(page.eval("document.querySelector('#auth').hidden").await, json!(true));
    assert!(seen(&log, "GET", &format!("/v1/runs/{run_id}")).contains(&200));
    assert_no_page_errors(&page);
}
