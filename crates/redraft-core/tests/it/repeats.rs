//! A repeated answer: the feedback says so, the temperature rises (capped) and the next fallback
//! model takes over.

use std::time::Duration;

use redraft_core::{Engine, Next, Price};

use crate::{answer, city_check, plan};

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
