//! What the next request carries after an attempt: the previous answer (cut like every echo)
//! and the feedback, including for an answer too large to read.

use std::time::Duration;

use redraft_core::{AttemptEnd, AttemptOutcome, AttemptStatus, Engine, Message, Next, Role};

use crate::{answer, city_check, plan};

#[test]
fn the_conversation_keeps_the_previous_answer_and_adds_feedback() {
    let mut p = plan();
    p.task.system = Some("You are precise.".into());
    let mut e = Engine::new(p).unwrap();
    answer(&mut e, r#"{"city": "Louisville"}"#, city_check);
    let req = e.request();
    let roles: Vec<Role> = req.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::System, Role::User, Role::Assistant, Role::User]);
    assert_eq!(req.messages[2], Message::assistant(r#"{"city": "Louisville"}"#));
}

#[test]
fn an_answer_too_large_to_read_is_a_failed_attempt_whose_feedback_says_so() {
    for strategy in [redraft_core::Strategy::Conversation, redraft_core::Strategy::Fresh] {
        let mut p = plan();
        p.strategy = strategy;
        let mut e = Engine::new(p.clone()).unwrap();
        let first = e.request();
        let Next::Attempt { iteration, .. } = e.next(Duration::ZERO) else { panic!() };
        let end = AttemptEnd::ResponseTooLarge { limit: 4_194_304 };
        let rec = e
            .settle(AttemptOutcome {
                iteration,
                request_chars: 10,
                wall_ms: 900,
                started_at: None,
                finished_at: None,
                end,
            })
            .cloned()
            .unwrap();
        assert_eq!((rec.status, rec.raw.as_str(), rec.score.get()), (AttemptStatus::Error, "", 0.0));
        assert_eq!(rec.issues.len(), 1);
        assert_eq!(rec.issues[0].code, "response_too_large");
        assert_eq!(
            rec.issues[0].message,
            "the answer was larger than the limit of 4194304 bytes (`max_response_bytes`) and was not read: answer much more briefly"
        );
        // The next request tells the proposer, and holds nothing of the answer.
        let next = e.request();
        assert_ne!(next.messages, first.messages, "{strategy:?}: not the same request again");
        let told = &next.messages.last().unwrap().content;
        assert!(told.contains("[response_too_large]") && told.contains("answer much more briefly"), "{told}");
        assert!(!told.contains("within the time limit"), "{strategy:?}: it is not a timeout: {told}");
        assert!(next.messages.iter().all(|m| m.role != Role::Assistant), "{strategy:?}");

        // A resumed run rebuilds the same request.
        let mut resumed = Engine::new(p).unwrap();
        resumed.restore(rec);
        assert_eq!(resumed.request(), next, "{strategy:?}");
    }
}

#[test]
fn the_previous_answer_kept_in_the_conversation_is_cut_like_the_echo() {
    let mut p = plan();
    p.feedback_max_chars = 100;
    let mut e = Engine::new(p).unwrap();
    let raw = format!("I think {}", "é".repeat(5000));
    answer(&mut e, &raw, city_check);
    let request = e.request();
    let kept = &request.messages[1];
    assert_eq!(kept.role, Role::Assistant);
    let marker = format!("[truncated: showing the first 100 of {} characters]", raw.chars().count());
    assert_eq!(kept.content, format!("{}\n{marker}", raw.chars().take(100).collect::<String>()));
    let feedback = &request.messages[2].content;
    assert!(feedback.contains(&format!("\n{marker}\n")), "the feedback's echo has the same marker: {feedback}");

    // An answer within the limit is kept verbatim.
    let mut e = Engine::new(plan()).unwrap();
    answer(&mut e, r#"{"city": "Louisville"}"#, city_check);
    assert_eq!(e.request().messages[1], Message::assistant(r#"{"city": "Louisville"}"#));
}
