//! Properties that hold for every run, whatever the proposer and evaluators do.

use std::time::Duration;

use proptest::prelude::*;
use redraft_core::{AttemptEnd, AttemptOutcome, AttemptStatus, Engine, HaltReason, Next, Usage};
use serde_json::json;

use crate::{answer_with, plan, scored};

#[derive(Debug, Clone)]
enum Step {
    Scored { value: u8, score: f64 },
    Prose,
    TimedOut,
    ProviderFailed,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u8..4, prop_oneof![Just(0.0), Just(0.25), Just(0.5), Just(0.95), Just(1.0)])
            .prop_map(|(value, score)| Step::Scored { value, score }),
        1 => Just(Step::Prose),
        1 => Just(Step::TimedOut),
        1 => Just(Step::ProviderFailed),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_run_halts_once_within_its_limits(
        steps in proptest::collection::vec(step(), 0..30),
        max_iterations in 1u32..8,
        patience in 0u32..4,
        repeat_limit in prop_oneof![Just(0u32), 2u32..4],
    ) {
        let mut p = plan();
        p.policy.max_iterations = max_iterations;
        p.policy.patience = patience;
        p.policy.repeat_limit = repeat_limit;
        let mut e = Engine::new(p).unwrap();
        let mut halted_with = None;
        for s in &steps {
            match e.next(Duration::ZERO) {
                Next::Halt(reason) => { halted_with = Some(reason); break; }
                Next::Attempt { iteration, .. } => match s {
                    Step::Scored { value, score } => {
                        answer_with(&mut e, &json!({"v": value}).to_string(), Some(Usage::default()), scored(*score));
                    }
                    Step::Prose => { answer_with(&mut e, "no json here", None, scored(1.0)); }
                    Step::TimedOut => { e.settle(AttemptOutcome { iteration, request_chars: 1, wall_ms: 1, started_at: None, finished_at: None, end: AttemptEnd::TimedOut }); }
                    Step::ProviderFailed => { e.settle(AttemptOutcome { iteration, request_chars: 1, wall_ms: 1, started_at: None, finished_at: None, end: AttemptEnd::ProviderFailed { message: "down".into() } }); }
                },
            }
        }
        let halted = e.halted();
        // A halt is final: asked again, the engine halts for the same reason and asks for no
        // other attempt.
        if let Some(reason) = halted_with {
            prop_assert_eq!(halted, Some(reason));
            for _ in 0..3 {
                prop_assert_eq!(e.next(Duration::ZERO), Next::Halt(reason));
            }
        }
        let r = e.finish("r", Duration::ZERO);
        // never more than max_iterations attempts
        prop_assert!(r.iterations <= max_iterations);
        prop_assert_eq!(r.iterations as usize, r.history.len());
        // exactly one halt reason, and it agrees with the status
        if let Some(h) = halted { prop_assert_eq!(h, r.halted_because); }
        prop_assert_eq!(r.succeeded(), r.halted_because == HaltReason::Success);
        prop_assert_eq!(r.succeeded(), r.history.last().is_some_and(|a| a.status == AttemptStatus::Accepted));
        prop_assert_eq!(r.escalation.is_some(), !r.succeeded());
        // only the last attempt can be accepted
        prop_assert!(r.history.iter().rev().skip(1).all(|a| a.status != AttemptStatus::Accepted));
        // best = highest score among attempts with an artifact, ties to the latest
        let expected_best = r.history.iter().filter(|a| a.artifact.is_some())
            .fold(None::<&redraft_core::AttemptRecord>, |b, a| match b { Some(b) if b.score > a.score => Some(b), _ => Some(a) });
        prop_assert_eq!(r.best_iteration, expected_best.map(|a| a.iteration));
        prop_assert_eq!(r.artifact.as_ref(), expected_best.and_then(|a| a.artifact.as_ref()));
        // attempt numbers are 1..=n
        for (i, a) in r.history.iter().enumerate() { prop_assert_eq!(a.iteration as usize, i + 1); }
    }
}
