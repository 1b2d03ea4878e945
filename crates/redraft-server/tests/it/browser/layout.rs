//! The viewer's layout: nothing overlaps or sticks out from 800 to 1920 px, with long prompts,
//! answers and words that never break; and aborting the run shown takes two clicks.

use redraft_testkit::reply;
use serde_json::{Value, json};

use super::{DETAIL_STATE, assert_no_page_errors, chromium, open, priced, seen, serve_logged, start_run, stored};
use crate::{CITY_SCHEMA, harness_with};

/// Every pair of boxes among the page's main elements that overlap, and what sticks out.
const OVERLAPS: &str = r##"(() => {
  const shown = (e) => { const s = getComputedStyle(e); return s.display !== "none" && s.visibility !== "hidden"; };
  // The part of an element its scrolling or clipping ancestors let show.
  const visible = (e) => {
    const r = e.getBoundingClientRect();
    const box = { l: r.left, t: r.top, r: r.right, b: r.bottom };
    for (let p = e.parentElement; p; p = p.parentElement) {
      const s = getComputedStyle(p), q = p.getBoundingClientRect();
      if (s.overflowX !== "visible") { box.l = Math.max(box.l, q.left); box.r = Math.min(box.r, q.right); }
      if (s.overflowY !== "visible") { box.t = Math.max(box.t, q.top); box.b = Math.min(box.b, q.bottom); }
    }
    return box;
  };
  const name = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
    (typeof e.className === "string" && e.className.trim() ? "." + e.className.trim().split(/\s+/).join(".") : "") +
    (e.closest("tr") ? "[row " + e.closest("tr").rowIndex + "]" : "");
  const selectors = ["header#top", "header#top > *", "#list", "#filters > *", "#pager > *", "#runs-table th", "#runs-table td",
    "#detail", "#detail > *", "#detail .pair > *", "#run-head .facts > div", "#chart", ".attempt", ".attempt-head > *",
    "#answer-form", "#answer-form > *", "#answer-form .answer-row > *"];
  const els = [...new Set(selectors.flatMap((s) => [...document.querySelectorAll(s)]))].filter(shown);
  const boxes = els.map((e) => [e, visible(e)]).filter(([, b]) => b.r - b.l > 0.5 && b.b - b.t > 0.5);
  const out = [];
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, p] = boxes[i], [b, q] = boxes[j];
      if (a.contains(b) || b.contains(a)) continue;
      const w = Math.min(p.r, q.r) - Math.max(p.l, q.l), h = Math.min(p.b, q.b) - Math.max(p.t, q.t);
      if (w > 1 && h > 1) out.push(`${name(a)} overlaps ${name(b)} by ${w.toFixed(0)}x${h.toFixed(0)}`);
    }
  }
  const root = document.documentElement;
  if (root.scrollWidth > innerWidth + 1) out.push(`the page scrolls sideways: ${root.scrollWidth} > ${innerWidth}`);
  for (const [outer, inner] of [["#detail", "#detail .card, #detail .attempt, #detail pre, #detail svg, #detail textarea, #detail button"],
                                ["#list", "#list table, #filters, #pager, #list button"]]) {
    const o = document.querySelector(outer).getBoundingClientRect();
    for (const e of document.querySelectorAll(inner)) {
      const r = e.getBoundingClientRect();
      if (shown(e) && r.width > 0 && (r.left < o.left - 1 || r.right > o.right + 1)) out.push(`${name(e)} sticks out of ${outer}`);
    }
  }
  return out;
})()"##;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_overlaps_from_800_to_1920_px() {
    let Some(chromium) = chromium("layout::nothing_overlaps_from_800_to_1920_px") else { return };
    let long_word = "Springfield-".repeat(150);
    let long_prompt = format!(
        "Which city is the contract in? {} And one word that never breaks: {long_word}",
        "Read the whole contract, clause by clause, and the annexes too. ".repeat(40)
    );
    let long_raw = format!(
        "{} {{\"town\": \"{}\"}}",
        "Let me think about where this contract was signed...".repeat(60),
        "T".repeat(600)
    );
    let h = harness_with(
        vec![reply(r#"{"city": "Toledo"}"#), reply(r#"{"town": "Toledo"}"#), reply(&long_raw)],
        vec![],
        priced,
    )
    .await;
    let schema = serde_json::from_str::<Value>(CITY_SCHEMA).unwrap();
    let ok = h.call("POST", "/v1/iterate", Some(json!({"prompt": "Which city?", "schema": schema}))).await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    let failed = h
        .call("POST", "/v1/iterate", Some(json!({"prompt": "Which city?", "schema": schema, "max_iterations": 1})))
        .await;
    assert_eq!(failed.status, 422, "{}", failed.text);
    let spec = json!({"prompt": long_prompt, "schema": schema, "max_iterations": 1, "on_escalation": "await",
                      "context": {"contract": long_word}});
    let run_id = start_run(&h, spec).await;
    assert_eq!(h.finished(&run_id).await["status"], "awaiting_input");
    let (target, log) = serve_logged(&h).await;

    let (_browser, page) = open(&chromium, &format!("{target}/runs/{run_id}"), 800).await;
    page.wait_for(&format!("{DETAIL_STATE} === 'awaiting_input' && document.querySelector('#answer')")).await;
    page.wait_for("document.querySelectorAll('#runs tr.run').length === 3").await;
    let dir = crate::cdp::artifacts_dir("viewer");
    for width in [800, 1400, 1920] {
        page.set_width(width).await;
        page.eval("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))").await;
        let stacked = page
            .eval("document.querySelector('#list').getBoundingClientRect().bottom <= document.querySelector('#detail').getBoundingClientRect().top")
            .await;
        assert_eq!(stacked, json!(width < 1100), "at {width} px the list is above the detail only below 1100 px");
        let overlaps = page.eval(OVERLAPS).await;
        page.screenshot(&dir.join(format!("viewer-{width}.png"))).await;
        assert_eq!(overlaps, json!([]), "at {width} px (see {})", dir.display());
    }
    // Aborting takes two clicks; then the run has failed, here and in the store.
    page.click("#abort").await;
    page.wait_for("document.querySelector('#abort').textContent.includes('again')").await;
    assert_eq!(stored(&h, &run_id).await["state"], "awaiting_input");
    page.click("#abort").await;
    page.wait_for(&format!("{DETAIL_STATE} === 'failed' && !document.querySelector('#answer')")).await;
    assert_eq!(seen(&log, "POST", &format!("/v1/runs/{run_id}/abort")), [200]);
    assert_eq!(stored(&h, &run_id).await["status"], "failed");
    assert_no_page_errors(&page);
}
