//! Human units in task files: durations (`"15m"`, `"90s"`) and sizes (`"4GiB"`).

use std::time::Duration;

/// Parses a duration such as `"15m"`, `"1h 30m"`, `"500ms"`.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(io_harness::contract::parse_duration("15m"), Ok(Duration::from_secs(900)));
/// assert!(io_harness::contract::parse_duration("soon").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("{text:?} is not a duration like \"90s\" or \"15m\" ({e})"))
}

pub(crate) fn parse_duration_field(text: &str) -> Result<Duration, String> {
    parse_duration(text)
}

/// Parses a byte size: a plain number of bytes or a number with `KiB`, `MiB`, `GiB`
/// (also `K`, `M`, `G`, `KB`, `MB`, `GB`, all binary).
///
/// ```
/// assert_eq!(io_harness::contract::parse_size("4GiB"), Ok(4 << 30));
/// assert_eq!(io_harness::contract::parse_size("1024"), Ok(1024));
/// assert!(io_harness::contract::parse_size("lots").is_err());
/// ```
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a size like \"512MiB\""))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(format!("{text:?} has an unknown unit (use KiB, MiB, GiB)")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// Serde for a `Duration` as whole milliseconds (the stored contract's shape).
pub(crate) mod serde_duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis().try_into().unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

/// Serde for an optional `Duration` as whole milliseconds.
pub(crate) mod serde_opt_duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}
