//! A raw HTTP/1.1 server on `127.0.0.1:0` scripted per connection, for what a well-behaved
//! server (wiremock) cannot do: reset the connection in the middle of a body, promise a
//! `Content-Length` and close early, end a close-delimited body in the middle of the JSON, or
//! stream a body of tens of megabytes without holding it. Each connection reads one request
//! and gets the next [`RawReply`] of the script, then the connection is closed. Strict: a
//! connection beyond the script gets HTTP 500 "unexpected call".

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What one connection gets.
#[derive(Debug, Clone)]
pub enum RawReply {
    /// A complete response with status `status` and body `body` (`Content-Length` set).
    Full { status: u16, headers: Vec<(String, String)>, body: Vec<u8> },
    /// Status 200 with `Content-Length` of the whole `body`, the first `sent` bytes of it, then
    /// the connection reset (TCP RST).
    ResetMidBody { body: Vec<u8>, sent: usize },
    /// Status 200 with `Content-Length` of the whole `body`, the first `sent` bytes of it, then
    /// a clean close: the body is shorter than promised.
    ShortBody { body: Vec<u8>, sent: usize },
    /// Status 200 without `Content-Length` (`Connection: close`: the body ends where the
    /// connection does), the first `sent` bytes of `body`, then a clean close.
    CloseDelimited { body: Vec<u8>, sent: usize },
    /// Status `status` whose body is `head`, then `fill` repeated up to `len` bytes in all, then
    /// `tail`, streamed as the client reads (never held whole). `Content-Length` is announced
    /// unless `chunked` (then the body is chunked, its length unknown in advance).
    Streamed { status: u16, head: Vec<u8>, fill: u8, len: usize, tail: Vec<u8>, chunked: bool },
}

impl RawReply {
    /// A 200 with a JSON body.
    pub fn json(body: &Value) -> Self {
        RawReply::Full {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }

    /// A `status` answer whose body is `len` bytes of `x`, streamed (never held whole), with its
    /// length announced when `announce`, else chunked.
    pub fn huge(status: u16, len: usize, announce: bool) -> Self {
        RawReply::Streamed { status, head: Vec::new(), fill: b'x', len, tail: Vec::new(), chunked: !announce }
    }

    /// A 429 with `Retry-After: secs`.
    pub fn rate_limited(secs: u64) -> Self {
        RawReply::Full {
            status: 429,
            headers: vec![("retry-after".into(), secs.to_string())],
            body: br#"{"error": {"message": "slow down"}}"#.to_vec(),
        }
    }

    /// A JSON body of about `len` bytes: `body` with the string value `"@@FILL@@"` inside it
    /// replaced by `len` bytes of `x`, streamed. With `announce`, `Content-Length` is sent;
    /// without, the body is chunked.
    pub fn huge_json(body: &Value, len: usize, announce: bool) -> Self {
        let text = body.to_string();
        let (head, tail) = text.split_once("@@FILL@@").unwrap_or((text.as_str(), ""));
        RawReply::Streamed {
            status: 200,
            head: head.as_bytes().to_vec(),
            fill: b'x',
            len,
            tail: tail.as_bytes().to_vec(),
            chunked: !announce,
        }
    }
}

/// One request as the server read it.
#[derive(Debug, Clone)]
pub struct RawRequest {
    /// `POST /v1/chat/completions`
    pub line: String,
    pub body: Vec<u8>,
}

impl RawRequest {
    /// The body as JSON (`Value::Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Debug, Default)]
struct Shared {
    replies: VecDeque<RawReply>,
    requests: Vec<RawRequest>,
    /// Bytes of streamed bodies actually written to clients.
    streamed: usize,
}

/// The scripted raw server. Dropping it stops it.
#[derive(Debug)]
pub struct RawServer {
    addr: std::net::SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: JoinHandle<()>,
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RawServer {
    /// Start a server that answers connection by connection with `replies`, in order.
    pub async fn start(replies: Vec<RawReply>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Mutex::new(Shared { replies: replies.into(), ..Shared::default() }));
        let state = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = state.clone();
                tokio::spawn(async move {
                    let _ = serve(stream, state).await;
                });
            }
        });
        Ok(Self { addr, shared, task })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests read so far, in order.
    pub fn requests(&self) -> Vec<RawRequest> {
        self.shared.lock().map(|s| s.requests.clone()).unwrap_or_default()
    }

    /// How many requests were read.
    pub fn calls(&self) -> usize {
        self.shared.lock().map(|s| s.requests.len()).unwrap_or(0)
    }

    /// Bytes of streamed bodies written to clients so far (what a client that stops reading
    /// did not take stays unsent).
    pub fn streamed_bytes(&self) -> usize {
        self.shared.lock().map(|s| s.streamed).unwrap_or(0)
    }
}

async fn serve(mut stream: TcpStream, shared: Arc<Mutex<Shared>>) -> std::io::Result<()> {
    let Some(request) = read_request(&mut stream).await? else { return Ok(()) };
    let reply = {
        let mut s = shared.lock().map_err(|_| std::io::Error::other("poisoned"))?;
        s.requests.push(request);
        s.replies.pop_front()
    };
    let reply = reply.unwrap_or_else(|| RawReply::Full {
        status: 500,
        headers: Vec::new(),
        body: b"unexpected call: the script is exhausted".to_vec(),
    });
    match reply {
        RawReply::Full { status, headers, body } => {
            let mut head = format!("HTTP/1.1 {status} {}\r\ncontent-length: {}\r\n", reason(status), body.len());
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("connection: close\r\n\r\n");
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&body).await?;
            stream.shutdown().await?;
        }
        RawReply::ResetMidBody { body, sent } => {
            let head =
                format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&body[..sent.min(body.len())]).await?;
            stream.flush().await?;
            // On loopback what was written has reached the client's socket; the reset follows it.
            stream.set_zero_linger()?;
            drop(stream);
        }
        RawReply::ShortBody { body, sent } => {
            let head =
                format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&body[..sent.min(body.len())]).await?;
            stream.shutdown().await?;
        }
        RawReply::CloseDelimited { body, sent } => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n";
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&body[..sent.min(body.len())]).await?;
            stream.shutdown().await?;
        }
        RawReply::Streamed { status, head, fill, len, tail, chunked } => {
            let total = head.len() + len + tail.len();
            let framing =
                if chunked { "transfer-encoding: chunked".to_owned() } else { format!("content-length: {total}") };
            let start = format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\n{framing}\r\nconnection: close\r\n\r\n",
                reason(status)
            );
            stream.write_all(start.as_bytes()).await?;
            let block = vec![fill; 64 * 1024];
            let mut parts: Vec<&[u8]> = vec![&head];
            let mut left = len;
            while left > 0 {
                let n = left.min(block.len());
                parts.push(&block[..n]);
                left -= n;
            }
            parts.push(&tail);
            for part in parts {
                if part.is_empty() {
                    continue;
                }
                if chunked {
                    stream.write_all(format!("{:x}\r\n", part.len()).as_bytes()).await?;
                    stream.write_all(part).await?;
                    stream.write_all(b"\r\n").await?;
                } else {
                    stream.write_all(part).await?;
                }
                if let Ok(mut s) = shared.lock() {
                    s.streamed += part.len();
                }
            }
            if chunked {
                stream.write_all(b"0\r\n\r\n").await?;
            }
            stream.shutdown().await?;
        }
    }
    Ok(())
}

/// Read one request: the head up to the blank line, then `Content-Length` bytes of body.
async fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<RawRequest>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let line = head.lines().next().unwrap_or_default().to_owned();
    let length = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(RawRequest { line, body }))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
