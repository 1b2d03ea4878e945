//! A real browser against the real server: headless Chromium loads a page from another
//! 127.0.0.1 port whose script tries every request a page can send without asking (CORS
//! "simple requests", `no-cors` fetches, a form posted into a frame); none may start a run or
//! call the model. And the run viewer keeps working from its own origin ([`origins`]).
//!
//! The viewer is driven over the DevTools protocol ([`crate::cdp`]): a run's own URL opens it
//! with its task, attempts, diffs and chart, the list filters and pages, and the page asks for a
//! token when the server wants one ([`viewer`]); an answer typed into the page continues a run
//! awaiting one, and what a reader opened stays open while the run goes on ([`live`]); nothing
//! overlaps from 800 to 1920 px ([`layout`]).
//!
//! Needs Chromium: `$REDRAFT_CHROMIUM`, else `/usr/bin/chromium`. Without it the tests print a
//! SKIP line and pass, unless `REDRAFT_CHROMIUM` is set (CI sets it, so there a missing browser
//! fails).

mod layout;
mod live;
mod origins;
mod viewer;

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use redraft::config::Config;
use serde_json::Value;

use crate::Harness;
use crate::cdp::{Browser, Page};

/// The browser, or `None` after printing why the test is skipped. `test` is the test's path
/// below `browser` (`viewer::the_viewer_works_behind_token_auth`).
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
