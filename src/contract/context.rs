//! `[context]`: the token budget of each request. Assembly under it is the `context`
//! module's job.

use serde::{Deserialize, Serialize};

/// The `[context]` section of a contract.
///
/// ```
/// use io_harness::{TaskContract, Verification};
///
/// let contract = TaskContract::workspace("g", ".", Verification::file_contains("a", "b"))
///     .context_max_tokens(60_000);
/// assert_eq!(contract.context.max_tokens, Some(60_000));
/// assert!(contract.context.assemble, "assembly is on unless asked for the baseline");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextSettings {
    /// Input-token budget per request. The model's context window (less the output
    /// cap) bounds it too when the model is known; with neither, requests are not
    /// compacted for size (stale reads are still re-read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// `false` sends the full history unchanged, stale reads included: the baseline
    /// the assembly is measured against, not a setting for real runs.
    #[serde(default = "yes")]
    pub assemble: bool,
}

fn yes() -> bool {
    true
}

impl Default for ContextSettings {
    fn default() -> Self {
        Self {
            max_tokens: None,
            assemble: true,
        }
    }
}
