//! Wall-clock times as users read them: RFC 3339 in UTC with milliseconds
//! (`2026-11-24T09:15:03.120Z`), computed without a calendar crate. Formatting only: the
//! clock is read by the faces (`redraft::clock`), never here.

/// Milliseconds since the Unix epoch as RFC 3339 in UTC with milliseconds.
pub fn rfc3339_ms(ms: i64) -> String {
    let (days, ms_of_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, m, d) = civil_from_days(days);
    let secs = ms_of_day / 1000;
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z", secs / 3600, secs / 60 % 60, secs % 60, ms_of_day % 1000)
}

/// The date (UTC) of milliseconds since the Unix epoch, as `YYYY-MM-DD`.
pub fn date_ms(ms: i64) -> String {
    let (y, m, d) = civil_from_days(ms.div_euclid(86_400_000));
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn times_are_rfc3339_utc_with_milliseconds() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        // 2026-11-24T09:15:03.120Z
        assert_eq!(rfc3339_ms(1_795_511_703_120), "2026-11-24T09:15:03.120Z");
        assert_eq!(rfc3339_ms(951_782_399_999), "2000-02-28T23:59:59.999Z");
        assert_eq!(date_ms(1_795_511_703_120), "2026-11-24");
    }
}
