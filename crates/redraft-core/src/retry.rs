//! Transport retries: the next step after a failed request, as a value the runner carries out.

use std::time::Duration;

use crate::chat::ProviderError;
pub use crate::chat::WaitBound;

/// How transport failures are retried: exponential backoff with jitter, bounded.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries per attempt. By default, 2.
    pub max_retries: u32,
    /// First backoff. By default, 500 ms.
    pub base_delay: Duration,
    /// Longest backoff, and the longest `Retry-After` honoured when the run has no
    /// `max_wall_time` (with one, a server may ask for any wait that ends before it). A server
    /// asking for longer makes redraft give up. By default, 30 s.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { max_retries: 2, base_delay: Duration::from_millis(500), max_delay: Duration::from_secs(30) }
    }
}

/// What to do after a failed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryStep {
    /// Wait, then send the same request again.
    Retry { after: Duration },
    /// Stop: the error is permanent or retries are spent.
    GiveUp,
    /// Stop: the server asked to wait (`Retry-After`) `wait`, longer than `bound` allows.
    WaitTooLong { wait: Duration, bound: WaitBound },
}

impl RetryPolicy {
    /// The step after `retries_done` retries have already failed with `error`. `jitter` is a
    /// random number in `[0, 1)`; the backoff is `base · 2^retries_done`, scaled into
    /// `[50 %, 100 %]` by the jitter and capped at `max_delay`. A `Retry-After` from the
    /// server is honoured as given when it ends before the run's wall time runs out
    /// (`wall_time_left`, `None` when the run has no `max_wall_time`) or, without a wall time,
    /// when it is within `max_delay`; a longer one is [`RetryStep::WaitTooLong`].
    pub fn step(
        &self,
        retries_done: u32,
        error: &ProviderError,
        jitter: f64,
        wall_time_left: Option<Duration>,
    ) -> RetryStep {
        if !error.is_transient() || retries_done >= self.max_retries {
            return RetryStep::GiveUp;
        }
        if let Some(wait) = error.retry_after() {
            return match wall_time_left {
                Some(left) if wait < left => RetryStep::Retry { after: wait },
                Some(left) => RetryStep::WaitTooLong { wait, bound: WaitBound::WallTime { left } },
                None if wait <= self.max_delay => RetryStep::Retry { after: wait },
                None => RetryStep::WaitTooLong { wait, bound: WaitBound::MaxDelay { max: self.max_delay } },
            };
        }
        let exp = self.base_delay.saturating_mul(2u32.saturating_pow(retries_done.min(16)));
        let capped = exp.min(self.max_delay);
        let jitter = if jitter.is_finite() { jitter.clamp(0.0, 1.0) } else { 0.0 };
        RetryStep::Retry { after: capped.mul_f64(0.5 + 0.5 * jitter) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> ProviderError {
        ProviderError::Status { url: "u".into(), status: code, body: Default::default() }
    }

    #[test]
    fn backs_off_exponentially_and_gives_up() {
        let p = RetryPolicy { max_retries: 3, ..RetryPolicy::default() };
        assert_eq!(p.step(0, &status(500), 1.0, None), RetryStep::Retry { after: Duration::from_millis(500) });
        assert_eq!(p.step(1, &status(500), 1.0, None), RetryStep::Retry { after: Duration::from_millis(1000) });
        assert_eq!(p.step(2, &status(502), 0.0, None), RetryStep::Retry { after: Duration::from_millis(1000) });
        assert_eq!(p.step(3, &status(500), 0.5, None), RetryStep::GiveUp);
        assert_eq!(p.step(0, &status(400), 0.5, None), RetryStep::GiveUp);
    }

    #[test]
    fn honours_retry_after_within_bounds() {
        let p = RetryPolicy::default();
        let limited = |s| ProviderError::RateLimited { url: "u".into(), retry_after: Some(Duration::from_secs(s)) };
        let secs = Duration::from_secs;
        assert_eq!(p.step(0, &limited(7), 0.3, None), RetryStep::Retry { after: secs(7) });
        assert_eq!(
            p.step(0, &limited(3600), 0.3, None),
            RetryStep::WaitTooLong { wait: secs(3600), bound: WaitBound::MaxDelay { max: secs(30) } }
        );
        // With a wall time, any wait that ends before it is honoured, even past `max_delay`.
        assert_eq!(p.step(0, &limited(600), 0.3, Some(secs(900))), RetryStep::Retry { after: secs(600) });
        assert_eq!(
            p.step(0, &limited(600), 0.3, Some(secs(85))),
            RetryStep::WaitTooLong { wait: secs(600), bound: WaitBound::WallTime { left: secs(85) } }
        );
        assert_eq!(
            p.step(1, &limited(85), 0.3, Some(secs(85))),
            RetryStep::WaitTooLong { wait: secs(85), bound: WaitBound::WallTime { left: secs(85) } },
            "a wait that ends at the deadline leaves no time for the call"
        );
        // Retries spent: give up whatever the wait.
        assert_eq!(p.step(2, &limited(1), 0.3, Some(secs(900))), RetryStep::GiveUp);
    }

    #[test]
    fn a_cut_connection_is_retried_with_backoff() {
        let p = RetryPolicy::default();
        let cut = ProviderError::Cut { url: "u".into(), message: "connection reset by peer".into() };
        assert_eq!(p.step(0, &cut, 1.0, None), RetryStep::Retry { after: Duration::from_millis(500) });
        let too_large = ProviderError::ResponseTooLarge { from: "u".into(), limit: 10 };
        assert_eq!(p.step(0, &too_large, 1.0, None), RetryStep::GiveUp);
    }

    #[test]
    fn delay_never_exceeds_cap() {
        let p = RetryPolicy { max_retries: 100, ..RetryPolicy::default() };
        for n in 0..100 {
            if let RetryStep::Retry { after } = p.step(n, &status(503), 0.999, None) {
                assert!(after <= p.max_delay);
            }
        }
    }
}
