//! The viewer over the DevTools protocol, on runs that halted: a run's own URL, the list's
//! filters and pages, and a server that wants a token.

use redraft_testkit::reply;
use serde_json::{Value, json};

use super::{DETAIL_STATE, assert_no_page_errors, attempts_shown, chromium, open, priced, seen, serve_logged};
use crate::cdp::js_string;
use crate::{CITY_SCHEMA, harness_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_url_opens_it_with_its_task_diff_and_chart() {
    let Some(chromium) = chromium("viewer::a_runs_url_opens_it_with_its_task_diff_and_chart") else { return };
    let hostile = r#"Which city? <script>window.pwned = "prompt script"</script><img src=x onerror="window.pwned = 'prompt img'">"#;
    let h = harness_with(
        vec![
            reply("The contract is governed by the laws of Ohio; the courts of Toledo have jurisdiction.\n{\"town\": \"Toledo\"}"),
            reply(r#"{"city": ["Toledo", "Ohio"]}"#),
            reply(r#"{"city": "Toledo"}"#),
            reply(r#"Sure! <img src=x onerror="window.pwned = 'raw img'"><script>window.pwned = 'raw script'</script> {"city": "Toledo"}"#),
        ],
        vec![],
        priced,
    )
    .await;
    let schema = serde_json::from_str::<Value>(CITY_SCHEMA).unwrap();
    let spec = json!({
        "prompt": "Which city's courts have jurisdiction over this contract? Answer with the city alone.",
        "system": "You extract fields from contracts and answer with one JSON object.",
        "context": {"contract": "C-17", "clause_12": "This Agreement is governed by the laws of the State of Ohio. Any dispute shall be brought before the courts of Toledo."},
        "schema": schema,
        "max_iterations": 3,
        "patience": 3,
    });
    let done = h.call("POST", "/v1/iterate", Some(spec)).await;
    assert_eq!(done.status, 200, "{}", done.text);
    let run_id = done.json["run_id"].as_str().unwrap().to_owned();
    let history = done.json["history"].as_array().unwrap().clone();
    assert_eq!(history.len(), 3, "{}", done.text);
    let spec = json!({
        "prompt": hostile,
        "system": "You answer with one JSON object. <b onmouseover=alert(1)>bold</b>",
        "context": {"note": "<img src=x onerror=\"window.pwned = 'context'\">"},
        "schema": schema,
    });
    let bad = h.call("POST", "/v1/iterate", Some(spec)).await;
    assert_eq!(bad.status, 200, "{}", bad.text);
    let bad_id = bad.json["run_id"].as_str().unwrap().to_owned();
    let (target, log) = serve_logged(&h).await;

    let (_browser, page) = open(&chromium, &format!("{target}/runs/{run_id}"), 1400).await;
    page.wait_for(&format!("{} && {DETAIL_STATE} === 'succeeded'", attempts_shown(3))).await;
    // The task and the evaluators and policy.
    let task = page.eval("document.querySelector('#task').textContent").await;
    let task = task.as_str().unwrap();
    for part in ["Which city's courts have jurisdiction", "You extract fields from contracts", "courts of Toledo"] {
        assert!(task.contains(part), "`{part}` is not in the task: {task}");
    }
    let evaluators = page.eval("document.querySelector('#evaluators').textContent").await;
    let evaluators = evaluators.as_str().unwrap();
    for word in ["schema", "max attempts", "patience"] {
        assert!(evaluators.contains(word), "`{word}` is not in the evaluators: {evaluators}");
    }
    // Each attempt: what the model was told (the prompt, then the feedback), its issues, its diff.
    for (i, attempt) in history.iter().enumerate() {
        let told = attempt["prompt"].as_str().unwrap_or_else(|| panic!("attempt {} has no prompt: {attempt}", i + 1));
        let shown = page
            .eval(&format!(
                "(() => {{ const p = document.querySelector('.attempt[data-iteration=\"{}\"] pre.prompt');
                   return p && p.closest('details').open && p.getBoundingClientRect().height > 0 ? p.textContent : null; }})()",
                i + 1
            ))
            .await;
        assert_eq!(shown.as_str(), Some(told), "attempt {}'s prompt is not shown", i + 1);
    }
    assert_ne!(history[1]["prompt"], history[0]["prompt"], "attempt 2 was told the feedback");
    let issues = page.eval("document.querySelector('.attempt[data-iteration=\"2\"] .issues').textContent").await;
    let first_issue = history[1]["issues"][0]["message"].as_str().unwrap();
    assert!(issues.as_str().unwrap().contains(first_issue), "{issues} lacks {first_issue}");
    let diffs = page
        .eval("[...document.querySelectorAll('.diff')].filter((d) => d.querySelector('.add') && d.querySelector('.del')).length")
        .await;
    assert!(diffs.as_u64() >= Some(2), "diffs with added and removed lines: {diffs}");
    let last = page
        .eval("[...document.querySelectorAll('.attempt[data-iteration=\"3\"] .diff .line')].map((l) => l.className + ' ' + l.textContent)")
        .await;
    let last: Vec<&str> = last.as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(
        last.contains(&"line del -   \"city\": [") && last.contains(&"line add +   \"city\": \"Toledo\""),
        "{last:?}"
    );
    // The chart: a point and a bar per attempt, and the cost known.
    let chart = page
        .eval("[document.querySelectorAll('#chart circle.point.score').length, document.querySelectorAll('#chart rect.bar').length, document.querySelectorAll('#chart .point.cost').length]")
        .await;
    assert_eq!(chart, json!([3, 3, 3]));
    // It is selected in the list beside it.
    page.wait_for(&format!("document.querySelector('tr.run.selected')?.dataset.id === {}", js_string(&run_id))).await;
    if let Some(path) = std::env::var_os("REDRAFT_VIEWER_SCREENSHOT").filter(|p| !p.is_empty()) {
        page.eval("window.scrollTo(0, 0)").await;
        page.screenshot_page(std::path::Path::new(&path), 2200).await;
    }

    // Another run, from the list: its own URL, hostile markup shown as text.
    page.click(&format!("tr.run[data-id={}] a", js_string(&bad_id))).await;
    page.wait_for(&format!(
        "location.pathname === {} && document.querySelector('#detail').dataset.runId === {} && {} && {DETAIL_STATE} === 'succeeded'",
        js_string(&format!("/runs/{bad_id}")),
        js_string(&bad_id),
        attempts_shown(1)
    ))
    .await;
    let task = page.eval("document.querySelector('#task').textContent").await;
    let task = task.as_str().unwrap();
    assert!(task.contains(hostile) && task.contains("<b onmouseover=alert(1)>bold</b>"), "not shown as given: {task}");
    let raw = page.eval("document.querySelector('.attempt[data-iteration=\"1\"] pre.raw').textContent").await;
    assert!(raw.as_str().unwrap().contains(r#"<img src=x onerror="window.pwned = 'raw img'">"#), "{raw}");
    page.click(".attempt[data-iteration=\"1\"] details.raw-box > summary").await;
    let injected = page.eval("document.querySelectorAll('main img, main script, main b[onmouseover]').length").await;
    assert_eq!(injected, json!(0), "markup from the run made it into the page");
    assert_eq!(page.eval("typeof window.pwned").await, json!("undefined"), "a script from the run ran");
    // Back: the first run again, at its URL.
    page.eval("history.back()").await;
    page.wait_for(&format!(
        "location.pathname === {} && document.querySelector('#detail').dataset.runId === {} && {}",
        js_string(&format!("/runs/{run_id}")),
        js_string(&run_id),
        attempts_shown(3)
    ))
    .await;
    assert_no_page_errors(&page);
    // A halted run needs no events: one read each time it is opened, and every request answered.
    assert_eq!(seen(&log, "GET", &format!("/v1/runs/{run_id}")), [200, 200]);
    assert_eq!(seen(&log, "GET", &format!("/v1/runs/{bad_id}")), [200]);
    assert!(seen(&log, "GET", &format!("/v1/runs/{run_id}/events")).is_empty());
    let log = log.lock().unwrap().clone();
    assert!(log.iter().all(|(_, _, s)| *s == 200), "{log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_filters_searches_and_pages() {
    let Some(chromium) = chromium("viewer::the_list_filters_searches_and_pages") else { return };
    let right = reply(r#"{"city": "Toledo"}"#);
    let h = harness_with(
        vec![right.clone(), right.clone(), right.clone(), reply(r#"{"town": "Toledo"}"#), right],
        vec![],
        |_| {},
    )
    .await;
    let schema = serde_json::from_str::<Value>(CITY_SCHEMA).unwrap();
    let mut ids = Vec::new();
    for (prompt, extra) in [
        ("Which city? (alpha)", json!({})),
        ("Which city? (bravo)", json!({})),
        ("Which city? (zebra crossing)", json!({})),
        ("Which city? (failing)", json!({"max_iterations": 1})),
        ("Which city? (by kind)", json!({"kind": "city", "context": {"city": "Toledo"}})),
    ] {
        let mut spec = json!({"prompt": prompt, "schema": schema});
        if extra.get("kind").is_some() {
            spec = json!({"prompt": prompt});
        }
        spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let a = h.call("POST", "/v1/iterate", Some(spec)).await;
        assert!([200, 422].contains(&a.status), "{}", a.text);
        ids.push(a.json["run_id"].as_str().unwrap().to_owned());
    }
    let (target, _log) = serve_logged(&h).await;
    let rows = "[...document.querySelectorAll('#runs tr.run')].map((r) => r.dataset.id)";
    let newest: Vec<String> = ids.iter().rev().cloned().collect();

    // Two a page, newest first.
    let (_browser, page) = open(&chromium, &format!("{target}/?limit=2"), 1400).await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!(newest[..2]).to_string()))).await;
    assert_eq!(
        page.eval("[document.querySelector('#prev').disabled, document.querySelector('#next').disabled]").await,
        json!([true, false])
    );
    page.click("#next").await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!(newest[2..4]).to_string()))).await;
    assert_eq!(page.eval("location.search").await, json!("?offset=2&limit=2"));
    page.click("#next").await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!(newest[4..]).to_string()))).await;
    assert_eq!(
        page.eval("[document.querySelector('#prev').disabled, document.querySelector('#next').disabled]").await,
        json!([false, true])
    );
    page.click("#prev").await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!(newest[2..4]).to_string()))).await;

    // Filters start again from the first page.
    page.eval("document.querySelector('#status').value = 'failed'; document.querySelector('#status').dispatchEvent(new Event('change'))").await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!([ids[3]]).to_string()))).await;
    assert_eq!(page.eval("location.search").await, json!("?status=failed&limit=2"));
    page.eval("document.querySelector('#status').value = ''; document.querySelector('#status').dispatchEvent(new Event('change'))").await;
    page.type_into("#q", "ZEBRA").await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!([ids[2]]).to_string()))).await;
    page.eval("document.querySelector('#q').value = ''").await;
    page.type_into("#kind", "city").await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!([ids[4]]).to_string()))).await;
    page.eval("document.querySelector('#kind').value = ''").await;
    page.type_into("#model", "fake/nope").await;
    page.wait_for("document.querySelector('#runs tr.empty')").await;

    // A row opens its run at its URL, filters kept; the browser's back button closes it.
    page.eval("document.querySelector('#model').value = ''; document.querySelector('#filters').requestSubmit()").await;
    page.wait_for(&format!("JSON.stringify({rows}) === {}", js_string(&json!(newest[..2]).to_string()))).await;
    page.click(&format!("tr.run[data-id={}] td:nth-child(4)", js_string(&ids[4]))).await;
    page.wait_for(&format!("{} && {DETAIL_STATE} === 'succeeded'", attempts_shown(1))).await;
    assert_eq!(page.eval("location.pathname + location.search").await, json!(format!("/runs/{}?limit=2", ids[4])));
    page.eval("history.back()").await;
    page.wait_for("location.pathname === '/' && !document.querySelector('#detail .attempt') && !document.querySelector('tr.run.selected')").await;
    page.eval("history.forward()").await;
    page.wait_for(&format!(
        "location.pathname === {} && {}",
        js_string(&format!("/runs/{}", ids[4])),
        attempts_shown(1)
    ))
    .await;
    assert_no_page_errors(&page);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_works_behind_token_auth() {
    let Some(chromium) = chromium("viewer::the_viewer_works_behind_token_auth") else { return };
    let h = harness_with(vec![reply(r#"{"city": "Toledo"}"#)], vec!["s3cret".into()], |_| {}).await;
    let spec = json!({"prompt": "Which city?", "schema": serde_json::from_str::<Value>(CITY_SCHEMA).unwrap()});
    let mut request = crate::request("POST", "/v1/iterate", Some(&spec));
    request.headers_mut().insert("authorization", "Bearer s3cret".parse().unwrap());
    let done = h.send(request).await;
    assert_eq!(done.status, 200, "{}", done.text);
    let run_id = done.json["run_id"].as_str().unwrap().to_owned();
    let (target, log) = serve_logged(&h).await;

    let (_browser, page) = open(&chromium, &format!("{target}/runs/{run_id}"), 1400).await;
    page.wait_for("!document.querySelector('#auth').hidden && document.querySelector('#token').getBoundingClientRect().width > 0 && !document.querySelector('#run-error').hidden").await;
    assert_eq!(seen(&log, "GET", &format!("/v1/runs/{run_id}")), [401]);
    assert_eq!(page.eval("document.querySelectorAll('#detail .attempt').length").await, json!(0));
    page.type_into("#token", "s3cret").await;
    page.click("#save").await;
    page.wait_for(&format!("{} && {DETAIL_STATE} === 'succeeded'", attempts_shown(1))).await;
    page.wait_for(&format!("document.querySelector('tr.run[data-id={}]')", js_string(&run_id))).await;
    assert_eq!(page.eval("localStorage.getItem('redraft-token')").await, json!("s3cret"));
    assert_eq!(page.eval("document.querySelector('#auth').hidden").await, json!(true));
    assert!(seen(&log, "GET", &format!("/v1/runs/{run_id}")).contains(&200));
    assert_no_page_errors(&page);
}
