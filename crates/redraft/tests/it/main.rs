//! The runner end to end: against a fake OpenAI-compatible server on 127.0.0.1, and with
//! scripted providers under paused time for timeouts and backoff.

mod architecture;
mod fake_server;
mod openai;
mod paused;
mod typed;
