//! Data-driven checks of the lenient parser: input, then the expected value (as JSON text,
//! or `None` when the parser must give up) and the repairs it must record.

use proptest::prelude::*;
use serde_json::Value;

use super::{parse, parse_plain};
use crate::Repair::{self, *};

fn check(input: &str, expect: (Option<&str>, &[Repair])) {
    let got = parse(input, 0);
    match expect.0 {
        None => assert!(got.is_err(), "{input:?} should fail, got {got:?}"),
        Some(json) => {
            let parsed = got.unwrap_or_else(|fail| panic!("{input:?}: {fail:?}"));
            let want: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!((&parsed.value, parsed.repairs.as_slice()), (&want, expect.1), "{input:?}");
        }
    }
}

#[test]
fn valid_json_is_untouched() {
    check(
        r#"{"a": [1, 2.5, -3e2, true, null, "x\"y\u00e9"]}"#,
        (Some(r#"{"a": [1, 2.5, -3e2, true, null, "x\"y\u00e9"]}"#), &[]),
    );
    check(
        r#"["{", "[", "}", "]", ",", ":", "\"", "it's"]"#,
        (Some(r#"["{", "[", "}", "]", ",", ":", "\"", "it's"]"#), &[]),
    );
    check(r#"{"{": "[", "a,b": "c:d", "": ""}"#, (Some(r#"{"{": "[", "a,b": "c:d", "": ""}"#), &[]));
    check("\"\\ud83d\\ude00\"", (Some("\"\u{1F600}\""), &[]));
    check("12345678901234567890", (Some("12345678901234567890"), &[]));
}

#[test]
fn commas_and_colons() {
    check("{a: 1,}", (Some(r#"{"a": 1}"#), &[UnquotedKey, TrailingComma]));
    check("[,1,,2,]", (Some("[1, 2]"), &[TrailingComma]));
    check("{\"a\": 1\n\"b\": 2}", (Some(r#"{"a": 1, "b": 2}"#), &[MissingComma]));
    check("[1 2 {}{}]", (Some("[1, 2, {}, {}]"), &[MissingComma]));
    check(r#"{"a" "b"}"#, (Some(r#"{"a": "b"}"#), &[MissingColon]));
    check(r#"{"a" true}"#, (Some(r#"{"a": true}"#), &[MissingColon]));
    check(r#"{"a": , "b": 2}"#, (Some(r#"{"a": null, "b": 2}"#), &[MissingValue]));
    check(r#"{"a": 1 "b"}"#, (None, &[]));
    // stray words before the next member, after a bare or a quoted value
    check(
        r#"{"a": sic tamet, more words. "b": 2}"#,
        (Some(r#"{"a": "sic tamet", "b": 2}"#), &[UnquotedString, UnquotedKey, StrayText]),
    );
    check(r#"{"a": one, two, three}"#, (Some(r#"{"a": "one, two, three"}"#), &[UnquotedString]));
}

#[test]
fn quotes() {
    check("{'a': 'b'}", (Some(r#"{"a": "b"}"#), &[SingleQuotes]));
    check("{“a”: ‘b’}", (Some(r#"{"a": "b"}"#), &[SmartQuotes]));
    check("{'a': 'it''s'}", (Some(r#"{"a": "it's"}"#), &[SingleQuotes, UnescapedQuote]));
    check(r#"{"html": "<a href="x">y</a>"}"#, (Some(r#"{"html": "<a href=\"x\">y</a>"}"#), &[UnescapedQuote]));
    check(r#""The TV has a 24" screen""#, (Some(r#""The TV has a 24\" screen""#), &[UnescapedQuote]));
    check(r#"{"a": "b, "c": "d"}"#, (Some(r#"{"a": "b", "c": "d"}"#), &[MissingQuote]));
    check(r#"["hello, world]"#, (Some(r#"["hello", "world"]"#), &[MissingQuote, UnquotedString]));
    check(r#"{"x": "see {"k": 1}, ok", "y": 2}"#, (Some(r#"{"x": "see {\"k\": 1}, ok", "y": 2}"#), &[UnescapedQuote]));
    check(r#"{"a": "(5'3")"}"#, (Some(r#"{"a": "(5'3\")"}"#), &[UnescapedQuote]));
    // a quote directly before a closing quote is text: `"x" ", "y"`
    check(r#"["a "b" c" ", "d"]"#, (Some(r#"["a \"b\" c\" ", "d"]"#), &[UnescapedQuote]));
    // a `}` inside an object value is text unless structure follows it
    check(r#"{"a": "x} "y" z}"#, (Some(r#"{"a": "x} \"y\" z"}"#), &[UnescapedQuote, MissingQuote]));
    check(r#"{"a": "x} b: 2}"#, (Some(r#"{"a": "x"}"#), &[MissingQuote]));
    // at the end of the text, an unpaired quote in a value was its end quote
    check(r#"{"a": "x" tail"#, (Some(r#"{"a": "x"}"#), &[StrayText, TruncatedTail]));
    // in a code snippet, a quote ending its line before a lone end quote is text
    check(
        "{\"a\": \"```sh\necho \"hi\"\n```\n\"\n\", \"b\": 1}",
        (Some(r#"{"a": "```sh\necho \"hi\"\n```\n\"", "b": 1}"#), &[ControlCharacter, UnescapedQuote]),
    );
    check("{\"a\": \"line\nbreak\"}", (Some(r#"{"a": "line\nbreak"}"#), &[ControlCharacter]));
    check(r#"{"re": "\d+\.\d"}"#, (Some(r#"{"re": "\\d+\\.\\d"}"#), &[InvalidEscape]));
    check(r#"{"a": "x\u26"}"#, (None, &[]));
    check("\"a\u{1}b\"", (None, &[]));
}

#[test]
fn unquoted_and_literals() {
    check("{key: value, n: 2}", (Some(r#"{"key": "value", "n": 2}"#), &[UnquotedKey, UnquotedString]));
    check("{url: https://x.org/a}", (Some(r#"{"url": "https://x.org/a"}"#), &[UnquotedKey, UnquotedString]));
    check("[True, False, None]", (Some("[true, false, null]"), &[PythonLiteral]));
    check("[undefined, NaN, -Infinity]", (Some("[null, null, null]"), &[Undefined, NonFiniteNumber]));
    check("{\"a\": 1, COMMENT \"b\": 2}", (Some(r#"{"a": 1, "b": 2}"#), &[UnquotedKey, StrayText]));
    check(
        "[.5, 2., 1_000, +1, 0789, 1.1.1]",
        (Some(r#"[0.5, 2.0, 1000, 1, "0789", "1.1.1"]"#), &[NumberFormat, UnquotedString]),
    );
}

#[test]
fn comments_and_wrappers() {
    check("{// c\n\"a\": /* b */ 1 # d\n}", (Some(r#"{"a": 1}"#), &[Comment]));
    check(r#"{"a": {"b": 1 # c }, "d": [2 # e ]}"#, (Some(r#"{"a": {"b": 1}, "d": [2]}"#), &[Comment]));
    check(r#"{"a": "```json {"b": [1]}```"}"#, (Some(r#"{"a": {"b": [1]}}"#), &[FencedString]));
    check(r#"{"a": "```json [1]```"}"#, (Some(r#"{"a": "```json [1]```"}"#), &[]));
    check("callback({\"a\": 1});", (Some(r#"{"a": 1}"#), &[FunctionWrapper]));
    check("{\"_id\": ObjectId(\"123\")}", (Some(r#"{"_id": "123"}"#), &[FunctionWrapper]));
    check("\"a\" + \"b\"", (Some(r#""ab""#), &[Concatenation]));
    check("{re: /a+b/i}", (Some(r#"{"re": "/a+b/i"}"#), &[UnquotedKey, RegexLiteral]));
    check("[1, 2, ...]", (Some("[1, 2]"), &[Ellipsis]));
    check("((1, 2), (3))", (Some("[[1, 2], 3]"), &[Tuple]));
    check("{'a', 'b'}", (Some(r#"["a", "b"]"#), &[SingleQuotes, SetLiteral]));
    check(r#"{\"a\": \"b\"}"#, (Some(r#"{"a": "b"}"#), &[EscapedJson]));
    check("{\u{a0}\"a\":\u{200b}1}", (Some(r#"{"a": 1}"#), &[UnicodeWhitespace]));
}

#[test]
fn brackets_and_documents() {
    check(r#"{"a": [1, 2}"#, (Some(r#"{"a": [1, 2]}"#), &[MismatchedBracket]));
    check(r#"[{"a": 1}}, {"a": 2}]"#, (Some(r#"[{"a": 1}, {"a": 2}]"#), &[MismatchedBracket]));
    check(r#"{"a": 1}}"#, (Some(r#"{"a": 1}"#), &[MismatchedBracket]));
    check(r#"["k": "v"]"#, (Some(r#"[{"k": "v"}]"#), &[MismatchedBracket]));
    check(r#"{"a": 1}, "b": 2}"#, (Some(r#"{"a": 1, "b": 2}"#), &[MismatchedBracket]));
    check("1\n2\n3", (Some("[1, 2, 3]"), &[MultipleValues]));
    check("{\"a\": 1}[2, True]", (Some(r#"[{"a": 1}, [2, true]]"#), &[PythonLiteral, MultipleValues]));
    check("{\"a\": 1}\n[citation needed]", (Some(r#"{"a": 1}"#), &[]));
    check("[]{}", (Some("[]"), &[MultipleValues]));
    check("{}\n{}", (Some("[{}, {}]"), &[MultipleValues]));
    // rows of a table that lost their brackets
    check(
        r#"{"rows": [["a", "b"], "c", "d"], ["e", "f"]]}"#,
        (Some(r#"{"rows": [["a", "b"], ["c", "d"], ["e", "f"]]}"#), &[MismatchedBracket]),
    );
    check(r#"{"a": ["x"], ["y"]}"#, (Some(r#"{"a": ["x", "y"]}"#), &[MismatchedBracket]));
    check("{\"a\": 1}\nthanks!", (Some(r#"{"a": 1}"#), &[]));
    check("{\"a\": 1}```", (Some(r#"{"a": 1}"#), &[]));
    check("{\"a\":\"x\"} {\"b\"}", (Some(r#"{"a": "x"}"#), &[]));
    check(r#"{"dangling"}"#, (None, &[]));
    check("[[[[", (Some("[[[[]]]]"), &[TruncatedTail]));
}

#[test]
fn truncation() {
    check(r#"{"items":[{"id":1},{"id":2,"na"#, (Some(r#"{"items":[{"id":1},{"id":2}]}"#), &[TruncatedTail]));
    check(r#"{"a": "hel"#, (Some(r#"{"a": "hel"}"#), &[TruncatedTail]));
    check(r#"{"a": 1, "b":"#, (Some(r#"{"a": 1, "b": null}"#), &[TruncatedTail, MissingValue]));
    // a key the text ended before its colon is dropped, cut off part-way or whole
    check(r#"{"a": 1, "b"#, (Some(r#"{"a": 1}"#), &[TruncatedTail]));
    check(r#"{"a": 1, "name""#, (Some(r#"{"a": 1}"#), &[TruncatedTail]));
    check("{\"a\": 1, \"name\"  \n", (Some(r#"{"a": 1}"#), &[TruncatedTail]));
    check(r#"{"a": 1, 'name'"#, (Some(r#"{"a": 1}"#), &[TruncatedTail]));
    check(r#"{"a": 1, “name”"#, (Some(r#"{"a": 1}"#), &[TruncatedTail]));
    check(r#"{"a": 1, name"#, (Some(r#"{"a": 1}"#), &[TruncatedTail]));
    check(r#"{"a": 1 "name""#, (Some(r#"{"a": 1}"#), &[TruncatedTail]));
    check(r#"[{"a": 1, "name""#, (Some(r#"[{"a": 1}]"#), &[TruncatedTail]));
    check(r#"{"a": {"b": 1, "c""#, (Some(r#"{"a": {"b": 1}}"#), &[TruncatedTail]));
    check(r#"{"name""#, (Some("{}"), &[TruncatedTail]));
    // with its colon, the key stays, as `null`
    check(r#"{"a": "#, (Some(r#"{"a": null}"#), &[TruncatedTail, MissingValue]));
    check(r#"{"a": 1, "name" :"#, (Some(r#"{"a": 1, "name": null}"#), &[TruncatedTail, MissingValue]));
    check(r#"{"done": fals"#, (Some(r#"{"done": false}"#), &[TruncatedTail]));
    check(r#"["x\u26"#, (Some(r#"["x"]"#), &[TruncatedTail]));
    check(r#"["a", ""#, (Some(r#"["a"]"#), &[TruncatedTail]));
}

#[test]
fn brackets_in_a_string_cut_off_are_text() {
    // the text ends inside a string: the brackets it holds are its text, not structure
    check(r#"{"a": "x [1, 2] {y"#, (Some(r#"{"a": "x [1, 2] {y"}"#), &[TruncatedTail]));
    check(r#"["x [1", "y {"#, (Some(r#"["x [1", "y {"]"#), &[TruncatedTail]));
    check(r#"{"a": "x", "b": "[1, {2}]"#, (Some(r#"{"a": "x", "b": "[1, {2}]"}"#), &[TruncatedTail]));
    check(r#"{"a": "see [the list]"#, (Some(r#"{"a": "see [the list]"}"#), &[TruncatedTail]));
    check(r#"{"a": "x [1,"#, (Some(r#"{"a": "x [1,"}"#), &[TruncatedTail]));
    check(r#"{"a": {"b": "c [d"#, (Some(r#"{"a": {"b": "c [d"}}"#), &[TruncatedTail]));
    check(r#"{"list": ["x [1, 2] {y"#, (Some(r#"{"list": ["x [1, 2] {y"]}"#), &[TruncatedTail]));
    // a closer the string did not open is where its end quote was lost, and the string's own
    // brackets before it stay text
    check(r#"["hello]"#, (Some(r#"["hello"]"#), &[MissingQuote]));
    check(r#"["a [1, 2] b]"#, (Some(r#"["a [1, 2] b"]"#), &[MissingQuote]));
    check(r#"["x {y} z]"#, (Some(r#"["x {y} z"]"#), &[MissingQuote]));
    check(r#"{"a": "hello}"#, (Some(r#"{"a": "hello"}"#), &[MissingQuote]));
    check(r#"{"a": "see [the list],"#, (Some(r#"{"a": "see [the list]"}"#), &[MissingQuote, TruncatedTail]));
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    let deep = "[".repeat(100_000);
    assert!(parse(&deep, 0).is_err());
}

/// Arbitrary JSON values with strings made of the characters the heuristics look at.
fn json() -> impl Strategy<Value = Value> {
    let text =
        prop_oneof![any::<String>(), "[{}\\[\\]\",:'\\\\/*#` a\n“”()]{0,12}", "(```json |```|\\{|\"|, |:|x){0,6}"];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        text.clone().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((text.clone(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

proptest! {
    /// The parser itself, without the strict backstop in `parse`, reads valid JSON as
    /// `serde_json` does and records no repair.
    #[test]
    fn heuristics_leave_valid_json_alone(value in json()) {
        for text in [value.to_string(), serde_json::to_string_pretty(&value).unwrap_or_default()] {
            let strict: Value = serde_json::from_str(&text).unwrap_or_default();
            let parsed = parse_plain(&text, 0).map(|p| (p.value, p.repairs));
            prop_assert_eq!(parsed, Ok((strict, Vec::new())), "{:?}", text);
        }
    }
}
