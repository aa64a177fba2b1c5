//! Loop counters kept with every committed step so a resumed run continues with them.

use serde::{Deserialize, Serialize};

/// What the loop needs besides the conversation and the totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LoopState {
    /// Failed verifications so far.
    pub verify_failures: u32,
    /// Criteria that failed at the last verification (empty when it passed or none ran).
    pub failing: Vec<String>,
    /// Wall time used by the run up to this commit, across sessions.
    pub elapsed_ms: u64,
    /// Stall detection counters.
    #[serde(default)]
    pub stall: super::stall::StallCounters,
    /// The outcome the committed step's verdict decided (a pass, the last failed
    /// attempt, a stall), kept in the same commit: a process killed after it and
    /// before the outcome was recorded resumes to that outcome instead of asking the
    /// model for a step the run was never going to take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided: Option<super::outcome::RunOutcome>,
    /// The provider chain's circuit breaker: which provider serves, and since when the
    /// primary is passed over. Kept with every commit, so a resumed run goes on with
    /// the provider that served; a sub-agent starts from its parent's.
    #[serde(default)]
    pub breaker: crate::provider::BreakerState,
}
