//! `[tools]`: what one reply may ask of the tools, bounded so no single reply can
//! hang or bloat the harness.

use serde::{Deserialize, Serialize};

/// Bounds on a reply's tool calls.
///
/// A call over a bound is answered with a tool error saying which bound it crossed
/// (never dropped silently, never run): the model sees why and can split its work.
///
/// ```
/// use io_harness::contract::ToolSettings;
/// let t = ToolSettings::default();
/// assert_eq!((t.max_argument_bytes, t.max_calls_per_reply), (1 << 20, 64));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolSettings {
    /// Bytes of one call's arguments (as JSON); a larger call is refused and its
    /// arguments are not stored.
    pub max_argument_bytes: u64,
    /// Calls run from one reply; the calls after these are refused.
    pub max_calls_per_reply: u32,
}

impl Default for ToolSettings {
    fn default() -> Self {
        Self {
            max_argument_bytes: 1 << 20,
            max_calls_per_reply: 64,
        }
    }
}
