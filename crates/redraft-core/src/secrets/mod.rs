//! Secrets leave by no door: the values redraft knows to be secret and the one step that takes
//! them out of every text it writes.
//!
//! Key design decision: one process-wide registry of known secret values, filled where a
//! secret is read ([`register`]: each API key read from a variable the config names, the
//! server's bearer tokens, the database password, the OTLP exporter's headers) and never
//! emptied. Every exit where redraft writes text out passes it through [`redact`] (or
//! [`redact_bytes`], [`redact_json`], [`redact_serde`], a [`StreamRedactor`] for bodies written
//! as they come), which replaces each occurrence of a known value with `[redacted]`: the
//! server's responses, MCP messages, logs and traces, the store, the CLI's output, a run's
//! result. The registry lives here, in core, because every exit can reach it; it holds values
//! and does no IO.
//!
//! Values shorter than [`MIN_SECRET_BYTES`] are never registered: so short a value cannot be
//! told from an ordinary word (a key `ollama` would blank every model name), and no real
//! credential is that short.
//!
//! Cost: with nothing registered, one atomic load per text. With secrets, one Aho-Corasick pass
//! over the text, whatever the number of secrets.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod url;

pub use self::url::register_url;

/// Values shorter than this many bytes are not registered (they are not secrets, or not ones
/// that can be told from ordinary text).
pub const MIN_SECRET_BYTES: usize = 8;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// The known values, and the matcher over them.
#[derive(Debug)]
struct Known {
    /// Every pattern: each value as registered and, where it differs, as it reads inside a
    /// JSON string (so that serialized JSON is redacted as well as the text it holds).
    patterns: Vec<Vec<u8>>,
    /// One pass over a text for all patterns, leftmost-longest; `None` only if the automaton
    /// could not be built (then a plain search, slower but as strict).
    matcher: Option<AhoCorasick>,
    /// The longest pattern, in bytes.
    longest: usize,
}

static KNOWN: RwLock<Option<Arc<Known>>> = RwLock::new(None);
/// Whether anything is registered: the fast path of every redaction.
static ANY: AtomicBool = AtomicBool::new(false);

/// Make `value` a known secret, from now on replaced with `[redacted]` in everything redraft
/// writes out. Surrounding whitespace is ignored; a value shorter than [`MIN_SECRET_BYTES`] is
/// not registered. Returns whether the value is known (now or already).
pub fn register(value: &str) -> bool {
    let value = value.trim();
    if value.len() < MIN_SECRET_BYTES {
        return false;
    }
    let forms = forms(value);
    let mut known = KNOWN.write().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut patterns = known.as_ref().map(|k| k.patterns.clone()).unwrap_or_default();
    let before = patterns.len();
    for form in forms {
        if !patterns.contains(&form) {
            patterns.push(form);
        }
    }
    if patterns.len() != before {
        // Every match, overlapping ones included: the union of overlapping secrets is redacted.
        let matcher = AhoCorasick::builder().match_kind(MatchKind::Standard).build(&patterns).ok();
        let longest = patterns.iter().map(Vec::len).max().unwrap_or(0);
        *known = Some(Arc::new(Known { patterns, matcher, longest }));
    }
    ANY.store(true, Ordering::Release);
    true
}

/// The forms `value` is known by: as it is and as it reads inside a JSON string, written the
/// way `serde_json` writes it (quotes, backslashes, control characters escaped) and the way
/// other encoders do (`/` as `\/`; `<`, `>`, `&`, `'` as `\u00XX`, as Go and PHP write them).
fn forms(value: &str) -> Vec<Vec<u8>> {
    let mut forms = vec![value.as_bytes().to_vec()];
    let mut add = |form: String| {
        if !forms.iter().any(|f| f == form.as_bytes()) {
            forms.push(form.into_bytes());
        }
    };
    if let Ok(quoted) = serde_json::to_string(value)
        && let Some(inner) = quoted.strip_prefix('"').and_then(|q| q.strip_suffix('"'))
    {
        add(inner.to_owned());
        add(inner.replace('/', "\\/"));
        let mut html = inner.to_owned();
        for (c, escaped) in [('<', "\\u003c"), ('>', "\\u003e"), ('&', "\\u0026"), ('\'', "\\u0027")] {
            html = html.replace(c, escaped);
        }
        add(html.clone());
        add(html.replace('/', "\\/"));
    }
    forms
}

/// Register a percent-encoded value (in a URL, an OTLP header), as written and decoded.
pub fn register_percent_encoded(value: &str) {
    register(value);
    register(&percent_decoded(value));
}

/// `text` with `%XX` escapes decoded (invalid ones kept as they are).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes.get(i), hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (Some(b'%'), Some(decoded)) => {
                out.push(decoded);
                i += 3;
            }
            (Some(&b), _) => {
                out.push(b);
                i += 1;
            }
            (None, _) => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether any secret is registered.
pub fn active() -> bool {
    ANY.load(Ordering::Acquire)
}

fn known() -> Option<Arc<Known>> {
    if !active() {
        return None;
    }
    KNOWN.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
}

impl Known {
    /// The secrets in `haystack`, as byte ranges, leftmost first: every match, overlapping ones
    /// merged into one range (`AAAABBBB` and `BBBBCCCC` in `AAAABBBBCCCC` are one secret there).
    /// A secret written with JSON escapes (`\u0073k-…`, or escaped twice: a JSON text inside a
    /// JSON string) is found too, up to [`ESCAPE_LEVELS`] levels deep, and its escaped bytes
    /// are the range.
    fn find(&self, haystack: &[u8]) -> Vec<(usize, usize)> {
        let mut matches = self.find_plain(haystack);
        // Offsets are kept as `u32`: a text of 4 GiB or more is searched as written only.
        if !haystack.contains(&b'\\') || u32::try_from(haystack.len()).is_err() {
            return merge_ranges(matches);
        }
        let mut view = Unescaped::whole(haystack);
        for _ in 0..ESCAPE_LEVELS {
            let Some(next) = view.unescape() else { break };
            view = next;
            matches.extend(self.find_plain(&view.bytes).into_iter().map(|(start, end)| view.source(start, end)));
        }
        merge_ranges(matches)
    }

    /// The secrets written as they are (or in a form [`forms`] knows) in `haystack`, unmerged.
    fn find_plain(&self, haystack: &[u8]) -> Vec<(usize, usize)> {
        match &self.matcher {
            Some(matcher) => matcher.find_overlapping_iter(haystack).map(|m| (m.start(), m.end())).collect(),
            None => (0..haystack.len())
                .flat_map(|at| {
                    let here = haystack.get(at..).unwrap_or_default();
                    self.patterns.iter().filter(move |p| here.starts_with(p)).map(move |p| (at, at + p.len()))
                })
                .collect(),
        }
    }

    fn replace(&self, haystack: &[u8]) -> Option<Vec<u8>> {
        let found = self.find(haystack);
        if found.is_empty() {
            return None;
        }
        let mut out = Vec::with_capacity(haystack.len());
        let mut last = 0;
        for (start, end) in found {
            out.extend_from_slice(haystack.get(last..start).unwrap_or_default());
            out.extend_from_slice(REDACTED.as_bytes());
            last = end;
        }
        out.extend_from_slice(haystack.get(last..).unwrap_or_default());
        Some(out)
    }

    /// The length of the longest end of `bytes` that could be the start of a secret (and is
    /// not a whole one), at most `room` bytes.
    fn partial_tail(&self, bytes: &[u8], room: usize) -> usize {
        let most = room.min(self.longest.saturating_sub(1)).min(bytes.len());
        (1..=most)
            .rev()
            .find(|&k| {
                let tail = bytes.get(bytes.len() - k..).unwrap_or_default();
                self.patterns.iter().any(|p| p.len() > k && p.starts_with(tail))
            })
            .unwrap_or(0)
    }
}

/// How many levels of JSON escapes a secret is looked for under: a JSON text in a JSON string
/// (a tool result's text copy) is two.
const ESCAPE_LEVELS: usize = 3;

/// Byte ranges sorted, overlapping ones merged into one.
fn merge_ranges(mut ranges: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match merged.last_mut() {
            Some(last) if start < last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// A text with its JSON escapes decoded, and for each of its bytes the range of the original
/// text it was read from.
struct Unescaped {
    bytes: Vec<u8>,
    /// `origin[i]`: the original bytes that byte `i` came from.
    origin: Vec<(u32, u32)>,
}

impl Unescaped {
    /// `text` as it is, each byte its own origin.
    fn whole(text: &[u8]) -> Self {
        let at = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
        Self { bytes: text.to_vec(), origin: (0..text.len()).map(|i| (at(i), at(i + 1))).collect() }
    }

    /// The original range of `start..end` of these bytes.
    fn source(&self, start: usize, end: usize) -> (usize, usize) {
        let from = self.origin.get(start).map_or(0, |o| o.0);
        let to = end.checked_sub(1).and_then(|last| self.origin.get(last)).map_or(from, |o| o.1);
        (from as usize, to as usize)
    }

    /// These bytes with one level of JSON escapes decoded (`\uXXXX`, surrogate pairs
    /// included, and `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`); `None` when they hold no
    /// escape. Anything that is not a valid escape is kept as it is.
    fn unescape(&self) -> Option<Self> {
        if !self.bytes.contains(&b'\\') {
            return None;
        }
        let (bytes, origin) = (&self.bytes, &self.origin);
        let mut out = Self { bytes: Vec::with_capacity(bytes.len()), origin: Vec::with_capacity(bytes.len()) };
        let span = |from: usize, to: usize| {
            let start = origin.get(from).map_or(0, |o| o.0);
            (start, origin.get(to - 1).map_or(start, |o| o.1))
        };
        let mut i = 0;
        while i < bytes.len() {
            let decoded = match bytes.get(i) {
                Some(b'\\') => escape_at(bytes, i),
                _ => None,
            };
            match decoded {
                Some((c, len)) => {
                    let mut buffer = [0u8; 4];
                    let from = span(i, i + len);
                    for &b in c.encode_utf8(&mut buffer).as_bytes() {
                        out.bytes.push(b);
                        out.origin.push(from);
                    }
                    i += len;
                }
                None => {
                    out.bytes.push(bytes.get(i).copied().unwrap_or_default());
                    out.origin.push(origin.get(i).copied().unwrap_or_default());
                    i += 1;
                }
            }
        }
        Some(out)
    }
}

/// The character a JSON escape at `at` (a backslash) stands for, and the escape's length.
fn escape_at(bytes: &[u8], at: usize) -> Option<(char, usize)> {
    let simple = match bytes.get(at + 1)? {
        b'"' => Some('"'),
        b'\\' => Some('\\'),
        b'/' => Some('/'),
        b'b' => Some('\u{8}'),
        b'f' => Some('\u{c}'),
        b'n' => Some('\n'),
        b'r' => Some('\r'),
        b't' => Some('\t'),
        b'u' => None,
        _ => return None,
    };
    if let Some(c) = simple {
        return Some((c, 2));
    }
    let unit = |from: usize| {
        let hex = bytes.get(from..from + 4)?;
        u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
    };
    let first = unit(at + 2)?;
    if (0xD800..0xDC00).contains(&first)
        && bytes.get(at + 6..at + 8) == Some(b"\\u")
        && let Some(second) = unit(at + 8)
        && (0xDC00..0xE000).contains(&second)
    {
        let c = char::from_u32(0x10000 + ((u32::from(first) - 0xD800) << 10) + (u32::from(second) - 0xDC00))?;
        return Some((c, 12));
    }
    // A lone surrogate stands for nothing a secret holds.
    char::from_u32(u32::from(first)).map(|c| (c, 6))
}

/// Whether `bytes` hold a known secret.
pub fn contains(bytes: &[u8]) -> bool {
    known().is_some_and(|k| match &k.matcher {
        Some(matcher) if !bytes.contains(&b'\\') => matcher.is_match(bytes),
        _ => !k.find(bytes).is_empty(),
    })
}

/// `text` with every known secret replaced with `[redacted]` (borrowed when there is none).
pub fn redact(text: &str) -> Cow<'_, str> {
    match redact_bytes(text.as_bytes()) {
        Cow::Borrowed(_) => Cow::Borrowed(text),
        // A secret is whole UTF-8, so it starts and ends on character boundaries of valid text.
        Cow::Owned(bytes) => {
            Cow::Owned(String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
        }
    }
}

/// [`redact`] of an owned text, giving it back unchanged when it holds no secret.
pub fn redact_string(text: String) -> String {
    match redact(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(redacted) => redacted,
    }
}

/// `bytes` with every known secret replaced with `[redacted]` (borrowed when there is none).
pub fn redact_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    match known().and_then(|k| k.replace(bytes)) {
        Some(redacted) => Cow::Owned(redacted),
        None => Cow::Borrowed(bytes),
    }
}

/// Redact every string (and object key) in `value`, in place. Returns whether anything changed.
pub fn redact_json(value: &mut Value) -> bool {
    if !active() {
        return false;
    }
    match value {
        Value::String(s) => match redact(s) {
            Cow::Borrowed(_) => false,
            Cow::Owned(redacted) => {
                *s = redacted;
                true
            }
        },
        Value::Array(items) => items.iter_mut().fold(false, |changed, item| redact_json(item) | changed),
        Value::Object(fields) => {
            let mut changed = false;
            if fields.keys().any(|k| matches!(redact(k), Cow::Owned(_))) {
                let taken = std::mem::take(fields);
                *fields = taken.into_iter().map(|(k, v)| (redact_string(k), v)).collect();
                changed = true;
            }
            fields.values_mut().fold(changed, |changed, v| redact_json(v) | changed)
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// `value` with every known secret in its strings replaced, through its JSON form: any type
/// that serializes, whatever its fields (a field added later is covered too). Given back as it
/// was when it holds no secret (or, which cannot happen for redraft's types, when the redacted
/// JSON does not read back as the type).
pub fn redact_serde<T: Serialize + DeserializeOwned>(value: T) -> T {
    if !active() {
        return value;
    }
    let Ok(text) = serde_json::to_string(&value) else { return value };
    if !contains(text.as_bytes()) {
        return value;
    }
    let Ok(mut json) = serde_json::from_str::<Value>(&text) else { return value };
    redact_json(&mut json);
    serde_json::from_value(json).unwrap_or(value)
}

/// A text that has been through [`redact`]: it can only be built that way, so a field of this
/// type (a provider's error body, say) never holds a known secret.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Redacted(String);

impl Redacted {
    /// `text`, redacted.
    pub fn new(text: impl Into<String>) -> Self {
        Self(redact_string(text.into()))
    }

    /// The redacted text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The redacted text, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl From<String> for Redacted {
    fn from(text: String) -> Self {
        Self::new(text)
    }
}

impl From<&str> for Redacted {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<Redacted> for String {
    fn from(text: Redacted) -> Self {
        text.0
    }
}

impl std::ops::Deref for Redacted {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Redacted {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Redacted {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Redacted {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl fmt::Display for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl Serialize for Redacted {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Redacted {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::new)
    }
}

/// Redaction of a text written piece by piece (a streamed HTTP body, server-sent events): a
/// secret split between two pieces is still found. The end of a piece that could be the start
/// of a secret is held back until the next piece (or [`StreamRedactor::finish`]) tells; any
/// other text passes at once, so a stream is not delayed.
#[derive(Debug, Default)]
pub struct StreamRedactor {
    held: Vec<u8>,
}

impl StreamRedactor {
    /// A redactor with nothing held.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next piece: what may be written now, redacted.
    pub fn push(&mut self, piece: &[u8]) -> Vec<u8> {
        let Some(known) = known() else {
            let mut out = std::mem::take(&mut self.held);
            out.extend_from_slice(piece);
            return out;
        };
        let mut pending = std::mem::take(&mut self.held);
        pending.extend_from_slice(piece);
        // Held: an end that could begin a secret and, when a secret found so far reaches into
        // it, that secret too (the next piece may extend it with an overlapping one).
        let mut ready = pending.len() - known.partial_tail(&pending, pending.len());
        if let Some(&(start, _)) = known.find(&pending).iter().find(|&&(start, end)| start < ready && ready < end) {
            ready = start;
        }
        self.held = pending.split_off(ready);
        known.replace(&pending).unwrap_or(pending)
    }

    /// The end of the stream: whatever was held, redacted.
    pub fn finish(&mut self) -> Vec<u8> {
        let held = std::mem::take(&mut self.held);
        match redact_bytes(&held) {
            Cow::Borrowed(_) => held,
            Cow::Owned(redacted) => redacted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The registry is process-wide: each test registers values of its own.

    #[test]
    fn known_values_are_replaced_wherever_they_occur() {
        assert!(register("sk-core-test-AAAAAAAAAAAAAAAA"));
        let text = "auth: Bearer sk-core-test-AAAAAAAAAAAAAAAA, again sk-core-test-AAAAAAAAAAAAAAAA!";
        assert_eq!(redact(text), "auth: Bearer [redacted], again [redacted]!");
        assert!(matches!(redact("nothing secret here"), Cow::Borrowed(_)));
        assert_eq!(Redacted::new("x sk-core-test-AAAAAAAAAAAAAAAA y").as_str(), "x [redacted] y");
        let mut value = serde_json::json!({"a": ["sk-core-test-AAAAAAAAAAAAAAAA"], "sk-core-test-AAAAAAAAAAAAAAAA": 1});
        assert!(redact_json(&mut value));
        assert_eq!(value, serde_json::json!({"a": ["[redacted]"], "[redacted]": 1}));
    }

    #[test]
    fn short_values_are_not_secrets() {
        assert!(!register("ollama"));
        assert!(!register("  short  "));
        assert!(!register(""));
        assert_eq!(redact("ollama short"), "ollama short");
    }

    #[test]
    fn the_longest_secret_at_a_place_wins_and_json_forms_are_known() {
        register("core-test-BBBBBBBB");
        register("core-test-BBBBBBBB-longer");
        assert_eq!(redact("[core-test-BBBBBBBB-longer]"), "[[redacted]]");
        register("core\"test\\CCCCCCCC");
        let json = serde_json::to_string(&serde_json::json!({"k": "core\"test\\CCCCCCCC"})).unwrap();
        assert_eq!(redact(&json), r#"{"k":"[redacted]"}"#);
    }

    #[test]
    fn secrets_written_with_json_escapes_are_found_at_any_depth_up_to_three() {
        register("sk-core-test-EEEEEEEE");
        // Every character as `\uXXXX`, as a JSON encoder that escapes everything writes it.
        let escaped: String = "sk-core-test-EEEEEEEE".chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
        assert_eq!(redact(&format!(r#"{{"k":"{escaped}"}}"#)), r#"{"k":"[redacted]"}"#);
        // Some characters escaped, a surrogate pair beside it kept.
        assert_eq!(redact(r#""\u0073k-core-test-EEEE\u0045EEE \ud83d\ude00""#), r#""[redacted] \ud83d\ude00""#);
        // A JSON text inside a JSON string: escaped twice, and three times.
        register("core\"quote\\back-FFFF");
        let once = serde_json::to_string(&serde_json::json!({"found": "core\"quote\\back-FFFF"})).unwrap();
        let twice = serde_json::to_string(&serde_json::json!({"text": once})).unwrap();
        let thrice = serde_json::to_string(&serde_json::json!({"message": twice})).unwrap();
        for text in [&once, &twice, &thrice] {
            assert!(contains(text.as_bytes()), "{text}");
            assert!(!redact(text).contains("back-FFFF"), "{text}");
        }
        // What is not a secret is left alone, escapes and all.
        assert!(matches!(redact(r#"{"a":"\u0073k-other \" \\ \n"}"#), Cow::Borrowed(_)));
    }

    #[test]
    fn url_passwords_are_known_as_written_and_decoded() {
        register_url("postgres://app:core%2Ftest%40FFFF@db.internal:5432/redraft");
        assert_eq!(
            redact("postgres://app:core%2Ftest%40FFFF@db.internal and core/test@FFFF"),
            "postgres://app:[redacted]@db.internal and [redacted]"
        );
        register_url("postgres://db.internal/redraft?user=app&password=core-test-GGGG%21");
        assert_eq!(redact("core-test-GGGG! core-test-GGGG%21"), "[redacted] [redacted]");
        // No password: nothing registered, nothing blanked.
        register_url("postgres://app@db.internal/redraft");
        register_url("sqlite:.redraft/redraft.db");
        assert_eq!(redact("app@db.internal"), "app@db.internal");
    }

    #[test]
    fn serializable_values_are_redacted_through_their_json() {
        register("core-test-DDDDDDDDDDDD");
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct R {
            text: String,
            n: f64,
        }
        let r = redact_serde(R { text: "is core-test-DDDDDDDDDDDD".into(), n: 0.25 });
        assert_eq!(r, R { text: "is [redacted]".into(), n: 0.25 });
    }

    #[test]
    fn overlapping_secrets_are_redacted_as_their_union() {
        register("core-ovl-AAAABBBBCCCC");
        register("CCCCDDDDEEEE-core-ovl");
        let text = "x core-ovl-AAAABBBBCCCCDDDDEEEE-core-ovl y";
        assert_eq!(redact(text), "x [redacted] y");
        // The same when the text comes piece by piece, wherever it is cut.
        for cut in 0..text.len() {
            let mut stream = StreamRedactor::new();
            let mut out = stream.push(&text.as_bytes()[..cut]);
            out.extend(stream.push(&text.as_bytes()[cut..]));
            out.extend(stream.finish());
            assert_eq!(String::from_utf8(out).unwrap(), "x [redacted] y", "{cut}");
        }
    }

    #[test]
    fn json_escaped_forms_of_other_encoders_are_known() {
        register("core/json<test>&FFFF");
        assert_eq!(redact(r"a core\/json<test>&FFFF b"), "a [redacted] b");
        assert_eq!(redact(r"a core\/json\u003ctest\u003e\u0026FFFF b"), "a [redacted] b");
        assert_eq!(redact(r"a core/json\u003ctest\u003e\u0026FFFF b"), "a [redacted] b");
    }

    #[test]
    fn a_cut_never_leaves_part_of_a_secret() {
        register("core-cut-test-HHHHHHHH");
        let text = format!("{}core-cut-test-HHHHHHHH{}", "a".repeat(50), "z".repeat(50));
        for max in 0..text.len() {
            let (head, _) = crate::prompt::truncate_chars(&text, max);
            let middle = crate::diagnostics::cut_middle(&text, max);
            for cut in [head, middle] {
                assert!(!cut.contains("core-cut"), "{max}: {cut}");
                assert!(!cut.contains("HHHH"), "{max}: {cut}");
            }
        }
    }

    #[test]
    fn a_secret_split_across_pieces_is_still_found() {
        register("core-test-EEEEEEEEEEEE");
        let text = b"data: {\"x\": \"core-test-EEEEEEEEEEEE\"}\n\ndata: [DONE]\n\n";
        for cut_a in 0..text.len() {
            for cut_b in cut_a..text.len() {
                let mut stream = StreamRedactor::new();
                let mut out = stream.push(&text[..cut_a]);
                out.extend(stream.push(&text[cut_a..cut_b]));
                out.extend(stream.push(&text[cut_b..]));
                out.extend(stream.finish());
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    "data: {\"x\": \"[redacted]\"}\n\ndata: [DONE]\n\n",
                    "{cut_a} {cut_b}"
                );
            }
        }
        // Text that cannot start a secret is not held back.
        let mut stream = StreamRedactor::new();
        assert_eq!(stream.push(b"data: 1\n\n"), b"data: 1\n\n");
        // The start of one is, until the next piece says.
        assert_eq!(stream.push(b"data: core-te"), b"data: ");
        assert_eq!(stream.push(b"a\n"), b"core-tea\n");
    }
}
