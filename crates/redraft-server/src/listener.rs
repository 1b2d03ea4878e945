//! Connections within the open-files budget. Every connection holds a descriptor, taken from
//! the budget it shares with the runs ([`Files`]); past what it leaves them a new connection is
//! answered `503` with `Retry-After` and closed at once, instead of the process running out of
//! descriptors (which would stall the accept loop and fail the runs in flight when they open
//! their next connection to a model).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use redraft::limits::{FileHeld, Files};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use crate::metrics::{Metrics, ShedReason};

const REFUSAL_BODY: &str = r#"{"error":{"code":"overloaded","message":"the server holds as many connections as its open-files limit allows; retry later"}}"#;

/// A listener that admits a connection while `files` has a descriptor for it.
#[derive(Debug)]
pub struct Bounded {
    inner: TcpListener,
    files: Arc<Files>,
    metrics: Arc<Metrics>,
}

impl Bounded {
    pub fn new(inner: TcpListener, files: Arc<Files>, metrics: Arc<Metrics>) -> Self {
        Self { inner, files, metrics }
    }
}

/// An admitted connection; the budget gets its descriptor back when it is dropped.
#[derive(Debug)]
pub struct Counted {
    io: TcpStream,
    _file: FileHeld,
}

impl AsyncRead for Counted {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl axum::serve::Listener for Bounded {
    type Io = Counted;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((io, addr)) => {
                    let Some(file) = self.files.connection() else {
                        self.metrics.run_shed(ShedReason::Overloaded);
                        tokio::spawn(refuse(io));
                        continue;
                    };
                    let _ = io.set_nodelay(true);
                    return (Counted { io, _file: file }, addr);
                }
                Err(e) if is_out_of_files(&e) => {
                    tracing::warn!("cannot accept a connection: {e}; waiting for descriptors to be freed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) if is_connection_error(&e) => {}
                Err(e) => {
                    tracing::error!("cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// Answer 503 with `Retry-After` and close. The request is read (briefly) first, so that the
/// client sees the answer rather than a reset.
async fn refuse(mut io: TcpStream) {
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 2\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{REFUSAL_BODY}",
        REFUSAL_BODY.len()
    );
    let exchange = async {
        let mut head = [0u8; 4096];
        let _ = tokio::time::timeout(Duration::from_millis(200), io.read(&mut head)).await;
        io.write_all(answer.as_bytes()).await?;
        io.shutdown().await?;
        let mut rest = [0u8; 4096];
        while io.read(&mut rest).await? > 0 {}
        Ok::<_, io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), exchange).await;
}

fn is_out_of_files(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(code) if code == libc_emfile() || code == libc_enfile())
}

/// `EMFILE` and `ENFILE` on Linux and the BSDs.
const fn libc_emfile() -> i32 {
    24
}

const fn libc_enfile() -> i32 {
    23
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}
