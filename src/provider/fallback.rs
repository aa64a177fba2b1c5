//! Fallback between providers (C2, C5): each provider in order gets its retries; only a
//! retryable failure moves on to the next one. An auth or request error stops the chain
//! at once — falling through to another provider would hide a configuration mistake.

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use super::Provider;
use super::error::{ProviderError, ProviderErrorKind};
use super::retry::{RetryAttempt, RetryError, RetryPolicy, complete_with_retry};
use super::types::{Completion, CompletionRequest, ProviderIdentity};

/// Why a chain produced no completion.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// Every provider failed (or one failed with a kind that is not retried).
    #[error("{error}")]
    Escalated {
        /// The last failure.
        error: ProviderError,
        /// Whether its kind was retryable (so retries and fallbacks were used up).
        retryable: bool,
        /// The number of the attempt that failed last, with its provider (1-based).
        attempts: u32,
        /// Which provider of the chain failed last (its index in the chain as given).
        provider_index: usize,
    },
    /// The next retry would pass the deadline.
    #[error("the next retry would pass the time budget")]
    Deadline,
}

/// One failed attempt in a chain, with the provider it went to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainAttempt {
    /// Index of the provider in the chain.
    pub provider_index: usize,
    /// The attempt.
    pub attempt: RetryAttempt,
    /// What happens next: `retry` the same provider or `fallback` to the next.
    pub next: &'static str,
}

/// Calls the providers in order, each with `policy`'s retries. Returns the completion
/// and the index of the provider that served it.
pub async fn complete_chain(
    providers: &[&dyn Provider],
    request: &CompletionRequest,
    policy: &RetryPolicy,
    deadline: Option<Instant>,
    on_attempt: &mut (dyn FnMut(&ChainAttempt) + Send),
) -> Result<(Completion, usize), ChainError> {
    let mut last = None;
    for (i, p) in providers.iter().enumerate() {
        let mut per_provider = |a: &RetryAttempt| {
            on_attempt(&ChainAttempt {
                provider_index: i,
                attempt: a.clone(),
                next: if a.gives_up { "deadline" } else { "retry" },
            });
        };
        match complete_with_retry(*p, request, policy, deadline, &mut per_provider).await {
            Ok(c) => return Ok((c, i)),
            Err(RetryError::Deadline) => return Err(ChainError::Deadline),
            Err(
                RetryError::Exhausted { error, attempts }
                | RetryError::WaitTooLong { error, attempts },
            ) => {
                if !error.kind.is_retryable() {
                    return Err(ChainError::Escalated {
                        error,
                        retryable: false,
                        attempts,
                        provider_index: i,
                    });
                }
                if i + 1 < providers.len() {
                    on_attempt(&ChainAttempt {
                        provider_index: i,
                        attempt: super::retry::final_attempt(&error, attempts),
                        next: "fallback",
                    });
                }
                last = Some((error, attempts, i));
            }
        }
    }
    let (error, attempts, provider_index) = last.unwrap_or_else(|| {
        let none = ProviderError::new(
            ProviderErrorKind::Request,
            "fallback",
            "no provider in the chain",
        );
        (none, 0, 0)
    });
    Err(ChainError::Escalated {
        error,
        retryable: true,
        attempts,
        provider_index,
    })
}

/// A provider that is a chain of providers with retries: `Fallback::new(vec![primary,
/// secondary])`. The run loop builds the same chain itself (so it can record every
/// attempt and respect the time budget); this type is for embedders who call providers
/// directly.
pub struct Fallback {
    providers: Vec<Box<dyn Provider>>,
    policy: RetryPolicy,
}

impl Fallback {
    /// A chain with the default retry policy.
    pub fn new(providers: Vec<Box<dyn Provider>>) -> Self {
        Self {
            providers,
            policy: RetryPolicy::default(),
        }
    }

    /// Sets the retry policy used for each provider.
    pub fn with_retry(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }
}

impl Provider for Fallback {
    fn identity(&self) -> ProviderIdentity {
        let ids: Vec<ProviderIdentity> = self.providers.iter().map(|p| p.identity()).collect();
        ProviderIdentity {
            kind: format!(
                "fallback({})",
                ids.iter()
                    .map(|i| i.kind.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            model: ids.first().map(|i| i.model.clone()).unwrap_or_default(),
            base_url: ids.first().and_then(|i| i.base_url.clone()),
        }
    }

    fn secrets(&self) -> Vec<String> {
        self.providers.iter().flat_map(|p| p.secrets()).collect()
    }

    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(async move {
            let refs: Vec<&dyn Provider> = self.providers.iter().map(|p| p.as_ref()).collect();
            match complete_chain(&refs, request, &self.policy, None, &mut |_| {}).await {
                Ok((c, _)) => Ok(c),
                Err(ChainError::Escalated { error, .. }) => Err(error),
                Err(ChainError::Deadline) => Err(ProviderError::new(
                    ProviderErrorKind::Timeout,
                    "fallback",
                    "deadline",
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{Message, ScriptTurn, Scripted};
    use std::sync::atomic::{AtomicU32, Ordering};

    struct Dead(ProviderErrorKind, AtomicU32);
    impl Provider for Dead {
        fn identity(&self) -> ProviderIdentity {
            ProviderIdentity {
                kind: "dead".into(),
                model: "d".into(),
                base_url: None,
            }
        }
        fn complete<'a>(
            &'a self,
            _: &'a CompletionRequest,
        ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
            self.1.fetch_add(1, Ordering::SeqCst);
            let k = self.0;
            Box::pin(async move { Err(ProviderError::new(k, "dead", "down")) })
        }
    }

    fn req() -> CompletionRequest {
        CompletionRequest::new("m", vec![Message::user("hi")])
    }

    #[tokio::test(start_paused = true)]
    async fn dead_primary_falls_back_after_its_retries() {
        let dead = Dead(ProviderErrorKind::Server, AtomicU32::new(0));
        let live = Scripted::new(vec![ScriptTurn::text("hello")]);
        let policy = RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        };
        let mut seen = Vec::new();
        let (c, i) = complete_chain(&[&dead, &live], &req(), &policy, None, &mut |a| {
            seen.push(a.next)
        })
        .await
        .unwrap();
        assert_eq!((c.text().as_str(), i), ("hello", 1));
        assert_eq!(dead.1.load(Ordering::SeqCst), 3);
        assert_eq!(seen, ["retry", "retry", "fallback"]);
    }

    #[tokio::test(start_paused = true)]
    async fn auth_failure_does_not_fall_through() {
        let dead = Dead(ProviderErrorKind::Auth, AtomicU32::new(0));
        let live = Scripted::new(vec![ScriptTurn::text("hello")]);
        let err = complete_chain(
            &[&dead, &live],
            &req(),
            &RetryPolicy::default(),
            None,
            &mut |_| {},
        )
        .await
        .unwrap_err();
        assert!(
            matches!(err, ChainError::Escalated { retryable: false, ref error, attempts: 1, provider_index: 0 } if error.kind == ProviderErrorKind::Auth)
        );
        assert_eq!(dead.1.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn no_wait_passes_the_deadline() {
        let dead = Dead(ProviderErrorKind::RateLimited, AtomicU32::new(0));
        let policy = RetryPolicy {
            max_attempts: 10,
            jitter: false,
            ..RetryPolicy::default()
        };
        let deadline = Instant::now() + std::time::Duration::from_millis(2500);
        let started = Instant::now();
        let err = complete_chain(&[&dead], &req(), &policy, Some(deadline), &mut |_| {})
            .await
            .unwrap_err();
        assert!(matches!(err, ChainError::Deadline));
        // 1 s + 2 s would pass 2.5 s: the second wait is cut to the deadline, where it
        // gives up: never a wait past it, never an end before it.
        assert_eq!(started.elapsed(), std::time::Duration::from_millis(2500));
        assert_eq!(dead.1.load(Ordering::SeqCst), 2);
    }
}
