//! The model call of a step: the request assembled from the history under the context
//! budget, then the provider chain with retries, under the budgets. A context overflow
//! is answered once by assembling again, harder; a second one ends the run
//! `ContextOverflow`.

use super::environment::policy_event;
use super::{Session, StepEnd};
use crate::context::ContextRunner;
use crate::contract::TaskContract;
use crate::provider::{
    ChainAttempt, ChainError, Completion, CompletionRequest, Provider, ProviderError,
    complete_chain,
};
use crate::run::events::RunEvent;
use crate::run::outcome::RunOutcome;
use crate::run::setup;
use crate::store::ProviderAttempt;

/// The context assembler for a run: its settings, and the primary provider's model
/// (tokenizer family, context window) and output cap.
pub(super) fn context_runner(contract: &TaskContract, provider: &dyn Provider) -> ContextRunner {
    let max_out = contract
        .providers
        .first()
        .map_or(8192, |s| s.max_output_tokens);
    ContextRunner::new(&contract.context, &provider.identity(), max_out)
}

impl Session<'_> {
    /// Assembles the step's request from the full history and calls the model; on a
    /// context overflow compacts harder and calls once more. Every assembly is recorded
    /// in `context_events`, with the usage the provider reported for it.
    pub(super) async fn call_assembled(
        &mut self,
        step: u32,
    ) -> Result<(Completion, Option<String>), StepEnd> {
        let full = self.request();
        let mut harder = false;
        loop {
            let (assembly, decisions) = self
                .conversation
                .context
                .prepare(
                    &full,
                    &self.opts.tools,
                    &self.tools.ctx,
                    self.tools.policy.gate.as_ref(),
                    harder,
                )
                .await;
            // The re-reads' policy decisions are on record like every other.
            let events = decisions
                .iter()
                .map(|d| policy_event(self.run.id, step, d))
                .collect();
            self.store.record_policy_events(events).await;
            let result = self.call_model(step, &assembly.request).await;
            let usage = result.as_ref().ok().map(|(c, _)| c.usage);
            let mut events =
                self.conversation
                    .context
                    .events(self.run.id, step, &assembly, usage.as_ref());
            let overflow = matches!(result, Err(StepEnd::Outcome(RunOutcome::ContextOverflow)));
            let retry = overflow && !harder && self.conversation.context.can_compact();
            if retry {
                events.push(ContextRunner::overflow_event(self.run.id, step, &assembly));
            }
            if let Err(e) = self.store.record_context_events(events).await {
                tracing::warn!(run_id = self.run.id, step, error = %e, "could not record context events");
            }
            if !retry {
                return result;
            }
            harder = true;
        }
    }

    /// Calls the provider chain with retries, under the time budget and the cancel
    /// token; records every failed attempt.
    pub(super) async fn call_model(
        &mut self,
        step: u32,
        request: &CompletionRequest,
    ) -> Result<(Completion, Option<String>), StepEnd> {
        let deadline = self.halt.deadline();
        let chain: Vec<&dyn Provider> = std::iter::once(self.provider)
            .chain(
                self.opts
                    .fallbacks
                    .iter()
                    .map(|p| p.as_ref() as &dyn Provider),
            )
            .collect();
        let names: Vec<String> = chain
            .iter()
            .map(|p| {
                let id = p.identity();
                format!("{}/{}", id.kind, id.model)
            })
            .collect();
        let mut attempts = Vec::new();
        let mut on_attempt = |a: &ChainAttempt| attempts.push(a.clone());
        let call = complete_chain(
            &chain,
            request,
            &self.run.contract.retry,
            deadline,
            &mut on_attempt,
        );
        // The chain sleeps no retry past the deadline; the halt ends the call itself.
        let outcome = self.halt.guard(call).await;
        self.record_attempts(step, &names, &attempts).await;
        let (reply, served) = match outcome {
            Err(why) => return Err(StepEnd::Outcome(super::halted(why))),
            Ok(Err(ChainError::Deadline)) => {
                return Err(StepEnd::Outcome(RunOutcome::TimeBudgetExceeded));
            }
            Ok(Err(ChainError::Escalated { error, retryable })) => {
                let outcome = self
                    .escalated(step, &names, request, &error, retryable)
                    .await;
                return Err(StepEnd::Outcome(outcome));
            }
            Ok(Ok(r)) => r,
        };
        let served_by = names.get(served).cloned();
        Ok((reply, served_by))
    }

    /// A provider failure the chain escalated: the redirect it refused and the
    /// failure itself on record; the outcome it ends the step with.
    async fn escalated(
        &self,
        step: u32,
        names: &[String],
        request: &CompletionRequest,
        error: &ProviderError,
        retryable: bool,
    ) -> RunOutcome {
        tracing::warn!(run_id = self.run.id, step, error = %error, "provider call failed");
        if let Some(target) = &error.redirect {
            self.record_refused_redirect(step, target).await;
        }
        let provider = names
            .iter()
            .find(|n| n.starts_with(&format!("{}/", error.provider)))
            .or(names.last())
            .cloned()
            .unwrap_or_default();
        let escalated = ProviderAttempt {
            run_id: self.run.id,
            step,
            provider,
            attempt: 0,
            kind: error.kind.as_str().to_string(),
            status: error.status,
            delay_ms: 0,
            next: "escalate".into(),
            code: error.code.clone(),
            request_bytes: serde_json::to_vec(request).ok().map(|b| b.len() as u64),
        };
        self.store.record_provider_attempts(vec![escalated]).await;
        if error.kind == crate::provider::ProviderErrorKind::ContextOverflow {
            RunOutcome::ContextOverflow
        } else {
            RunOutcome::Escalated {
                kind: error.kind,
                retryable,
            }
        }
    }

    /// A redirect the provider client refused: a `net` decision, recorded and told to
    /// the observer like every other (best effort).
    async fn record_refused_redirect(&self, step: u32, target: &str) {
        let d = setup::redirect_decision(target);
        self.emit_decision(step, &d);
        self.store
            .record_policy_events(vec![policy_event(self.run.id, step, &d)])
            .await;
    }

    /// Records the failed attempts of a step's model call (best effort: a record that
    /// cannot be written must not end the run) and tells the observer.
    /// Each attempt is written before the observer hears of it, as one call each:
    /// retries are rare, and an observer reading the store sees what it is told of.
    pub(super) async fn record_attempts(
        &self,
        step: u32,
        names: &[String],
        attempts: &[ChainAttempt],
    ) {
        for a in attempts {
            let provider = names.get(a.provider_index).cloned().unwrap_or_default();
            let record = ProviderAttempt {
                run_id: self.run.id,
                step,
                provider: provider.clone(),
                attempt: a.attempt.attempt,
                kind: a.attempt.kind.as_str().to_string(),
                status: a.attempt.status,
                delay_ms: a.attempt.delay_ms,
                next: a.next.to_string(),
                code: a.attempt.code.clone(),
                request_bytes: None,
            };
            self.store.record_provider_attempts(vec![record]).await;
            self.emit(RunEvent::ProviderRetry {
                run_id: self.run.id,
                step,
                provider,
                attempt: a.attempt.attempt,
                kind: a.attempt.kind,
                delay_ms: a.attempt.delay_ms,
                next: a.next.to_string(),
            });
        }
    }
}
