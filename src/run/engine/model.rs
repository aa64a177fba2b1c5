//! The model call of a step: the request assembled from the history under the context
//! budget, then the provider chain with retries, under the budgets. A context overflow
//! is answered once by assembling again, harder; a second one ends the run
//! `ContextOverflow`.

use super::*;
use crate::context::ContextRunner;

/// The context assembler for a run: its settings, and the primary provider's model
/// (tokenizer family, context window) and output cap.
pub(super) fn context_runner(contract: &TaskContract, provider: &dyn Provider) -> ContextRunner {
    let max_out = contract
        .providers
        .first()
        .map_or(8192, |s| s.max_output_tokens);
    ContextRunner::new(&contract.context, &provider.identity(), max_out)
}

impl Engine<'_> {
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
                .context
                .prepare(
                    &full,
                    &self.opts.tools,
                    &self.ctx,
                    self.policy.as_ref(),
                    harder,
                )
                .await;
            // The re-reads' policy decisions are on record like every other.
            for d in &decisions {
                let _ = self.store.record_policy_event(&PolicyEvent {
                    run_id: self.run_id,
                    step,
                    act: d.action.act.as_str().into(),
                    target: d.action.target.clone(),
                    decision: d.decision.as_str().into(),
                    rule: d.rule.clone(),
                    layer: d.layer.clone(),
                });
            }
            let result = self.call_model(step, &assembly.request).await;
            let usage = result.as_ref().ok().map(|(c, _)| c.usage);
            let mut events = self
                .context
                .events(self.run_id, step, &assembly, usage.as_ref());
            let overflow = matches!(result, Err(StepEnd::Outcome(RunOutcome::ContextOverflow)));
            let retry = overflow && !harder && self.context.can_compact();
            if retry {
                events.push(ContextRunner::overflow_event(self.run_id, step, &assembly));
            }
            if let Err(e) = self.store.record_context_events(&events) {
                tracing::warn!(run_id = self.run_id, step, error = %e, "could not record context events");
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
        let remaining = budget::remaining(&self.contract.budget, self.elapsed());
        let deadline = remaining.map(|d| tokio::time::Instant::now() + d);
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
            &self.contract.retry,
            deadline,
            &mut on_attempt,
        );
        let outcome = tokio::select! {
            _ = self.opts.cancel.cancelled() => None,
            r = async {
                match remaining {
                    Some(d) => tokio::time::timeout(d, call).await.unwrap_or(Err(ChainError::Deadline)),
                    None => call.await,
                }
            } => Some(r),
        };
        self.record_attempts(step, &names, &attempts);
        let (reply, served) = match outcome {
            None => return Err(StepEnd::Outcome(RunOutcome::Cancelled)),
            Some(Err(ChainError::Deadline)) => {
                return Err(StepEnd::Outcome(RunOutcome::TimeBudgetExceeded));
            }
            Some(Err(ChainError::Escalated { error, retryable })) => {
                tracing::warn!(run_id = self.run_id, step, error = %error, "provider call failed");
                if let Some(target) = &error.redirect {
                    self.record_refused_redirect(step, target);
                }
                let provider = names
                    .iter()
                    .find(|n| n.starts_with(&format!("{}/", error.provider)))
                    .or(names.last())
                    .cloned()
                    .unwrap_or_default();
                let _ = self.store.record_provider_attempt(&ProviderAttempt {
                    run_id: self.run_id,
                    step,
                    provider,
                    attempt: 0,
                    kind: error.kind.as_str().to_string(),
                    status: error.status,
                    delay_ms: 0,
                    next: "escalate".into(),
                    code: error.code.clone(),
                    request_bytes: serde_json::to_vec(request).ok().map(|b| b.len() as u64),
                });
                return Err(StepEnd::Outcome(
                    if error.kind == crate::provider::ProviderErrorKind::ContextOverflow {
                        RunOutcome::ContextOverflow
                    } else {
                        RunOutcome::Escalated {
                            kind: error.kind,
                            retryable,
                        }
                    },
                ));
            }
            Some(Ok(r)) => r,
        };
        let served_by = names.get(served).cloned();
        Ok((reply, served_by))
    }

    /// A redirect the provider client refused: a `net` decision, recorded and told to
    /// the observer like every other (best effort).
    fn record_refused_redirect(&self, step: u32, target: &str) {
        let d = setup::redirect_decision(target);
        self.emit(RunEvent::PolicyDecision {
            run_id: self.run_id,
            step,
            act: d.action.act.as_str().into(),
            target: d.action.target.clone(),
            decision: d.decision.as_str().into(),
            layer: d.layer.clone(),
        });
        let _ = self.store.record_policy_event(&PolicyEvent {
            run_id: self.run_id,
            step,
            act: d.action.act.as_str().into(),
            target: d.action.target,
            decision: d.decision.as_str().into(),
            rule: d.rule,
            layer: d.layer,
        });
    }

    /// Records the failed attempts of a step's model call (best effort: a record that
    /// cannot be written must not end the run) and tells the observer.
    pub(super) fn record_attempts(&self, step: u32, names: &[String], attempts: &[ChainAttempt]) {
        for a in attempts {
            let provider = names.get(a.provider_index).cloned().unwrap_or_default();
            let _ = self.store.record_provider_attempt(&ProviderAttempt {
                run_id: self.run_id,
                step,
                provider: provider.clone(),
                attempt: a.attempt.attempt,
                kind: a.attempt.kind.as_str().to_string(),
                status: a.attempt.status,
                delay_ms: a.attempt.delay_ms,
                next: a.next.to_string(),
                code: a.attempt.code.clone(),
                request_bytes: None,
            });
            self.emit(RunEvent::ProviderRetry {
                run_id: self.run_id,
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
