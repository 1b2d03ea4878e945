//! The native adapters against the testkit's fakes on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod anthropic;
mod ollama;
mod secrets;
mod transport;

/// An address on 127.0.0.1 where nothing listens (bound, then released).
fn refused_base_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}
