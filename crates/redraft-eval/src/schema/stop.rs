//! A JSON Schema validation that stops when its check is no longer wanted.
//!
//! The validator has no way to be told to stop, and one validation can be long (a schema of a
//! megabyte against an answer of four). So every subschema gets one more keyword, a probe,
//! which the validator evaluates as it goes: while the check's [`CancelFlag`] is not set it
//! passes and changes nothing; once it is set, the probe unwinds out of the validator (a
//! [`Stopped`] payload, never a panic message), and [`under`], which started the validation on
//! this thread, catches it. So a cancelled run, an attempt past its time or a process stopping
//! leaves no validation running on, whatever the schema.

use std::cell::RefCell;
use std::panic::AssertUnwindSafe;

use redraft_core::CancelFlag;
use serde_json::{Map, Value};

/// The probe's name in a subschema. (A schema's own keyword of that name would be replaced.)
pub(super) const KEYWORD: &str = "x-redraft-stop";

thread_local! {
    /// The flag of the validation running on this thread.
    static FLAG: RefCell<Option<CancelFlag>> = const { RefCell::new(None) };
}

/// What the probe unwinds with.
struct Stopped;

fn stop_if_cancelled() {
    if FLAG.with(|flag| flag.borrow().as_ref().is_some_and(CancelFlag::is_cancelled)) {
        std::panic::resume_unwind(Box::new(Stopped));
    }
}

struct Probe;

impl<'i> jsonschema::Keyword<'i> for Probe {
    fn validate(&self, _: &'i Value) -> Result<(), jsonschema::ValidationError<'i>> {
        stop_if_cancelled();
        Ok(())
    }

    fn is_valid(&self, _: &'i Value) -> bool {
        stop_if_cancelled();
        true
    }
}

/// The factory the validator's options get for [`KEYWORD`].
pub(super) fn probe<'a>(
    _: &'a Map<String, Value>,
    _: &'a Value,
    _: jsonschema::paths::Location,
) -> Result<Box<dyn for<'i> jsonschema::Keyword<'i>>, jsonschema::ValidationError<'a>> {
    Ok(Box::new(Probe))
}

/// `work` (a validation) run on this thread under `cancel`: `None` when it was stopped
/// because the flag was set. Any other unwinding goes on as it came.
pub(super) fn under<T>(cancel: &CancelFlag, work: impl FnOnce() -> T) -> Option<T> {
    let previous = FLAG.with(|flag| flag.replace(Some(cancel.clone())));
    let result = std::panic::catch_unwind(AssertUnwindSafe(work));
    FLAG.with(|flag| *flag.borrow_mut() = previous);
    match result {
        Ok(value) => Some(value),
        Err(payload) if payload.is::<Stopped>() => None,
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

/// Keywords whose value is one subschema.
pub(super) const ONE: [&str; 13] = [
    "not",
    "if",
    "then",
    "else",
    "items",
    "additionalItems",
    "additionalProperties",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contains",
    "propertyNames",
    "contentSchema",
    "extends",
];
/// Keywords whose value is an array of subschemas.
pub(super) const MANY: [&str; 5] = ["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose value maps names to subschemas.
pub(super) const NAMED: [&str; 6] =
    ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];

/// `schema` with the probe in every subschema (object) it holds, found by the keywords that
/// hold subschemas; data (`enum`, `const`, `default`, …) and unknown keywords are left as they
/// are.
pub(super) fn probed(schema: &Value) -> Value {
    let mut schema = schema.clone();
    add_probes(&mut schema);
    schema
}

/// The subschemas directly below the schema object `fields`, by the keywords that hold them
/// (the same ones [`probed`] follows): each is probed, counted and may be referred to.
pub(super) fn subschemas(fields: &Map<String, Value>) -> Vec<&Value> {
    let mut found = Vec::new();
    for (key, value) in fields {
        let key = key.as_str();
        match value {
            Value::Object(_) if ONE.contains(&key) => found.push(value),
            Value::Array(items) if MANY.contains(&key) => found.extend(items.iter()),
            Value::Object(named) if NAMED.contains(&key) => found.extend(named.values()),
            _ => {}
        }
    }
    found
}

fn add_probes(schema: &mut Value) {
    let Value::Object(fields) = schema else { return };
    for (key, value) in fields.iter_mut() {
        let key = key.as_str();
        match value {
            Value::Object(_) if ONE.contains(&key) => add_probes(value),
            Value::Array(items) if MANY.contains(&key) => items.iter_mut().for_each(add_probes),
            Value::Object(named) if NAMED.contains(&key) => named.values_mut().for_each(add_probes),
            _ => {}
        }
    }
    fields.insert(KEYWORD.to_owned(), Value::Bool(true));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_subschema_gets_a_probe_and_data_none() {
        let schema = json!({"type": "object", "properties": {"a": {"enum": [{"x": 1}]}, "b": true},
            "allOf": [{"minProperties": 1}], "items": [{"type": "string"}], "$defs": {"d": {"not": {}}}});
        let probed = probed(&schema);
        assert_eq!(probed[KEYWORD], true);
        assert_eq!(probed["properties"]["a"][KEYWORD], true);
        assert_eq!(probed["properties"]["a"]["enum"], json!([{"x": 1}]));
        assert_eq!(probed["properties"]["b"], true);
        assert!(probed["properties"].get(KEYWORD).is_none(), "a property is not a subschema");
        assert_eq!(probed["allOf"][0][KEYWORD], true);
        assert_eq!(probed["items"][0][KEYWORD], true);
        assert_eq!(probed["$defs"]["d"]["not"][KEYWORD], true);
    }
}
