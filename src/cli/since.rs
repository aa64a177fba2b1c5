//! `runs --since`: a duration back from now, or an RFC 3339 time, `Z` or a numeric
//! offset (humantime reads only the first form; adversary P2 of issue 19 found
//! `2026-12-01T09:00:00+02:00` refused).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `--since` as a Unix time in milliseconds.
pub fn parse_since(s: &str) -> Result<i64, String> {
    let now = SystemTime::now();
    let at = match humantime::parse_duration(s) {
        Ok(d) => now.checked_sub(d).ok_or("too far back")?,
        Err(_) => time_of(s).ok_or_else(|| {
            format!(
                "`{s}` is neither a duration (2h, 7d) nor an RFC 3339 time \
                 (2026-12-01T09:00:00Z, 2026-12-01T11:00:00+02:00)"
            )
        })?,
    };
    let ms = at
        .duration_since(UNIX_EPOCH)
        .map_err(|_| "before 1970")?
        .as_millis();
    i64::try_from(ms).map_err(|_| "too far ahead".to_string())
}

/// An RFC 3339 time: UTC (`Z`), or local with a `+HH:MM` / `-HH:MM` offset.
fn time_of(s: &str) -> Option<SystemTime> {
    if let Ok(t) = humantime::parse_rfc3339_weak(s) {
        return Some(t);
    }
    let (local, offset) = s.split_at_checked(s.len().checked_sub(6)?)?;
    let b = offset.as_bytes();
    if !matches!(b[0], b'+' | b'-') || b[3] != b':' {
        return None;
    }
    let hours: u64 = offset.get(1..3)?.parse().ok()?;
    let minutes: u64 = offset.get(4..6)?.parse().ok()?;
    if hours > 23 || minutes > 59 {
        return None;
    }
    let utc_if_z = humantime::parse_rfc3339_weak(&format!("{local}Z")).ok()?;
    let off = Duration::from_secs(hours * 3600 + minutes * 60);
    // Local time ahead of UTC (`+`) is that much later than the same clock time in UTC.
    if b[0] == b'+' {
        utc_if_z.checked_sub(off)
    } else {
        utc_if_z.checked_add(off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_is_the_same_instant_as_its_utc_time() {
        let z = parse_since("2026-12-01T09:00:00Z").unwrap();
        assert_eq!(parse_since("2026-12-01T11:00:00+02:00").unwrap(), z);
        assert_eq!(parse_since("2026-12-01T04:30:00-04:30").unwrap(), z);
        assert!(parse_since("2026-12-01T11:00:00+25:00").is_err());
        assert!(parse_since("yesterday-ish").is_err());
        assert!(parse_since("2h").is_ok());
    }
}
