//! RFC 3339 timestamps (the host's `started`, a login's expiration) to and from
//! [`SystemTime`]s, without a date-time dependency in every guest.

use std::time::{Duration, SystemTime};

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (lower-case `t`/`z` and a
/// space for `T` too); `None` for anything else or a time before 1970.
pub(crate) fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let bytes = text.as_bytes();
    let digits = |from: usize, len: usize| -> Option<i64> {
        let part = bytes.get(from..from + len)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0_i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let at = |i: usize, allowed: &[u8]| bytes.get(i).is_some_and(|b| allowed.contains(b));
    if !(at(4, b"-") && at(7, b"-") && at(10, b"Tt ") && at(13, b":") && at(16, b":")) {
        return None;
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (hour, minute, second) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    // A leap second (:60) counts as the next second's start, as most systems do.
    if second > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos: u32 = 0;
    if at(i, b".") {
        i += 1;
        let start = i;
        while at(i, b"0123456789") {
            if i - start < 9 {
                nanos = nanos * 10 + u32::from(bytes[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start)..9 {
            nanos *= 10;
        }
    }
    let offset = match bytes.get(i) {
        Some(b'Z' | b'z') if i + 1 == bytes.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == bytes.len() && at(i + 3, b":") => {
            let minutes = digits(i + 1, 2)? * 60 + digits(i + 4, 2)?;
            if *sign == b'+' { minutes } else { -minutes }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset * 60;
    let seconds = u64::try_from(seconds).ok()?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::new(seconds, nanos))
}

/// `YYYY-MM-DDTHH:MM:SSZ`, to the second (a time before 1970 is 1970's start).
pub(crate) fn format_rfc3339(time: SystemTime) -> String {
    let seconds = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let seconds = i64::try_from(seconds).unwrap_or(i64::MAX / 2);
    let (days, second_of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    let (hour, minute, second) = (
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60,
    );
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
}

/// The proleptic Gregorian date of days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_what_it_parses() {
        for text in [
            "1970-01-01T00:00:00Z",
            "2000-02-29T23:59:59Z",
            "2024-12-31T12:00:01Z",
            "2099-03-01T00:00:00Z",
        ] {
            let time = parse_rfc3339(text).expect("parses");
            assert_eq!(format_rfc3339(time), text);
        }
    }

    fn unix(text: &str) -> Option<(u64, u32)> {
        parse_rfc3339(text).map(|t| {
            let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap();
            (d.as_secs(), d.subsec_nanos())
        })
    }

    #[test]
    fn parses_what_the_host_sends() {
        assert_eq!(unix("1970-01-01T00:00:00Z"), Some((0, 0)));
        // `date -u -d 2026-11-30T03:32:51Z +%s` = 1796009571.
        assert_eq!(
            unix("2026-11-30T03:32:51.611056+00:00"),
            Some((1_796_009_571, 611_056_000))
        );
        assert_eq!(unix("2026-11-30T05:32:51+02:00"), Some((1_796_009_571, 0)));
        assert_eq!(
            unix("2026-11-30t03:32:51.5z"),
            Some((1_796_009_571, 500_000_000))
        );
        assert_eq!(unix("2000-02-29T00:00:00Z"), Some((951_782_400, 0)));
        assert_eq!(
            unix("2026-01-01T00:00:00.1234567891Z").map(|t| t.1),
            Some(123_456_789)
        );
    }

    #[test]
    fn rejects_the_rest() {
        for bad in [
            "",
            "2026-11-30",
            "2026-11-30T03:32:51",
            "2026-13-01T00:00:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30T03:32:51.Z",
            "2026-11-30T03:32:51+0000",
            "2026-11-30T03:32:51Zjunk",
            "1969-12-31T23:59:59Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
