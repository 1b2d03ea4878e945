//! The wall clock, read where things happen (the core only formats times).

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now (0 for a clock set before 1970).
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Now as RFC 3339 in UTC with milliseconds (`2026-11-24T09:15:03.120Z`).
pub fn now_rfc3339() -> String {
    redraft_core::time::rfc3339_ms(now_ms())
}

/// Today's date (UTC) as `YYYY-MM-DD`.
pub fn today() -> String {
    redraft_core::time::date_ms(now_ms())
}
