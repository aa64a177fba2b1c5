//! Answering the policy's asks: a decision on record, an approver, or a deferral.

use super::Session;
use crate::halt::HaltReason;
use crate::policy::{Action, Approval, ApprovalRequest};
use crate::provider::Completion;
use crate::run::outcome::RunOutcome;
use crate::store::ApprovalRecord;

/// How an ask was answered.
pub(super) enum AskAnswer {
    /// Run it (with these arguments, possibly modified by the approver).
    Approved {
        input: serde_json::Value,
        remember: crate::policy::Remember,
    },
    /// Do not run it; the reason goes to the model.
    Denied(String),
}

pub(super) fn describe(actions: &[Action]) -> String {
    actions
        .iter()
        .map(|a| format!("{} {}", a.act.as_str(), a.target))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Session<'_> {
    /// Answers an `ask`: a decision already on record (an operator's `approve` before
    /// this resume), else the approver, else — nobody to ask — a deferral that ends the
    /// run `AwaitingApproval`, never a hang.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn resolve_ask(
        &self,
        step: u32,
        id: &str,
        name: &str,
        input: &serde_json::Value,
        input_json: &str,
        asked: &[Action],
        reply: &Completion,
    ) -> Result<AskAnswer, RunOutcome> {
        let decided = self
            .store
            .approvals(self.run.id)
            .await
            .unwrap_or_default()
            .into_iter()
            .find(|a| {
                a.step == step
                    && a.tool == name
                    && a.input_json == input_json
                    && a.status != "pending"
            });
        if let Some(a) = decided {
            return Ok(if a.status == "allowed" {
                AskAnswer::Approved {
                    input: input.clone(),
                    remember: a.remember,
                }
            } else {
                AskAnswer::Denied(a.reason.unwrap_or_else(|| "no reason given".into()))
            });
        }
        let request_id = format!("{step}-{id}");
        let request = ApprovalRequest {
            id: request_id.clone(),
            action: asked[0].clone(),
            detail: format!(
                "{name} {}",
                crate::tools::bound_text(input_json.to_string(), 2000)
            ),
        };
        let answer = match &self.opts.approver {
            // The prompt waits under the halt: Ctrl-C ends it (the call is asked
            // again on resume); the deadline defers it, on record for `approve`.
            Some(a) => match self.halt.guard(a.decide(&request)).await {
                Ok(answer) => answer,
                Err(HaltReason::Cancelled) => return Err(RunOutcome::Cancelled),
                Err(HaltReason::Deadline) => {
                    self.defer(step, id, name, input_json, asked, reply, &request_id)
                        .await;
                    return Err(RunOutcome::TimeBudgetExceeded);
                }
            },
            None => Approval::Defer,
        };
        match answer {
            Approval::Approve { modified, remember } => Ok(AskAnswer::Approved {
                input: modified.unwrap_or_else(|| input.clone()),
                remember,
            }),
            Approval::Deny { reason } => Ok(AskAnswer::Denied(reason)),
            Approval::Defer => {
                self.defer(step, id, name, input_json, asked, reply, &request_id)
                    .await;
                Err(RunOutcome::AwaitingApproval { request_id })
            }
        }
    }

    /// Puts an unanswered ask on record as `pending`, for `io-harness approve`.
    #[allow(clippy::too_many_arguments)]
    async fn defer(
        &self,
        step: u32,
        id: &str,
        name: &str,
        input_json: &str,
        asked: &[Action],
        reply: &Completion,
        request_id: &str,
    ) {
        let record = ApprovalRecord {
            run_id: self.run.id,
            request_id: request_id.to_string(),
            step,
            call_id: id.to_string(),
            tool: name.to_string(),
            input_json: input_json.to_string(),
            action_json: serde_json::to_string(&asked[0]).unwrap_or_default(),
            reply_json: serde_json::to_string(reply).unwrap_or_default(),
            status: "pending".into(),
            reason: None,
            remember: crate::policy::Remember::No,
        };
        if let Err(e) = self.store.record_approval_request(record).await {
            tracing::error!(error = %e, "could not record the approval request");
        }
    }
}
