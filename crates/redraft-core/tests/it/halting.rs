//! The halting rules as the engine applies them: success, stagnation, patience, the attempt
//! limit, wall time, an interrupted or timed-out attempt, and a provider that keeps failing.

use std::time::Duration;

use redraft_core::{AttemptEnd, AttemptOutcome, AttemptStatus, Engine, HaltReason, Interruption, Next, Verdict};
use serde_json::json;

use crate::{answer, city_check, finish, plan, scored};

fn statuses(r: &redraft_core::RunResult) -> Vec<&'static str> {
    r.history.iter().map(|a| a.status.as_str()).collect()
}

#[test]
fn converges_from_invalid_through_wrong_to_repaired() {
    let mut e = Engine::new(plan()).unwrap();
    answer(&mut e, "Sure! The city is Toledo.", city_check);
    answer(&mut e, "```json\n{\"city\": \"Louisville\"}\n```", city_check);
    let last = answer(&mut e, "{'city': 'Toledo',}", city_check).unwrap();
    assert_eq!(last.extraction, Some(redraft_core::extract::Route::Repaired));
    let r = finish(e);
    assert_eq!(statuses(&r), ["invalid_json", "rejected", "accepted"]);
    assert_eq!(r.halted_because, HaltReason::Success);
    assert!(r.succeeded());
    assert_eq!(r.artifact, Some(json!({"city": "Toledo"})));
    assert_eq!(r.best_iteration, Some(3));
    assert_eq!(r.best_ref.as_deref(), Some("run-1/3"));
    assert_eq!(r.iterations, 3);
    assert!(r.escalation.is_none());
    assert!(r.validation.passed);
    assert_eq!(r.history[0].issues[0].code, "invalid_json");
}

#[test]
fn the_same_wrong_answer_twice_is_stagnation_with_best_so_far() {
    let mut e = Engine::new(plan()).unwrap();
    answer(&mut e, r#"{"city": "Louisville"}"#, city_check);
    let second = answer(&mut e, r#"{ "city" : "Louisville" }"#, city_check).unwrap();
    assert_eq!(second.repeat_of, Some(1));
    assert_eq!(e.next(Duration::ZERO), Next::Halt(HaltReason::Stagnation));
    let r = finish(e);
    assert_eq!(r.halted_because, HaltReason::Stagnation);
    assert!(!r.succeeded());
    assert_eq!(r.artifact, Some(json!({"city": "Louisville"})));
    assert_eq!(r.best_iteration, Some(2), "ties go to the latest attempt");
    let esc = r.escalation.unwrap();
    assert_eq!(esc.attempts, ["1: /city rule:city_matches", "2: identical to 1"]);
    assert!(esc.pattern.unwrap().starts_with("the same answer was proposed twice"));
}

#[test]
fn patience_halts_when_the_score_stops_improving() {
    let mut p = plan();
    p.policy.max_iterations = 10;
    p.policy.patience = 2;
    p.policy.repeat_limit = 0;
    let mut e = Engine::new(p).unwrap();
    answer(&mut e, r#"{"a": 1}"#, scored(0.5));
    answer(&mut e, r#"{"a": 2}"#, scored(0.4));
    assert!(matches!(e.next(Duration::ZERO), Next::Attempt { .. }));
    answer(&mut e, r#"{"a": 3}"#, scored(0.5));
    let r = finish(e);
    assert_eq!(r.halted_because, HaltReason::Patience);
    assert_eq!(r.iterations, 3);
    assert_eq!(r.best_iteration, Some(3), "ties go to the latest");
    assert_eq!(r.best_score.map(|s| s.get()), Some(0.5));
}

#[test]
fn max_iterations_returns_the_best_so_far() {
    let mut e = Engine::new(plan()).unwrap();
    answer(&mut e, r#"{"a": 1}"#, scored(0.2));
    answer(&mut e, r#"{"a": 2}"#, scored(0.7));
    answer(&mut e, r#"{"a": 3}"#, scored(0.1));
    assert_eq!(e.next(Duration::ZERO), Next::Halt(HaltReason::MaxIterations));
    let r = finish(e);
    assert_eq!(r.halted_because, HaltReason::MaxIterations);
    assert_eq!(r.artifact, Some(json!({"a": 2})));
    assert_eq!(r.best_iteration, Some(2));
    assert_eq!(r.history.len(), 3);
    assert!(!r.validation.passed);
}

#[test]
fn a_scoring_evaluator_lowers_the_default_threshold() {
    let mut p = plan();
    p.scoring = true;
    let mut e = Engine::new(p).unwrap();
    assert_eq!(e.threshold(), 0.9);
    let check = |_: &serde_json::Value| Verdict { score: redraft_core::Score::new(0.92).unwrap(), ..Verdict::pass() };
    answer(&mut e, r#"{"a": 1}"#, check);
    assert_eq!(finish(e).halted_because, HaltReason::Success);
}

#[test]
fn wall_time_halts_before_the_next_attempt() {
    let mut p = plan();
    p.policy.max_wall_time = Some(Duration::from_secs(5));
    let mut e = Engine::new(p).unwrap();
    answer(&mut e, r#"{"city": "Louisville"}"#, city_check);
    assert_eq!(e.next(Duration::from_secs(6)), Next::Halt(HaltReason::WallTime));
}

#[test]
fn an_interrupted_attempt_is_recorded_and_halts() {
    let mut e = Engine::new(plan()).unwrap();
    let Next::Attempt { iteration, .. } = e.next(Duration::ZERO) else { panic!() };
    e.settle(AttemptOutcome {
        iteration,
        request_chars: 0,
        wall_ms: 5000,
        started_at: None,
        finished_at: None,
        end: AttemptEnd::Interrupted(Interruption::WallTime),
    });
    let r = finish(e);
    assert_eq!(r.halted_because, HaltReason::WallTime);
    assert_eq!(r.history[0].status, AttemptStatus::Error);
    assert_eq!(r.history[0].issues[0].code, "wall_time");
}

#[test]
fn a_timed_out_attempt_counts_and_the_same_request_is_sent_again() {
    let mut e = Engine::new(plan()).unwrap();
    let before = e.request();
    let Next::Attempt { iteration, .. } = e.next(Duration::ZERO) else { panic!() };
    let rec = e
        .settle(AttemptOutcome {
            iteration,
            request_chars: 10,
            wall_ms: 120_000,
            started_at: None,
            finished_at: None,
            end: AttemptEnd::TimedOut,
        })
        .cloned()
        .unwrap();
    assert_eq!(rec.status, AttemptStatus::Error);
    assert_eq!(rec.issues[0].code, "timeout");
    assert_eq!(rec.issues[0].message, "the attempt took longer than 120s and was stopped");
    assert_eq!(e.request().messages, before.messages, "the same conversation is sent again");
    let Next::Attempt { iteration, request, .. } = e.next(Duration::ZERO) else { panic!() };
    assert_eq!((iteration, request.iteration, request.max_iterations), (2, 2, 3));
}

#[test]
fn persistent_provider_failure_halts_with_an_error_and_costs_no_attempt() {
    let mut e = Engine::new(plan()).unwrap();
    answer(&mut e, r#"{"city": "Louisville"}"#, city_check);
    let Next::Attempt { iteration, .. } = e.next(Duration::ZERO) else { panic!() };
    let rec = e.settle(AttemptOutcome {
        iteration,
        request_chars: 0,
        wall_ms: 1,
        started_at: None,
        finished_at: None,
        end: AttemptEnd::ProviderFailed { message: "`http://x` answered HTTP 500: boom".into() },
    });
    assert!(rec.is_none());
    let r = finish(e);
    assert_eq!(r.halted_because, HaltReason::ProviderError);
    assert_eq!(r.iterations, 1);
    assert_eq!(r.error.as_ref().unwrap().code, "provider_error");
    assert_eq!(r.artifact, Some(json!({"city": "Louisville"})), "best so far survives a provider failure");
    assert!(r.escalation.unwrap().question.contains("API key"));
}
