//! CEL for kinds: the environment (standard library, the `strings`, `lists` and `math`
//! extensions, `lookup` and `exists`), JSON ↔ CEL values, compilation with readable errors, and
//! a check at load that every name an expression uses is bound.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::common::types::{self, CelBool, CelNull};
use cel::common::value::CowVal;
use cel::objects::{Key, Map};
use cel::{Context, DeclarationError, Env, ExecutionError, Program, Value};

/// The CEL type names an expression may use as plain identifiers (`type(x) == string`).
const TYPE_NAMES: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "duration",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "optional_type",
    "string",
    "timestamp",
    "type",
    "uint",
];

/// Function namespaces: `math.greatest(…)`, `lists.range(…)`, `optional.of(…)`.
const NAMESPACES: &[&str] = &["math", "lists", "strings", "optional", "base64"];

/// Names a table may not take: the variables rules see, CEL's reserved words, type names and
/// function namespaces.
pub(super) fn is_reserved(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "self",
        "context",
        "item",
        "index",
        "found",
        "expected",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
        "true",
        "false",
        "null",
        "lookup",
        "exists",
    ];
    WORDS.contains(&name) || TYPE_NAMES.contains(&name) || NAMESPACES.contains(&name)
}

/// The environment every kind's expressions compile and run in.
pub(super) fn env() -> Result<Env, DeclarationError> {
    let mut env = Env::stdlib();
    env.add_extension(cel::extensions::strings)?;
    env.add_extension(cel::extensions::lists)?;
    env.add_extension(cel::extensions::math)?;
    // `exists` is a *receiver* macro in CEL (`list.exists(x, p)`); a global call with two
    // arguments is not, so it reaches this overload.
    env.add_overload("lookup", "lookup_map_dyn", vec![types::MAP_TYPE, types::DYN_TYPE], lookup)?;
    env.add_overload("exists", "exists_map_dyn", vec![types::MAP_TYPE, types::DYN_TYPE], exists)?;
    Ok(env)
}

/// `lookup(table, key)`: the row at `key`, or `null`. A key of a type the table cannot hold
/// (null, a list…) finds nothing rather than failing.
fn lookup<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let n = args.len();
    let Ok([table, key]) = <[CowVal<'b, 'v>; 2]>::try_from(args) else {
        return Err(ExecutionError::invalid_argument_count(2, n));
    };
    let not_table = || ExecutionError::function_error("lookup", "the first argument is not a table");
    let found = match table {
        CowVal::Borrowed(t) => t.as_indexer().ok_or_else(not_table)?.get(key.as_ref()),
        CowVal::Owned(t) => t.into_indexer().ok_or_else(not_table)?.steal(key.as_ref()).map(CowVal::Owned),
    };
    match found {
        Ok(row) => Ok(row),
        Err(ExecutionError::NoSuchKey(_) | ExecutionError::UnexpectedType { .. }) => Ok(CowVal::owned(CelNull)),
        Err(e) => Err(e),
    }
}

/// `exists(table, key)`: whether the table has a row at `key` (the same as `key in table`, but
/// false rather than an error for a key of a type no table holds).
fn exists<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [table, key] = args.as_slice() else {
        return Err(ExecutionError::invalid_argument_count(2, args.len()));
    };
    let container = table
        .as_ref()
        .as_container()
        .ok_or_else(|| ExecutionError::function_error("exists", "the first argument is not a table"))?;
    Ok(CowVal::owned(CelBool::from(container.contains(key.as_ref()).unwrap_or(false))))
}

/// A JSON value as a CEL value: integers are `int` (`uint` only above `i64::MAX`), so
/// `size(self.fills) == context.target_count` compares like with like.
pub(super) fn json_to_cel(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::UInt(u)
            } else {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(items) => Value::List(Arc::new(items.iter().map(json_to_cel).collect())),
        serde_json::Value::Object(fields) => {
            let map: HashMap<Key, Value> =
                fields.iter().map(|(k, v)| (Key::String(Arc::new(k.clone())), json_to_cel(v))).collect();
            Value::Map(Map { map: Arc::new(map) })
        }
    }
}

/// A CEL value as JSON (`null` for what JSON cannot hold).
pub(super) fn cel_to_json(value: &Value) -> serde_json::Value {
    value.json().unwrap_or(serde_json::Value::Null)
}

/// The CEL type name of a value, for messages.
pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::List(_) => "a list",
        Value::Map(_) => "a map",
        Value::Int(_) => "an int",
        Value::UInt(_) => "a uint",
        Value::Float(_) => "a double",
        Value::String(_) => "a string",
        Value::Bytes(_) => "bytes",
        Value::Bool(_) => "a bool",
        Value::Null => "null",
        _ => "a value of another type",
    }
}

/// A compiled expression with its source.
#[derive(Debug)]
pub(super) struct Expression {
    pub source: String,
    program: Program,
    /// The tables it reads, in the order it first names them.
    pub tables: Vec<String>,
}

impl Expression {
    pub fn eval(&self, ctx: &Context<'_, '_>) -> Result<Value, ExecutionError> {
        self.program.execute(ctx)
    }
}

/// What the names of an expression may refer to.
pub(super) struct Scope<'a> {
    pub tables: &'a [&'a str],
    /// `item` and `index` are bound (the rule has `each`, and this is not the `each` itself).
    pub per_item: bool,
    /// The rule has `each` (to explain why `item` is unbound in the `each` expression).
    pub has_each: bool,
}

/// Compile `source` in `env` and check its names against `scope`. The error is a sentence
/// fragment (after "`check` …") and an optional hint.
pub(super) fn compile(env: &Env, source: &str, scope: &Scope<'_>) -> Result<Expression, (String, Option<String>)> {
    let program = env.compile(source).map_err(|errors| {
        let multiline = source.contains('\n');
        let text = errors
            .errors
            .iter()
            .map(|e| {
                let (line, column) = e.pos;
                if multiline {
                    format!("{} at line {line}, column {column}", e.msg)
                } else {
                    format!("{} at column {column}", e.msg)
                }
            })
            .collect::<Vec<_>>()
            .join("; ");
        (format!("does not compile: {text}"), Some(format!("the expression is `{source}`")))
    })?;
    let mut names = Names { bound: Vec::new(), tables: Vec::new() };
    check_names(program.expression(), scope, &mut names)?;
    let tables = names.tables;
    Ok(Expression { source: source.to_owned(), program, tables })
}

/// The names bound by the comprehensions around an expression, and the tables it reads.
struct Names<'a> {
    bound: Vec<&'a str>,
    tables: Vec<String>,
}

fn check_names<'a>(e: &'a IdedExpr, scope: &Scope<'_>, names: &mut Names<'a>) -> Result<(), (String, Option<String>)> {
    match &e.expr {
        Expr::Ident(name) => {
            check_ident(name, scope, &names.bound)?;
            if scope.tables.contains(&name.as_str())
                && !names.bound.contains(&name.as_str())
                && !names.tables.iter().any(|t| t == name)
            {
                names.tables.push(name.clone());
            }
            Ok(())
        }
        Expr::Call(call) => {
            if call.target.is_none()
                && matches!(call.func_name.as_str(), "lookup" | "exists")
                && let Some(IdedExpr { expr: Expr::Ident(table), .. }) = call.args.first()
                && !names.bound.contains(&table.as_str())
                && !scope.tables.contains(&table.as_str())
                && !matches!(table.as_str(), "self" | "context")
            {
                return Err((
                    format!("calls `{}` on `{table}`, which is not a table", call.func_name),
                    Some(tables_hint(scope.tables)),
                ));
            }
            if let Some(target) = &call.target {
                let namespace = matches!(&target.expr, Expr::Ident(ns) if NAMESPACES.contains(&ns.as_str()));
                if !namespace {
                    check_names(target, scope, names)?;
                }
            }
            call.args.iter().try_for_each(|a| check_names(a, scope, names))
        }
        Expr::Comprehension(c) => {
            check_names(&c.iter_range, scope, names)?;
            check_names(&c.accu_init, scope, names)?;
            let depth = names.bound.len();
            names.bound.push(&c.iter_var);
            if let Some(v2) = &c.iter_var2 {
                names.bound.push(v2);
            }
            names.bound.push(&c.accu_var);
            let inner =
                [&c.loop_cond, &c.loop_step, &c.result].into_iter().try_for_each(|x| check_names(x, scope, names));
            names.bound.truncate(depth);
            inner
        }
        Expr::Select(select) => check_names(&select.operand, scope, names),
        Expr::List(list) => list.elements.iter().try_for_each(|x| check_names(x, scope, names)),
        Expr::Map(map) => map.entries.iter().try_for_each(|x| check_entry(&x.expr, scope, names)),
        Expr::Struct(s) => s.entries.iter().try_for_each(|x| check_entry(&x.expr, scope, names)),
        Expr::Literal(_) | Expr::Unspecified => Ok(()),
    }
}

fn check_entry<'a>(
    entry: &'a EntryExpr,
    scope: &Scope<'_>,
    names: &mut Names<'a>,
) -> Result<(), (String, Option<String>)> {
    match entry {
        EntryExpr::StructField(field) => check_names(&field.value, scope, names),
        EntryExpr::MapEntry(entry) => {
            check_names(&entry.key, scope, names)?;
            check_names(&entry.value, scope, names)
        }
    }
}

fn check_ident(name: &str, scope: &Scope<'_>, bound: &[&str]) -> Result<(), (String, Option<String>)> {
    let known = bound.contains(&name)
        || name.starts_with('@')
        || matches!(name, "self" | "context")
        || scope.tables.contains(&name)
        || TYPE_NAMES.contains(&name)
        || (scope.per_item && matches!(name, "item" | "index"));
    if known {
        return Ok(());
    }
    if matches!(name, "item" | "index") {
        return Err(if scope.has_each {
            (format!("uses `{name}`, which `each` itself cannot see"), None)
        } else {
            (
                format!("uses `{name}`, but the rule has no `each`"),
                Some("add `each = \"self.LIST\"` to run the rule once per element, as `item` at `index`".to_owned()),
            )
        });
    }
    let mut names = vec!["self", "context"];
    names.extend(scope.tables.iter().copied());
    if scope.per_item {
        names.extend(["item", "index"]);
    }
    Err((format!("uses `{name}`, which is not defined"), Some(format!("expressions see: {}", names.join(", ")))))
}

fn tables_hint(tables: &[&str]) -> String {
    if tables.is_empty() {
        "this kind declares no tables; add `[tables.NAME]` with `file` and `key` to kind.toml".to_owned()
    } else {
        format!("the tables of this kind are: {}", tables.join(", "))
    }
}

/// A runtime error in words.
pub(super) fn describe(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(key) => format!("there is no field `{key}`"),
        ExecutionError::NoSuchOverload(o)
            if o.function() == "_._" && o.argument_types().first().is_some_and(|t| t == "null_type") =>
        {
            "a field was read from null (a `lookup` that found no row?)".to_owned()
        }
        ExecutionError::IndexOutOfBounds(i) => format!("index {} is out of bounds", cel_to_json(i)),
        ExecutionError::UndeclaredReference(name) => format!("`{name}` is not defined"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TABLES: &[&str] = &["workers"];

    /// Compile `source` (with `item`/`index` bound when `per_item`) and run it with
    /// `self = {"fills": [{"worker_id": "W-1"}, {"worker_id": "W-9"}], "n": 2}`, a `workers`
    /// table `{W-1: {city: Toledo}}` and `item` = the first fill; a compile error as
    /// `Err(message)`.
    fn check(source: &str, per_item: bool) -> Result<Result<serde_json::Value, String>, String> {
        let env = Arc::new(env().unwrap());
        let scope = Scope { tables: TABLES, per_item, has_each: per_item };
        let expression = compile(&env, source, &scope).map_err(|(m, h)| match h {
            Some(h) => format!("{m} | {h}"),
            None => m,
        })?;
        let mut ctx = Context::with_env(env);
        ctx.add_variable_from_value("workers", json_to_cel(&json!({"W-1": {"city": "Toledo"}})));
        let artifact = json!({"fills": [{"worker_id": "W-1"}, {"worker_id": "W-9"}], "n": 2});
        ctx.add_variable_from_value("self", json_to_cel(&artifact));
        ctx.add_variable_from_value("context", json_to_cel(&json!({"city": "Toledo"})));
        ctx.add_variable_from_value("item", json_to_cel(&artifact["fills"][0]));
        ctx.add_variable_from_value("index", Value::Int(0));
        Ok(expression.eval(&ctx).map(|v| cel_to_json(&v)).map_err(|e| describe(&e)))
    }

    fn ok(source: &str) -> serde_json::Value {
        check(source, true).unwrap().unwrap()
    }

    #[test]
    fn lookup_and_exists() {
        assert_eq!(ok("lookup(workers, 'W-1')"), json!({"city": "Toledo"}));
        assert_eq!(ok("lookup(workers, item.worker_id).city == context.city"), json!(true));
        assert_eq!(ok("lookup(workers, 'W-9')"), json!(null));
        assert_eq!(ok("exists(workers, 'W-1')"), json!(true));
        assert_eq!(ok("exists(workers, 'W-9')"), json!(false));
        assert_eq!(ok("exists(workers, null) || exists(workers, 3) || exists(workers, [1])"), json!(false));
        assert_eq!(ok("'W-1' in workers && !('W-9' in workers)"), json!(true));
        // the receiver macro `exists` is untouched
        assert_eq!(ok("self.fills.exists(f, f.worker_id == 'W-9')"), json!(true));
        assert_eq!(ok("self.fills.filter(f, exists(workers, f.worker_id)).size()"), json!(1));
        // lookup works on any map
        assert_eq!(ok("lookup({'a': 1}, 'a')"), json!(1));
    }

    #[test]
    fn json_integers_are_ints() {
        assert_eq!(ok("size(self.fills) == self.n"), json!(true));
        assert_eq!(ok("type(self.n) == int"), json!(true));
        assert_eq!(ok("self.fills.slice(0, index).size()"), json!(0));
        assert_eq!(ok("'  x '.trim() + string(math.greatest(1, 2)) + string(size(lists.range(3)))"), json!("x23"));
    }

    #[test]
    fn runtime_errors_are_described() {
        let err = |s: &str| check(s, true).unwrap().unwrap_err();
        assert_eq!(err("item.city"), "there is no field `city`");
        assert_eq!(err("lookup(workers, 'W-9').city"), "a field was read from null (a `lookup` that found no row?)");
        assert_eq!(err("self.fills[5]"), "index 5 is out of bounds");
        assert_eq!(err("nope(1)"), "`nope` is not defined");
    }

    #[test]
    fn syntax_errors_give_the_column() {
        let err = check("size(self.fills) ==", false).unwrap_err();
        assert!(err.starts_with("does not compile: Syntax error: mismatched input '<EOF>'"), "{err}");
        assert!(err.contains("at column 20 | the expression is `size(self.fills) ==`"), "{err}");
        let err = check("self.a &&\n  (", false).unwrap_err();
        assert!(err.contains("at line 2, column 4"), "{err}");
    }

    #[test]
    fn unknown_names_are_refused_at_compile_time() {
        assert_eq!(
            check("lookup(wrkers, item.worker_id)", true).unwrap_err(),
            "calls `lookup` on `wrkers`, which is not a table | the tables of this kind are: workers"
        );
        assert_eq!(
            check("exists(roster, 'W-1')", true).unwrap_err(),
            "calls `exists` on `roster`, which is not a table | the tables of this kind are: workers"
        );
        assert_eq!(
            check("slef.fills", false).unwrap_err(),
            "uses `slef`, which is not defined | expressions see: self, context, workers"
        );
        let err = check("item.worker_id == 'W-1'", false).unwrap_err();
        assert!(err.starts_with("uses `item`, but the rule has no `each` | add `each"), "{err}");
        // comprehension variables, type names and namespaces are fine
        for ok in [
            "self.fills.all(f, f.worker_id != '')",
            "self.fills.map(f, {'id': f.worker_id})",
            "type(self) == map",
            "math.least(1, 2) == 1",
            "lists.range(2) == [0, 1]",
            "[self.n].exists(x, x > index)",
        ] {
            assert!(check(ok, true).is_ok(), "{ok}: {:?}", check(ok, true));
        }
        // a comprehension variable does not leak out of its comprehension
        assert!(check("self.fills.all(f, true) && f", false).is_err());
    }

    #[test]
    fn reserved_names() {
        for name in ["self", "context", "item", "int", "in", "math", "lookup"] {
            assert!(is_reserved(name), "{name}");
        }
        assert!(!is_reserved("workers"));
    }
}
