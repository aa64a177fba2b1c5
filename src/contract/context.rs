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
    /// How tokens are counted (`[context] tokens`): the model's own encoder where the
    /// build has one (`auto`, the default), always that encoder (`exact`, which needs
    /// the `exact-tokens` feature and an OpenAI model), or always the calibrated
    /// estimate (`estimate`).
    #[serde(default, skip_serializing_if = "TokenCounting::is_auto")]
    pub tokens: TokenCounting,
}

/// How a run counts tokens for its context budget and its record.
///
/// ```
/// use io_harness::contract::TokenCounting;
/// assert_eq!("exact".parse::<TokenCounting>(), Ok(TokenCounting::Exact));
/// assert_eq!(TokenCounting::default(), TokenCounting::Auto);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenCounting {
    /// The model's own encoder when this build has it, else the estimate.
    #[default]
    Auto,
    /// The model's own encoder, or the run is refused.
    Exact,
    /// The calibrated estimate, even where an encoder exists.
    Estimate,
}

impl TokenCounting {
    /// The default.
    pub fn is_auto(&self) -> bool {
        *self == Self::Auto
    }
}

impl std::str::FromStr for TokenCounting {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "exact" => Ok(Self::Exact),
            "estimate" => Ok(Self::Estimate),
            other => Err(format!(
                "{other:?}: expected \"auto\", \"exact\" or \"estimate\""
            )),
        }
    }
}

fn yes() -> bool {
    true
}

impl Default for ContextSettings {
    fn default() -> Self {
        Self {
            max_tokens: None,
            assemble: true,
            tokens: TokenCounting::Auto,
        }
    }
}
