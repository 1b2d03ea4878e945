//! Capturing stdout and stderr under one cap for both: what does not fit is cut from the middle
//! of a stream, keeping its head and its tail (a test summary comes last, a compiler's first
//! error comes first) with a marker saying how much was cut.

/// One output stream as it is read: its first bytes, its last bytes, and how many there were.
#[derive(Debug)]
pub(crate) struct Stream {
    cap: usize,
    /// The first `cap` bytes.
    head: Vec<u8>,
    /// The latest bytes after the head; trimmed to `cap / 2` whenever it grows past `cap`.
    tail: Vec<u8>,
    total: u64,
}

impl Stream {
    /// A stream of which at most `cap` bytes will be kept (the cap over both streams).
    pub(crate) fn new(cap: usize) -> Self {
        Stream { cap, head: Vec::new(), tail: Vec::new(), total: 0 }
    }

    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.total = self.total.saturating_add(chunk.len() as u64);
        let room = self.cap.saturating_sub(self.head.len());
        let (first, rest) = chunk.split_at(room.min(chunk.len()));
        self.head.extend_from_slice(first);
        if rest.is_empty() {
            return;
        }
        self.tail.extend_from_slice(rest);
        let keep = self.cap / 2;
        if self.tail.len() > self.cap.max(keep + rest.len()) {
            let excess = self.tail.len() - keep;
            self.tail.drain(..excess);
        }
    }

    /// The last `n` bytes read (`n` at most `cap / 2`, or at most what was read when nothing was
    /// dropped between head and tail).
    fn last(&self, n: usize) -> Vec<u8> {
        if let Some(start) = self.tail.len().checked_sub(n) {
            return self.tail[start..].to_vec();
        }
        let from_head = (n - self.tail.len()).min(self.head.len());
        let mut bytes = self.head[self.head.len() - from_head..].to_vec();
        bytes.extend_from_slice(&self.tail);
        bytes
    }

    /// The text of this stream in at most `budget` bytes, and whether anything was cut.
    fn render(&self, budget: usize) -> (String, bool) {
        if self.total <= budget as u64 {
            let text = String::from_utf8_lossy(&self.head).into_owned();
            // Invalid UTF-8 grows when replaced; the budget still holds.
            let cut = text.len() > budget;
            return (keep_front(text, budget), cut);
        }
        let widest_marker = marker(self.total).len();
        if budget < widest_marker * 2 {
            // Too small for a marker to be worth its bytes: the head only.
            let head = &self.head[..char_start_at_or_before(&self.head, budget)];
            return (keep_front(String::from_utf8_lossy(head).into_owned(), budget), true);
        }
        let room = budget - widest_marker;
        let (head_room, tail_room) = (room / 2, room - room / 2);
        let head = &self.head[..char_start_at_or_before(&self.head, head_room)];
        let tail = self.last(tail_room);
        let tail = &tail[char_start_at_or_after(&tail)..];
        let cut = self.total.saturating_sub(head.len() as u64).saturating_sub(tail.len() as u64);
        let mut text = keep_front(String::from_utf8_lossy(head).into_owned(), head_room);
        text.push_str(&marker(cut));
        text.push_str(keep_back(&String::from_utf8_lossy(tail), tail_room));
        (text, true)
    }
}

/// The text put where bytes were cut.
fn marker(cut: u64) -> String {
    format!("\n[... {cut} bytes cut ...]\n")
}

/// Stdout and stderr as text, together at most `cap` bytes, each with whether it was cut.
///
/// A stream that fits in half the cap is kept whole and the other gets the rest; when both are
/// larger, each gets half.
pub(crate) fn finish(stdout: &Stream, stderr: &Stream, cap: usize) -> [(String, bool); 2] {
    let (out, err) = (stdout.total, stderr.total);
    let half = (cap / 2) as u64;
    let cap64 = cap as u64;
    let (out_budget, err_budget) = if out.saturating_add(err) <= cap64 {
        (out, err)
    } else if out <= half {
        (out, cap64 - out)
    } else if err <= half {
        (cap64 - err, err)
    } else {
        (half, cap64 - half)
    };
    let budget = |b: u64| usize::try_from(b).unwrap_or(cap);
    [stdout.render(budget(out_budget)), stderr.render(budget(err_budget))]
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// The largest index at most `n` (and at most `bytes.len()`) that does not split a UTF-8 character.
fn char_start_at_or_before(bytes: &[u8], n: usize) -> usize {
    let mut i = n.min(bytes.len());
    let floor = i.saturating_sub(3);
    while i > floor && i < bytes.len() && is_continuation(bytes[i]) {
        i -= 1;
    }
    i
}

/// The index of the first byte that does not continue a character cut off before `bytes`.
fn char_start_at_or_after(bytes: &[u8]) -> usize {
    bytes.iter().take(3).take_while(|&&b| is_continuation(b)).count()
}

/// `text` cut to at most `max` bytes at the end, on a character boundary.
fn keep_front(mut text: String, max: usize) -> String {
    if text.len() > max {
        text.truncate(text.floor_char_boundary(max));
    }
    text
}

/// `text` cut to at most `max` bytes at the start, on a character boundary.
fn keep_back(text: &str, max: usize) -> &str {
    &text[text.ceil_char_boundary(text.len().saturating_sub(max))..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(cap: usize, chunks: &[&[u8]]) -> Stream {
        let mut s = Stream::new(cap);
        for chunk in chunks {
            s.push(chunk);
        }
        s
    }

    #[test]
    fn streams_that_fit_together_are_kept_whole() {
        let out = stream(10, &[b"abc", b"de"]);
        let err = stream(10, &[b"12345"]);
        assert_eq!(finish(&out, &err, 10), [("abcde".to_owned(), false), ("12345".to_owned(), false)]);
    }

    #[test]
    fn a_small_stream_is_kept_whole_and_the_large_one_gets_the_rest_with_head_and_tail() {
        let big: Vec<u8> = (0..10_000).map(|i| b'a' + (i % 26) as u8).collect();
        let out = stream(100, &[&big[..4000], &big[4000..]]);
        let err = stream(100, &[b"error: boom\n"]);
        let [(out_text, out_cut), (err_text, err_cut)] = finish(&out, &err, 100);
        assert_eq!((err_text.as_str(), err_cut), ("error: boom\n", false));
        assert!(out_cut);
        assert!(out_text.len() + err_text.len() <= 100, "{}", out_text.len() + err_text.len());
        let marker_at = out_text.find("\n[... ").unwrap();
        let head = &out_text[..marker_at];
        let tail = &out_text[out_text.find(" bytes cut ...]\n").unwrap() + 16..];
        assert!(big.starts_with(head.as_bytes()) && big.ends_with(tail.as_bytes()), "{out_text:?}");
        let cut: usize = out_text[marker_at + 6..].split(' ').next().unwrap().parse().unwrap();
        assert_eq!(head.len() + cut + tail.len(), big.len());
    }

    #[test]
    fn two_large_streams_share_the_cap() {
        let out = stream(200, &[&[b'o'; 1000]]);
        let err = stream(200, &[&[b'e'; 1000]]);
        let [(o, o_cut), (e, e_cut)] = finish(&out, &err, 200);
        assert!(o_cut && e_cut);
        assert!(o.len() <= 100 && e.len() <= 100, "{o:?} {e:?}");
        assert!(o.starts_with('o') && o.ends_with('o') && o.contains("bytes cut"), "{o:?}");
    }

    #[test]
    fn cuts_never_split_characters_and_invalid_bytes_stay_within_the_budget() {
        let text = "é".repeat(500);
        let s = stream(101, &[text.as_bytes()]);
        let [(t, cut), _] = finish(&s, &Stream::new(101), 101);
        assert!(cut && t.len() <= 101 && !t.contains('\u{FFFD}'), "{t:?}");

        let junk = stream(50, &[&[0xFF; 40]]);
        let [(t, cut), _] = finish(&junk, &Stream::new(50), 50);
        assert!(cut && t.len() <= 50, "{} {t:?}", t.len());
    }

    #[test]
    fn a_tiny_cap_keeps_heads_without_a_marker() {
        let out = stream(5, &[b"12345"]);
        let err = stream(5, &[&[b'e'; 5000]]);
        let [(o, o_cut), (e, e_cut)] = finish(&out, &err, 5);
        assert_eq!((o.as_str(), o_cut, e.as_str(), e_cut), ("12", true, "eee", true));
    }
}
