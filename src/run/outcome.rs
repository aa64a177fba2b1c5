//! How a run ended, and the one place that maps it to a process exit code.

use serde::{Deserialize, Serialize};

use crate::provider::ProviderErrorKind;

/// How a run ended. Declared whole from the start (SPEC §3); new variants may come, so
/// match with a wildcard. Exit codes and whether `resume` continues the run (as
/// [`RunOutcome::exit_code`] and [`RunOutcome::is_resumable`] say):
///
/// | outcome | exit | resumable |
/// |---|---|---|
/// | `Success` | 0 | no |
/// | `VerificationFailed`, `StepCapReached` | 1 | no |
/// | `TimeBudgetExceeded`, `TokenBudgetExceeded`, `CostBudgetExceeded`, `Stalled`, `ContextOverflow` | 3 | no |
/// | `Escalated`, `McpRequiredServerFailed` | 4 | when `retryable` |
/// | `AwaitingApproval` | 5 | yes |
/// | `Cancelled` | 130 | yes |
///
/// Two exits are not outcomes but [`RunError`](super::RunError)s: 2, a usage or
/// configuration error (nothing ran), and 70 ([`EXIT_INTERNAL`]), an internal failure
/// of the harness (its store failing or replaced underneath, its own I/O), resumable
/// where the store file still exists ([`RunError::is_resumable`](super::RunError::is_resumable)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunOutcome {
    /// Every criterion verified.
    Success,
    /// Verification attempts (or the step cap) ran out with a criterion failing.
    VerificationFailed {
        /// Labels of the criteria that failed last.
        failed: Vec<String>,
    },
    /// The step budget ran out before the model said it was done.
    StepCapReached,
    /// The wall-clock budget ran out.
    TimeBudgetExceeded,
    /// The token budget ran out.
    TokenBudgetExceeded,
    /// The cost budget ran out.
    CostBudgetExceeded,
    /// The agent repeated itself past its replans.
    Stalled,
    /// The conversation no longer fits the context window.
    ContextOverflow,
    /// A provider failure that retry and fallback could not absorb.
    Escalated {
        /// The failure's kind.
        kind: ProviderErrorKind,
        /// Whether the kind was retryable (retries ran out) or not (failed at once).
        retryable: bool,
    },
    /// An MCP server marked required failed.
    McpRequiredServerFailed {
        /// The server.
        server: String,
    },
    /// A decision is pending; resume once it is made.
    AwaitingApproval {
        /// The pending request.
        request_id: String,
    },
    /// Cancelled by the operator (Ctrl-C) or an observer; resumable.
    Cancelled,
}

impl RunOutcome {
    /// The process exit code (SPEC §3's table; 2 is for configuration errors, which
    /// are not outcomes).
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Success => 0,
            Self::VerificationFailed { .. } | Self::StepCapReached => 1,
            Self::TimeBudgetExceeded
            | Self::TokenBudgetExceeded
            | Self::CostBudgetExceeded
            | Self::Stalled
            | Self::ContextOverflow => 3,
            Self::Escalated { .. } | Self::McpRequiredServerFailed { .. } => 4,
            Self::AwaitingApproval { .. } => 5,
            Self::Cancelled => 130,
        }
    }

    /// Stable snake_case name (`verification_failed`…).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::VerificationFailed { .. } => "verification_failed",
            Self::StepCapReached => "step_cap_reached",
            Self::TimeBudgetExceeded => "time_budget_exceeded",
            Self::TokenBudgetExceeded => "token_budget_exceeded",
            Self::CostBudgetExceeded => "cost_budget_exceeded",
            Self::Stalled => "stalled",
            Self::ContextOverflow => "context_overflow",
            Self::Escalated { .. } => "escalated",
            Self::McpRequiredServerFailed { .. } => "mcp_required_server_failed",
            Self::AwaitingApproval { .. } => "awaiting_approval",
            Self::Cancelled => "cancelled",
        }
    }

    /// Whether `resume` may continue a run that ended this way: a pending decision, a
    /// cancel, or a provider failure whose kind may pass (retries ran out on a
    /// rate limit, an outage, a cut connection), which a later session may get past.
    pub fn is_resumable(&self) -> bool {
        matches!(
            self,
            Self::AwaitingApproval { .. }
                | Self::Cancelled
                | Self::Escalated {
                    retryable: true,
                    ..
                }
        )
    }
}

/// Exit code for a usage or configuration error (nothing ran).
pub const EXIT_USAGE: i32 = 2;

/// Exit code for an internal failure of the harness (`EX_SOFTWARE`): its store failing
/// or replaced underneath, an I/O error of its own. Not an outcome — the run did not
/// end, its record did — so it is [`RunError::exit_code`](super::RunError::exit_code),
/// and the run is resumable while its store file exists.
pub const EXIT_INTERNAL: i32 = 70;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_table_matches_the_spec() {
        let table = [
            (RunOutcome::Success, 0),
            (RunOutcome::VerificationFailed { failed: vec![] }, 1),
            (RunOutcome::StepCapReached, 1),
            (RunOutcome::TimeBudgetExceeded, 3),
            (RunOutcome::TokenBudgetExceeded, 3),
            (RunOutcome::CostBudgetExceeded, 3),
            (RunOutcome::Stalled, 3),
            (RunOutcome::ContextOverflow, 3),
            (
                RunOutcome::Escalated {
                    kind: ProviderErrorKind::Auth,
                    retryable: false,
                },
                4,
            ),
            (
                RunOutcome::McpRequiredServerFailed {
                    server: "fs".into(),
                },
                4,
            ),
            (
                RunOutcome::AwaitingApproval {
                    request_id: "r1".into(),
                },
                5,
            ),
            (RunOutcome::Cancelled, 130),
        ];
        assert!(
            table.iter().all(|(_, c)| *c != EXIT_INTERNAL),
            "an internal failure has its own code"
        );
        for (o, code) in table {
            assert_eq!(o.exit_code(), code, "{o:?}");
            let json = serde_json::to_string(&o).unwrap();
            assert!(json.contains(o.name()), "{json}");
            assert_eq!(serde_json::from_str::<RunOutcome>(&json).unwrap(), o);
        }
    }

    #[test]
    fn a_failed_record_exits_70_and_says_whether_it_can_be_resumed() {
        use crate::run::RunError;
        use crate::store::StoreError;
        let lost = RunError::Recording {
            run_id: 3,
            source: StoreError::RecordsLost {
                run_id: 3,
                count: 1,
                what: "policy event",
                first: "disk full".into(),
            },
        };
        assert_eq!((lost.exit_code(), lost.is_resumable()), (70, true));
        let gone = RunError::Recording {
            run_id: 3,
            source: StoreError::Replaced {
                path: "/s.db".into(),
            },
        };
        assert_eq!((gone.exit_code(), gone.is_resumable()), (70, false));
        let busy = RunError::WorkspaceBusy {
            path: "/w".into(),
            holder: "run 1 (pid 2)".into(),
        };
        assert_eq!(busy.exit_code(), EXIT_USAGE);
    }
}
