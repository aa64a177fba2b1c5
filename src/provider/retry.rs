//! Retry with exponential backoff and full jitter (C5).
//!
//! Only retryable kinds are retried. A server's `Retry-After` (or a "try again in
//! 1.5s" in its error text) wins over the computed delay, up to `max_wait` and the time
//! left: a server that asks for longer is not waited for at all ([`RetryError::WaitTooLong`]),
//! so the chain moves on to a fallback or the run ends resumable, on record, instead of
//! sleeping ten minutes in silence or ending on a budget it never used. A computed
//! delay that would pass the deadline is waited out to it, and the run ends on its
//! time budget there.

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

/// The record of the failure that ended a provider's attempts (no wait follows it).
pub(crate) fn final_attempt(error: &ProviderError, attempts: u32) -> RetryAttempt {
    RetryAttempt {
        attempt: attempts,
        kind: error.kind,
        status: error.status,
        code: error.code.clone(),
        delay_ms: 0,
        server_said: false,
        reply_lost: error.reply_lost,
        gives_up: false,
        message: kept_message(&error.message),
    }
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
    /// The server asked for a wait longer than `max_wait` or than the time left; the
    /// error's message says how long and which limit.
    #[error("{error} (after {attempts} attempts)")]
    WaitTooLong {
        /// The failure that asked for the wait.
        error: ProviderError,
        /// Attempts made.
        attempts: u32,
    },
}

/// Why a server's wait is not waited out, if it is not: longer than `max_wait`, or
/// than the time the deadline leaves.
pub fn refused_wait(asked: Duration, max_wait: Duration, left: Option<Duration>) -> Option<String> {
    if asked > max_wait {
        return Some(format!(
            "the server asked to wait {asked:?}, longer than [retry] max_wait ({max_wait:?}): not waited"
        ));
    }
    match left {
        Some(left) if asked >= left => Some(format!(
            "the server asked to wait {asked:?}, longer than the {left:?} left of the time budget: not waited"
        )),
        _ => None,
    }
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
    // The request names the model of the chain's first provider; a fallback is asked
    // for its own (a fallback configured with another model was sent the primary's).
    let own = provider.identity().model;
    let retargeted;
    let request = if own.is_empty() || request.model == own {
        request
    } else {
        retargeted = CompletionRequest {
            model: own,
            ..request.clone()
        };
        &retargeted
    };
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
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if let Some(why) = server.and_then(|s| refused_wait(s, policy.max_wait, left)) {
            let mut error = error;
            error.message = format!("{} ({why})", error.message);
            return Err(RetryError::WaitTooLong {
                error,
                attempts: attempt,
            });
        }
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
    fn a_server_wait_is_taken_up_to_max_wait_and_the_time_left() {
        let s = Duration::from_secs;
        assert_eq!(refused_wait(s(2), s(5), None), None);
        assert_eq!(refused_wait(s(5), s(5), Some(s(10))), None);
        assert!(
            refused_wait(s(600), s(300), None)
                .unwrap()
                .contains("max_wait")
        );
        assert!(
            refused_wait(s(3), s(300), Some(s(2)))
                .unwrap()
                .contains("time budget")
        );
    }

    /// Issue 17.4: `Retry-After: 600` slept 600 s with nothing on record. Now the call
    /// returns at once, the wait refused and said in the error.
    #[tokio::test(start_paused = true)]
    async fn retry_after_over_max_wait_returns_at_once_without_sleeping() {
        struct Slow;
        impl Provider for Slow {
            fn identity(&self) -> crate::provider::ProviderIdentity {
                crate::provider::ProviderIdentity {
                    kind: "slow".into(),
                    model: "m".into(),
                    base_url: None,
                }
            }
            fn complete<'a>(
                &'a self,
                _: &'a CompletionRequest,
            ) -> futures_util::future::BoxFuture<'a, Result<Completion, ProviderError>>
            {
                let mut e = ProviderError::new(ProviderErrorKind::RateLimited, "slow", "429");
                e.retry_after = Some(Duration::from_secs(600));
                Box::pin(async move { Err(e) })
            }
        }
        let request = CompletionRequest::new("m", vec![crate::provider::Message::user("hi")]);
        let started = Instant::now();
        let mut seen = 0;
        let err = complete_with_retry(&Slow, &request, &RetryPolicy::default(), None, &mut |_| {
            seen += 1
        })
        .await
        .unwrap_err();
        assert_eq!(started.elapsed(), Duration::ZERO);
        assert_eq!(seen, 0);
        let RetryError::WaitTooLong { error, attempts: 1 } = err else {
            panic!("{err:?}");
        };
        assert!(error.message.contains("max_wait"), "{}", error.message);
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
