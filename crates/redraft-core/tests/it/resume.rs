//! A run resumed from its records (`Engine::restore`) goes on exactly where it stopped.

use std::time::Duration;

use redraft_core::{AttemptEnd, AttemptOutcome, Engine, HaltReason, Interruption, Next};

use crate::{answer, city_check, finish, plan};

#[test]
fn a_restored_history_continues_exactly_where_it_stopped() {
    let mut p = plan();
    p.policy.max_iterations = 4;
    p.policy.repeat_limit = 3;
    p.fallbacks = vec![redraft_core::Fallback { model: "mock/b".into(), price: None }];
    // The original run: three answers, the third a repeat, then the process dies.
    let mut original = Engine::new(p.clone()).unwrap();
    answer(&mut original, "no json", city_check);
    answer(&mut original, r#"{"city": "Louisville"}"#, city_check);
    answer(&mut original, r#"{"city": "Louisville"}"#, city_check);
    let records = original.history().to_vec();
    let expected_request = original.request();
    let Next::Attempt { proposer: expected_proposer, .. } = original.next(Duration::ZERO) else { panic!() };

    let mut resumed = Engine::new(p).unwrap();
    for r in records.clone() {
        resumed.restore(r);
    }
    assert_eq!(resumed.history(), records.as_slice());
    assert_eq!(resumed.request(), expected_request, "same conversation, temperature and iteration");
    let Next::Attempt { iteration, proposer, .. } = resumed.next(Duration::ZERO) else { panic!() };
    assert_eq!((iteration, proposer), (4, expected_proposer));
    answer(&mut resumed, r#"{"city": "Toledo"}"#, city_check);
    let r = finish(resumed);
    assert_eq!(r.halted_because, HaltReason::Success);
    assert_eq!(r.iterations, 4);
}

#[test]
fn an_interrupted_attempt_is_made_again_after_a_resume() {
    let mut original = Engine::new(plan()).unwrap();
    answer(&mut original, r#"{"city": "Louisville"}"#, city_check);
    let Next::Attempt { iteration, .. } = original.next(Duration::ZERO) else { panic!() };
    original.settle(AttemptOutcome {
        iteration,
        request_chars: 0,
        wall_ms: 1,
        started_at: None,
        finished_at: None,
        end: AttemptEnd::Interrupted(Interruption::Cancelled),
    });
    let records = original.history().to_vec();
    assert_eq!(records.len(), 2);
    let mut resumed = Engine::new(plan()).unwrap();
    for r in records {
        resumed.restore(r);
    }
    assert_eq!(resumed.history().len(), 1);
    let Next::Attempt { iteration, .. } = resumed.next(Duration::ZERO) else { panic!() };
    assert_eq!(iteration, 2);
}
