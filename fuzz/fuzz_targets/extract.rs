//! Fuzz `extract` and `repair` on arbitrary UTF-8, checking the invariants cheaply.

#![no_main]

use libfuzzer_sys::fuzz_target;
use redraft_extract::{Route, extract, repair};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let strict: Option<Value> = serde_json::from_str(text.trim()).ok();
    match extract(text) {
        Ok(found) => {
            // the span is a slice of the input, on character boundaries
            assert!(text.get(found.span.clone()).is_some(), "span {:?} is not a slice of the input", found.span);
            if found.route != Route::Repaired {
                assert!(found.repairs.is_empty(), "repairs on a strict route");
            }
            // valid JSON comes back unchanged, by the bare route
            if let Some(value) = &strict {
                assert_eq!(&found.value, value);
                assert_eq!(found.route, Route::Bare);
            }
        }
        Err(_) => assert!(strict.is_none(), "valid JSON was not found"),
    }
    // the lenient parser alone agrees with serde_json on valid JSON and repairs nothing
    match strict {
        Some(value) => assert_eq!(repair(text.trim()), Some((value, Vec::new()))),
        None => {
            let _ = repair(text);
        }
    }
});
