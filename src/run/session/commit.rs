//! The commit phase of a step: the step's messages, usage and counters written as one
//! record, atomically, then taken into the session. Until this commit nothing of the
//! step is on record as done; a run killed before it resumes from the previous step.

use super::step::{ModelTurn, StepClock, ToolRound};
use super::{Session, StepEnd, ms};
use crate::provider::{ContentBlock, Message, Role};
use crate::run::events::RunEvent;
use crate::store::StepRecord;

impl Session<'_> {
    /// Commits the step: the reply and the message answering it (tool results,
    /// observations, resume notes), the usage added to the totals, the record
    /// written; then the policy layers saved, the history extended, the observer told.
    pub(super) async fn commit(
        &mut self,
        clock: StepClock,
        turn: ModelTurn,
        round: ToolRound,
    ) -> Result<(), StepEnd> {
        let step = clock.step;
        let mut results = round.results;
        for note in std::mem::take(&mut self.carryover.notes) {
            results.push(ContentBlock::Text { text: note });
        }
        let mut added = vec![turn.reply.to_message()];
        if !results.is_empty() {
            added.push(Message {
                role: Role::User,
                content: results,
            });
        }
        let reply = &turn.reply;
        self.progress.totals.add(&reply.usage, &reply.cost);
        self.progress.state.elapsed_ms = ms(self.elapsed());
        let record = StepRecord {
            run_id: self.run.id,
            step,
            started_at_ms: clock.started_at_ms,
            duration_ms: ms(clock.started.elapsed()),
            model_ms: turn.model_ms,
            request_body: reply.request_body.clone(),
            request_hash: None,
            // The reply is the first of `added`: stored there, once.
            reply_json: String::new(),
            messages_json: serde_json::to_string(&added).unwrap_or_default(),
            usage_json: serde_json::to_string(&reply.usage).unwrap_or_default(),
            input_tokens: reply.usage.effective_uncached_input(),
            output_tokens: reply.usage.effective_output(),
            token_source: reply.usage.source().as_str().into(),
            estimated_input_tokens: reply.usage.estimate.map(|e| e.input_tokens),
            estimated_output_tokens: reply.usage.estimate.map(|e| e.output_tokens),
            model_call: reply.model_call,
            cached_input_tokens: reply.usage.cached_input_tokens,
            cost_usd: reply.cost.usd,
            cost_source: serde_json::to_value(reply.cost.source)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| "unknown".into()),
            tool_calls: round.records,
            policy_events: round.policy_events,
            state_json: serde_json::to_string(&self.progress.state).unwrap_or_default(),
            provider: turn.served_by,
            stop_reason: Some(stop_label(&reply.stop_reason)),
        };
        crate::failpoint::hit("step.before_commit", step);
        if let Err(e) = self.store.commit_step(record).await {
            // The step's effects are on disk but not on record: stop rather than run on
            // with a trace that no longer matches the workspace. The run stays
            // `running` in the store, so `resume` continues from the last committed
            // step once the store is writable again, and the intent journal keeps the
            // writes of this step from being applied twice.
            tracing::error!(run_id = self.run.id, step, error = %e, "step commit failed");
            return Err(StepEnd::Store(e));
        }
        crate::failpoint::hit("step.after_commit", step);
        if self.run.depth > 0 {
            crate::failpoint::hit("agent.child_after_commit", step);
        }
        self.save_policy().await;
        self.conversation.messages.extend(added);
        self.carryover.journal.clear();
        self.emit(RunEvent::StepCommitted {
            run_id: self.run.id,
            step,
            total_tokens: self.progress.totals.total_tokens(),
            cost_usd: self.progress.totals.cost_usd(),
        });
        Ok(())
    }
}

/// The stop reason as the store keeps it: the neutral names, or the provider's own
/// word for anything else.
fn stop_label(r: &crate::provider::StopReason) -> String {
    use crate::provider::StopReason;
    match r {
        StopReason::EndTurn => "end_turn".into(),
        StopReason::ToolUse => "tool_use".into(),
        StopReason::MaxTokens => "max_tokens".into(),
        StopReason::Other(s) => s.clone(),
    }
}
