use std::time::Duration;

use redraft_core::{
    AttemptEnd, AttemptOutcome, AttemptStatus, Engine, HaltReason, Interruption, Message, Next, PlanError, Price, Role,
    Usage, Verdict,
};
use serde_json::json;

use crate::{answer, answer_with, city_check, finish, plan, scored};

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
fn the_first_repeat_is_told_so_when_the_limit_allows_another_try() {
    let mut p = plan();
    p.policy.repeat_limit = 3;
    let mut e = Engine::new(p).unwrap();
    answer(&mut e, r#"{"city": "Louisville"}"#, city_check);
    answer(&mut e, r#"{"city": "Louisville"}"#, city_check);
    let req = e.request();
    let feedback = &req.messages.last().unwrap().content;
    assert!(
        feedback.contains("Your answer is identical to attempt 1 and was rejected for the same reasons"),
        "{feedback}"
    );
    assert!(feedback.starts_with("Attempt 3 of 3."), "{feedback}");
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
fn budget_is_checked_before_each_attempt_with_an_estimate() {
    let mut p = plan();
    p.price = Some(Price { input_usd_per_mtok: 100.0, output_usd_per_mtok: 100.0 });
    p.policy.max_budget_usd = Some(0.5);
    let mut e = Engine::new(p).unwrap();
    // The first attempt is estimated at ~1150 tokens ($0.115) and may start. It reports
    // 3000 + 1000 tokens at $100/Mtok = $0.40 spent; the next is estimated at its prompt plus
    // 1000 output tokens (> $0.10), which would pass the $0.50 budget.
    let est = e.estimate_next_cost(&e.request()).unwrap();
    assert!(est > 0.1 && est < 0.5, "{est}");
    answer_with(
        &mut e,
        r#"{"city": "Louisville"}"#,
        Some(Usage { input_tokens: 3000, output_tokens: 1000 }),
        city_check,
    );
    assert_eq!(e.next(Duration::ZERO), Next::Halt(HaltReason::Budget));
    let r = finish(e);
    assert_eq!(r.halted_because, HaltReason::Budget);
    assert_eq!(r.iterations, 1);
    assert!((r.metrics.cost_usd.unwrap() - 0.4).abs() < 1e-9);
    assert!(!r.metrics.tokens_estimated);
    // The escalation says what was spent, what the next attempt would have cost and how that
    // was estimated.
    let pattern = r.escalation.unwrap().pattern.unwrap();
    assert!(
        pattern.starts_with(
            "the budget of $0.50 ran out after 1 attempts: $0.40 was spent and the next attempt was estimated at $0.1"
        ),
        "{pattern}"
    );
    assert!(pattern.contains("1000 output tokens: the longest answer so far, at $100 per million"), "{pattern}");
}

#[test]
fn a_budget_that_cannot_pay_for_one_attempt_refuses_to_start() {
    let mut p = plan();
    p.price = Some(Price { input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60 });
    p.max_tokens = Some(100);
    p.policy.max_budget_usd = Some(0.000_01);
    let chars = Engine::new(plan()).unwrap().request().chars();
    let err = Engine::new(p).unwrap_err();
    assert!(matches!(err, PlanError::BudgetTooSmall { .. }), "{err}");
    let text = err.to_string();
    assert!(text.starts_with("a budget of $0.00001 (`max_budget_usd`) cannot pay for one attempt"), "{text}");
    assert!(
        text.contains(&format!(
            "{} input tokens: the {chars}-character prompt at 4 characters per token, at $0.15 per million",
            chars.div_ceil(4)
        )),
        "{text}"
    );
    assert!(
        text.contains("100 output tokens: `max_tokens`, at most 1024, before any answer, at $0.6 per million"),
        "{text}"
    );
    assert!(text.contains("hint: raise `max_budget_usd` to at least $0.0000"), "{text}");
}

#[test]
fn a_budget_without_a_price_refuses_to_start() {
    let mut p = plan();
    p.policy.max_budget_usd = Some(1.0);
    let err = Engine::new(p).unwrap_err();
    assert!(matches!(err, PlanError::BudgetWithoutPrice { .. }));
    assert!(err.to_string().contains("[models.\"mock/test\"]"), "{err}");
}

#[test]
fn tokens_are_estimated_when_usage_is_missing() {
    let mut e = Engine::new(plan()).unwrap();
    let raw = r#"{"city": "Toledo"}"#; // 18 chars -> 5 tokens
    let rec = answer(&mut e, raw, city_check).unwrap();
    assert_eq!(rec.tokens_out, 5);
    assert!(rec.tokens_estimated);
    assert!(rec.tokens_in > 0);
    assert_eq!(rec.cost_usd, None, "no price, no cost");
    let r = finish(e);
    assert!(r.metrics.tokens_estimated);
    assert_eq!(r.metrics.cost_usd, None);
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
fn text_mode_evaluates_the_raw_text() {
    let mut p = plan();
    p.mode = redraft_core::Mode::Text;
    p.schema = None;
    let mut e = Engine::new(p).unwrap();
    let check = |a: &serde_json::Value| {
        if a.as_str().is_some_and(|s| s.contains("haiku")) {
            Verdict::pass()
        } else {
            Verdict::from_issues(vec![redraft_core::Issue::new("", "check", "no haiku")])
        }
    };
    answer(&mut e, "a poem", check);
    answer(&mut e, "a haiku", check);
    let r = finish(e);
    assert_eq!(r.artifact, Some(json!("a haiku")));
    assert_eq!(r.history[1].extraction, None);
}

#[test]
fn a_repeat_raises_the_temperature_and_switches_to_the_next_fallback_model() {
    let mut p = plan();
    p.policy.repeat_limit = 3;
    p.policy.max_iterations = 4;
    p.fallbacks = vec![
        redraft_core::Fallback { model: "mock/bigger".into(), price: None },
        redraft_core::Fallback { model: "mock/biggest".into(), price: None },
    ];
    let mut e = Engine::new(p).unwrap();
    let first = answer(&mut e, r#"{"city": "Louisville"}"#, city_check).unwrap();
    assert_eq!((first.model.as_deref(), first.temperature), (Some("mock/test"), None));
    answer(&mut e, r#"{"city": "Louisville"}"#, city_check);
    let Next::Attempt { request, proposer, .. } = e.next(Duration::ZERO) else { panic!() };
    assert_eq!((proposer, request.temperature), (1, Some(0.5)));
    let third = answer(&mut e, r#"{"city": "Dayton"}"#, city_check).unwrap();
    assert_eq!((third.model.as_deref(), third.temperature), (Some("mock/bigger"), Some(0.5)));
    // no repeat, no change
    let Next::Attempt { request, proposer, .. } = e.next(Duration::ZERO) else { panic!() };
    assert_eq!((proposer, request.temperature), (1, Some(0.5)));
}

#[test]
fn the_temperature_rise_is_capped_and_a_budget_needs_every_fallback_price() {
    let mut p = plan();
    p.temperature = Some(0.9);
    p.policy.repeat_limit = 0;
    let mut e = Engine::new(p).unwrap();
    answer(&mut e, r#"{"city": "X"}"#, city_check);
    answer(&mut e, r#"{"city": "X"}"#, city_check);
    assert_eq!(e.request().temperature, Some(1.0));

    let mut p = plan();
    p.price = Some(Price { input_usd_per_mtok: 1.0, output_usd_per_mtok: 1.0 });
    p.policy.max_budget_usd = Some(1.0);
    p.fallbacks = vec![redraft_core::Fallback { model: "mock/unpriced".into(), price: None }];
    let err = Engine::new(p).unwrap_err().to_string();
    assert!(err.contains("`mock/unpriced`"), "{err}");
}

#[test]
fn judge_costs_are_reported_apart_and_not_counted_against_the_budget() {
    let mut p = plan();
    p.price = Some(Price { input_usd_per_mtok: 1.0, output_usd_per_mtok: 1.0 });
    p.policy.max_budget_usd = Some(0.01);
    p.policy.repeat_limit = 0;
    let mut e = Engine::new(p).unwrap();
    let judged = |_: &serde_json::Value| Verdict {
        cost_usd: Some(5.0),
        ..Verdict::from_issues(vec![redraft_core::Issue::new("", "grade", "meh")])
    };
    let rec = answer_with(&mut e, r#"{"a": 1}"#, Some(Usage { input_tokens: 100, output_tokens: 10 }), judged).unwrap();
    assert_eq!(rec.judge_cost_usd, Some(5.0));
    assert!(matches!(e.next(Duration::ZERO), Next::Attempt { .. }), "a $5 judge does not spend the $0.01 budget");
    let r = finish(e);
    assert_eq!(r.metrics.judge_cost_usd, Some(5.0));
    assert!(r.metrics.cost_usd.unwrap() < 0.001);
}

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

/// The engine coerces what it extracts toward the plan's schema (each change a repair), leaves
/// an echoed schema as it was written for the `schema_echo` check to see, and with `coerce`
/// off gives the evaluators the answer as extracted.
#[test]
fn an_extracted_answer_is_coerced_toward_the_schema_unless_the_plan_says_not() {
    let mut p = plan();
    p.schema = Some(std::sync::Arc::new(json!({
        "type": "object",
        "required": ["city", "zip", "open"],
        "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}, "open": {"type": "boolean"}}
    })));
    let e = Engine::new(p.clone()).unwrap();
    let c = e.candidate(r#"Here: {"city": "Toledo", "zip": "43604", "open": "Yes"}"#);
    assert_eq!(c.artifact, Some(json!({"city": "Toledo", "zip": 43604, "open": true})));
    let repairs = serde_json::to_value(&c.repairs).unwrap();
    assert_eq!(
        repairs,
        json!([{"path": "/zip", "from": "43604", "to": 43604}, {"path": "/open", "from": "Yes", "to": true}])
    );

    // A repaired text and a coercion are both recorded, the text's repair first.
    let c = e.candidate(r#"{'city': 'Toledo', 'zip': '43604', 'open': true,}"#);
    assert_eq!(c.artifact, Some(json!({"city": "Toledo", "zip": 43604, "open": true})));
    let repairs = serde_json::to_value(&c.repairs).unwrap();
    assert_eq!(repairs[0], "single_quotes");
    assert_eq!(repairs.as_array().unwrap().last().unwrap(), &json!({"path": "/zip", "from": "43604", "to": 43604}));

    // The schema given back instead of an answer is not bent toward itself.
    let echo = serde_json::to_string(p.schema.as_deref().unwrap()).unwrap();
    let c = e.candidate(&echo);
    assert_eq!(c.artifact.as_ref(), p.schema.as_deref());
    assert!(c.repairs.is_empty(), "{:?}", c.repairs);

    p.coerce = false;
    let e = Engine::new(p).unwrap();
    let c = e.candidate(r#"{"city": "Toledo", "zip": "43604", "open": "Yes"}"#);
    assert_eq!(c.artifact, Some(json!({"city": "Toledo", "zip": "43604", "open": "Yes"})));
    assert!(c.repairs.is_empty());
}

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

/// A check whose hint carries a schema narrows what the next requests ask a constraining
/// decoder for, at the failed path, and keeps what it learned when a later attempt fails
/// elsewhere; the prompt's schema and the checks are unchanged, and a resumed run asks the same.
#[test]
fn a_hint_schema_narrows_the_next_requests_schema_at_its_path() {
    let mut p = plan();
    p.policy.max_iterations = 5;
    p.schema = Some(std::sync::Arc::new(json!({
        "type": "object",
        "required": ["city", "role"],
        "properties": {"city": {"type": "string"}, "role": {"type": "string"}}
    })));
    let check = |artifact: &serde_json::Value| {
        let mut issues = Vec::new();
        if artifact["city"] != "Toledo" {
            issues.push(
                redraft_core::Issue::new("/city", "rule:city", "not the contract's city")
                    .with_hint("the contract is in Toledo", vec![])
                    .with_hint_schema(json!({"enum": ["Toledo"]})),
            );
        }
        if artifact["role"] != "Welder" {
            issues.push(
                redraft_core::Issue::new("/role", "rule:role", "not the contract's role")
                    .with_hint_schema(json!({"const": "Welder"})),
            );
        }
        redraft_core::Verdict::from_issues(issues)
    };
    let schema_sent = |e: &Engine| e.request().schema.map(|s| (*s).clone()).unwrap();
    let mut e = Engine::new(p.clone()).unwrap();
    assert_eq!(schema_sent(&e), *p.schema.clone().unwrap(), "the first request sends the run's schema");
    answer(&mut e, r#"{"city": "Dayton", "role": "Welder"}"#, check);
    let narrowed = schema_sent(&e);
    assert_eq!(narrowed["properties"]["city"], json!({"type": "string", "enum": ["Toledo"]}));
    assert_eq!(narrowed["properties"]["role"], json!({"type": "string"}));
    // The second attempt fixes the city and breaks the role: both stay narrowed.
    answer(&mut e, r#"{"city": "Toledo", "role": "Pipefitter"}"#, check);
    let narrowed = schema_sent(&e);
    assert_eq!(narrowed["properties"]["city"]["enum"], json!(["Toledo"]));
    assert_eq!(narrowed["properties"]["role"], json!({"type": "string", "const": "Welder"}));
    let prompt = e.request().messages.iter().map(|m| m.content.clone()).collect::<Vec<_>>().join("\n");
    assert!(!prompt.contains("const"), "the prompt shows the run's schema, not the narrowed one:\n{prompt}");

    // Resumed from its records, the run asks the same.
    let mut resumed = Engine::new(p.clone()).unwrap();
    for r in e.history().to_vec() {
        resumed.restore(r);
    }
    assert_eq!(resumed.request(), e.request());
    assert_eq!(schema_sent(&resumed), narrowed);

    answer(&mut e, r#"{"city": "Toledo", "role": "Welder"}"#, check);
    assert_eq!(finish(e).halted_because, HaltReason::Success);

    // Without a schema to send (text mode), nothing is narrowed.
    let mut p = p;
    p.schema = None;
    let mut e = Engine::new(p).unwrap();
    answer(&mut e, r#"{"city": "Dayton", "role": "Welder"}"#, check);
    assert_eq!(e.request().schema, None);
}
