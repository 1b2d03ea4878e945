//! The halting rules of a run and the reasons a run stops: the [`Policy`] a run is given, the
//! rules that apply it before and after each attempt ([`Policy::halt_before`],
//! [`Policy::halt_after`]: pure functions of what the engine counts, which it obeys), the
//! [`HaltReason`]s, the [`Ceilings`] a server puts on a policy, and the checks of a plan's
//! settings ([`PlanError`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::duration::serde_human;

/// Why a run stopped. Exactly one per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HaltReason {
    Success,
    MaxIterations,
    Patience,
    Budget,
    WallTime,
    Stagnation,
    ProviderError,
    Cancelled,
}

impl HaltReason {
    /// The word used in results and logs (`max_iterations`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            HaltReason::Success => "success",
            HaltReason::MaxIterations => "max_iterations",
            HaltReason::Patience => "patience",
            HaltReason::Budget => "budget",
            HaltReason::WallTime => "wall_time",
            HaltReason::Stagnation => "stagnation",
            HaltReason::ProviderError => "provider_error",
            HaltReason::Cancelled => "cancelled",
        }
    }
}

impl HaltReason {
    /// Whether a person's answer can change what the next attempts do: the attempts ran out,
    /// stopped improving or repeated themselves. A budget, the wall time, a provider failing
    /// and a cancel are limits a person answering does not lift.
    pub fn awaits_a_person(self) -> bool {
        matches!(self, HaltReason::MaxIterations | HaltReason::Patience | HaltReason::Stagnation)
    }
}

/// What a run that would fail does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnEscalation {
    /// It fails, with its escalation. The default.
    #[default]
    Fail,
    /// It stops as `awaiting_input`, with its escalation, until a person answers the question
    /// (the run goes on with the answer) or aborts it. Only when the attempts ran out, stopped
    /// improving or repeated themselves ([`HaltReason::awaits_a_person`]).
    Await,
}

impl OnEscalation {
    pub fn as_str(self) -> &'static str {
        match self {
            OnEscalation::Fail => "fail",
            OnEscalation::Await => "await",
        }
    }
}

impl std::fmt::Display for HaltReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The halting rules. Every field has the SPEC's default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Attempts at most. By default, 3.
    pub max_iterations: u32,
    /// Score at or above which an attempt without error issues succeeds. By default, 1.0 for
    /// pass/fail evaluators and 0.9 when any scoring evaluator is used.
    pub success_threshold: Option<f64>,
    /// Halt after this many consecutive attempts that do not improve the best score.
    /// By default, 0 (off).
    pub patience: u32,
    /// Halt before an attempt whose estimated cost would take spending past this.
    /// By default, off.
    pub max_budget_usd: Option<f64>,
    /// Halt (cancelling the attempt in flight) after this much time. By default, off.
    #[serde(with = "serde_human::option")]
    pub max_wall_time: Option<Duration>,
    /// An attempt taking longer counts as `error` with a `timeout` issue. By default, 120 s.
    #[serde(with = "serde_human")]
    pub attempt_timeout: Duration,
    /// Halt with `stagnation` when the same artifact is proposed this many times; 0 is off.
    /// By default, 2.
    pub repeat_limit: u32,
    /// Retries of transport failures per attempt; they do not count as attempts. By default, 2.
    pub transport_retries: u32,
    /// What a run that would fail does: fail, or await a person's answer. By default, fail.
    pub on_escalation: OnEscalation,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            max_iterations: 3,
            success_threshold: None,
            patience: 0,
            max_budget_usd: None,
            max_wall_time: None,
            attempt_timeout: Duration::from_secs(120),
            repeat_limit: 2,
            transport_retries: 2,
            on_escalation: OnEscalation::Fail,
        }
    }
}

/// Upper bounds a server or config puts on what a request may ask for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Ceilings {
    /// By default, 20.
    pub max_iterations: u32,
    /// The largest `max_budget_usd` a request may set. By default, none.
    pub max_budget_usd: Option<f64>,
    /// The longest `max_wall_time` a request may set; with a ceiling, a request that sets none
    /// gets the ceiling. By default, none.
    #[serde(with = "serde_human::option")]
    pub max_wall_time: Option<Duration>,
}

impl Default for Ceilings {
    fn default() -> Self {
        Self { max_iterations: 20, max_budget_usd: None, max_wall_time: None }
    }
}

impl Ceilings {
    /// No bounds at all (the local CLI).
    pub fn none() -> Self {
        Self { max_iterations: u32::MAX, max_budget_usd: None, max_wall_time: None }
    }
}

impl Policy {
    /// Check every field, naming the field and the fix in the error.
    pub fn validate(&self, ceilings: &Ceilings) -> Result<(), PlanError> {
        if self.max_iterations == 0 {
            return Err(PlanError::invalid("max_iterations", "0", "must be at least 1"));
        }
        if self.max_iterations > ceilings.max_iterations {
            return Err(PlanError::invalid(
                "max_iterations",
                &self.max_iterations.to_string(),
                &format!("must be at most {}", ceilings.max_iterations),
            ));
        }
        if let (Some(asked), Some(limit)) = (self.max_budget_usd, ceilings.max_budget_usd)
            && asked > limit
        {
            return Err(PlanError::invalid(
                "max_budget_usd",
                &asked.to_string(),
                &format!("must be at most {limit} here"),
            ));
        }
        if let (Some(asked), Some(limit)) = (self.max_wall_time, ceilings.max_wall_time)
            && asked > limit
        {
            return Err(PlanError::invalid(
                "max_wall_time",
                &crate::duration::format(asked),
                &format!("must be at most {} here", crate::duration::format(limit)),
            ));
        }
        if let Some(t) = self.success_threshold
            && !(0.0..=1.0).contains(&t)
        {
            return Err(PlanError::invalid("success_threshold", &t.to_string(), "must be in [0, 1]"));
        }
        if let Some(b) = self.max_budget_usd
            && (!b.is_finite() || b <= 0.0)
        {
            return Err(PlanError::invalid("max_budget_usd", &b.to_string(), "must be a positive number of USD"));
        }
        if self.attempt_timeout.is_zero() {
            return Err(PlanError::invalid("attempt_timeout", "0s", "must be longer than zero"));
        }
        if self.max_wall_time.is_some_and(|d| d.is_zero()) {
            return Err(PlanError::invalid("max_wall_time", "0s", "must be longer than zero"));
        }
        if self.repeat_limit == 1 {
            return Err(PlanError::invalid(
                "repeat_limit",
                "1",
                "must be 0 (off) or at least 2: it counts how often the same artifact may appear",
            ));
        }
        Ok(())
    }

    /// The success threshold in force: the configured one, else 1.0 for pass/fail
    /// evaluators and 0.9 when a scoring evaluator is used.
    pub fn threshold(&self, scoring: bool) -> f64 {
        self.success_threshold.unwrap_or(if scoring { 0.9 } else { 1.0 })
    }
}

/// What the halting rules look at before an attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BeforeAttempt {
    /// Attempts made so far.
    pub made: u32,
    /// Attempts the run may make: `max_iterations`, raised by each person's answer.
    pub limit: u32,
    /// Time since the run started.
    pub elapsed: Duration,
    /// USD spent so far (attempts with a known cost).
    pub spent_usd: f64,
    /// The estimated cost of the next attempt, when it is known (a price) and asked for (a
    /// budget).
    pub next_usd: Option<f64>,
}

/// What the halting rules look at after an attempt is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfterAttempt {
    /// The attempt was accepted.
    pub accepted: bool,
    /// How often the answer it repeats has been given, this one included; 0 when it repeats
    /// no earlier answer.
    pub repeats: u32,
    /// Attempts in a row, this one included, that did not improve the best score.
    pub stale: u32,
    /// Attempts made, this one included.
    pub made: u32,
    /// Attempts the run may make: `max_iterations`, raised by each person's answer.
    pub limit: u32,
}

impl Policy {
    /// Whether the run halts before its next attempt, and why: the attempts ran out, the wall
    /// time did, or the attempt's estimated cost would take the spending past the budget
    /// (in that order).
    pub fn halt_before(&self, now: BeforeAttempt) -> Option<HaltReason> {
        if now.made >= now.limit {
            return Some(HaltReason::MaxIterations);
        }
        if self.max_wall_time.is_some_and(|limit| now.elapsed >= limit) {
            return Some(HaltReason::WallTime);
        }
        if let (Some(budget), Some(next)) = (self.max_budget_usd, now.next_usd)
            && now.spent_usd + next > budget
        {
            return Some(HaltReason::Budget);
        }
        None
    }

    /// Whether the run halts after an attempt, and why: it was accepted, its answer was given
    /// `repeat_limit` times, `patience` attempts did not improve, or it was the last the run
    /// may make (in that order). A limit of 0 is off.
    pub fn halt_after(&self, now: AfterAttempt) -> Option<HaltReason> {
        if now.accepted {
            Some(HaltReason::Success)
        } else if self.repeat_limit > 0 && now.repeats >= self.repeat_limit {
            Some(HaltReason::Stagnation)
        } else if self.patience > 0 && now.stale >= self.patience {
            Some(HaltReason::Patience)
        } else if now.made >= now.limit {
            Some(HaltReason::MaxIterations)
        } else {
            None
        }
    }
}

/// The sampling settings a proposer may be sent: `temperature` in [0, 2] (the widest range
/// the providers accept) and `max_tokens` at least 1. Anything else is refused here, by name,
/// rather than forwarded to a server that may reject it — or worse, accept it.
pub fn validate_sampling(temperature: Option<f32>, max_tokens: Option<u32>) -> Result<(), PlanError> {
    if let Some(t) = temperature
        && !(t.is_finite() && (0.0..=2.0).contains(&t))
    {
        return Err(PlanError::invalid("temperature", &t.to_string(), "must be a number from 0 to 2"));
    }
    if max_tokens == Some(0) {
        return Err(PlanError::invalid("max_tokens", "0", "must be at least 1"));
    }
    Ok(())
}

/// A run cannot start as described.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    #[error("`{key}` = `{value}` is invalid: it {rule}")]
    Invalid { key: String, value: String, rule: String },
    #[error(
        "a budget (`max_budget_usd`) is set but the price of `{model}` is unknown\nhint: add its price to the config:\n\n[models.\"{model}\"]\ninput_usd_per_mtok = 0.15\noutput_usd_per_mtok = 0.60"
    )]
    BudgetWithoutPrice { model: String },
    #[error(
        "a budget of ${} (`max_budget_usd`) cannot pay for one attempt: the first is estimated at {estimate}\nhint: raise `max_budget_usd` to at least ${}, or shorten the prompt or lower `max_tokens`",
        crate::price::usd(*budget),
        crate::price::usd(*needed)
    )]
    BudgetTooSmall { budget: f64, estimate: String, needed: f64 },
    #[error("the {which} template is invalid: {message}")]
    Template { which: String, message: String },
}

impl PlanError {
    fn invalid(key: &str, value: &str, rule: &str) -> Self {
        PlanError::Invalid { key: key.into(), value: value.into(), rule: rule.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_spec() {
        let p = Policy::default();
        assert_eq!(p.max_iterations, 3);
        assert_eq!(p.repeat_limit, 2);
        assert_eq!(p.attempt_timeout, Duration::from_secs(120));
        assert_eq!(p.threshold(false), 1.0);
        assert_eq!(p.threshold(true), 0.9);
        assert!(p.validate(&Ceilings::default()).is_ok());
    }

    #[test]
    fn invalid_fields_are_named() {
        let c = Ceilings::default();
        let bad = |p: Policy, key: &str| {
            let err = p.validate(&c).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(key), "{err}");
        };
        bad(Policy { success_threshold: Some(1.5), ..Policy::default() }, "success_threshold");
        bad(Policy { max_iterations: 0, ..Policy::default() }, "max_iterations");
        bad(Policy { max_iterations: 21, ..Policy::default() }, "at most 20");
        bad(Policy { max_budget_usd: Some(-1.0), ..Policy::default() }, "max_budget_usd");
        bad(Policy { repeat_limit: 1, ..Policy::default() }, "repeat_limit");
        let server = Ceilings { max_budget_usd: Some(1.0), max_wall_time: Some(Duration::from_secs(60)), ..c.clone() };
        let err = Policy { max_budget_usd: Some(5.0), ..Policy::default() }.validate(&server).unwrap_err().to_string();
        assert!(err.contains("must be at most 1 here"), "{err}");
        let err = Policy { max_wall_time: Some(Duration::from_secs(600)), ..Policy::default() }
            .validate(&server)
            .unwrap_err()
            .to_string();
        assert!(err.contains("must be at most 60s here"), "{err}");
    }

    #[test]
    fn the_halting_rules_apply_in_order() {
        let p = Policy {
            max_wall_time: Some(Duration::from_secs(60)),
            max_budget_usd: Some(1.0),
            patience: 2,
            ..Policy::default()
        };
        let before =
            BeforeAttempt { made: 1, limit: 3, elapsed: Duration::from_secs(1), spent_usd: 0.5, next_usd: Some(0.4) };
        assert_eq!(p.halt_before(before), None);
        assert_eq!(p.halt_before(BeforeAttempt { next_usd: Some(0.6), ..before }), Some(HaltReason::Budget));
        assert_eq!(p.halt_before(BeforeAttempt { next_usd: None, spent_usd: 9.0, ..before }), None, "no estimate");
        let late = BeforeAttempt { elapsed: Duration::from_secs(60), next_usd: Some(0.6), ..before };
        assert_eq!(p.halt_before(late), Some(HaltReason::WallTime));
        assert_eq!(p.halt_before(BeforeAttempt { made: 3, ..late }), Some(HaltReason::MaxIterations));

        let after = AfterAttempt { accepted: false, repeats: 0, stale: 1, made: 1, limit: 3 };
        assert_eq!(p.halt_after(after), None);
        assert_eq!(p.halt_after(AfterAttempt { made: 3, ..after }), Some(HaltReason::MaxIterations));
        assert_eq!(p.halt_after(AfterAttempt { stale: 2, made: 3, ..after }), Some(HaltReason::Patience));
        let repeated = AfterAttempt { repeats: 2, stale: 2, made: 3, ..after };
        assert_eq!(p.halt_after(repeated), Some(HaltReason::Stagnation));
        assert_eq!(p.halt_after(AfterAttempt { accepted: true, ..repeated }), Some(HaltReason::Success));
        let off = Policy { repeat_limit: 0, patience: 0, ..p };
        assert_eq!(off.halt_after(AfterAttempt { repeats: 5, stale: 5, ..after }), None);
    }

    #[test]
    fn sampling_settings_out_of_range_are_named() {
        assert!(validate_sampling(None, None).is_ok());
        assert!(validate_sampling(Some(0.0), Some(1)).is_ok());
        assert!(validate_sampling(Some(2.0), Some(u32::MAX)).is_ok());
        for (t, key, rule) in [
            (Some(99.0), "temperature", "from 0 to 2"),
            (Some(-1.0), "temperature", "from 0 to 2"),
            (Some(f32::NAN), "temperature", "from 0 to 2"),
            (Some(f32::INFINITY), "temperature", "from 0 to 2"),
        ] {
            let err = validate_sampling(t, None).unwrap_err().to_string();
            assert!(err.contains(key) && err.contains(rule), "{err}");
        }
        let err = validate_sampling(None, Some(0)).unwrap_err().to_string();
        assert!(err.contains("`max_tokens` = `0`") && err.contains("at least 1"), "{err}");
    }

    #[test]
    fn reads_human_durations() {
        let p: Policy =
            serde_json::from_str(r#"{"max_wall_time":"90s","attempt_timeout":5}"#).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.max_wall_time, Some(Duration::from_secs(90)));
        assert_eq!(p.attempt_timeout, Duration::from_secs(5));
        assert!(serde_json::from_str::<Policy>(r#"{"max_iteration":3}"#).is_err());
    }
}
