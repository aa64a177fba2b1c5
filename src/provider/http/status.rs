//! Turns what a server said went wrong into a [`ProviderErrorKind`].
//!
//! Failures arrive in three shapes: an HTTP status with a JSON body, an error object
//! inside a `200` stream, and a `Retry-After` header. Both wire protocols use the same
//! vocabulary closely enough (`overloaded_error`, `rate_limit_exceeded`,
//! `context_length_exceeded`, "prompt is too long") that one classifier serves them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::provider::error::ProviderErrorKind;

/// Classifies a non-success HTTP status; `body` refines it (overload, context
/// overflow), since providers use plain 400 and 5xx for those.
pub(crate) fn classify_status(status: u16, body: &str) -> ProviderErrorKind {
    let lower = body.to_ascii_lowercase();
    match status {
        401 | 403 => ProviderErrorKind::Auth,
        429 => ProviderErrorKind::RateLimited,
        529 => ProviderErrorKind::Overloaded,
        500..=599 if says_overloaded(&lower) => ProviderErrorKind::Overloaded,
        500..=599 => ProviderErrorKind::Server,
        400 | 413 | 422 if says_context_overflow(&lower) => ProviderErrorKind::ContextOverflow,
        _ => ProviderErrorKind::Request,
    }
}

/// Classifies an error object a server sent in place of (or in the middle of) a
/// stream: `{"type": "overloaded_error", "message": ...}` (Anthropic) or
/// `{"code": "rate_limit_exceeded", "type": ..., "message": ...}` (OpenAI,
/// OpenRouter, where `code` may also be an HTTP status number).
///
/// An error the stream reports that matches nothing is `Server`: the request was
/// accepted and the server failed while answering it.
/// The provider's name for an error object: its `code` when that is a string,
/// else its `type` (Anthropic's `overloaded_error`).
pub(crate) fn error_code(err: &serde_json::Value) -> Option<String> {
    let s = |k: &str| {
        err.get(k)
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
    };
    s("code").or_else(|| s("type")).map(str::to_string)
}

/// The error object of a JSON error body (`{"error": {...}}`), if there is one.
pub(crate) fn body_error_code(body: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    error_code(v.get("error")?)
}

pub(crate) fn classify_error_object(err: &serde_json::Value) -> ProviderErrorKind {
    let text = |k: &str| {
        err.get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_ascii_lowercase()
    };
    let (kind, code, message) = (text("type"), text("code"), text("message"));
    let status = err
        .get("code")
        .and_then(|v| v.as_u64())
        .or_else(|| code.parse().ok());
    let words = format!("{kind} {code} {message}");
    if says_overloaded(&words) || status == Some(529) {
        ProviderErrorKind::Overloaded
    } else if words.contains("rate_limit") || words.contains("rate limit") || status == Some(429) {
        ProviderErrorKind::RateLimited
    } else if says_context_overflow(&words) {
        ProviderErrorKind::ContextOverflow
    } else if ["authentication", "permission", "invalid_api_key"]
        .iter()
        .any(|w| words.contains(w))
        || matches!(status, Some(401 | 403))
    {
        ProviderErrorKind::Auth
    } else if kind == "invalid_request_error" || matches!(status, Some(400..=499)) {
        ProviderErrorKind::Request
    } else {
        ProviderErrorKind::Server
    }
}

fn says_overloaded(lower: &str) -> bool {
    lower.contains("overloaded")
}

fn says_context_overflow(lower: &str) -> bool {
    lower.contains("context_length_exceeded")
        || lower.contains("prompt is too long")
        || lower.contains("maximum context length")
        || lower.contains("context window")
}

/// How long a server asked us to wait: `retry-after-ms` (OpenAI's SDKs honour it),
/// else `Retry-After` as seconds or as an HTTP-date (RFC 9110 §10.2.3), relative to
/// `now`. A date in the past means "now" (zero).
pub(crate) fn retry_after(
    ms: Option<&str>,
    header: Option<&str>,
    now: SystemTime,
) -> Option<Duration> {
    if let Some(ms) = ms.and_then(|v| v.trim().parse::<f64>().ok()) {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    let value = header?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let at = parse_http_date(value)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the only form RFC 9110
/// lets servers send.
pub(crate) fn parse_http_date(s: &str) -> Option<SystemTime> {
    let rest = s.split_once(", ")?.1;
    let mut parts = rest.split(' ');
    let day: i64 = parts.next()?.parse().ok()?;
    let month = parts.next()?;
    let year: i64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':').map(|p| p.parse::<i64>().ok());
    let (h, m, sec) = (hms.next()??, hms.next()??, hms.next()??);
    if parts.next()? != "GMT" || parts.next().is_some() {
        return None;
    }
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|&n| n == month)? as i64 + 1;
    if !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let secs = days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + sec;
    Some(UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProviderErrorKind as K;

    #[test]
    fn statuses() {
        assert_eq!(classify_status(401, ""), K::Auth);
        assert_eq!(classify_status(403, ""), K::Auth);
        assert_eq!(classify_status(429, ""), K::RateLimited);
        assert_eq!(classify_status(529, ""), K::Overloaded);
        let overloaded =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(classify_status(503, overloaded), K::Overloaded);
        assert_eq!(classify_status(500, "{}"), K::Server);
        assert_eq!(classify_status(502, ""), K::Server);
        let openai = r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        assert_eq!(classify_status(400, openai), K::ContextOverflow);
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#;
        assert_eq!(classify_status(400, anthropic), K::ContextOverflow);
        assert_eq!(
            classify_status(400, r#"{"error":{"message":"bad"}}"#),
            K::Request
        );
        assert_eq!(classify_status(404, ""), K::Request);
        assert_eq!(classify_status(301, ""), K::Request);
    }

    #[test]
    fn error_objects() {
        let j = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
        assert_eq!(
            classify_error_object(&j(r#"{"type":"overloaded_error","message":"Overloaded"}"#)),
            K::Overloaded
        );
        assert_eq!(
            classify_error_object(&j(r#"{"type":"rate_limit_error","message":"slow"}"#)),
            K::RateLimited
        );
        assert_eq!(
            classify_error_object(&j(r#"{"code":429,"message":"Rate limited"}"#)),
            K::RateLimited
        );
        assert_eq!(
            classify_error_object(&j(r#"{"code":"context_length_exceeded"}"#)),
            K::ContextOverflow
        );
        assert_eq!(
            classify_error_object(&j(r#"{"type":"authentication_error"}"#)),
            K::Auth
        );
        assert_eq!(
            classify_error_object(&j(r#"{"type":"invalid_request_error","message":"x"}"#)),
            K::Request
        );
        assert_eq!(
            classify_error_object(&j(r#"{"type":"api_error","message":"Internal"}"#)),
            K::Server
        );
        assert_eq!(
            classify_error_object(&j(r#"{"code":"server_error"}"#)),
            K::Server
        );
        assert_eq!(
            classify_error_object(&j(r#"{"code":502,"message":"upstream"}"#)),
            K::Server
        );
    }

    #[test]
    fn retry_after_forms() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_770); // Sun, 06 Nov 1994 08:49:30 GMT
        assert_eq!(
            retry_after(None, Some("7"), now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(None, Some("1.5"), now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            retry_after(Some("250"), Some("7"), now),
            Some(Duration::from_millis(250))
        );
        let date = "Sun, 06 Nov 1994 08:49:37 GMT";
        assert_eq!(
            parse_http_date(date),
            Some(UNIX_EPOCH + Duration::from_secs(784_111_777))
        );
        assert_eq!(
            retry_after(None, Some(date), now),
            Some(Duration::from_secs(7))
        );
        let past = now + Duration::from_secs(3600);
        assert_eq!(retry_after(None, Some(date), past), Some(Duration::ZERO));
        assert_eq!(retry_after(None, Some("soon"), now), None);
        assert_eq!(retry_after(None, Some("-3"), now), None);
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 UTC"), None);
        assert_eq!(
            parse_http_date("Wed, 29 Feb 2028 00:00:00 GMT")
                .map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs()),
            Some(1_835_395_200)
        );
    }
}
