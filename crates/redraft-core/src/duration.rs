//! Human durations for config and flags: `90s`, `5m`, `1h30m`, `250ms`, or bare seconds.

use std::time::Duration;

/// Parse `90s`, `5m`, `1h30m`, `250ms`, `1.5s` or a bare number of seconds.
pub fn parse(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("a duration is empty; write it like `90s`, `5m` or `250ms`".into());
    }
    if let Ok(secs) = s.parse::<f64>() {
        return seconds(secs, text);
    }
    let mut total = 0.0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        let unit_len = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let value: f64 = num.parse().map_err(|_| bad(text))?;
        let factor = match unit.trim() {
            "ms" => 0.001,
            "s" | "sec" | "secs" => 1.0,
            "m" | "min" | "mins" => 60.0,
            "h" | "hr" | "hrs" => 3600.0,
            _ => return Err(bad(text)),
        };
        total += value * factor;
        rest = next;
    }
    seconds(total, text)
}

fn seconds(secs: f64, text: &str) -> Result<Duration, String> {
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(bad(text));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn bad(text: &str) -> String {
    format!("`{text}` is not a duration; write it like `90s`, `5m`, `1h30m` or `250ms`")
}

/// Format a duration the way [`parse`] reads it (`90s`, `1.5s`, `250ms`).
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        if ms < 1000 { format!("{ms}ms") } else { format!("{}s", d.as_secs_f64()) }
    } else {
        format!("{}s", d.as_secs())
    }
}

/// Serde adapter: a duration as a human string (or a number of seconds) in config and JSON.
pub mod serde_human {
    use super::*;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Secs(f64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Secs(n) => seconds(n, &n.to_string()).map_err(serde::de::Error::custom),
            Raw::Text(t) => parse(&t).map_err(serde::de::Error::custom),
        }
    }

    /// The same for `Option<Duration>`.
    pub mod option {
        use super::*;

        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => s.serialize_str(&format(*d)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            #[derive(Deserialize)]
            struct Wrap(#[serde(with = "super")] Duration);
            Ok(Option::<Wrap>::deserialize(d)?.map(|w| w.0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_human_durations() {
        let ok = |s: &str, ms: u64| assert_eq!(parse(s), Ok(Duration::from_millis(ms)), "{s}");
        ok("90s", 90_000);
        ok("5m", 300_000);
        ok("1h30m", 5_400_000);
        ok("250ms", 250);
        ok("1.5s", 1500);
        ok("2", 2000);
        ok(" 10 s", 10_000);
        for bad in ["", "abc", "5 parsecs", "-3s", "s"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats_round_trip() {
        for ms in [250u64, 1500, 90_000, 120_000] {
            let d = Duration::from_millis(ms);
            assert_eq!(parse(&format(d)), Ok(d));
        }
    }
}
