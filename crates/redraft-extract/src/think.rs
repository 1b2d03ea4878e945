//! Remove `<think>…</think>` reasoning blocks, keeping a map back to offsets in the raw text.

use std::borrow::Cow;

const OPEN: [&str; 2] = ["<think>", "<thinking>"];
const CLOSE: [&str; 2] = ["</think>", "</thinking>"];

/// The answer text with reasoning removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Visible<'a> {
    /// Text outside reasoning blocks.
    pub(crate) text: Cow<'a, str>,
    /// `(offset in text, offset in raw)` at the start of each kept piece, ascending.
    pieces: Vec<(usize, usize)>,
    /// Whether any reasoning was removed.
    pub(crate) had_reasoning: bool,
    /// Whether a `<think>` at the start was never closed (the answer is all reasoning).
    pub(crate) unfinished: bool,
}

impl Visible<'_> {
    /// The raw offset of offset `at` in [`Visible::text`].
    pub(crate) fn raw_offset(&self, at: usize) -> usize {
        let idx = self.pieces.partition_point(|&(vis, _)| vis <= at);
        match idx.checked_sub(1).and_then(|i| self.pieces.get(i)) {
            Some(&(vis, raw)) => raw + (at - vis),
            None => at,
        }
    }
}

/// The earliest of `tags` in `raw` at or after `from`, as `(start, end)`.
fn find_tag(raw: &str, from: usize, tags: &[&str]) -> Option<(usize, usize)> {
    let rest = raw.get(from..)?;
    tags.iter().filter_map(|tag| rest.find(tag).map(|at| (from + at, from + at + tag.len()))).min()
}

/// Remove reasoning blocks from `raw`.
///
/// A `</think>` before any `<think>` drops everything before it (templates that open the block
/// for the model). A `<think>` that is never closed drops the rest of the text.
pub(crate) fn strip(raw: &str) -> Visible<'_> {
    if !raw.as_bytes().contains(&b'<') {
        // No tag at all (most answers): the text as it is, with no piece map (identity offsets).
        return Visible { text: Cow::Borrowed(raw), pieces: Vec::new(), had_reasoning: false, unfinished: false };
    }
    let mut keep: Vec<(usize, usize)> = Vec::new();
    let mut pos = 0;
    let mut had_reasoning = false;
    let mut unfinished = false;
    let first_open = find_tag(raw, 0, &OPEN);
    if let Some((_, close_end)) = find_tag(raw, 0, &CLOSE)
        && first_open.is_none_or(|(open, _)| close_end <= open)
    {
        pos = close_end;
        had_reasoning = true;
    }
    loop {
        match find_tag(raw, pos, &OPEN) {
            None => {
                keep.push((pos, raw.len()));
                break;
            }
            Some((open, open_end)) => {
                had_reasoning = true;
                keep.push((pos, open));
                match find_tag(raw, open_end, &CLOSE) {
                    Some((_, close_end)) => pos = close_end,
                    None => {
                        let before: usize =
                            keep.iter().map(|&(a, b)| raw.get(a..b).map_or(0, |s| s.trim().len())).sum();
                        unfinished = before == 0;
                        break;
                    }
                }
            }
        }
    }
    keep.retain(|&(a, b)| a < b);
    let text = match keep.as_slice() {
        [] => Cow::Borrowed(""),
        [(a, b)] => Cow::Borrowed(raw.get(*a..*b).unwrap_or_default()),
        _ => Cow::Owned(keep.iter().filter_map(|&(a, b)| raw.get(a..b)).collect()),
    };
    let mut pieces = Vec::with_capacity(keep.len());
    let mut vis = 0;
    for &(a, b) in &keep {
        pieces.push((vis, a));
        vis += b - a;
    }
    Visible { text, pieces, had_reasoning, unfinished }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `expect`: visible text, unfinished, and the raw offset of the first `{` in the text.
    fn check(raw: &str, expect: (&str, bool, Option<usize>)) {
        let v = strip(raw);
        let brace = v.text.find('{').map(|at| v.raw_offset(at));
        assert_eq!((v.text.as_ref(), v.unfinished, brace), expect, "{raw:?}");
        if let Some(at) = brace {
            assert_eq!(raw.get(at..=at), Some("{"));
        }
    }

    #[test]
    fn reasoning_blocks() {
        check(r#"{"a":1}"#, (r#"{"a":1}"#, false, Some(0)));
        check(r#"<think>{"a":0}</think>{"a":3}"#, (r#"{"a":3}"#, false, Some(22)));
        check("<think>x</think> A <think>y</think> {}", (" A  {}", false, Some(36)));
        check("hmm, so…</think>\n{}", ("\n{}", false, Some(19)));
        check("<think>still going {", ("", true, None));
        check("answer {} <think>later", ("answer {} ", false, Some(7)));
        check("<thinking>x</thinking>{}", ("{}", false, Some(22)));
    }
}
