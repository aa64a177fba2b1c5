//! The trace of a run tree built from the store alone, after the fact: the same spans
//! whenever it is built, because every id and time comes from the record.
//!
//! Where the record keeps less than a span wants, the span says what it is built from:
//! a step's span is its recorded start and wall time; its model call starts with it
//! and lasts the recorded model time; its tool calls follow the model call one after
//! another with their recorded durations (the store keeps a call's duration, not its
//! start); a sandbox session ends when it was recorded and lasts its duration.
//! `gen_ai.response.finish_reasons` is the step's stored stop reason (`end_turn`,
//! `tool_use`, `max_tokens` or the provider's word), absent for steps stored before it
//! was kept. Prompt and completion content is never exported.

use std::collections::HashMap;

use super::OtelError;
use super::conventions as sc;
use super::span::{Span, SpanId, SpanKind, Status, Trace, TraceId};
use crate::store::{RunRecord, SandboxSession, SessionTime, StepRecord, Store, ToolCallRecord};

/// Builds the trace of the tree `run_id` belongs to, rooted at its root run: the run
/// asked for is exported with its ancestors' and its sub-agents' spans, so a collector
/// shows one trace whichever run of the tree was named.
pub fn trace_of(store: &Store, run_id: i64) -> Result<Trace, OtelError> {
    store.run(run_id)?.ok_or(OtelError::NoSuchRun(run_id))?;
    let root_id = store.root_run(run_id)?;
    let root = store.run(root_id)?.ok_or(OtelError::NoSuchRun(root_id))?;
    let trace_id = TraceId::for_root(root.id, root.started_at_ms, &root.goal);
    let mut b = Builder {
        store,
        trace_id,
        spans: Vec::new(),
    };
    b.run(&root, None, None)?;
    Ok(Trace {
        trace_id,
        spans: b.spans,
    })
}

struct Builder<'s> {
    store: &'s Store,
    trace_id: TraceId,
    spans: Vec<Span>,
}

impl Builder<'_> {
    /// The run's span, its steps, and each child run under the tool call that spawned
    /// it (`spawn` is that span, `name` the child's agent name).
    fn run(
        &mut self,
        run: &RunRecord,
        spawn: Option<SpanId>,
        name: Option<&str>,
    ) -> Result<(), OtelError> {
        let steps = self.store.steps(run.id)?;
        let sessions = self.store.sandbox_sessions(run.id)?;
        let times = self.store.sandbox_session_times(run.id)?;
        let run_span = self.run_span(run, spawn, name, &steps);
        let run_span_id = run_span.id;
        self.spans.push(run_span);
        let mut tool_spans: HashMap<(u32, String), SpanId> = HashMap::new();
        let mut step_spans: HashMap<u32, SpanId> = HashMap::new();
        for step in &steps {
            let id = self.step(run, step, run_span_id, &mut tool_spans);
            step_spans.insert(step.step, id);
        }
        for (ordinal, (s, t)) in sessions.iter().zip(times).enumerate() {
            let parent = match step_spans.get(&s.step) {
                Some(id) => *id,
                // Its step is not committed yet: it joins the trace with its step, so
                // a live export never sends it under another parent.
                None if run.status == "running" => continue,
                None => run_span_id,
            };
            self.session(run.id, ordinal, s, t, parent);
        }
        for child in self.store.children(run.id)? {
            let parent = tool_spans
                .get(&(child.link.step, child.link.call_id.clone()))
                .copied()
                .unwrap_or(run_span_id);
            self.run(&child.run, Some(parent), Some(&child.link.name))?;
        }
        Ok(())
    }

    fn run_span(
        &self,
        run: &RunRecord,
        parent: Option<SpanId>,
        name: Option<&str>,
        steps: &[StepRecord],
    ) -> Span {
        let agent = name.unwrap_or(sc::HARNESS);
        let last_step_end = steps
            .iter()
            .map(|s| s.started_at_ms.saturating_add(ms_i64(s.duration_ms)))
            .max();
        let end = run
            .finished_at_ms
            .or(last_step_end)
            .unwrap_or(run.started_at_ms)
            .max(run.started_at_ms);
        let duration = u64::try_from(end - run.started_at_ms).unwrap_or(0);
        let mut s = Span::new(
            self.trace_id.span(&format!("run:{}", run.id)),
            parent,
            format!("{} {agent}", sc::OP_INVOKE_AGENT),
            SpanKind::Internal,
            run.started_at_ms,
            duration,
        );
        s.str(sc::OPERATION_NAME, sc::OP_INVOKE_AGENT)
            .str(sc::AGENT_NAME, agent)
            .str(sc::AGENT_ID, run.id.to_string())
            .str(sc::CONVERSATION_ID, run.id.to_string())
            .int(sc::HARNESS_RUN_ID, run.id)
            .str(sc::HARNESS_RUN_STATUS, run.status.as_str())
            .int(sc::HARNESS_STEPS, run.steps)
            .int(sc::USAGE_INPUT_TOKENS, run.input_tokens)
            .int(sc::USAGE_OUTPUT_TOKENS, run.output_tokens);
        if let Some(cost) = run.cost_usd {
            s.attributes
                .push((sc::HARNESS_COST_USD, super::span::Value::Double(cost)));
        }
        if let Some(outcome) = &run.outcome {
            s.str(sc::HARNESS_OUTCOME, outcome.as_str());
            s.status = if outcome == "success" {
                Status::Ok
            } else {
                Status::Error(outcome.clone())
            };
        }
        s
    }

    /// A step's span, its model call and its tool calls; returns the step's span id.
    fn step(
        &mut self,
        run: &RunRecord,
        step: &StepRecord,
        parent: SpanId,
        tool_spans: &mut HashMap<(u32, String), SpanId>,
    ) -> SpanId {
        let key = format!("{}:{}", run.id, step.step);
        let mut s = Span::new(
            self.trace_id.span(&format!("step:{key}")),
            Some(parent),
            format!("step {}", step.step),
            SpanKind::Internal,
            step.started_at_ms,
            step.duration_ms,
        );
        s.int(sc::HARNESS_STEP, step.step);
        let step_id = s.id;
        self.spans.push(s);
        self.spans.push(self.chat(run, step, &key, step_id));
        let mut at = step.started_at_ms.saturating_add(ms_i64(step.model_ms));
        for (seq, call) in step.tool_calls.iter().enumerate() {
            let span = self.tool(call, &format!("{key}:{seq}"), step_id, at);
            at = at.saturating_add(ms_i64(call.duration_ms));
            tool_spans.insert((step.step, call.call_id.clone()), span.id);
            self.spans.push(span);
        }
        step_id
    }

    fn chat(&self, run: &RunRecord, step: &StepRecord, key: &str, parent: SpanId) -> Span {
        let (provider, model) = provider_of(step, run);
        let mut s = Span::new(
            self.trace_id.span(&format!("chat:{key}")),
            Some(parent),
            format!("{} {model}", sc::OP_CHAT),
            SpanKind::Client,
            step.started_at_ms,
            step.model_ms,
        );
        s.str(sc::OPERATION_NAME, sc::OP_CHAT)
            .str(sc::PROVIDER_NAME, provider_name(&provider))
            .str(sc::REQUEST_MODEL, model)
            .int(sc::USAGE_INPUT_TOKENS, step.input_tokens)
            .int(sc::USAGE_OUTPUT_TOKENS, step.output_tokens)
            .str(sc::HARNESS_TOKEN_SOURCE, step.token_source.as_str());
        if let Some(cost) = step.cost_usd {
            s.attributes
                .push((sc::HARNESS_COST_USD, super::span::Value::Double(cost)));
        }
        if let Some(reason) = &step.stop_reason {
            s.attributes.push((
                sc::RESPONSE_FINISH_REASONS,
                super::span::Value::StrArray(vec![reason.clone()]),
            ));
        }
        s
    }

    fn tool(&self, call: &ToolCallRecord, key: &str, parent: SpanId, at: i64) -> Span {
        let mut s = Span::new(
            self.trace_id.span(&format!("tool:{key}")),
            Some(parent),
            format!("{} {}", sc::OP_EXECUTE_TOOL, call.name),
            SpanKind::Internal,
            at,
            call.duration_ms,
        );
        s.str(sc::OPERATION_NAME, sc::OP_EXECUTE_TOOL)
            .str(sc::TOOL_NAME, call.name.as_str())
            .str(sc::TOOL_CALL_ID, call.call_id.as_str())
            .str(sc::TOOL_TYPE, sc::TOOL_TYPE_FUNCTION);
        if call.is_error {
            let why = match &call.confinement_refusal {
                Some(r) => format!("refused: {r}"),
                None => "the tool call failed or was refused".to_string(),
            };
            s.str(sc::ERROR_TYPE, sc::ERROR_TOOL);
            s.status = Status::Error(why);
        }
        s
    }

    /// The `ordinal`-th sandbox session of the run (its order in the store, so the
    /// span's id does not depend on what else the trace holds yet).
    fn session(
        &mut self,
        run_id: i64,
        ordinal: usize,
        s: &SandboxSession,
        t: SessionTime,
        parent: SpanId,
    ) {
        let program = serde_json::from_str::<Vec<String>>(&s.argv_json)
            .ok()
            .and_then(|a| a.into_iter().next())
            .map(|p| p.rsplit('/').next().unwrap_or("").to_string())
            .unwrap_or_default();
        let kind = if s.purpose == "gate" {
            "gate"
        } else {
            "sandbox"
        };
        let start = t.ended_at_ms.saturating_sub(ms_i64(s.duration_ms));
        let mut span = Span::new(
            self.trace_id.span(&format!("session:{run_id}:{ordinal}")),
            Some(parent),
            format!("{kind} {program}").trim_end().to_string(),
            SpanKind::Internal,
            start,
            s.duration_ms,
        );
        span.str(sc::HARNESS_SANDBOX_PURPOSE, s.purpose.as_str())
            .str(sc::HARNESS_SANDBOX_BACKEND, s.backend.as_str())
            .str(sc::HARNESS_SANDBOX_NETWORK, s.network.as_str())
            .int(sc::HARNESS_STEP, s.step);
        if let Some(code) = s.exit_code {
            span.int(sc::PROCESS_EXIT_CODE, code);
        }
        if let Some(sig) = s.signal {
            span.int(sc::HARNESS_SIGNAL, sig);
        }
        if let Some(cap) = &s.cap_hit {
            span.str(sc::HARNESS_CAP_HIT, cap.as_str());
            span.status = Status::Error(format!("cap hit: {cap}"));
        } else if s.purpose == "gate" && s.exit_code != Some(0) {
            span.status = Status::Error(match (s.exit_code, s.signal) {
                (Some(c), _) => format!("exit {c}"),
                (None, Some(sig)) => format!("signal {sig}"),
                (None, None) => "did not exit".to_string(),
            });
        }
        self.spans.push(span);
    }
}

/// `(kind, model)` of the provider that served the step (`kind/model` as recorded),
/// else the run's primary.
fn provider_of(step: &StepRecord, run: &RunRecord) -> (String, String) {
    if let Some((kind, model)) = step.provider.as_deref().and_then(|p| p.split_once('/')) {
        return (kind.to_string(), model.to_string());
    }
    run.provider_json
        .as_deref()
        .and_then(|j| serde_json::from_str::<serde_json::Value>(j).ok())
        .map(|v| {
            let s = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
            (s("kind"), s("model"))
        })
        .unwrap_or_default()
}

/// `gen_ai.provider.name` for a provider kind: the conventions' well-known value where
/// one applies (`openai`, `anthropic`), else the kind itself (a custom value, as the
/// conventions allow: `openrouter`, `scripted`).
fn provider_name(kind: &str) -> String {
    match kind {
        "" => sc::PROVIDER_OTHER.to_string(),
        k => k.to_string(),
    }
}

fn ms_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}
