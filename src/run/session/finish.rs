//! The end of a session: the outcome on record with the final diff and message, the
//! run's temporary state removed, the result for the caller.

use super::Session;
use crate::contract::WorkspaceMode;
use crate::policy::{Act, Action, Decision};
use crate::provider::{Message, Role};
use crate::run::events::RunEvent;
use crate::run::outcome::RunOutcome;
use crate::run::workdir;
use crate::run::{RunError, RunResult};
use crate::store::RunFinish;
use crate::verify;

impl Session<'_> {
    /// The agent's last non-empty message.
    fn final_message(&self) -> String {
        self.conversation
            .messages
            .iter()
            .rev()
            .filter(|m| m.role == Role::Assistant)
            .map(Message::text)
            .find(|t| !t.trim().is_empty())
            .unwrap_or_default()
    }

    /// Closes the MCP servers, records the outcome, cleans up and reports.
    ///
    /// An outcome that cannot be recorded — the write failed, a record of the run was
    /// lost earlier, or the store file is no longer the one written to (checked after
    /// the last write, so a store deleted after the last commit is seen) — is no
    /// result: the run ends with the store's error (which `run` and `resume` report as
    /// [`RunError::Recording`]) and keeps what a resume needs.
    pub(super) async fn finish(self, outcome: RunOutcome) -> Result<RunResult, RunError> {
        if let Some(m) = &self.tools.mcp {
            m.close();
        }
        // The servers' sessions are over: a repository one of them made is moved out
        // before anything reads the tree for the diff (or the operator's git does).
        if let Some(exec) = &self.tools.ctx.exec {
            exec.check_new_repos().await;
        }
        let dirs = &self.run.dirs;
        // Scoped: the judges are not `Send` and must not live across an await.
        let diff = {
            let gate = self.tools.policy.gate.clone();
            let denied = move |path: &str| {
                gate.decide(&Action::new(Act::Read, path.to_string()))
                    .decision
                    == Decision::Deny
            };
            let holds = |path: &str, bytes: &[u8]| {
                crate::policy::content_holds_credential(path, bytes).is_some()
            };
            let withhold = workdir::Withhold {
                path: &denied,
                content: &holds,
            };
            workdir::diff_against(&dirs.baseline, &dirs.work, &withhold)
                .unwrap_or_else(|e| format!("[diff unavailable: {e}]\n"))
        };
        let final_message = self.final_message();
        let fin = RunFinish {
            outcome: outcome.name().to_string(),
            outcome_json: serde_json::to_string(&outcome).unwrap_or_default(),
            final_message: Some(final_message.clone()),
            diff: Some(diff.clone()),
        };
        let recorded = match self.store.finish_run(self.run.id, fin).await {
            Ok(()) => self.store.sync().verify_file(),
            Err(e) => Err(e),
        };
        if recorded.is_ok() {
            self.end_session(outcome.name()).await;
        }
        // The run's gate directory and its dependency caches end with the session.
        if let Some(exec) = &self.tools.ctx.exec {
            verify::remove_gate_dir(exec);
        }
        if let Err(source) = recorded {
            tracing::error!(run_id = self.run.id, error = %source, "could not record the outcome");
            // A store error, as a failed commit's: a sub-agent's ends its parent's step
            // the same way, and `run`/`resume` name the run (`RunError::Recording`).
            return Err(RunError::Store(source));
        }
        // The in-place baseline is only needed while the run can go on; a copy is the
        // run's product and stays where `show` says it is.
        if self.run.contract.workspace == WorkspaceMode::InPlace && !outcome.is_resumable() {
            let _ = std::fs::remove_dir_all(&dirs.scratch);
        }
        self.emit(RunEvent::Finished {
            run_id: self.run.id,
            outcome: outcome.clone(),
        });
        let t = &self.progress.totals;
        Ok(RunResult {
            run_id: self.run.id,
            outcome,
            steps: t.steps,
            input_tokens: t.input_tokens,
            output_tokens: t.output_tokens,
            cached_input_tokens: t.cached_input_tokens,
            total_tokens: t.total_tokens(),
            estimated_tokens: t.estimated_tokens,
            lost_calls: t.lost_calls,
            cost_usd: t.cost_usd(),
            cost_unknown_steps: t.cost_unknown_steps,
            cost_estimated: t.cost_estimated,
            agent_steps: t.agent_steps,
            diff,
            final_message,
            work_dir: dirs.work.display().to_string(),
        })
    }

    /// Puts how this session ended on record, after the outcome (a live exporter's
    /// last pass, which follows the `Finished` event, sends the session's span).
    async fn end_session(&self, ended_as: &str) {
        let Some(ordinal) = self.progress.ordinal else {
            return;
        };
        let (run_id, at, ended_as) = (self.run.id, super::now_ms(), ended_as.to_string());
        if let Err(e) = self
            .store
            .call(move |s| s.end_run_session(run_id, ordinal, at, &ended_as))
            .await
        {
            tracing::warn!(run_id, error = %e, "could not record the session's end");
        }
    }
}
