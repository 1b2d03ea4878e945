//! Known secrets out of every message the server writes: the session's writer is wrapped, so
//! tool results, tool errors, progress notifications and protocol errors alike pass one
//! redaction ([`redraft::core::secrets`]) on their way out, as bytes — no message is parsed
//! again. Each message is a line of JSON, and a secret never holds a line break (registered
//! values are trimmed), so a whole message is never held back past its flush.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use redraft::core::secrets::{self, StreamRedactor};
use tokio::io::AsyncWrite;

/// How much redacted output may wait for the writer before writes wait too.
const BACKLOG: usize = 1 << 20;

/// `inner`, with every known secret in what is written to it replaced with `[redacted]`.
#[derive(Debug)]
pub(crate) struct RedactingWriter<W> {
    inner: W,
    redactor: StreamRedactor,
    /// Redacted bytes not yet taken by `inner`.
    out: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> RedactingWriter<W> {
    pub(crate) fn new(inner: W) -> Self {
        Self { inner, redactor: StreamRedactor::new(), out: Vec::new() }
    }

    /// Hand `inner` what is waiting, until it is all taken or `inner` is not ready.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.out.is_empty() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.out) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    self.out.drain(..n);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for RedactingWriter<W> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if let Poll::Ready(Err(e)) = this.drain(cx) {
            return Poll::Ready(Err(e));
        }
        if this.out.len() >= BACKLOG {
            return Poll::Pending;
        }
        let redacted = if secrets::active() { this.redactor.push(buf) } else { buf.to_vec() };
        this.out.extend_from_slice(&redacted);
        // Start writing now; what `inner` does not take yet waits in `out`.
        if let Poll::Ready(Err(e)) = this.drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match this.drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let rest = this.redactor.finish();
        this.out.extend_from_slice(&rest);
        match this.drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_shutdown(cx),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    #[tokio::test]
    async fn messages_are_redacted_even_when_written_in_pieces() {
        secrets::register("sk-mcp-writer-test-1234");
        let mut sink = Vec::new();
        {
            let mut writer = RedactingWriter::new(&mut sink);
            let message = b"{\"text\": \"key sk-mcp-writer-test-1234\"}\n";
            for piece in message.chunks(5) {
                writer.write_all(piece).await.unwrap();
            }
            writer.flush().await.unwrap();
        }
        assert_eq!(String::from_utf8(sink).unwrap(), "{\"text\": \"key [redacted]\"}\n");
    }
}
