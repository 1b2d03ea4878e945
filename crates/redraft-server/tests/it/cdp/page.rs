//! One tab of the browser: commands in its session, JavaScript evaluated and waited for, the
//! mouse and the keyboard, and screenshots.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::{Conn, POLL, Process, WAIT, lock};

/// One tab of the browser.
pub struct Page {
    pub(super) conn: Arc<Conn>,
    pub(super) session: String,
    pub(super) _process: Arc<Process>,
}

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Page").field("session", &self.session).finish_non_exhaustive()
    }
}

/// Whether a value from the page counts as true, as JavaScript has it.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// `text` as a JavaScript string literal.
pub fn js_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

impl Page {
    /// Send a command in this page's session; panic on an error reply.
    pub async fn call(&self, method: &str, params: Value) -> Value {
        match self.conn.call(Some(&self.session), method, params).await {
            Ok(v) => v,
            Err(e) => panic!("{e}\npage errors: {:?}", self.errors()),
        }
    }

    /// Go to `url` and wait until its `load` event fired.
    pub async fn navigate(&self, url: &str) {
        let mut events = self.conn.events.subscribe();
        let nav = self.call("Page.navigate", json!({"url": url})).await;
        if let Some(error) = nav.get("errorText").and_then(Value::as_str).filter(|e| !e.is_empty()) {
            panic!("cannot load {url}: {error}");
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let event = match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Ok(event)) => event,
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => continue,
                Ok(Err(broadcast::error::RecvError::Closed)) => panic!("Chromium exited while loading {url}"),
                Err(_) => panic!("{url} did not load within {WAIT:?}"),
            };
            if event["method"] == "Page.loadEventFired" && event["sessionId"] == self.session.as_str() {
                let here = self.eval("location.href").await;
                if here.as_str().is_some_and(|h| h != "about:blank") {
                    return;
                }
            }
        }
    }

    /// Evaluate `js` (an expression; a promise is awaited) and return its value as JSON.
    pub async fn eval(&self, js: &str) -> Value {
        match self.try_eval(js).await {
            Ok(v) => v,
            Err(e) => panic!("evaluating `{js}`: {e}\npage errors: {:?}", self.errors()),
        }
    }

    async fn try_eval(&self, js: &str) -> Result<Value, String> {
        let params = json!({"expression": js, "returnByValue": true, "awaitPromise": true});
        let reply = self.conn.call(Some(&self.session), "Runtime.evaluate", params).await?;
        if let Some(details) = reply.get("exceptionDetails") {
            let description = details.pointer("/exception/description").and_then(Value::as_str);
            return Err(description.or(details["text"].as_str()).unwrap_or("exception").to_owned());
        }
        Ok(reply.pointer("/result/value").cloned().unwrap_or(Value::Null))
    }

    /// Wait until `js` is truthy (checked every few milliseconds, for up to [`WAIT`]); its value.
    pub async fn wait_for(&self, js: &str) -> Value {
        self.wait_for_within(js, WAIT).await
    }

    /// Wait until `js` is truthy, for up to `timeout`; its value.
    pub async fn wait_for_within(&self, js: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let last = self.try_eval(js).await;
            if let Ok(v) = &last
                && truthy(v)
            {
                return v.clone();
            }
            if Instant::now() >= deadline {
                let text = self.try_eval("document.body ? document.body.innerText : ''").await.unwrap_or_default();
                let text = text.as_str().unwrap_or_default();
                let mut shown: String = text.chars().take(3000).collect();
                if shown.len() < text.len() {
                    shown.push('…');
                }
                panic!(
                    "waited {timeout:?} for `{js}`, which is still {last:?}\npage errors: {:?}\nthe page reads:\n{shown}",
                    self.errors()
                );
            }
        }
    }

    /// Make the viewport `width` px wide (900 high), as a desktop browser.
    pub async fn set_width(&self, width: u32) {
        let metrics = json!({"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": false});
        self.call("Emulation.setDeviceMetricsOverride", metrics).await;
        self.wait_for(&format!("window.innerWidth === {width}")).await;
    }

    /// Write a PNG of the viewport to `path` (its directory is created).
    pub async fn screenshot(&self, path: &Path) {
        self.capture(path, json!({"format": "png"})).await;
    }

    /// Write a PNG of the page from its top, as tall as the page but at most `max_height` px.
    pub async fn screenshot_page(&self, path: &Path, max_height: u32) {
        let size = self.eval("[document.documentElement.clientWidth, document.documentElement.scrollHeight]").await;
        let (width, height) = (size[0].as_f64().unwrap_or(800.0), size[1].as_f64().unwrap_or(900.0));
        let clip = json!({"x": 0, "y": 0, "width": width, "height": height.min(f64::from(max_height)), "scale": 1});
        self.capture(path, json!({"format": "png", "captureBeyondViewport": true, "clip": clip})).await;
    }

    async fn capture(&self, path: &Path, params: Value) {
        let shot = self.call("Page.captureScreenshot", params).await;
        let png = base64_decode(shot["data"].as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("Chromium's screenshot is not base64: {e}"));
        assert!(png.starts_with(b"\x89PNG"), "the screenshot is not a PNG");
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }

    /// Click the middle of the first element matching `selector` with the mouse, as a person
    /// would (scrolled into view first); panics when something else covers that point.
    pub async fn click(&self, selector: &str) {
        let sel = js_string(selector);
        let js = format!(
            "(() => {{ const e = document.querySelector({sel}); if (!e) return 'missing';
               e.scrollIntoView({{block: 'center', inline: 'center'}});
               const r = e.getBoundingClientRect(); const x = r.left + r.width / 2, y = r.top + r.height / 2;
               const top = document.elementFromPoint(x, y);
               if (!top || !(e === top || e.contains(top))) return 'covered by ' + (top ? top.outerHTML.slice(0, 120) : 'nothing');
               return [x, y]; }})()"
        );
        let at = self.wait_for(&js.replace("return 'missing'", "return null")).await;
        let (Some(x), Some(y)) = (at[0].as_f64(), at[1].as_f64()) else { panic!("cannot click `{selector}`: {at}") };
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            let event = json!({"type": kind, "x": x, "y": y, "button": "left", "buttons": u8::from(kind == "mousePressed"), "clickCount": 1});
            self.call("Input.dispatchMouseEvent", event).await;
        }
    }

    /// Focus the element matching `selector` and type `text` into it (as an input method does).
    pub async fn type_into(&self, selector: &str, text: &str) {
        let focused = self
            .eval(&format!(
                "(() => {{ const e = document.querySelector({}); if (!e) return false; e.focus(); return document.activeElement === e; }})()",
                js_string(selector)
            ))
            .await;
        assert_eq!(focused, Value::Bool(true), "cannot focus `{selector}`");
        self.call("Input.insertText", json!({"text": text})).await;
    }

    /// The page's uncaught exceptions and `console.error` calls so far.
    pub fn errors(&self) -> Vec<String> {
        lock(&self.conn.errors).clone()
    }
}

/// Decode standard base64 (padding optional, whitespace ignored).
pub fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for (i, c) in text.bytes().enumerate() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return Err(format!("byte {c:#04x} at {i}")),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((acc >> bits) & 0xff).unwrap_or_default());
        }
    }
    Ok(out)
}

/// Where tests leave screenshots: `$REDRAFT_TEST_ARTIFACTS`, else `target/test-artifacts/<sub>`.
pub fn artifacts_dir(sub: &str) -> PathBuf {
    match std::env::var_os("REDRAFT_TEST_ARTIFACTS").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        // The workspace's `target`: two levels above this crate.
        None => {
            let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
            crate_dir.ancestors().nth(2).unwrap_or(crate_dir).join("target/test-artifacts").join(sub)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(super::base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(super::base64_decode("aGVsbG8").unwrap(), b"hello");
        assert_eq!(super::base64_decode("iVBORw0KGgo=").unwrap(), b"\x89PNG\r\n\x1a\n");
        assert_eq!(super::base64_decode("").unwrap(), b"");
        assert!(super::base64_decode("a$b").is_err());
    }
}
