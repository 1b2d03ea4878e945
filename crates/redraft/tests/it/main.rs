//! The runner end to end: against a fake OpenAI-compatible server on 127.0.0.1, and with
//! scripted providers under paused time for timeouts and backoff.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_debug_implementations)] // test code

mod architecture;
mod checks;
mod leases;
mod openai;
mod paused;
mod schema;
mod secrets;
mod transport;
mod typed;
mod wire;
