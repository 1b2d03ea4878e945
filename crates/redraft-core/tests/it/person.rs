//! A run that awaits a person's answer (`on_escalation = await`), goes on with it, and replays
//! it when resumed.

use std::time::Duration;

use redraft_core::{Engine, HaltReason, Next, Role};
use serde_json::json;

use crate::{answer, city_check, finish, plan};

fn reply(answer: &str, max_iterations: u32) -> redraft_core::PersonReply {
    redraft_core::PersonReply {
        question: "Which city is the contract in?".into(),
        answer: answer.into(),
        max_iterations,
        after_iteration: 0,
        answered_at: None,
    }
}

#[test]
fn a_run_that_would_fail_awaits_a_person_and_goes_on_with_the_answer() {
    let mut p = plan();
    p.policy.on_escalation = redraft_core::OnEscalation::Await;
    // Without an answer: stopped awaiting input, with its escalation and best so far.
    let mut waiting = Engine::new(p.clone()).unwrap();
    answer(&mut waiting, r#"{"city": "Louisville"}"#, city_check);
    answer(&mut waiting, r#"{"city": "Louisville"}"#, city_check);
    let r = finish(waiting);
    assert_eq!((r.status, r.halted_because), (redraft_core::RunStatus::AwaitingInput, HaltReason::Stagnation));
    assert!(r.escalation.is_some() && !r.succeeded());
    assert_eq!(r.artifact, Some(json!({"city": "Louisville"})));

    // Answered: the next attempt gets the feedback on the last one and the answer, and the
    // repeat count starts again (the same wrong answer once more is not stagnation yet).
    let mut e = Engine::new(p.clone()).unwrap();
    answer(&mut e, r#"{"city": "Louisville"}"#, city_check);
    answer(&mut e, r#"{"city": "Louisville"}"#, city_check);
    assert_eq!(e.next(Duration::ZERO), Next::Halt(HaltReason::Stagnation));
    e.answer(reply("Toledo, OH: the contract says so", 2)).unwrap();
    let request = e.request();
    let last = request.messages.last().unwrap();
    assert_eq!(last.role, Role::User);
    assert!(last.content.contains("rule:city_matches") || last.content.contains("city"), "{}", last.content);
    assert!(
        last.content.contains("Question: Which city is the contract in?\nAnswer: Toledo, OH: the contract says so"),
        "{}",
        last.content
    );
    assert_eq!(request.max_iterations, 4, "two more attempts than the two made");
    let Next::Attempt { iteration, .. } = e.next(Duration::ZERO) else { panic!("the run goes on") };
    assert_eq!(iteration, 3);
    let third = answer(&mut e, r#"{"city": "Louisville"}"#, city_check).unwrap();
    assert_eq!(
        third.reply.as_ref().map(|r| (r.answer.as_str(), r.after_iteration)),
        Some(("Toledo, OH: the contract says so", 2))
    );
    assert!(matches!(e.next(Duration::ZERO), Next::Attempt { iteration: 4, .. }));
    let fourth = answer(&mut e, r#"{"city": "Toledo"}"#, city_check).unwrap();
    assert!(fourth.reply.is_none(), "the answer is recorded on the attempt that first received it");
    // Each attempt keeps what it was told: the first prompt, then the feedback, with the
    // person's answer on the attempt that received it.
    let told: Vec<String> = e.history().iter().map(|a| a.prompt.clone().unwrap_or_default()).collect();
    let first = Engine::new(p.clone()).unwrap().request().messages.last().unwrap().content.clone();
    assert_eq!(told[0], first);
    assert!(!told[0].contains("Answer:") && told[0] != told[1], "{told:?}");
    assert!(told[2].contains("Answer: Toledo, OH: the contract says so"), "{}", told[2]);
    assert!(!told[3].contains("Answer: Toledo"), "the answer is given once: {}", told[3]);
    let r = finish(e);
    assert!(r.succeeded());
    assert_eq!(r.iterations, 4);
}

#[test]
fn an_answer_is_refused_unless_the_run_halted_for_a_reason_it_can_change() {
    let mut p = plan();
    p.policy.on_escalation = redraft_core::OnEscalation::Await;
    let mut running = Engine::new(p.clone()).unwrap();
    assert!(matches!(running.answer(reply("x", 3)), Err(redraft_core::AnswerError::NotAwaiting(_))));
    let mut cancelled = Engine::new(p.clone()).unwrap();
    answer(&mut cancelled, r#"{"city": "Louisville"}"#, city_check);
    cancelled.cancel();
    assert!(matches!(cancelled.answer(reply("x", 3)), Err(redraft_core::AnswerError::NotAwaiting(_))));
    // A cancelled run fails, whatever the policy says.
    assert_eq!(finish(cancelled).status, redraft_core::RunStatus::Failed);
    let mut stagnated = Engine::new(p).unwrap();
    answer(&mut stagnated, r#"{"city": "Louisville"}"#, city_check);
    answer(&mut stagnated, r#"{"city": "Louisville"}"#, city_check);
    assert_eq!(stagnated.answer(reply("x", 0)), Err(redraft_core::AnswerError::NoAttempts));
}

#[test]
fn an_answered_run_replayed_from_its_records_asks_the_same_as_the_live_one() {
    let mut p = plan();
    p.policy.on_escalation = redraft_core::OnEscalation::Await;
    p.policy.max_iterations = 2;
    p.policy.repeat_limit = 0;
    let mut live = Engine::new(p.clone()).unwrap();
    answer(&mut live, "no json", city_check);
    answer(&mut live, r#"{"city": "Louisville"}"#, city_check);
    live.answer(reply("Toledo", 3)).unwrap();
    answer(&mut live, r#"{"city": "Dayton"}"#, city_check);
    let records = live.history().to_vec();
    let mut replayed = Engine::new(p).unwrap();
    let mut given = reply("Toledo", 3);
    given.after_iteration = 2;
    for (i, r) in records.into_iter().enumerate() {
        if i == 2 {
            replayed.answer(given.clone()).unwrap();
        }
        replayed.restore(r);
    }
    assert_eq!(replayed.history(), live.history());
    assert_eq!(replayed.request(), live.request());
    assert_eq!(replayed.next(Duration::ZERO), live.next(Duration::ZERO));
}
