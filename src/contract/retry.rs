//! How failed provider calls are retried (`[retry]`): the policy as data and the delay
//! it gives. The retry loop itself is the provider's.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How failed provider calls are retried.
///
/// ```
/// use std::time::Duration;
/// use io_harness::provider::RetryPolicy;
/// let p = RetryPolicy { jitter: false, ..RetryPolicy::default() };
/// assert_eq!(p.delay(1, None, 0.0), Duration::from_secs(1));
/// assert_eq!(p.delay(3, None, 0.0), Duration::from_secs(4));
/// assert_eq!(p.delay(20, None, 0.0), Duration::from_secs(60)); // capped
/// assert_eq!(p.delay(1, Some(Duration::from_secs(7)), 0.0), Duration::from_secs(7));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = never retry).
    pub max_attempts: u32,
    /// Delay before the first retry, doubled each time.
    #[serde(with = "super::serde_duration")]
    pub base: Duration,
    /// Largest computed delay.
    #[serde(with = "super::serde_duration")]
    pub cap: Duration,
    /// Full jitter: wait a uniformly random part of the computed delay.
    pub jitter: bool,
    /// Attempts in all while the replies are malformed on the wire (a chunk that is
    /// not JSON, a stream labelled `text/plain`): a transient fault of a server or a
    /// proxy, worth another try, but not `max_attempts` of them before the fallback.
    pub malformed_attempts: u32,
    /// The longest wait a server may ask for (`Retry-After`, "try again in …") that is
    /// waited out. A longer one is not slept through unrecorded: the call goes to the
    /// fallback, else the run ends `Escalated { retryable: true }` and can be resumed.
    #[serde(with = "super::serde_duration")]
    pub max_wait: Duration,
    /// Circuit breaker: steps a fallback serves before the primary is probed again (one
    /// attempt, no retry). The probe also waits for `probe_interval`: whichever comes
    /// later.
    pub probe_steps: u32,
    /// Circuit breaker: time since the primary failed (or was last probed) before it is
    /// probed again, together with `probe_steps`.
    #[serde(with = "super::serde_duration")]
    pub probe_interval: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
            jitter: true,
            malformed_attempts: 2,
            max_wait: Duration::from_secs(300),
            probe_steps: 10,
            probe_interval: Duration::from_secs(300),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1-based). `unit` is a random number in
    /// [0, 1) used for jitter.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>, unit: f64) -> Duration {
        if let Some(server) = retry_after {
            return server;
        }
        let exp = retry.saturating_sub(1).min(30);
        let computed = self.base.saturating_mul(1u32 << exp).min(self.cap);
        if self.jitter {
            computed.mul_f64(unit.clamp(0.0, 1.0))
        } else {
            computed
        }
    }
}
