//! Schema-aligned coercion: after extraction, a value the schema plainly meant is given the
//! shape the schema asks for, and every change is recorded as a [`Coercion`].
//!
//! The key design decision: **a value that already fits its schema is never changed, and
//! nothing is guessed.** A value is coerced only where it does not fit, and only when exactly
//! one reading makes it fit; when two would (`"1"` where an integer or a boolean may stand), or
//! none does, it is left for the evaluator to report. No default is filled in, no `null` added
//! for a missing member, no number rounded.
//!
//! What is coerced, where the schema asks for it:
//! - a number or integer written as text: `"12"`, `"12.0"` for an integer (not `"12.5"`), with
//!   a sign, a currency (`"€77.08"`, `"$1,234.50"`, `"USD 12"`), thousands separators grouping
//!   by three (`"1,234"`, `"1 234"`, `"1_234"`, `"1.234,5"`), or a unit the field names in its
//!   property name or `description` (`"12 kg"` for `weight_kg`, `"5%"` for `discount_pct` is
//!   5); `"1.234"` (a decimal point, or a German thousands separator?), a decimal comma alone
//!   (`"12,5"`) and units the schema does not name are left alone;
//! - a boolean written as `"yes"`/`"no"`, `"true"`/`"false"` or `"1"`/`"0"`, in any case;
//! - an enum member in another case or with spaces around it (`"Pending "` for `"pending"`),
//!   when exactly one member matches;
//! - one value where an array is expected, when it fits the items (after coercion): `"a"` is
//!   `["a"]`;
//! - an object or array serialised inside a string (`"{\"a\": 1}"`);
//! - a wrapper around the value: an object with one member, `{"data": {…}}` where an object is
//!   expected whose member name is not a property of the schema, which lacks every required
//!   property the inner object has (or, without `required`, forbids other properties and the
//!   inner object holds only its properties); or `{"result": 12}`, `{"items": […]}` where an
//!   object cannot stand and the inner value fits.
//!
//! The schema is read for `type` (arrays and `nullable` too), `enum`, `const`, `properties`,
//! `required`, `additionalProperties`, `items`, `prefixItems`, `anyOf`/`oneOf` (toward the
//! single branch the value can be made to fit) and local `$ref`s and `allOf`; a value under
//! `allOf` parts that each say something is not coerced. Work is bounded: past 128 levels of
//! nesting or 200,000 values and schema steps visited, nothing is coerced at all.

mod plan;
mod scalar;
mod schema;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use plan::{Change, Step, Walk};

/// One value changed to fit the schema: where (a JSON Pointer), what it was, what it became.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Coercion {
    /// Where the value is, as a JSON Pointer (`/unit_price`, `/items/0`; `` for the whole).
    pub path: String,
    /// The value as extracted.
    pub from: Value,
    /// The value as evaluated.
    pub to: Value,
}

/// Coerce `value` toward `schema` where that is unambiguous, in place; returns every change,
/// in the order made (an enclosing value before the values inside it). A value that fits is
/// returned unchanged with no coercion.
pub fn coerce(value: &mut Value, schema: &Value) -> Vec<Coercion> {
    let mut walk = Walk::new(schema);
    let steps = walk.run(value);
    if walk.exhausted() {
        return Vec::new();
    }
    apply(value, steps)
}

/// Carry out planned steps, recording each.
fn apply(value: &mut Value, steps: Vec<Step>) -> Vec<Coercion> {
    let mut done = Vec::with_capacity(steps.len());
    for Step { path, change } in steps {
        let Some(target) = value.pointer_mut(&path) else {
            continue;
        };
        let to = match change {
            Change::Set(to) => to,
            Change::Unwrap(key) => match target.get(&key) {
                Some(inner) => inner.clone(),
                None => continue,
            },
            Change::Wrap => Value::Array(vec![target.clone()]),
        };
        let from = std::mem::replace(target, to.clone());
        done.push(Coercion { path, from, to });
    }
    done
}

#[cfg(test)]
mod tests;
