//! Listing runs: newest first, by state, model, kind and text, a page at a time; the runs
//! left unfinished.

use std::sync::Arc;

use redraft_core::HaltReason;
use redraft_core::record::RunStatus;
use redraft_store::{RunFilter, RunState, Store};
use serde_json::json;

use crate::values::{W, attempt, held, ids, new_run, queued, result, spec};

/// `list`: newest first, by state, at most `limit` (50 by default).
pub(crate) async fn list_orders_filters_and_limits(store: Arc<dyn Store>) {
    for i in 0..5 {
        store.insert_run(&held(&format!("r{i}"), &spec(&format!("p{i}")))).await.unwrap();
    }
    store.finish_run(&result("r0", RunStatus::Succeeded, vec![attempt(1, 1.0, Some(json!(1)))]), W).await.unwrap();
    store.finish_run(&result("r1", RunStatus::Failed, vec![attempt(1, 0.1, Some(json!(1)))]), W).await.unwrap();
    assert!(store.release("r3", W).await.unwrap());

    let list = |state: Option<RunState>, limit: Option<u32>| {
        let store = store.clone();
        async move { store.list(&RunFilter { state, limit, ..RunFilter::default() }).await.unwrap() }
    };
    assert_eq!(ids(&list(None, None).await), ["r4", "r3", "r2", "r1", "r0"]);
    assert_eq!(ids(&list(Some(RunState::Running), None).await), ["r4", "r2"]);
    assert_eq!(ids(&list(Some(RunState::Queued), None).await), ["r3"]);
    assert_eq!(ids(&list(Some(RunState::Failed), None).await), ["r1"]);
    assert_eq!(ids(&list(None, Some(2)).await), ["r4", "r3"]);
    assert_eq!(ids(&list(Some(RunState::Succeeded), Some(1)).await), ["r0"]);
    assert!(list(None, Some(0)).await.is_empty());

    let all = list(None, None).await;
    assert!(all.windows(2).all(|w| w[0].created_at_ms >= w[1].created_at_ms));
    let r0 = all.iter().find(|s| s.run_id == "r0").unwrap();
    assert_eq!((r0.halted_because, r0.iterations, r0.best_score), (Some(HaltReason::Success), 1, Some(1.0)));

    for i in 5..60 {
        store.insert_run(&queued(&format!("r{i}"), &json!({"prompt": "p"}))).await.unwrap();
    }
    let page = list(None, None).await;
    assert_eq!(page.len(), 50);
    assert_eq!(page[0].run_id, "r59");
    assert_eq!(list(None, Some(500)).await.len(), 60);
}

/// `list` by model, kind and text (in the id, model, kind or prompt, in any ASCII case), every
/// condition at once, a page at a time.
pub(crate) async fn list_filters_by_model_kind_and_text_and_pages(store: Arc<dyn Store>) {
    let specs = [
        ("k0", json!({"prompt": "Extract the INVOICE total", "model": "openai/gpt-5", "kind": "invoice"})),
        (
            "k1",
            json!({"prompt": "Staff the Toledo contract", "provider": "local", "model": "qwen", "kind": "staffing"}),
        ),
        ("k2", json!({"prompt": "Another invoice, 100% off_", "model": "openai/gpt-5", "kind": "invoice"})),
        ("k3", json!({"prompt": "No kind here", "model": "openai/gpt-5"})),
    ];
    for (id, spec) in &specs {
        store.insert_run(&queued(id, spec)).await.unwrap();
    }
    let list = |filter: RunFilter| {
        let store = store.clone();
        async move { store.list(&filter).await.unwrap() }
    };
    let f = RunFilter::default;
    let all = list(f()).await;
    assert_eq!(
        all.iter().map(|s| s.kind.as_deref()).collect::<Vec<_>>(),
        [None, Some("invoice"), Some("staffing"), Some("invoice")]
    );
    assert_eq!(ids(&list(RunFilter { model: Some("openai/gpt-5".into()), ..f() }).await), ["k3", "k2", "k0"]);
    assert_eq!(ids(&list(RunFilter { model: Some("local/qwen".into()), ..f() }).await), ["k1"]);
    assert!(list(RunFilter { model: Some("openai".into()), ..f() }).await.is_empty(), "a model matches whole");
    assert_eq!(ids(&list(RunFilter { kind: Some("invoice".into()), ..f() }).await), ["k2", "k0"]);
    assert_eq!(ids(&list(RunFilter { text: Some("invoice".into()), ..f() }).await), ["k2", "k0"]);
    assert_eq!(ids(&list(RunFilter { text: Some("TOLEDO".into()), ..f() }).await), ["k1"]);
    assert_eq!(ids(&list(RunFilter { text: Some("k3".into()), ..f() }).await), ["k3"]);
    assert_eq!(ids(&list(RunFilter { text: Some("qwen".into()), ..f() }).await), ["k1"]);
    // A request holding a NUL character (JSON `\u0000`, which PostgreSQL cannot turn into
    // text) neither breaks the list nor hides from a search.
    let nul = json!({"prompt": "Find the NUL\u{0}here", "model": "openai/gpt-5", "kind": "invoice"});
    store.insert_run(&queued("k4", &nul)).await.unwrap();
    assert_eq!(ids(&list(RunFilter { kind: Some("invoice".into()), ..f() }).await), ["k4", "k2", "k0"]);
    assert_eq!(ids(&list(RunFilter { text: Some("find the nul".into()), ..f() }).await), ["k4"]);
    assert_eq!(list(f()).await.len(), 5);
    for odd in ["\u{0}", "nul\u{0}here", "\u{fffd}"] {
        let found = store.list(&RunFilter { text: Some(odd.into()), model: Some(odd.into()), ..f() }).await;
        assert!(found.is_ok_and(|runs| runs.is_empty()), "{odd:?}");
    }
    // Characters that are wildcards in LIKE are plain text here.
    assert_eq!(ids(&list(RunFilter { text: Some("100% off_".into()), ..f() }).await), ["k2"]);
    assert!(list(RunFilter { text: Some("%".into()), kind: Some("staffing".into()), ..f() }).await.is_empty());
    let both = RunFilter { kind: Some("invoice".into()), text: Some("total".into()), ..f() };
    assert_eq!(ids(&list(both).await), ["k0"]);
    assert!(list(RunFilter { kind: Some("invoice".into()), state: Some(RunState::Running), ..f() }).await.is_empty());
    // Pages: newest first, `offset` skips.
    let page = |offset| list(RunFilter { limit: Some(3), offset: Some(offset), ..f() });
    assert_eq!(ids(&page(0).await), ["k4", "k3", "k2"]);
    assert_eq!(ids(&page(3).await), ["k1", "k0"]);
    assert!(page(5).await.is_empty());
}

/// `unfinished`: running and queued runs, oldest first.
pub(crate) async fn unfinished_runs_oldest_first(store: Arc<dyn Store>) {
    assert!(store.unfinished().await.unwrap().is_empty());
    for (id, state) in
        [("a", RunState::Running), ("b", RunState::Queued), ("c", RunState::Running), ("d", RunState::Running)]
    {
        store.insert_run(&new_run(id, &json!({"prompt": id}), state)).await.unwrap();
    }
    store.finish_run(&result("c", RunStatus::Succeeded, vec![attempt(1, 1.0, Some(json!({})))]), W).await.unwrap();
    assert_eq!(store.unfinished().await.unwrap(), ["a", "b", "d"]);
    assert!(store.release("a", W).await.unwrap());
    store.finish_run(&result("d", RunStatus::Failed, Vec::new()), W).await.unwrap();
    assert_eq!(store.unfinished().await.unwrap(), ["a", "b"]);
}
