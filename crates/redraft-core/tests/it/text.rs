//! The exact text people and models read: prompts, feedback, escalations.

use redraft_core::{Engine, PromptStyle, Strategy};
use serde_json::json;

use crate::{answer, city_check, finish, plan};

#[test]
fn first_prompt_shows_context_schema_and_example() {
    let mut p = plan();
    p.task.context = Some(json!({"contract": "C-7", "city": "Toledo"}));
    let e = Engine::new(p).unwrap();
    insta::assert_snapshot!(e.request().messages[0].content, @r#"
    Name the city of the contract as {"city": …}.

    Context:
    contract: C-7
    city: Toledo

    Answer with JSON that matches this JSON Schema:
    ```json
    {
      "type": "object",
      "properties": {
        "city": {
          "type": "string"
        }
      },
      "required": [
        "city"
      ]
    }
    ```

    An example of the expected shape (replace every placeholder with a real value):
    ```json
    {
      "city": "<string>"
    }
    ```

    Answer with only the JSON value, no explanation.
    "#);
}

#[test]
fn example_style_leaves_the_schema_out_of_the_first_prompt() {
    let mut p = plan();
    p.prompt_style = PromptStyle::Example;
    let e = Engine::new(p).unwrap();
    insta::assert_snapshot!(e.request().messages[0].content, @r#"
    Name the city of the contract as {"city": …}.

    Answer with JSON of this shape (replace every placeholder with a real value):
    ```json
    {
      "city": "<string>"
    }
    ```

    Answer with only the JSON value, no explanation.
    "#);
}

#[test]
fn feedback_numbers_every_issue_and_echoes_the_submission() {
    let mut e = Engine::new(plan()).unwrap();
    let two_issues = |_: &serde_json::Value| {
        redraft_core::Verdict::from_issues(vec![
            redraft_core::Issue::new(
                "/city",
                "rule:city_matches",
                "city 'Louisville' doesn't match contract city 'Toledo'",
            ),
            redraft_core::Issue::new(
                "",
                "additionalProperties",
                "Additional properties are not allowed ('state' was unexpected)",
            ),
        ])
    };
    answer(&mut e, "Here it is:\n```json\n{\"city\": \"Louisville\", \"state\": \"KY\"}\n```", two_issues);
    insta::assert_snapshot!(e.request().messages.last().unwrap().content, @r#"
    Attempt 2 of 3.

    Your previous answer (attempt 1) was rejected:
    ```
    {
      "city": "Louisville",
      "state": "KY"
    }
    ```

    Problems (2):
    1. /city: city 'Louisville' doesn't match contract city 'Toledo' [rule:city_matches]
    2. (root): Additional properties are not allowed ('state' was unexpected) [additionalProperties]

    Return only the corrected JSON value, with no explanation.
    "#);
}

#[test]
fn feedback_in_the_example_style_shows_the_example_again_not_the_schema() {
    let mut p = plan();
    p.prompt_style = PromptStyle::Example;
    p.feedback_max_chars = 20;
    p.policy.max_iterations = 4;
    let mut e = Engine::new(p).unwrap();
    answer(&mut e, "I think the answer is that the city is Louisville, Kentucky.", city_check);
    insta::assert_snapshot!(e.request().messages.last().unwrap().content, @r#"
    Attempt 2 of 4.

    Your previous answer (attempt 1) was rejected:
    ```
    I think the answer i
    ```
    [truncated: showing the first 20 of 60 characters]

    Problems (1):
    1. (root): no JSON [... 62 characters cut ...] [invalid_json]

    The answer must have this shape (replace every placeholder with a real value):
    ```json
    {
      "city": "<string>"
    }
    ```

    Return only the corrected JSON value, with no explanation.
    "#);
    answer(&mut e, r#"{"city": "Louisville"}"#, city_check);
    let third = e.request().messages.last().unwrap().content.clone();
    assert!(!third.contains("JSON Schema"), "the example style never shows the schema: {third}");
    assert!(!third.contains("must have this shape"), "the example is shown again once: {third}");
}

#[test]
fn fresh_strategy_rebuilds_one_prompt_with_prior_attempts() {
    let mut p = plan();
    p.strategy = Strategy::Fresh;
    p.prompt_style = PromptStyle::Example;
    let mut e = Engine::new(p).unwrap();
    answer(&mut e, r#"{"city": "Louisville"}"#, city_check);
    let req = e.request();
    assert_eq!(req.messages.len(), 1);
    insta::assert_snapshot!(req.messages[0].content, @r#"
    Name the city of the contract as {"city": …}.

    Answer with JSON of this shape (replace every placeholder with a real value):
    ```json
    {
      "city": "<string>"
    }
    ```

    Answer with only the JSON value, no explanation.

    Prior attempts:

    Attempt 1 was rejected:
    ```
    {
      "city": "Louisville"
    }
    ```
    Problems (1):
    1. /city: city 'Louisville' doesn't match contract city 'Toledo' [rule:city_matches]

    This is attempt 2 of 3. Fix every problem above. Return only the corrected JSON value, with no explanation.
    "#);
}

#[test]
fn escalation_after_stagnation() {
    let mut e = Engine::new(plan()).unwrap();
    answer(&mut e, "no idea", city_check);
    answer(&mut e, r#"{"city": "Louisville"}"#, city_check);
    answer(&mut e, r#"{"city": "Louisville"}"#, city_check);
    let r = finish(e);
    insta::assert_json_snapshot!(r.escalation, @r#"
    {
      "summary": "3 attempts; best score 0 at attempt 3; halted because stagnation",
      "attempts": [
        "1: invalid_json",
        "2: /city rule:city_matches",
        "3: identical to 2"
      ],
      "recurring_issues": [
        {
          "path": "/city",
          "code": "rule:city_matches",
          "count": 2
        }
      ],
      "pattern": "the same answer was proposed twice (attempts 2 and 3): the model lacks the information to change it",
      "question": "The model keeps answering the same way despite `/city`: city 'Louisville' doesn't match contract city 'Toledo'. Give it the missing information, or change the requirement?"
    }
    "#);
}

#[test]
fn escalation_names_a_path_that_failed_every_time() {
    let mut e = Engine::new(plan()).unwrap();
    answer(&mut e, r#"{"city": "Louisville"}"#, city_check);
    answer(&mut e, r#"{"city": "Dayton"}"#, city_check);
    answer(&mut e, r#"{"city": "Akron"}"#, city_check);
    let esc = finish(e).escalation.unwrap();
    assert_eq!(esc.pattern.as_deref(), Some("`/city` failed in every attempt (rule:city_matches)"));
    assert_eq!(
        esc.question,
        "Every attempt failed at `/city`: city 'Louisville' doesn't match contract city 'Toledo'. Can that requirement be met with the information given, or should it change?"
    );
}

#[test]
fn escalation_spots_no_json_and_regressions() {
    let mut e = Engine::new(plan()).unwrap();
    for raw in ["no", "still no", "nope"] {
        answer(&mut e, raw, city_check);
    }
    let esc = finish(e).escalation.unwrap();
    assert_eq!(esc.pattern.as_deref(), Some("no attempt contained JSON at all: the model answers in prose"));

    let mut e = Engine::new(plan()).unwrap();
    let check = |a: &serde_json::Value| {
        let mut issues = vec![];
        if a.get("b").is_none() {
            issues.push(redraft_core::Issue::new("/b", "required", "\"b\" is a required property"));
        }
        if a.get("c").is_none() {
            issues.push(redraft_core::Issue::new("/c", "required", "\"c\" is a required property"));
        }
        redraft_core::Verdict::from_issues(issues)
    };
    answer(&mut e, r#"{"a": 1}"#, check);
    answer(&mut e, r#"{"b": 1}"#, check);
    answer(&mut e, r#"{"c": 1}"#, check);
    let esc = finish(e).escalation.unwrap();
    assert_eq!(
        esc.pattern.as_deref(),
        Some("a regression: `/b` (required) was fixed at attempt 2 and came back at attempt 3")
    );
}

#[test]
fn a_copied_placeholder_or_a_schema_given_back_is_rejected_and_named() {
    let mut p = plan();
    p.policy.max_iterations = 3;
    let mut e = Engine::new(p).unwrap();
    // The checker alone would pass anything with a string city: the placeholder is caught anyway.
    let copied = answer(&mut e, r#"{"city": "<string>"}"#, |_| redraft_core::Verdict::pass()).unwrap();
    assert_eq!(copied.status, redraft_core::AttemptStatus::Rejected);
    assert_eq!(copied.issues.last().unwrap().code, "placeholder");
    assert_eq!(copied.issues.last().unwrap().path, "/city");
    let echoed = answer(
        &mut e,
        r#"{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}"#,
        city_check,
    )
    .unwrap();
    assert_eq!(echoed.issues[0].code, "schema_echo");
    let feedback = e.request().messages.last().unwrap().content.clone();
    assert!(feedback.contains("1. (root): this is a JSON Schema, not an answer"), "{feedback}");
}

#[test]
fn an_answer_cut_off_at_the_token_limit_is_told_so() {
    use redraft_core::{AttemptEnd, AttemptOutcome, ChatResponse, FinishReason, Next};
    let mut e = Engine::new(plan()).unwrap();
    let Next::Attempt { iteration, request, .. } = e.next(std::time::Duration::ZERO) else { panic!("no attempt") };
    let raw = r#"{"city": "Louisville", "notes": ["a", "a", "a""#;
    let read = e.read_artifact(raw);
    let verdict = read.artifact.as_ref().map(city_check);
    let response = ChatResponse { finish_reason: Some(FinishReason::Length), ..ChatResponse::text(raw) };
    e.settle(AttemptOutcome {
        iteration,
        request_chars: request.chars(),
        wall_ms: 10,
        started_at: None,
        finished_at: None,
        end: AttemptEnd::Answered { response, read, verdict },
    });
    let feedback = e.request().messages.last().unwrap().content.clone();
    assert!(feedback.contains("It was cut off at the output token limit before it ended."), "{feedback}");
    assert!(feedback.ends_with("Keep it short: nothing repeated."), "{feedback}");
}

/// A rule that knows the reference data: its issue carries what would satisfy it.
fn hinted_city_check(artifact: &serde_json::Value) -> redraft_core::Verdict {
    let mut verdict = city_check(artifact);
    for issue in &mut verdict.issues {
        if issue.code == "rule:city_matches" {
            *issue =
                issue.clone().with_hint("offices in Toledo, OH: T-1 Summit St, T-2 Adams St", vec!["offices".into()]);
        }
    }
    verdict
}

#[test]
fn feedback_shows_a_hint_under_its_issue() {
    let mut e = Engine::new(plan()).unwrap();
    answer(&mut e, r#"{"city": "Louisville"}"#, hinted_city_check);
    let request = e.request();
    let content = &request.messages.last().unwrap().content;
    assert!(
        content.contains(
            "1. /city: city 'Louisville' doesn't match contract city 'Toledo' [rule:city_matches]\n   Hint: offices in Toledo, OH: T-1 Summit St, T-2 Adams St\n"
        ),
        "{content}"
    );

    let mut p = plan();
    p.strategy = Strategy::Fresh;
    let mut e = Engine::new(p).unwrap();
    answer(&mut e, r#"{"city": "Louisville"}"#, hinted_city_check);
    let request = e.request();
    let content = &request.messages.last().unwrap().content;
    assert!(content.contains("[rule:city_matches]\n   Hint: offices in Toledo, OH: T-1 Summit St"), "{content}");
}

#[test]
fn escalation_names_the_table_a_hint_came_from_when_the_rule_keeps_failing() {
    let mut e = Engine::new(plan()).unwrap();
    answer(&mut e, r#"{"city": "Louisville"}"#, hinted_city_check);
    answer(&mut e, r#"{"city": "Dayton"}"#, hinted_city_check);
    answer(&mut e, r#"{"city": "Akron"}"#, hinted_city_check);
    let esc = finish(e).escalation.unwrap();
    assert_eq!(
        esc.pattern.as_deref(),
        Some(
            "`/city` (rule:city_matches) kept failing in 3 attempts although the feedback named what would satisfy it from table `offices`: offices in Toledo, OH: T-1 Summit St, T-2 Adams St"
        )
    );
    assert!(
        esc.question.starts_with(
            "The model was shown the reference data from table `offices` and still failed `/city`: city 'Akron'"
        ),
        "{}",
        esc.question
    );
}

#[test]
fn a_hint_from_no_table_asks_about_the_requirement_not_a_table() {
    let hinted = |artifact: &serde_json::Value| {
        let mut verdict = city_check(artifact);
        for issue in &mut verdict.issues {
            *issue = issue.clone().with_hint("the text names: Toledo", vec![]);
        }
        verdict
    };
    let mut e = Engine::new(plan()).unwrap();
    answer(&mut e, r#"{"city": "Louisville"}"#, hinted);
    answer(&mut e, r#"{"city": "Dayton"}"#, hinted);
    answer(&mut e, r#"{"city": "Akron"}"#, hinted);
    let esc = finish(e).escalation.unwrap();
    assert_eq!(
        esc.pattern.as_deref(),
        Some(
            "`/city` (rule:city_matches) kept failing in 3 attempts although the feedback named what would satisfy it: the text names: Toledo"
        )
    );
    assert_eq!(
        esc.question,
        "The model was told what would satisfy `/city` and still failed it: city 'Akron' doesn't match contract city 'Toledo'. Should the requirement change, or does the task need to say more?"
    );
}

fn person_plan() -> redraft_core::Plan {
    let mut p = plan();
    p.task = redraft_core::Task::new("Extract the person: Yuki Tanaka, 27, works as a nurse in Osaka.");
    p.schema = Some(std::sync::Arc::new(json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"}},
        "required": ["name", "age", "city"]
    })));
    p.prompt_style = PromptStyle::Example;
    p
}

fn any_answer(_: &serde_json::Value) -> redraft_core::Verdict {
    redraft_core::Verdict::pass()
}

/// The shape shown after an answer that lost it.
fn example_in(feedback: &str) -> &str {
    let start = feedback.find("The answer must have this shape").expect(feedback);
    let body = &feedback[start..];
    let open = body.find("```json\n").unwrap() + 8;
    let close = body[open..].find("\n```").unwrap();
    &body[open..open + close]
}

#[test]
fn after_a_prose_answer_the_example_is_shown_filled_with_the_values_it_gave() {
    let mut e = Engine::new(person_plan()).unwrap();
    answer(
        &mut e,
        "Sure! Here is the person.\n- Name: Yuki Tanaka\n- Age: 27\n- City: \"Osaka\"\nHope this helps.",
        any_answer,
    );
    let request = e.request();
    let feedback = &request.messages.last().unwrap().content;
    assert_eq!(
        example_in(feedback),
        "{\n  \"name\": \"Yuki Tanaka\",\n  \"age\": 27,\n  \"city\": \"Osaka\"\n}",
        "{feedback}"
    );
}

#[test]
fn after_a_copied_placeholder_the_example_keeps_the_values_given_and_nothing_invented() {
    let mut e = Engine::new(person_plan()).unwrap();
    // The first answer gave the city; the second copied the example but for the name.
    answer(&mut e, r#"{"name": "<string>", "age": "twenty", "city": "Osaka"}"#, |_| {
        redraft_core::Verdict::from_issues(vec![redraft_core::Issue::new(
            "/age",
            "type",
            "\"twenty\" is not of type \"integer\"",
        )])
    });
    answer(&mut e, r#"{"name": "Yuki Tanaka", "age": "<integer>", "city": "<string>"}"#, any_answer);
    let request = e.request();
    let feedback = &request.messages.last().unwrap().content;
    assert!(feedback.contains("\"<integer>\" is a placeholder from the example"), "{feedback}");
    // "twenty" is not an integer: the placeholder stays.
    assert_eq!(
        example_in(feedback),
        "{\n  \"name\": \"Yuki Tanaka\",\n  \"age\": <integer>,\n  \"city\": \"Osaka\"\n}",
        "{feedback}"
    );
}

#[test]
fn an_answer_that_kept_the_shape_is_not_shown_the_example_again() {
    let mut e = Engine::new(person_plan()).unwrap();
    answer(&mut e, r#"{"name": "Yuki Tanaka", "age": 27, "city": "Kyoto"}"#, |_| {
        redraft_core::Verdict::from_issues(vec![redraft_core::Issue::new("/city", "rule:city", "wrong city")])
    });
    answer(&mut e, r#"{"name": "Yuki Tanaka", "age": 27, "city": "Nara"}"#, |_| {
        redraft_core::Verdict::from_issues(vec![redraft_core::Issue::new("/city", "rule:city", "wrong city")])
    });
    let request = e.request();
    let feedback = &request.messages.last().unwrap().content;
    assert!(!feedback.contains("The answer must have this shape"), "{feedback}");
}
