//! The binary's only ways to write to stdout and stderr, each with every known secret
//! ([`redraft::core::secrets`]) replaced with `[redacted]`: [`stdout`], [`stderr`], the
//! `print!` family (shadowed for the whole crate in `main.rs`) and [`LogWriter`], which the log
//! layer writes through. `tests/it/architecture.rs` in the `redraft` crate checks that nothing
//! else in this crate opens stdout or stderr.

use std::fmt;
use std::io::{self, Write};

use redraft::core::secrets::{self, StreamRedactor};
use tracing_subscriber::fmt::MakeWriter;

/// A writer that redacts what goes through it. A secret cut between two writes is still found:
/// the end of a write that could begin one is held until the next write, a flush or the drop.
#[derive(Debug)]
pub struct Redacting<W: Write> {
    inner: W,
    redactor: StreamRedactor,
}

impl<W: Write> Redacting<W> {
    pub fn new(inner: W) -> Self {
        Self { inner, redactor: StreamRedactor::new() }
    }
}

impl<W: Write> Write for Redacting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !secrets::active() {
            // Nothing was ever registered, so nothing is held.
            return self.inner.write(buf);
        }
        let out = self.redactor.push(buf);
        self.inner.write_all(&out)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let rest = self.redactor.finish();
        self.inner.write_all(&rest)?;
        self.inner.flush()
    }
}

impl<W: Write> Drop for Redacting<W> {
    fn drop(&mut self) {
        let rest = self.redactor.finish();
        let _ = self.inner.write_all(&rest);
        let _ = self.inner.flush();
    }
}

/// Standard output, locked, redacted.
pub fn stdout() -> Redacting<io::StdoutLock<'static>> {
    Redacting::new(io::stdout().lock())
}

/// Standard error, locked, redacted.
pub fn stderr() -> Redacting<io::StderrLock<'static>> {
    Redacting::new(io::stderr().lock())
}

/// What the crate's `print!` and `println!` do: `args`, redacted, on stdout. A failed write
/// (a closed pipe) is ignored, as there is nowhere left to report it. (Data goes through
/// [`stdout`] today; the macros are there so that a `println!` added later is redacted too.)
#[allow(dead_code)]
pub fn print(args: fmt::Arguments<'_>) {
    let _ = stdout().write_fmt(args);
}

/// What the crate's `eprint!` and `eprintln!` do: `args`, redacted, on stderr.
pub fn eprint(args: fmt::Arguments<'_>) {
    let _ = stderr().write_fmt(args);
}

/// Report panics on stderr through the redaction (the default hook writes straight to stderr,
/// and a panic's message may quote a value that holds a secret). A backtrace is added as the
/// default hook adds it (`RUST_BACKTRACE`).
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let mut err = stderr();
        let _ = err.write_all(panic_report(info).as_bytes());
        let _ = err.flush();
    }));
}

/// What a panic reports: the thread, the place, the message and, when asked for, the backtrace.
fn panic_report(info: &std::panic::PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "Box<dyn Any>".to_owned());
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("<unnamed>");
    let place = info.location().map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column())).unwrap_or_default();
    let backtrace = std::backtrace::Backtrace::capture();
    let backtrace = match backtrace.status() {
        std::backtrace::BacktraceStatus::Captured => format!("stack backtrace:\n{backtrace}"),
        _ => "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n".to_owned(),
    };
    secrets::redact_string(format!("\nthread '{name}' panicked{place}:\n{message}\n{backtrace}"))
}

/// Where log lines go: stderr, redacted (text and JSON logs alike; each line is one write).
#[derive(Debug, Clone, Copy, Default)]
pub struct LogWriter;

impl<'a> MakeWriter<'a> for LogWriter {
    type Writer = Redacting<io::Stderr>;

    fn make_writer(&'a self) -> Self::Writer {
        Redacting::new(io::stderr())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_reported_without_the_secrets_it_quotes() {
        static REPORT: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());
        secrets::register("sk-cli-panic-test-7788");
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(|info| {
            *REPORT.lock().unwrap_or_else(|e| e.into_inner()) = panic_report(info);
        }));
        let caught = std::panic::catch_unwind(|| panic!("cannot use key sk-cli-panic-test-7788"));
        std::panic::set_hook(previous);
        assert!(caught.is_err());
        let report = REPORT.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert!(report.contains("panicked at") && report.contains("cannot use key [redacted]"), "{report}");
        assert!(!report.contains("sk-cli-panic-test-7788"), "{report}");
    }

    #[test]
    fn what_is_written_in_pieces_is_redacted_whole() {
        secrets::register("sk-cli-writer-test-5566");
        let mut sink = Vec::new();
        {
            let mut out = Redacting::new(&mut sink);
            serde_json::to_writer(&mut out, &serde_json::json!({"key": "sk-cli-writer-test-5566", "n": 1})).unwrap();
            for piece in ["Bearer sk-cli-", "writer-test-5566", "\n", "sk-cli-writer"] {
                out.write_all(piece.as_bytes()).unwrap();
            }
        }
        assert_eq!(
            String::from_utf8(sink).unwrap(),
            "{\"key\":\"[redacted]\",\"n\":1}Bearer [redacted]\nsk-cli-writer",
            "held text is written at the end"
        );
    }
}
