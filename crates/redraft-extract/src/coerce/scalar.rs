//! Scalars written as text: numbers (with a sign, a currency, thousands separators, or a unit
//! the field names), booleans, and enum members in another case.

use serde_json::{Number, Value};

/// Longest text read as a number or a boolean.
const MAX_LEN: usize = 64;

/// Currency signs and codes read before or after an amount, longest first where one starts
/// another (`US$` before `$`).
const CURRENCIES: [&str; 51] = [
    "US$", "CA$", "AU$", "NZ$", "HK$", "A$", "C$", "R$", "S$", "$", "€", "£", "¥", "₹", "₩", "₽", "₺", "₪", "₫", "₴",
    "₦", "₱", "฿", "USD", "EUR", "GBP", "JPY", "CNY", "CHF", "CAD", "AUD", "NZD", "INR", "RUB", "BRL", "MXN", "SEK",
    "NOK", "DKK", "PLN", "CZK", "HUF", "TRY", "ZAR", "KRW", "SGD", "HKD", "ILS", "AED", "SAR", "THB",
];

/// Characters that group digits by thousands (besides `,` and `.`, which may also be a
/// decimal mark): space, no-break space, narrow no-break space, thin space, `_`, `'`.
const SPACERS: [char; 6] = [' ', '\u{a0}', '\u{202f}', '\u{2009}', '_', '\''];

/// What the schema says about the field a value is in: its name and its `description` and
/// `title`. A unit is stripped from a number only when they name it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Field<'a> {
    pub(super) key: Option<&'a str>,
    pub(super) description: Option<&'a str>,
    pub(super) title: Option<&'a str>,
}

/// The integer written in `text` (`"12"`, `"12.0"`, `"1,234"`, `"$5"`), if it is one.
pub(super) fn integer(text: &str, field: Field<'_>) -> Option<Value> {
    let (negative, int, frac) = decimal(text, field)?;
    if !frac.bytes().all(|c| c == b'0') {
        return None;
    }
    let n: Number = serde_json::from_str(&format!("{}{int}", if negative { "-" } else { "" })).ok()?;
    (n.is_i64() || n.is_u64()).then_some(Value::Number(n))
}

/// The number written in `text` (`"77.08"`, `"€77.08"`, `"1 234,5"`, `"1e3"`), if it is one.
pub(super) fn number(text: &str, field: Field<'_>) -> Option<Value> {
    let (negative, int, frac) = decimal(text, field)?;
    let sign = if negative { "-" } else { "" };
    let canonical = if frac.is_empty() { format!("{sign}{int}") } else { format!("{sign}{int}.{frac}") };
    let n: Number = serde_json::from_str(&canonical).ok()?;
    n.as_f64().is_some_and(f64::is_finite).then_some(Value::Number(n))
}

/// The boolean written in `text`: `true`/`yes`/`1` or `false`/`no`/`0`, in any case.
pub(super) fn boolean(text: &str) -> Option<bool> {
    match text.trim().to_lowercase().as_str() {
        "true" | "yes" | "1" => Some(true),
        "false" | "no" | "0" => Some(false),
        _ => None,
    }
}

/// Whether `value` is `member` written differently: a string in another case or with spaces
/// around it, or a number or boolean written as text.
pub(super) fn matches(value: &Value, member: &Value, field: Field<'_>) -> bool {
    let Value::String(text) = value else {
        return false;
    };
    match member {
        Value::String(m) => text.trim().to_lowercase() == m.to_lowercase(),
        Value::Number(m) => number(text, field).is_some_and(|n| same(&n, &Value::Number(m.clone()))),
        Value::Bool(m) => boolean(text) == Some(*m),
        _ => false,
    }
}

/// JSON equality where numbers compare by value (`1` is `1.0`), as JSON Schema's `enum` does.
pub(super) fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || (x.as_f64().is_some() && x.as_f64() == y.as_f64()),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The decimal number `text` writes: its sign, integer digits and fraction digits. `None` when
/// it writes none, or when how to read it is ambiguous (`"1.234"`: a decimal point, or a
/// thousands separator as in German?).
fn decimal(text: &str, field: Field<'_>) -> Option<(bool, String, String)> {
    let text = text.trim();
    if text.is_empty() || text.len() > MAX_LEN {
        return None;
    }
    // a JSON number, or one with a leading `+` (`"1e3"`, `"+5"`)
    if text.contains(['e', 'E'])
        && let Ok(n) = serde_json::from_str::<Number>(text.strip_prefix('+').unwrap_or(text))
        && let Some(f) = n.as_f64()
    {
        return f.is_finite().then(|| exponent_free(f)).flatten();
    }
    let (minus, rest) = sign(text);
    let (currency, rest) = currency_prefix(rest);
    let (minus_after, rest) = sign(rest);
    if minus && minus_after {
        return None;
    }
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ',' || SPACERS.contains(&c)));
    let (body, tail) = rest.split_at(end.unwrap_or(rest.len()));
    let body = body.trim_end_matches([' ', '\u{a0}', '\u{202f}', '\u{2009}']);
    let tail = tail.trim();
    // after the number: nothing, a currency (when none came before), or a unit the field names
    let currency_after = currency.is_none() && CURRENCIES.contains(&tail);
    if !(tail.is_empty() || currency_after || named_unit(tail, field)) {
        return None;
    }
    let (int, frac) = digits(body)?;
    Some((minus || minus_after, int, frac))
}

/// A finite float without an exponent, as (sign, integer digits, fraction digits).
fn exponent_free(f: f64) -> Option<(bool, String, String)> {
    let text = format!("{}", f.abs());
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    (int.bytes().all(|c| c.is_ascii_digit()) && frac.bytes().all(|c| c.is_ascii_digit()))
        .then(|| (f < 0.0, int.to_owned(), frac.to_owned()))
}

/// A leading minus (`-` or `−`) or plus, and the rest.
fn sign(text: &str) -> (bool, &str) {
    if let Some(rest) = text.strip_prefix('-').or_else(|| text.strip_prefix('\u{2212}')) {
        return (true, rest.trim_start());
    }
    (false, text.strip_prefix('+').unwrap_or(text).trim_start())
}

/// A leading currency sign or code, and the rest.
fn currency_prefix(text: &str) -> (Option<&'static str>, &str) {
    for currency in CURRENCIES {
        if let Some(rest) = text.strip_prefix(currency) {
            let letters = currency.bytes().all(|c| c.is_ascii_uppercase());
            // `USD12` or `USD 12`, but not `USDT`
            if !letters || rest.starts_with(|c: char| !c.is_alphabetic()) {
                return (Some(currency), rest.trim_start());
            }
        }
    }
    (None, text)
}

/// Integer and fraction digits of `body`, made of digits and separators. Thousands
/// separators must group by three (`1,234,567`); a single `,` before three digits is one
/// (`1,234`), and a single `.` is a decimal point, except before exactly three digits after
/// one to three others (`1.234`: ambiguous). With both `,` and `.`, the last is the decimal
/// mark (`1,234.5`, `1.234,5`); after space-like grouping either is (`1 234,5`). A decimal
/// comma alone (`12,5`) is not read.
fn digits(body: &str) -> Option<(String, String)> {
    if body.is_empty() || !body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let commas = body.matches(',').count();
    let dots = body.matches('.').count();
    let spacers: Vec<char> = SPACERS.into_iter().filter(|&s| body.contains(s)).collect();
    let (group, decimal) = match (spacers.as_slice(), commas, dots) {
        ([], 0, 0) => (None, None),
        ([_, _, ..], _, _) => return None,
        ([s], 0, 0) => (Some(*s), None),
        ([s], 1, 0) => (Some(*s), Some(',')),
        ([s], 0, 1) => (Some(*s), Some('.')),
        ([_], _, _) => return None,
        ([], 0, 1) => {
            let (int, frac) = body.split_once('.')?;
            let thousands_like = (1..=3).contains(&int.len()) && !int.starts_with('0') && frac.len() == 3;
            if thousands_like {
                return None;
            }
            (None, Some('.'))
        }
        ([], 0, _) => (Some('.'), None),
        ([], _, 0) => (Some(','), None),
        ([], _, _) => {
            let last_dot = body.rfind('.')?;
            let last_comma = body.rfind(',')?;
            if last_dot > last_comma { (Some(','), Some('.')) } else { (Some('.'), Some(',')) }
        }
    };
    let (int, frac) = match decimal {
        Some(mark) => {
            let (int, frac) = body.split_once(mark)?;
            if frac.is_empty() || !frac.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            (int, frac)
        }
        None => (body, ""),
    };
    let int = match group {
        Some(sep) => grouped(int, sep)?,
        None if int.bytes().all(|c| c.is_ascii_digit()) => int.to_owned(),
        None => return None,
    };
    let trimmed = int.trim_start_matches('0');
    Some((if trimmed.is_empty() { "0".into() } else { trimmed.to_owned() }, frac.to_owned()))
}

/// `int` without its thousands separator `sep`, when it groups by three: one to three digits
/// (not starting with `0`), then groups of exactly three.
fn grouped(int: &str, sep: char) -> Option<String> {
    let mut groups = int.split(sep);
    let first = groups.next()?;
    let lead_ok =
        (1..=3).contains(&first.len()) && first.bytes().all(|c| c.is_ascii_digit()) && !first.starts_with('0');
    let mut out = first.to_owned();
    for group in groups {
        if group.len() != 3 || !group.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        out.push_str(group);
    }
    (lead_ok || !int.contains(sep)).then_some(out)
}

/// Whether `unit`, written after a number, is the unit the field names: in its property name
/// (`weight_kg`, `durationMs`) or as a word of its `description` or `title`. `%` is named by
/// `percent`, `percentage` or `pct` (or `%` in the text); it is then the number written
/// (`"5%"` is 5), never a fraction.
fn named_unit(unit: &str, field: Field<'_>) -> bool {
    let unit = unit.to_lowercase();
    let words: Vec<String> = field.key.map(key_words).unwrap_or_default();
    let notes: Vec<String> = [field.description, field.title].into_iter().flatten().map(str::to_lowercase).collect();
    if unit == "%" {
        const NAMES: [&str; 3] = ["percent", "percentage", "pct"];
        return words.iter().any(|w| NAMES.contains(&w.as_str()))
            || notes.iter().any(|n| n.contains('%') || NAMES.iter().any(|name| has_word(n, name)));
    }
    let unit_like = unit.chars().count() <= 12 && unit.chars().all(|c| c.is_alphabetic() || "°µ²³/".contains(c));
    unit_like && (words.contains(&unit) || notes.iter().any(|n| has_word(n, &unit)))
}

/// The words of a property name, lower-cased: split at `_`, `-`, spaces and case changes
/// (`weightKg` is `weight`, `kg`).
fn key_words(key: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in key.chars() {
        if !c.is_alphanumeric() {
            words.push(std::mem::take(&mut word));
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower {
            words.push(std::mem::take(&mut word));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    words.push(word);
    words.retain(|w| !w.is_empty());
    words
}

/// Whether `word` stands in `text` as a word of its own.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text.get(..at).and_then(|s| s.chars().next_back());
        let after = text.get(at + word.len()..).and_then(|s| s.chars().next());
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn num(text: &str) -> Option<Value> {
        number(text, Field::default())
    }

    fn int(text: &str) -> Option<Value> {
        integer(text, Field::default())
    }

    #[test]
    fn numbers_written_as_text() {
        for (text, expect) in [
            ("12", json!(12)),
            (" 77.08 ", json!(77.08)),
            ("-3.5", json!(-3.5)),
            ("+5", json!(5)),
            ("\u{2212}5", json!(-5)),
            ("1e3", json!(1000)),
            ("2.5E-3", json!(0.0025)),
            ("€77.08", json!(77.08)),
            ("77.08 €", json!(77.08)),
            ("$1,234.50", json!(1234.5)),
            ("-$5", json!(-5)),
            ("$-5", json!(-5)),
            ("USD 12", json!(12)),
            ("12 USD", json!(12)),
            ("US$3", json!(3)),
            ("1,234", json!(1234)),
            ("12,345,678", json!(12_345_678)),
            ("1 234", json!(1234)),
            ("1\u{a0}234,5", json!(1234.5)),
            ("1_234", json!(1234)),
            ("1'234.5", json!(1234.5)),
            ("1.234,50", json!(1234.5)),
            ("1.234.567", json!(1_234_567)),
            ("0.125", json!(0.125)),
            ("12.50", json!(12.5)),
            ("1234.567", json!(1234.567)),
            (".5", json!(0.5)),
            ("007", json!(7)),
        ] {
            assert_eq!(num(text), Some(expect.clone()), "{text:?}");
        }
    }

    #[test]
    fn text_that_is_not_plainly_a_number_is_left() {
        for text in [
            "",
            "abc",
            "1.234",
            "12,5",
            "0,123",
            "1,23",
            "1,2345",
            "1.2.3",
            "12 kg",
            "5%",
            "approx. 12",
            "~12",
            "12-14",
            "1 234_567",
            "6'",
            "12_",
            "NaN",
            "inf",
            "1e999",
            "€",
            "12€$",
            "$$5",
            "--5",
            "USDT 5",
            "12 apples",
            "1,234,56",
        ] {
            assert_eq!(num(text), None, "{text:?}");
        }
        assert_eq!(num(&"1".repeat(65)), None, "too long");
    }

    #[test]
    fn integers_keep_every_digit() {
        assert_eq!(int("12.0"), Some(json!(12)));
        assert_eq!(int("12.5"), None, "no rounding");
        assert_eq!(int("1,234"), Some(json!(1234)));
        assert_eq!(int("-€7"), Some(json!(-7)));
        assert_eq!(int("18446744073709551615"), Some(json!(18_446_744_073_709_551_615_u64)));
        assert_eq!(int("18446744073709551616"), None, "past u64");
        assert_eq!(int("1e3"), Some(json!(1000)));
    }

    #[test]
    fn units_only_where_the_field_names_them() {
        let key = |k| Field { key: Some(k), ..Field::default() };
        let described = |d| Field { description: Some(d), ..Field::default() };
        assert_eq!(number("12 kg", key("weight_kg")), Some(json!(12)));
        assert_eq!(number("12kg", key("weightKg")), Some(json!(12)));
        assert_eq!(number("250 ms", key("duration-ms")), Some(json!(250)));
        assert_eq!(number("12 kg", described("Weight in kg.")), Some(json!(12)));
        assert_eq!(number("12 kg", key("weight")), None);
        assert_eq!(number("12 kg", key("kgs")), None);
        assert_eq!(number("12 g", described("Weight in kg.")), None);
        assert_eq!(number("5%", key("discount_percent")), Some(json!(5)));
        assert_eq!(number("5 %", key("taxPct")), Some(json!(5)));
        assert_eq!(number("5%", described("The discount, as a percentage")), Some(json!(5)));
        assert_eq!(number("5%", described("VAT (%)")), Some(json!(5)));
        assert_eq!(number("5%", key("discount")), None, "5 or 0.05?");
    }

    #[test]
    fn booleans_and_members() {
        for (text, expect) in
            [("yes", true), ("TRUE", true), (" 1 ", true), ("No", false), ("false", false), ("0", false)]
        {
            assert_eq!(boolean(text), Some(expect), "{text:?}");
        }
        assert_eq!(boolean("y"), None);
        assert_eq!(boolean("on"), None);
        let f = Field::default();
        assert!(matches(&json!(" Pending "), &json!("pending"), f));
        assert!(matches(&json!("ÉTÉ"), &json!("été"), f));
        assert!(!matches(&json!("pend"), &json!("pending"), f));
        assert!(matches(&json!("2"), &json!(2), f));
        assert!(matches(&json!("yes"), &json!(true), f));
        assert!(!matches(&json!(2), &json!("2"), f));
        assert!(same(&json!([1, {"a": 2.0}]), &json!([1.0, {"a": 2}])));
        assert!(!same(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }
}
