//! `[stall]`: how patient a run is with an agent that makes no progress. The detector
//! that applies it lives with the run loop.

use serde::{Deserialize, Serialize};

/// How patient the run is with an agent that makes no progress.
///
/// ```
/// use io_harness::run::StallPolicy;
/// let p = StallPolicy::default();
/// assert_eq!((p.window, p.max_replans), (4, 2));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StallPolicy {
    /// Consecutive steps without progress that count as a stall.
    pub window: u32,
    /// Replan directives before the run ends `Stalled`.
    pub max_replans: u32,
}

impl Default for StallPolicy {
    fn default() -> Self {
        Self {
            window: 4,
            max_replans: 2,
        }
    }
}
