//! What a run costs: the budget checked before each attempt, prices, token estimates and judge
//! costs.

use std::time::Duration;

use redraft_core::{Engine, HaltReason, Next, PlanError, Price, Usage, Verdict};

use crate::{answer, answer_with, city_check, finish, plan};

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
