//! The model call of a step: the request assembled from the history under the context
//! budget, then the provider chain with retries, under the budgets. A context overflow
//! is answered once by assembling again, harder; a second one ends the run
//! `ContextOverflow`.
//!
//! Every call is counted by the harness as well as by the provider: the assembled
//! request's tokens and the reply's, kept beside what the provider reported, so a
//! server that reports no usage still counts against `max_tokens`. The call is on
//! record (`model_calls`) before its request goes out; one whose reply is lost — an
//! attempt whose stream broke, a cancel or a kill in flight — counts its estimated
//! input, in this session or, for a kill, in the one that resumes the run.

use super::environment::policy_event;
use super::{Session, StepEnd};
use crate::context::ContextRunner;
use crate::contract::TaskContract;
use crate::provider::{
    ChainAttempt, ChainError, Completion, CompletionRequest, Provider, ProviderError, StepAt,
    TokenEstimate, complete_with_breaker,
};
use crate::run::events::RunEvent;
use crate::run::outcome::RunOutcome;
use crate::run::setup;
use crate::store::LostCall;
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
            let estimated_input = assembly.tokens_after;
            let family = self.conversation.context.family();
            let result = self
                .call_model(step, &assembly.request, estimated_input)
                .await
                .map(|(reply, served)| {
                    let output =
                        crate::context::tokens::estimate_message(&reply.to_message(), family);
                    let estimate = TokenEstimate {
                        input_tokens: estimated_input,
                        output_tokens: output,
                    };
                    (reply.with_estimate(estimate), served)
                });
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
        estimated_input: u64,
    ) -> Result<(Completion, Option<String>), StepEnd> {
        let deadline = self.halt.deadline();
        let (chain, names) = self.chain();
        // What each provider's call adds if its reply is lost.
        let lost_by: Vec<LostCall> = (0..chain.len())
            .map(|i| self.lost_call(&chain, i, estimated_input))
            .collect();
        let lost = lost_by[0];
        let call_row = self.open_call(step, &names, &lost).await;
        // Each failed attempt goes on record as it happens (its own time, and a crash
        // before the step commits keeps it), written beside the call while it waits.
        let (sent, mut failed) = tokio::sync::mpsc::unbounded_channel::<ChainAttempt>();
        // The breaker is taken out for the call and put back after it, whatever the
        // call's end: a failed probe counts even when the step goes no further.
        let mut breaker = self.progress.state.breaker;
        let breaker_ref = &mut breaker;
        let call = async {
            let mut on_attempt = move |a: &ChainAttempt| {
                let _ = sent.send(a.clone());
            };
            let call = complete_with_breaker(
                &chain,
                request,
                &self.run.contract.retry,
                deadline,
                breaker_ref,
                StepAt {
                    step,
                    now_ms: u64::try_from(super::now_ms()).unwrap_or(0),
                },
                &mut on_attempt,
            );
            // The chain sleeps no retry past the deadline; the halt ends the call itself.
            self.halt.guard(call).await
        };
        let writer = async {
            let mut attempts = Vec::new();
            while let Some(a) = failed.recv().await {
                self.record_attempt(step, &names, &a, estimated_input).await;
                attempts.push(a);
            }
            attempts
        };
        let (outcome, attempts) = tokio::join!(call, writer);
        self.progress.state.breaker = breaker;
        for a in attempts.iter().filter(|a| a.attempt.reply_lost) {
            let i = a.provider_index.min(lost_by.len() - 1);
            self.count_lost(step, &names[i], &lost_by[i]).await;
        }
        let (mut reply, served) = match outcome {
            // Dropped in flight (or in a backoff): counted as a lost reply.
            Err(why) => {
                self.close_call(call_row, Some(&lost)).await;
                return Err(StepEnd::Outcome(super::halted(why)));
            }
            Ok(Err(ChainError::Deadline)) => {
                self.close_call(call_row, Some(&lost)).await;
                return Err(StepEnd::Outcome(RunOutcome::TimeBudgetExceeded));
            }
            Ok(Err(ChainError::Escalated {
                error,
                retryable,
                attempts,
                provider_index,
            })) => {
                // The provider that failed last, by its place in the chain (by kind, a
                // fallback of the primary's kind was recorded under the primary's name).
                let last = provider_index.min(names.len().saturating_sub(1));
                self.close_call(call_row, error.reply_lost.then_some(&lost_by[last]))
                    .await;
                let failed = Failed {
                    error: &error,
                    retryable,
                    attempt: attempts,
                    provider: names.get(last).cloned().unwrap_or_default(),
                };
                let outcome = self.escalated(step, request, failed, estimated_input).await;
                return Err(StepEnd::Outcome(outcome));
            }
            Ok(Ok(r)) => r,
        };
        reply.model_call = call_row;
        let served_by = names.get(served).cloned();
        if let Some(limit) = reply.cut_at {
            let by = served_by.clone().unwrap_or_default();
            self.record_cut(step, by, (limit, reply.cut_status), estimated_input)
                .await;
        }
        Ok((reply, served_by))
    }

    /// The providers in the order the chain tries them before the breaker reorders
    /// them (the primary, then the fallbacks), and their `kind/model` names.
    fn chain(&self) -> (Vec<&dyn Provider>, Vec<String>) {
        let chain: Vec<&dyn Provider> = std::iter::once(self.provider)
            .chain(
                self.opts
                    .fallbacks
                    .iter()
                    .map(|p| p.as_ref() as &dyn Provider),
            )
            .collect();
        let names = chain
            .iter()
            .map(|p| {
                let id = p.identity();
                format!("{}/{}", id.kind, id.model)
            })
            .collect();
        (chain, names)
    }

    /// What a call to provider `index` of `chain` adds when its reply is lost: the
    /// request's estimated input, priced when the contract knows the model's price.
    fn lost_call(&self, chain: &[&dyn Provider], index: usize, input: u64) -> LostCall {
        let model = chain.get(index).map(|p| p.identity().model);
        let usage = crate::provider::Usage {
            estimate: Some(TokenEstimate {
                input_tokens: input,
                output_tokens: 0,
            }),
            ..Default::default()
        };
        let cost_usd = model
            .and_then(|m| self.run.contract.price_table().get(&m).copied())
            .map(|p| p.cost(&usage));
        LostCall {
            input_tokens: input,
            cost_usd,
        }
    }

    /// Puts the call on record before its request goes out (best effort: a store that
    /// cannot take it must not stop the call; the budget then misses it only if the
    /// process dies in flight).
    async fn open_call(&self, step: u32, names: &[String], lost: &LostCall) -> Option<i64> {
        let (run_id, provider, l) = (self.run.id, names[0].clone(), *lost);
        self.store
            .call(move |s| {
                s.record_model_call(run_id, step, &provider, l.input_tokens, l.cost_usd, "sent")
            })
            .await
            .map_err(
                |e| tracing::warn!(run_id, step, error = %e, "could not record the model call"),
            )
            .ok()
    }

    /// Closes a call that produced no reply: `lost` (its estimate counted now) when
    /// its request may have been processed, else `failed`.
    pub(super) async fn close_call(&mut self, call: Option<i64>, lost: Option<&LostCall>) {
        if let Some(l) = lost {
            self.progress.totals.add_lost(l);
        }
        let Some(id) = call else { return };
        let status = if lost.is_some() { "lost" } else { "failed" };
        if let Err(e) = self
            .store
            .call(move |s| s.set_model_call_status(id, status))
            .await
        {
            tracing::warn!(run_id = self.run.id, error = %e, "could not close the model call");
        }
    }

    /// Counts a retried attempt whose reply was lost, and keeps it on record as a
    /// lost call so a resumed session counts it too.
    async fn count_lost(&mut self, step: u32, provider: &str, lost: &LostCall) {
        self.progress.totals.add_lost(lost);
        let (run_id, provider, l) = (self.run.id, provider.to_string(), *lost);
        if let Err(e) = self
            .store
            .call(move |s| {
                s.record_model_call(run_id, step, &provider, l.input_tokens, l.cost_usd, "lost")
            })
            .await
        {
            tracing::warn!(run_id, step, error = %e, "could not record a lost model call");
        }
    }

    /// A provider failure the chain escalated: the redirect it refused and the
    /// failure itself on record; the outcome it ends the step with.
    async fn escalated(
        &self,
        step: u32,
        request: &CompletionRequest,
        failed: Failed<'_>,
        estimated_input: u64,
    ) -> RunOutcome {
        let Failed {
            error,
            retryable,
            attempt,
            provider,
        } = failed;
        tracing::warn!(run_id = self.run.id, step, error = %error, "provider call failed");
        if let Some(target) = &error.redirect {
            self.record_refused_redirect(step, target).await;
        }
        let escalated = ProviderAttempt {
            run_id: self.run.id,
            step,
            provider,
            attempt,
            kind: error.kind.as_str().to_string(),
            status: error.status,
            delay_ms: 0,
            next: "escalate".into(),
            code: error.code.clone(),
            request_bytes: serde_json::to_vec(request).ok().map(|b| b.len() as u64),
            estimated_input_tokens: Some(estimated_input),
            reply_lost: error.reply_lost,
            message: Some(crate::provider::kept_message(&error.message)),
            at_ms: 0,
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

    /// A reply cut at `max_reply_bytes`: on record as an attempt of its own (kind
    /// `reply-too-large`, next `tool-error`: its calls are answered with a tool error,
    /// the request is not sent again).
    async fn record_cut(
        &self,
        step: u32,
        provider: String,
        (limit, status): (u64, Option<u16>),
        estimated_input: u64,
    ) {
        let message = format!(
            "the reply was cut at {limit} bytes ([provider] max_reply_bytes); its calls are \
             answered with a tool error and the request is not retried"
        );
        let cut = ProviderAttempt {
            run_id: self.run.id,
            step,
            provider,
            attempt: 1,
            kind: REPLY_TOO_LARGE.into(),
            status,
            delay_ms: 0,
            next: TOOL_ERROR.into(),
            code: None,
            request_bytes: None,
            estimated_input_tokens: Some(estimated_input),
            reply_lost: false,
            message: Some(message),
            at_ms: 0,
        };
        self.store.record_provider_attempts(vec![cut]).await;
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

    /// Records one failed attempt of a step's model call (best effort: a record that
    /// cannot be written must not end the run), then tells the observer: an observer
    /// reading the store sees what it is told of.
    async fn record_attempt(
        &self,
        step: u32,
        names: &[String],
        a: &ChainAttempt,
        estimated_input: u64,
    ) {
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
            estimated_input_tokens: Some(estimated_input),
            reply_lost: a.attempt.reply_lost,
            message: Some(a.attempt.message.clone()),
            at_ms: 0,
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

/// `kind` of the attempt that records a reply cut at `max_reply_bytes`.
pub(crate) const REPLY_TOO_LARGE: &str = "reply-too-large";
/// `next` of that attempt: the reply is answered with a tool error.
pub(crate) const TOOL_ERROR: &str = "tool-error";

/// The failure a chain escalated, with the number of its last attempt.
struct Failed<'a> {
    error: &'a ProviderError,
    retryable: bool,
    attempt: u32,
    /// `kind/model` of the provider that failed last.
    provider: String,
}
