//! Planning coercions: one walk over the value beside its schema that decides, without
//! changing anything, which values to change and whether the value then fits.

use serde_json::{Map, Value};

use super::scalar::{self, Field, same};
use super::schema::{self, Node, TooComplex, Types};

/// Deepest nesting followed: levels of the value plus schema steps (`anyOf` branches, a wrapper
/// or a string read again) taken on the way.
const MAX_DEPTH: usize = 128;
/// Values and schema steps visited at most, over the whole walk.
const MAX_WORK: usize = 200_000;
/// `anyOf`/`oneOf` branches tried at most.
const MAX_BRANCHES: usize = 32;

/// A change to make at a path.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Change {
    /// Replace the value (a scalar read from text, an enum member, JSON read from a string).
    Set(Value),
    /// Replace an object by the value of its only member, this one.
    Unwrap(String),
    /// Put the value in an array of one.
    Wrap,
}

/// A change and where to make it (a JSON Pointer into the value as changed so far).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Step {
    pub(super) path: String,
    pub(super) change: Change,
}

/// What a walk found for one value: whether it fits once the steps are made.
#[derive(Debug, Clone)]
struct Plan {
    fits: bool,
    steps: Vec<Step>,
}

impl Plan {
    fn fits() -> Self {
        Plan { fits: true, steps: Vec::new() }
    }

    fn misfit() -> Self {
        Plan { fits: false, steps: Vec::new() }
    }

    /// Whether the value fits as it is.
    fn as_is(&self) -> bool {
        self.fits && self.steps.is_empty()
    }

    /// One step, then the steps inside the value it made.
    fn then(step: Step, inner: Plan) -> Self {
        let mut steps = Vec::with_capacity(inner.steps.len() + 1);
        steps.push(step);
        steps.extend(inner.steps);
        Plan { fits: inner.fits, steps }
    }

    /// Whether two plans make the same changes (numbers compared by value).
    fn same_as(&self, other: &Plan) -> bool {
        self.steps.len() == other.steps.len()
            && self.steps.iter().zip(&other.steps).all(|(a, b)| {
                a.path == b.path
                    && match (&a.change, &b.change) {
                        (Change::Set(x), Change::Set(y)) => same(x, y),
                        (x, y) => x == y,
                    }
            })
    }
}

/// The plans that differ, of those given.
fn distinct(plans: Vec<Plan>) -> Vec<Plan> {
    let mut kept: Vec<Plan> = Vec::new();
    for plan in plans {
        if !kept.iter().any(|k| k.same_as(&plan)) {
            kept.push(plan);
        }
    }
    kept
}

/// Where a value stands.
#[derive(Debug, Clone, Copy)]
struct At<'a> {
    /// Its JSON Pointer.
    path: &'a str,
    /// The name of the property it is (or whose array it is in).
    key: Option<&'a str>,
    depth: usize,
    /// Whether a wrapper may be taken off or an array put on here (not twice at one place).
    reshape: bool,
}

impl<'a> At<'a> {
    /// The same place, one schema step further.
    fn again(self) -> Self {
        At { depth: self.depth + 1, reshape: false, ..self }
    }

    /// A value inside this one, at `path`.
    fn inside(self, path: &'a str, key: Option<&'a str>) -> Self {
        At { path, key, depth: self.depth + 1, reshape: true }
    }
}

/// One walk over a value beside its schema.
#[derive(Debug)]
pub(super) struct Walk<'s> {
    root: &'s Value,
    work: usize,
    exhausted: bool,
}

impl<'s> Walk<'s> {
    pub(super) fn new(root: &'s Value) -> Self {
        Walk { root, work: MAX_WORK, exhausted: false }
    }

    /// Whether the walk gave up (too deep, too large, a schema too tangled): then nothing may
    /// be changed.
    pub(super) fn exhausted(&self) -> bool {
        self.exhausted
    }

    /// The steps that make `value` fit the schema, as far as they are unambiguous.
    pub(super) fn run(&mut self, value: &Value) -> Vec<Step> {
        let at = At { path: "", key: None, depth: 0, reshape: true };
        self.plan(value, self.root, at).steps
    }

    /// Take `units` of work; `false` (and the walk exhausted) when there are not enough left.
    fn spend(&mut self, units: usize) -> bool {
        match self.work.checked_sub(units) {
            Some(left) if !self.exhausted => {
                self.work = left;
                true
            }
            _ => {
                self.exhausted = true;
                false
            }
        }
    }

    /// Pay for copying `value` into the value and its record (a wrapper taken off, an array
    /// put on): `false` when it is too large or deep.
    fn spend_copy(&mut self, value: &Value) -> bool {
        match weight(value, self.work) {
            Some(n) => self.spend(2 * n),
            None => {
                self.exhausted = true;
                false
            }
        }
    }

    fn plan(&mut self, value: &Value, schema: &'s Value, at: At<'_>) -> Plan {
        if at.depth > MAX_DEPTH || !self.spend(1) {
            self.exhausted = true;
            return Plan::fits();
        }
        match schema::node(self.root, schema) {
            Err(TooComplex) => {
                self.exhausted = true;
                Plan::fits()
            }
            Ok(Node::Any) => Plan::fits(),
            Ok(Node::Never) => Plan::misfit(),
            Ok(Node::One(part)) => self.part(value, part, at),
            // several parts at once: checked, never coerced toward
            Ok(Node::All(parts)) => {
                let fits = parts.into_iter().all(|p| self.part(value, p, at.again()).as_is());
                Plan { fits, steps: Vec::new() }
            }
        }
    }

    fn part(&mut self, value: &Value, s: &'s Map<String, Value>, at: At<'_>) -> Plan {
        if let Some(branches) = schema::branches(s) {
            return self.branches(value, branches, at);
        }
        let types = Types::of(s);
        match types {
            Some(types) if !types.allows(value) => self.reshape(value, s, types, at),
            _ => match value {
                Value::Object(map) => self.object(value, map, s, at),
                Value::Array(items) => self.array(value, items, s, at),
                _ => self.member(value, s, at),
            },
        }
    }

    /// `anyOf`/`oneOf`: a value fitting a branch as it is stays; otherwise it is coerced toward
    /// the one branch it can be made to fit, or, when it fits none, the one branch that
    /// coerces anything inside it.
    fn branches(&mut self, value: &Value, branches: &'s [Value], at: At<'_>) -> Plan {
        if branches.len() > MAX_BRANCHES {
            self.exhausted = true;
            return Plan::fits();
        }
        let mut plans = Vec::with_capacity(branches.len());
        for branch in branches {
            let plan = self.plan(value, branch, At { depth: at.depth + 1, ..at });
            if plan.as_is() {
                return Plan::fits();
            }
            plans.push(plan);
        }
        let (fitting, other): (Vec<Plan>, Vec<Plan>) = plans.into_iter().partition(|p| p.fits);
        let mut fitting = distinct(fitting);
        if fitting.len() == 1 {
            return fitting.swap_remove(0);
        }
        if !fitting.is_empty() {
            return Plan::misfit();
        }
        let mut partial = distinct(other.into_iter().filter(|p| !p.steps.is_empty()).collect());
        if partial.len() == 1 {
            return partial.swap_remove(0);
        }
        Plan::misfit()
    }

    /// A scalar of an allowed type: an `enum` member written in another case, or as text.
    fn member(&mut self, value: &Value, s: &'s Map<String, Value>, at: At<'_>) -> Plan {
        let Some(members) = schema::members(s) else {
            return Plan::fits();
        };
        if members.iter().any(|m| same(m, value)) {
            return Plan::fits();
        }
        let field = field(s, at);
        let mut matching = members.iter().filter(|m| scalar::matches(value, m, field));
        match (matching.next(), matching.next()) {
            (Some(m), None) => Plan { fits: true, steps: vec![set(at, m.clone())] },
            _ => Plan::misfit(),
        }
    }

    /// An object: a wrapper around the object the schema describes is taken off; otherwise
    /// each member is planned beside its property's schema.
    fn object(&mut self, value: &Value, map: &Map<String, Value>, s: &'s Map<String, Value>, at: At<'_>) -> Plan {
        if at.reshape
            && let Some((key, inner)) = wrapped(map, s)
            && self.spend_copy(value)
        {
            let inner = self.part(inner, s, at.again());
            return Plan::then(Step { path: at.path.to_owned(), change: Change::Unwrap(key.to_owned()) }, inner);
        }
        let props = s.get("properties").and_then(Value::as_object);
        let patterns = s.get("patternProperties").and_then(Value::as_object).is_some_and(|p| !p.is_empty());
        let additional = s.get("additionalProperties");
        let mut plan = Plan::fits();
        for (key, member) in map {
            let sub = match props.and_then(|p| p.get(key)) {
                Some(sub) => sub,
                // what `patternProperties` asks of the others is not checked here
                None if patterns => continue,
                None => match additional {
                    Some(sub) => sub,
                    None => continue,
                },
            };
            let path = pointer(at.path, key);
            let child = self.plan(member, sub, at.inside(&path, Some(key)));
            plan.fits &= child.fits;
            plan.steps.extend(child.steps);
        }
        if schema::required(s).any(|r| !map.contains_key(r)) {
            plan.fits = false;
        }
        plan.fits &= schema::members(s).is_none_or(|ms| ms.iter().any(|m| same(m, value)));
        plan
    }

    /// An array: each item planned beside its schema (`prefixItems`, then `items`; or the
    /// older tuple form, `items` as a list, then `additionalItems`).
    fn array(&mut self, value: &Value, items: &[Value], s: &'s Map<String, Value>, at: At<'_>) -> Plan {
        let (tuple, rest) = match s.get("items") {
            Some(Value::Array(tuple)) => (Some(tuple), s.get("additionalItems")),
            rest => (s.get("prefixItems").and_then(Value::as_array), rest),
        };
        let mut plan = Plan::fits();
        for (i, item) in items.iter().enumerate() {
            let Some(sub) = tuple.and_then(|t| t.get(i)).or(rest) else {
                continue;
            };
            let path = format!("{}/{i}", at.path);
            let child = self.plan(item, sub, at.inside(&path, at.key));
            plan.fits &= child.fits;
            plan.steps.extend(child.steps);
        }
        plan.fits &= schema::members(s).is_none_or(|ms| ms.iter().any(|m| same(m, value)));
        plan
    }

    /// A value of a type the schema does not allow: every reading that gives an allowed one.
    /// A string holding the JSON of the object or array asked for, or a wrapper around the
    /// value, comes first; then a scalar read from text or the value put in an array. Two
    /// readings that both fit are ambiguous: the value is left as it is.
    fn reshape(&mut self, value: &Value, s: &'s Map<String, Value>, types: Types, at: At<'_>) -> Plan {
        let mut held: Vec<Plan> = Vec::new();
        let mut read: Vec<Plan> = Vec::new();
        let mut parsed_misfit = None;
        if let Value::String(text) = value {
            let field = field(s, at);
            let readings: [(u8, Reading); 3] = [
                (Types::INTEGER, scalar::integer),
                (Types::NUMBER, scalar::number),
                (Types::BOOLEAN, |text, _| scalar::boolean(text).map(Value::Bool)),
            ];
            for (_, read_as) in readings.into_iter().filter(|(t, _)| types.has(*t)) {
                if let Some(v) = read_as(text, field)
                    && types.allows(&v)
                    && schema::members(s).is_none_or(|ms| ms.iter().any(|m| same(m, &v)))
                {
                    read.push(Plan { fits: true, steps: vec![set(at, v)] });
                }
            }
            if let Some(parsed) = self.json_in(text, types) {
                let inner = self.part(&parsed, s, at.again());
                let plan = Plan::then(set(at, parsed), inner);
                if plan.fits {
                    held.push(plan);
                } else {
                    parsed_misfit = Some(plan);
                }
            }
        }
        if at.reshape
            && !types.has(Types::OBJECT)
            && let Value::Object(map) = value
            && let Some((key, inner)) = map.iter().next().filter(|(_, v)| map.len() == 1 && !v.is_null())
        {
            let plan = self.part(inner, s, at.again());
            if plan.fits && self.spend_copy(value) {
                held.push(Plan::then(Step { path: at.path.to_owned(), change: Change::Unwrap(key.clone()) }, plan));
            }
        }
        if at.reshape && types.has(Types::ARRAY) && !value.is_null() && held.is_empty() && parsed_misfit.is_none() {
            let path = format!("{}/0", at.path);
            let item = first_item(s);
            let plan = match item {
                Some(sub) => self.plan(value, sub, At { path: &path, reshape: false, depth: at.depth + 1, ..at }),
                None => Plan::fits(),
            };
            if plan.fits && self.spend_copy(value) {
                read.push(Plan::then(Step { path: at.path.to_owned(), change: Change::Wrap }, plan));
            }
        }
        for readings in [held, read] {
            let mut readings = distinct(readings);
            match readings.len() {
                0 => continue,
                1 => return readings.swap_remove(0),
                _ => return Plan::misfit(),
            }
        }
        // JSON of the right kind that still misses something: read, for the evaluator to judge
        parsed_misfit.unwrap_or_else(Plan::misfit)
    }

    /// The object or array serialised in `text`, when it is of a type `types` allows.
    fn json_in(&mut self, text: &str, types: Types) -> Option<Value> {
        let trimmed = text.trim();
        let container = match trimmed.as_bytes().first() {
            Some(b'{') => Types::OBJECT,
            Some(b'[') => Types::ARRAY,
            _ => return None,
        };
        if !types.has(container) || !self.spend(1 + trimmed.len() / 64) {
            return None;
        }
        serde_json::from_str(trimmed).ok()
    }
}

/// Reads a scalar of one type from text.
type Reading = fn(&str, Field<'_>) -> Option<Value>;

/// A step replacing the value at `at` by `to`.
fn set(at: At<'_>, to: Value) -> Step {
    Step { path: at.path.to_owned(), change: Change::Set(to) }
}

/// The field a value is in, for units: its property name and its schema's notes.
fn field<'a>(s: &'a Map<String, Value>, at: At<'a>) -> Field<'a> {
    Field {
        key: at.key,
        description: s.get("description").and_then(Value::as_str),
        title: s.get("title").and_then(Value::as_str),
    }
}

/// The schema of an array's first item.
fn first_item(s: &Map<String, Value>) -> Option<&Value> {
    match s.get("items") {
        Some(Value::Array(tuple)) => tuple.first().or_else(|| s.get("additionalItems")),
        items => s.get("prefixItems").and_then(Value::as_array).and_then(|p| p.first()).or(items),
    }
}

/// The member of a one-member object that wraps the object `s` describes: the member's name
/// is not a property (nor required, nor possibly one of `patternProperties`) and the wrapper
/// lacks what the inner object has, every required property; without `required`, `s` forbids
/// other properties and the inner object holds only its properties, at least one.
fn wrapped<'v>(map: &'v Map<String, Value>, s: &Map<String, Value>) -> Option<(&'v str, &'v Value)> {
    let (key, inner) = map.iter().next().filter(|_| map.len() == 1)?;
    let inner_map = inner.as_object()?;
    let props = s.get("properties").and_then(Value::as_object).filter(|p| !p.is_empty())?;
    let patterns = s.get("patternProperties").and_then(Value::as_object).is_some_and(|p| !p.is_empty());
    if patterns || props.contains_key(key) || schema::required(s).any(|r| r == key) {
        return None;
    }
    let mut required = schema::required(s).peekable();
    let holds = if required.peek().is_some() {
        required.all(|r| inner_map.contains_key(r))
    } else {
        s.get("additionalProperties") == Some(&Value::Bool(false))
            && !inner_map.is_empty()
            && inner_map.keys().all(|k| props.contains_key(k))
    };
    holds.then_some((key.as_str(), inner))
}

/// `base` with the property `key` added, escaped as JSON Pointer asks (`~0`, `~1`).
fn pointer(base: &str, key: &str) -> String {
    format!("{base}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// How many values `value` holds (itself included), counted up to `cap`; `None` when it nests
/// deeper than [`MAX_DEPTH`].
fn weight(value: &Value, cap: usize) -> Option<usize> {
    let mut count = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return None;
        }
        count += 1;
        if count > cap {
            return Some(count);
        }
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|m| (m, depth + 1))),
            _ => {}
        }
    }
    Some(count)
}
