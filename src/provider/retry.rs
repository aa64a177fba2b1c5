//! Retry with exponential backoff and full jitter (C5).
//!
//! Only retryable kinds are retried. A server's `Retry-After` (or a "try again in
//! 1.5s" in its error text) wins over the computed delay. With a deadline, a retry
//! whose wait would pass it is not attempted: the caller ends the run on its time
//! budget instead of sleeping through it.

use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use super::Provider;
use super::error::{ProviderError, ProviderErrorKind};
use super::types::{Completion, CompletionRequest};

pub use crate::contract::RetryPolicy;

/// One failed attempt that will be retried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetryAttempt {
    /// The attempt that failed (1-based).
    pub attempt: u32,
    /// Its failure kind.
    pub kind: ProviderErrorKind,
    /// HTTP status, if any.
    pub status: Option<u16>,
    /// The provider's error type or code, if it named one.
    pub code: Option<String>,
    /// The wait before the next attempt.
    pub delay_ms: u64,
    /// Whether the wait came from the server.
    pub server_said: bool,
    /// Whether the request reached the server and its reply was lost
    /// ([`ProviderError::reply_lost`]): its input counts against the token budget.
    pub reply_lost: bool,
    /// The wait would pass the deadline: the call waits out the time that is left
    /// (`delay_ms`) and gives up there, never retrying and never ending early.
    pub gives_up: bool,
    /// What the server (or the client) said went wrong, cut to [`MESSAGE_KEPT`]
    /// bytes; the API key is already redacted from it.
    pub message: String,
}

/// Bytes of a failure's message kept with its attempt.
pub const MESSAGE_KEPT: usize = 4096;

/// `message` cut to at most [`MESSAGE_KEPT`] bytes on a character boundary.
pub fn kept_message(message: &str) -> String {
    if message.len() <= MESSAGE_KEPT {
        return message.to_string();
    }
    let mut end = MESSAGE_KEPT;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &message[..end], message.len())
}

/// Why retrying stopped without a completion.
#[derive(Debug, thiserror::Error)]
pub enum RetryError {
    /// The last error, after `attempts` attempts.
    #[error("{error} (after {attempts} attempts)")]
    Exhausted {
        /// The last failure.
        error: ProviderError,
        /// Attempts made.
        attempts: u32,
    },
    /// The next wait would pass the deadline.
    #[error("the next retry would pass the time budget")]
    Deadline,
}

/// Parses "try again in 1.5s" / "retry after 20 seconds" / "in 250ms" from error text.
pub fn retry_after_from_text(text: &str) -> Option<Duration> {
    let lower = text.to_ascii_lowercase();
    for marker in ["try again in ", "retry after ", "retry in "] {
        let Some(at) = lower.find(marker) else {
            continue;
        };
        let rest = &lower[at + marker.len()..];
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let Ok(n) = rest[..num_len].parse::<f64>() else {
            continue;
        };
        let unit = rest[num_len..].trim_start();
        let secs = if unit.starts_with("ms") {
            n / 1000.0
        } else if unit.starts_with('s') {
            n
        } else if unit.starts_with('m') {
            n * 60.0
        } else {
            continue;
        };
        if secs.is_finite() && secs >= 0.0 {
            return Some(Duration::from_secs_f64(secs.min(3600.0)));
        }
    }
    None
}

/// A random number in [0, 1) without a dependency: std's randomly keyed hasher.
pub(crate) fn unit_random() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Calls `provider`, retrying retryable failures per `policy`. `on_retry` sees each
/// failed attempt before its wait.
pub async fn complete_with_retry(
    provider: &dyn Provider,
    request: &CompletionRequest,
    policy: &RetryPolicy,
    deadline: Option<Instant>,
    on_retry: &mut (dyn FnMut(&RetryAttempt) + Send),
) -> Result<Completion, RetryError> {
    let mut attempt = 1;
    let mut malformed = 0;
    loop {
        let error = match provider.complete(request).await {
            Ok(c) => return Ok(c),
            Err(e) => e,
        };
        malformed += u32::from(error.kind == ProviderErrorKind::Malformed);
        if !error.kind.is_retryable()
            || attempt >= policy.max_attempts.max(1)
            || malformed >= policy.malformed_attempts.max(1)
        {
            return Err(RetryError::Exhausted {
                error,
                attempts: attempt,
            });
        }
        let server = error
            .retry_after
            .or_else(|| retry_after_from_text(&error.message));
        let delay = policy.delay(attempt, server, unit_random());
        let gives_up = deadline.is_some_and(|d| Instant::now() + delay >= d);
        // A wait that would pass the deadline is cut to it: the budget is spent waiting
        // as the server asked, and the run ends at its real end, not early.
        let wait = match deadline.filter(|_| gives_up) {
            Some(d) => d.saturating_duration_since(Instant::now()),
            None => delay,
        };
        on_retry(&RetryAttempt {
            attempt,
            kind: error.kind,
            status: error.status,
            code: error.code.clone(),
            reply_lost: error.reply_lost,
            delay_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            server_said: server.is_some(),
            gives_up,
            message: kept_message(&error.message),
        });
        tokio::time::sleep(wait).await;
        if gives_up {
            return Err(RetryError::Deadline);
        }
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_hints_are_parsed() {
        assert_eq!(
            retry_after_from_text("Rate limit reached. Please try again in 1.5s."),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            retry_after_from_text("try again in 250ms"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after_from_text("Retry after 20 seconds"),
            Some(Duration::from_secs(20))
        );
        assert_eq!(retry_after_from_text("please wait"), None);
    }

    #[test]
    fn full_jitter_stays_within_the_computed_delay() {
        let p = RetryPolicy::default();
        for n in 1..10 {
            for u in [0.0, 0.3, 0.999] {
                let d = p.delay(n, None, u);
                assert!(d <= p.cap && d <= p.base * (1 << (n - 1)), "{n} {u} {d:?}");
            }
        }
        let r = unit_random();
        assert!((0.0..1.0).contains(&r));
    }
}
