//! The approval gate: who answers an `ask`.
//!
//! The policy says *that* a human must decide; an [`Approver`] is that human (or a
//! stand-in for one). The answer is an [`Approval`] — the name `Decision` is taken by
//! allow/ask/deny. Approving may change the call's input (`modified`) and may be
//! remembered as a rule ([`Policy::remember`](super::Policy::remember)); denying
//! carries a reason shown to the model; deferring ends the run awaiting a decision
//! made later, out of band.

use std::fmt;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::{Action, Remember};

/// What a human is asked to decide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// Stable id, so a deferred request can be answered later by id.
    pub id: String,
    /// The action the policy asked about.
    pub action: Action,
    /// What to show the human: the diff of a write, the argv of a command.
    pub detail: String,
}

impl ApprovalRequest {
    /// A request.
    pub fn new(id: impl Into<String>, action: Action, detail: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            action,
            detail: detail.into(),
        }
    }
}

/// The answer to an [`ApprovalRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Approval {
    /// Go ahead.
    Approve {
        /// A replacement for the tool call's input, when the human edited it.
        modified: Option<serde_json::Value>,
        /// Remember as a rule for the rest of the run: the exact action, or (the
        /// operator's explicit widening) a command's program with any arguments.
        remember: Remember,
    },
    /// Refused; the reason is shown to the model.
    Deny {
        /// Why.
        reason: String,
    },
    /// Not now: the run ends awaiting this request and resumes once it is answered.
    Defer,
}

impl Approval {
    /// Approve once, unmodified, not remembered.
    pub fn approve() -> Self {
        Self::Approve {
            modified: None,
            remember: Remember::No,
        }
    }

    /// Deny with a reason.
    pub fn deny(reason: impl Into<String>) -> Self {
        Self::Deny {
            reason: reason.into(),
        }
    }
}

/// Whoever answers asks. Object-safe, so a run holds an `Arc<dyn Approver>`.
///
/// ```
/// use io_harness::policy::{Act, Action, Approval, ApprovalRequest, Approver, Callback};
/// let approver = Callback::new(|r: &ApprovalRequest| {
///     if r.action.target == "cargo" { Approval::approve() } else { Approval::deny("only cargo") }
/// });
/// let req = ApprovalRequest::new("r1", Action::new(Act::Exec, "curl"), "curl example.com");
/// let answer = futures_util::FutureExt::now_or_never(approver.decide(&req)).unwrap();
/// assert_eq!(answer, Approval::deny("only cargo"));
/// ```
pub trait Approver: Send + Sync {
    /// Answers one request. The future may wait for a human; it must not hold the
    /// request borrowed (clone what it needs).
    fn decide(&self, request: &ApprovalRequest) -> BoxFuture<'_, Approval>;
}

/// Approves everything once (nothing remembered). For trusted, unattended runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl Approver for AllowAll {
    fn decide(&self, _request: &ApprovalRequest) -> BoxFuture<'_, Approval> {
        Box::pin(std::future::ready(Approval::approve()))
    }
}

/// Denies everything, saying so to the model.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyAll;

impl Approver for DenyAll {
    fn decide(&self, _request: &ApprovalRequest) -> BoxFuture<'_, Approval> {
        Box::pin(std::future::ready(Approval::deny(
            "refused: no approval is given in this run",
        )))
    }
}

/// Defers everything: the run ends awaiting a decision made later. What an ask
/// becomes when no terminal and no policy can answer it, so it never hangs.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeferAll;

impl Approver for DeferAll {
    fn decide(&self, _request: &ApprovalRequest) -> BoxFuture<'_, Approval> {
        Box::pin(std::future::ready(Approval::Defer))
    }
}

/// An approver made from a closure, for embedders.
pub struct Callback<F> {
    f: F,
}

impl<F> Callback<F>
where
    F: Fn(&ApprovalRequest) -> Approval + Send + Sync,
{
    /// Wraps `f`; it is called once per request and must not block for long (it runs
    /// on the run's task). Implement [`Approver`] directly to wait asynchronously.
    pub fn new(f: F) -> Self {
        Self { f }
    }
}

impl<F> fmt::Debug for Callback<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Callback")
    }
}

impl<F> Approver for Callback<F>
where
    F: Fn(&ApprovalRequest) -> Approval + Send + Sync,
{
    fn decide(&self, request: &ApprovalRequest) -> BoxFuture<'_, Approval> {
        Box::pin(std::future::ready((self.f)(request)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Act;
    use futures_util::FutureExt;
    use std::sync::Arc;

    fn answer(a: &dyn Approver) -> Approval {
        let req = ApprovalRequest::new("1", Action::new(Act::Write, "a.txt"), "+hello");
        a.decide(&req).now_or_never().expect("ready at once")
    }

    #[test]
    fn builtins_answer_as_named_and_are_object_safe() {
        let all: Vec<Arc<dyn Approver>> = vec![
            Arc::new(AllowAll),
            Arc::new(DenyAll),
            Arc::new(DeferAll),
            Arc::new(Callback::new(|r: &ApprovalRequest| Approval::Approve {
                modified: Some(serde_json::json!({ "path": r.action.target })),
                remember: Remember::Exact,
            })),
        ];
        let got: Vec<Approval> = all.iter().map(|a| answer(a.as_ref())).collect();
        assert_eq!(got[0], Approval::approve());
        assert!(matches!(&got[1], Approval::Deny { reason } if !reason.is_empty()));
        assert_eq!(got[2], Approval::Defer);
        assert_eq!(
            got[3],
            Approval::Approve {
                modified: Some(serde_json::json!({ "path": "a.txt" })),
                remember: Remember::Exact
            }
        );
    }

    #[test]
    fn approvals_and_requests_round_trip_as_json() {
        for a in [Approval::approve(), Approval::deny("no"), Approval::Defer] {
            let j = serde_json::to_string(&a).unwrap();
            assert_eq!(serde_json::from_str::<Approval>(&j).unwrap(), a);
        }
        let req = ApprovalRequest::new("7", Action::new(Act::Exec, "git"), "git push");
        let j = serde_json::to_value(&req).unwrap();
        assert_eq!(j["action"]["act"], "exec");
        assert_eq!(serde_json::from_value::<ApprovalRequest>(j).unwrap(), req);
    }
}
