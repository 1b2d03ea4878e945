//! A small client of the Chrome DevTools protocol, for driving headless Chromium from tests.
//!
//! Chromium runs with `--remote-debugging-pipe`: it reads commands on file descriptor 3 and
//! writes replies and events on 4, each message JSON ended by a NUL byte. The two pipes are
//! the child's stdin and stdout, which a shell moves to 3 and 4 before it becomes Chromium
//! (`exec … 3<&0 4>&1`): no `unsafe`, and no descriptor leaks into other children. A thread
//! reads the replies and routes each by its `id` to the command waiting for it; events go to
//! a broadcast channel, and the page's uncaught exceptions and `console.error` calls are kept
//! for the test to check. Chromium (its whole process group) is killed when the [`Browser`]
//! and every [`Page`] of it are dropped. This module holds the connection and the browser
//! process; [`page`] one tab of it.

mod page;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{broadcast, oneshot};

pub use page::{Page, artifacts_dir, js_string};

/// How long a condition is waited for by default.
pub const WAIT: Duration = Duration::from_secs(20);
/// How long one protocol command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// Between two checks of a condition.
const POLL: Duration = Duration::from_millis(40);

type Reply = Result<Value, String>;

/// The connection: commands out, replies routed back, events broadcast.
struct Conn {
    input: Mutex<ChildStdin>,
    next_id: AtomicU64,
    pending: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    /// Set once the browser closed its end: commands fail at once.
    closed: Mutex<bool>,
    events: broadcast::Sender<Arc<Value>>,
    /// Uncaught exceptions and `console.error` calls of pages, in order.
    errors: Mutex<Vec<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Conn {
    async fn call(&self, session: Option<&str>, method: &str, params: Value) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let (tx, rx) = oneshot::channel();
        {
            // Registered under the `closed` lock: the reader drains `pending` under it too.
            let closed = lock(&self.closed);
            if *closed {
                return Err(format!("{method}: Chromium has exited"));
            }
            lock(&self.pending).insert(id, tx);
        }
        let mut bytes = message.to_string().into_bytes();
        bytes.push(0);
        let written = {
            let mut input = lock(&self.input);
            input.write_all(&bytes).and_then(|()| input.flush())
        };
        if let Err(e) = written {
            lock(&self.pending).remove(&id);
            return Err(format!("{method}: cannot write to Chromium: {e}"));
        }
        match tokio::time::timeout(COMMAND_TIMEOUT, rx).await {
            Ok(Ok(reply)) => reply.map_err(|e| format!("{method}: {e}")),
            Ok(Err(_)) => Err(format!("{method}: Chromium has exited")),
            Err(_) => {
                lock(&self.pending).remove(&id);
                Err(format!("{method}: no reply within {COMMAND_TIMEOUT:?}"))
            }
        }
    }

    /// Read messages until Chromium closes its end.
    fn read(self: Arc<Self>, output: ChildStdout) {
        let mut output = BufReader::new(output);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match output.read_until(0, &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if buf.last() == Some(&0) {
                buf.pop();
            }
            let Ok(message) = serde_json::from_slice::<Value>(&buf) else { continue };
            if let Some(id) = message.get("id").and_then(Value::as_u64) {
                let reply = match message.get("error") {
                    Some(error) => Err(error.get("message").and_then(Value::as_str).unwrap_or("error").to_owned()),
                    None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                };
                if let Some(tx) = lock(&self.pending).remove(&id) {
                    let _ = tx.send(reply);
                }
            } else {
                self.note(&message);
                let _ = self.events.send(Arc::new(message));
            }
        }
        *lock(&self.closed) = true;
        // Dropping the senders fails every command still waiting.
        lock(&self.pending).clear();
    }

    /// Keep the page's uncaught exceptions and `console.error` calls.
    fn note(&self, event: &Value) {
        let params = &event["params"];
        let text = match event["method"].as_str() {
            Some("Runtime.exceptionThrown") => {
                let details = &params["exceptionDetails"];
                let description = details.pointer("/exception/description").and_then(Value::as_str);
                Some(format!(
                    "uncaught: {} ({}:{})",
                    description.or(details["text"].as_str()).unwrap_or("?"),
                    details["url"].as_str().unwrap_or(""),
                    details["lineNumber"]
                ))
            }
            Some("Runtime.consoleAPICalled") if matches!(params["type"].as_str(), Some("error" | "assert")) => {
                let args: Vec<String> = params["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| match a.get("value") {
                        Some(Value::String(s)) => s.clone(),
                        Some(v) => v.to_string(),
                        None => a["description"].as_str().unwrap_or("?").to_owned(),
                    })
                    .collect();
                Some(format!("console.error: {}", args.join(" ")))
            }
            _ => None,
        };
        if let Some(text) = text {
            lock(&self.errors).push(text);
        }
    }
}

/// The Chromium process: killed, with its whole process group, when the last handle goes.
struct Process {
    child: Child,
    /// The profile and Chromium's log; removed after the process is gone.
    dir: tempfile::TempDir,
}

impl Drop for Process {
    fn drop(&mut self) {
        // The child leads its own process group (renderers, GPU and zygote processes are in it).
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A headless Chromium driven over the DevTools protocol.
pub struct Browser {
    conn: Arc<Conn>,
    process: Arc<Process>,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser").field("pid", &self.process.child.id()).finish_non_exhaustive()
    }
}

impl Browser {
    /// Start `chromium` headless, with a fresh profile, talking over pipes.
    pub fn launch(chromium: &Path) -> Browser {
        let dir = tempfile::tempdir().unwrap();
        let profile = dir.path().join("profile");
        let log = std::fs::File::create(dir.path().join("chromium.log")).unwrap();
        let mut child = Command::new("/bin/sh")
            // `$0` is Chromium, `$@` its flags: fd 3 reads our commands, fd 4 carries its
            // answers; its own stdout goes to the log with its stderr.
            .args(["-c", r#"exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>&2"#])
            .arg(chromium)
            .args([
                "--headless",
                "--remote-debugging-pipe",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--disable-quic",
                "--hide-scrollbars",
                "--mute-audio",
                "--window-size=1400,900",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromium.display()));
        let input = child.stdin.take().unwrap();
        let output = child.stdout.take().unwrap();
        let (events, _) = broadcast::channel(4096);
        let conn = Arc::new(Conn {
            input: Mutex::new(input),
            next_id: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            closed: Mutex::new(false),
            events,
            errors: Mutex::new(Vec::new()),
        });
        let reader = conn.clone();
        std::thread::Builder::new().name("cdp-reader".into()).spawn(move || reader.read(output)).unwrap();
        Browser { conn, process: Arc::new(Process { child, dir }) }
    }

    /// What Chromium wrote to its stderr so far (for failure messages).
    pub fn log(&self) -> String {
        let text = std::fs::read_to_string(self.process.dir.path().join("chromium.log")).unwrap_or_default();
        let start = text.len().saturating_sub(4000);
        text.get(start..).unwrap_or_default().to_owned()
    }

    /// A new tab, attached (flat sessions), with the Page and Runtime domains enabled.
    pub async fn page(&self) -> Page {
        let fail = |e: String| -> ! { panic!("{e}\nChromium's log:\n{}", self.log()) };
        let target = self
            .conn
            .call(None, "Target.createTarget", json!({"url": "about:blank"}))
            .await
            .unwrap_or_else(|e| fail(e));
        let target_id = target["targetId"].as_str().unwrap_or_else(|| fail(format!("no targetId in {target}")));
        let attached = self
            .conn
            .call(None, "Target.attachToTarget", json!({"targetId": target_id, "flatten": true}))
            .await
            .unwrap_or_else(|e| fail(e));
        let session = attached["sessionId"].as_str().unwrap_or_else(|| fail(format!("no sessionId in {attached}")));
        let page = Page { conn: self.conn.clone(), session: session.to_owned(), _process: self.process.clone() };
        page.call("Page.enable", json!({})).await;
        page.call("Runtime.enable", json!({})).await;
        page
    }
}
