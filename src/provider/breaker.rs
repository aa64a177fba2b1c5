//! The circuit breaker of a provider chain: once the primary has failed and a fallback
//! served, later steps go straight to the provider that served.
//!
//! Without it every step went through the dead primary's whole retry schedule again
//! (about 7.5 s a step with the defaults) before the fallback answered. With it the
//! primary is only *probed* — one attempt, no retry — once both `[retry] probe_steps`
//! steps and `probe_interval` have passed since it last failed (whichever comes later);
//! a probe that succeeds closes the breaker, one that fails is recorded and the step
//! goes on to the serving provider. The state is plain data ([`BreakerState`]) that
//! the run keeps with every committed step, so a resumed run and a sub-agent start
//! where the run left it.

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::Provider;
use super::fallback::{ChainAttempt, ChainError, complete_chain};
use super::retry::{RetryError, RetryPolicy, complete_with_retry, final_attempt};
use super::types::{Completion, CompletionRequest};

/// Where a run's provider chain stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerState {
    /// The chain index of the provider that served last: 0 (closed) is the primary,
    /// anything else means the breaker is open and that fallback serves.
    pub serving: usize,
    /// The step at which the primary last failed (or was last probed).
    pub since_step: u32,
    /// When that was, in milliseconds since the Unix epoch (wall time: the state
    /// outlives the process).
    pub since_ms: u64,
}

impl BreakerState {
    /// Whether a fallback serves instead of the primary.
    pub fn is_open(&self) -> bool {
        self.serving > 0
    }

    /// Whether step `step` at `now_ms` probes the primary: the breaker is open and
    /// both `probe_steps` steps and `probe_interval` have passed.
    pub fn probe_due(&self, step: u32, now_ms: u64, policy: &RetryPolicy) -> bool {
        let interval = u64::try_from(policy.probe_interval.as_millis()).unwrap_or(u64::MAX);
        self.is_open()
            && step >= self.since_step.saturating_add(policy.probe_steps)
            && now_ms >= self.since_ms.saturating_add(interval)
    }

    /// Takes in that provider `index` served step `step`: the primary closes the
    /// breaker; a fallback opens it (its clock starts when the primary is first
    /// passed over, not at every step the fallback serves).
    pub fn served(&mut self, index: usize, step: u32, now_ms: u64) {
        if index == 0 {
            *self = Self::default();
        } else if self.serving != index {
            *self = Self {
                serving: index,
                since_step: step,
                since_ms: now_ms,
            };
        }
    }

    /// Takes in a failed probe at `step`: the next one waits a full period again.
    pub fn probe_failed(&mut self, step: u32, now_ms: u64) {
        self.since_step = step;
        self.since_ms = now_ms;
    }
}

/// Which step a call is for, and when it is made (wall time, ms since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepAt {
    /// The step.
    pub step: u32,
    /// Now, in milliseconds since the Unix epoch.
    pub now_ms: u64,
}

/// `next` of the attempt that records a failed probe of the primary.
pub const PROBE_FAILED: &str = "probe-failed";

/// Calls the chain as `breaker` says: from the serving provider onwards (the providers
/// before it last, as a last resort), after a probe of the primary when one is due.
/// Updates `breaker` with what happened. Indices in the attempts and the result are
/// the chain's own.
pub async fn complete_with_breaker(
    providers: &[&dyn Provider],
    request: &CompletionRequest,
    policy: &RetryPolicy,
    deadline: Option<Instant>,
    breaker: &mut BreakerState,
    at: StepAt,
    on_attempt: &mut (dyn FnMut(&ChainAttempt) + Send),
) -> Result<(Completion, usize), ChainError> {
    let StepAt { step, now_ms } = at;
    // The interval runs from when the primary failed or was probed, not from the
    // start of the call (the primary's retries come in between).
    let called = std::time::Instant::now();
    let then = || now_ms.saturating_add(u64::try_from(called.elapsed().as_millis()).unwrap_or(0));
    let start = breaker.serving.min(providers.len().saturating_sub(1));
    if start > 0 && breaker.probe_due(step, now_ms, policy) {
        let once = RetryPolicy {
            max_attempts: 1,
            ..*policy
        };
        match complete_with_retry(providers[0], request, &once, deadline, &mut |_| {}).await {
            Ok(c) => {
                breaker.served(0, step, then());
                return Ok((c, 0));
            }
            Err(RetryError::Deadline) => return Err(ChainError::Deadline),
            Err(
                RetryError::Exhausted { error, attempts }
                | RetryError::WaitTooLong { error, attempts },
            ) => {
                on_attempt(&ChainAttempt {
                    provider_index: 0,
                    attempt: final_attempt(&error, attempts),
                    next: PROBE_FAILED,
                });
                breaker.probe_failed(step, then());
            }
        }
    }
    // The serving provider first, then the rest of the chain after it, then the
    // providers before it.
    let order: Vec<usize> = (start..providers.len()).chain(0..start).collect();
    let chain: Vec<&dyn Provider> = order.iter().map(|&i| providers[i]).collect();
    let mut shifted = |a: &ChainAttempt| {
        on_attempt(&ChainAttempt {
            provider_index: order[a.provider_index],
            ..a.clone()
        });
    };
    let (c, i) = complete_chain(&chain, request, policy, deadline, &mut shifted)
        .await
        .map_err(|e| match e {
            ChainError::Escalated {
                error,
                retryable,
                attempts,
                provider_index,
            } => ChainError::Escalated {
                error,
                retryable,
                attempts,
                provider_index: order[provider_index],
            },
            other => other,
        })?;
    let served = order[i];
    if served == 0 || served != breaker.serving {
        breaker.served(served, step, then());
    }
    Ok((c, served))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            probe_steps: 10,
            probe_interval: Duration::from_secs(300),
            ..RetryPolicy::default()
        }
    }

    #[test]
    fn a_probe_waits_for_the_steps_and_the_interval_whichever_comes_later() {
        let mut b = BreakerState::default();
        assert!(!b.probe_due(100, u64::MAX, &policy()), "closed: no probe");
        b.served(1, 3, 1_000);
        let min5 = 300_000;
        assert!(!b.probe_due(12, 1_000 + min5, &policy()), "9 steps");
        assert!(!b.probe_due(13, 1_000 + min5 - 1, &policy()), "not 5 min");
        assert!(b.probe_due(13, 1_000 + min5, &policy()));
        // Serving on does not restart the clock; a failed probe does.
        b.served(1, 8, 50_000);
        assert_eq!(b.since_step, 3);
        b.probe_failed(13, 1_000 + min5);
        assert!(!b.probe_due(14, 10 * min5, &policy()));
        b.served(0, 20, 0);
        assert_eq!(b, BreakerState::default());
    }
}
