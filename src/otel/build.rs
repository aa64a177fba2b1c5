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
//! was kept. Prompt and completion content is exported only on the operator's opt-in
//! ([`TraceOptions::content`]; see `content`).
//!
//! A run is one span per session (the process that started it and each resume),
//! all in the run's one trace: a span cannot change once sent, so a resume adds its
//! own session's span instead of re-sending the run's.

use std::collections::HashMap;

use super::OtelError;
use super::conventions as sc;
use super::span::{Span, SpanId, SpanKind, Status, Trace, TraceId};
use crate::store::{RunRecord, SandboxSession, SessionTime, StepRecord, Store, ToolCallRecord};

/// What a trace carries beyond the record's structure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceOptions {
    /// Prompt and completion content on the model-call spans
    /// (`gen_ai.input.messages`, `gen_ai.output.messages`): only on the operator's
    /// explicit opt-in ([`CONTENT_ENV`] or `--otlp-content`), as the conventions ask.
    pub content: bool,
}

/// The environment variable the OpenTelemetry GenAI instrumentations read for the
/// content opt-in; `true` (any case) opts in here too.
pub const CONTENT_ENV: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

impl TraceOptions {
    /// The options an operator asked for: `flag` (`--otlp-content`) or [`CONTENT_ENV`].
    pub fn from_env(flag: bool) -> Self {
        let env = std::env::var(CONTENT_ENV).is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
        Self {
            content: flag || env,
        }
    }
}

/// Builds the trace of the tree `run_id` belongs to, rooted at its root run: the run
/// asked for is exported with its ancestors' and its sub-agents' spans, so a collector
/// shows one trace whichever run of the tree was named. No content is exported.
pub fn trace_of(store: &Store, run_id: i64) -> Result<Trace, OtelError> {
    trace_with(store, run_id, TraceOptions::default())
}

/// [`trace_of`] with options (the content opt-in).
pub fn trace_with(store: &Store, run_id: i64, options: TraceOptions) -> Result<Trace, OtelError> {
    store.run(run_id)?.ok_or(OtelError::NoSuchRun(run_id))?;
    let root_id = store.root_run(run_id)?;
    let root = store.run(root_id)?.ok_or(OtelError::NoSuchRun(root_id))?;
    let trace_id = TraceId::for_root(root.id, root.started_at_ms, &root.goal);
    let mut b = Builder {
        store,
        trace_id,
        options,
        spans: Vec::new(),
    };
    b.run(&root, None, None)?;
    let mut spans = b.spans;
    cover_children(&mut spans);
    Ok(Trace { trace_id, spans })
}

/// Makes every parent end no earlier than its children (adversary B4 of issue 20: a
/// step recorded as 0 ms after a kill had tool spans ending after it). Spans come
/// parents first, so one pass from the end carries each end up the tree.
/// Everything a span covers is on record by the time it is sent live, so the live and
/// the after-the-fact span still agree.
fn cover_children(spans: &mut [Span]) {
    let index: HashMap<SpanId, usize> = spans.iter().enumerate().map(|(i, s)| (s.id, i)).collect();
    for i in (0..spans.len()).rev() {
        let (end, parent) = (spans[i].end_ns, spans[i].parent);
        // A resume's session sits under the first, later, and does not stretch it (its
        // span went out when it ended).
        let resumed = matches!(spans[i].attr(sc::HARNESS_SESSION), Some(super::span::Value::Int(n)) if *n > 0);
        if !resumed
            && let Some(p) = parent.and_then(|p| index.get(&p).copied())
            && p < i
            && spans[p].end_ns < end
        {
            spans[p].end_ns = end;
        }
    }
}

struct Builder<'s> {
    store: &'s Store,
    trace_id: TraceId,
    options: TraceOptions,
    spans: Vec<Span>,
}

/// One session of a run as its span shows it.
struct SessionView {
    ordinal: u32,
    start: i64,
    end: Option<i64>,
    /// How it ended: its outcome, `interrupted` for a session a later one followed
    /// without an end on record, `None` for the open (or last, killed) session.
    ended_as: Option<String>,
}

impl Builder<'_> {
    /// The run's sessions, each a span, its steps under the session that committed
    /// them, and each child run under the tool call that spawned it (`spawn` is that
    /// span, `name` the child's agent name).
    fn run(
        &mut self,
        run: &RunRecord,
        spawn: Option<SpanId>,
        name: Option<&str>,
    ) -> Result<(), OtelError> {
        let steps = self.store.steps(run.id)?;
        let sessions = self.sessions(run)?;
        let sandbox = self.store.sandbox_sessions(run.id)?;
        let times = self.store.sandbox_session_times(run.id)?;
        let in_session = |at: i64| sessions.iter().rposition(|v| v.start <= at).unwrap_or(0);
        let mut session_ids = Vec::with_capacity(sessions.len());
        let mut session_at = Vec::with_capacity(sessions.len());
        for (i, v) in sessions.iter().enumerate() {
            let parent = if i == 0 {
                spawn
            } else {
                session_ids.first().copied()
            };
            let own: Vec<&StepRecord> = steps
                .iter()
                .filter(|s| in_session(s.started_at_ms) == i)
                .collect();
            let span = self.session_span(run, v, parent, name, &own);
            session_ids.push(span.id);
            session_at.push(self.spans.len());
            self.spans.push(span);
        }
        let mut tool_spans: HashMap<(u32, String), SpanId> = HashMap::new();
        let mut step_spans: HashMap<u32, SpanId> = HashMap::new();
        let mut previous: Option<&StepRecord> = None;
        let mut chat_at: HashMap<u32, usize> = HashMap::new();
        let content = self.options.content;
        for step in &steps {
            let parent = session_ids[in_session(step.started_at_ms)];
            let (id, chat) = self.step(run, step, previous, parent, &mut tool_spans);
            for p in &step.policy_events {
                super::events::decision(&mut self.spans[chat - 1], p, content);
            }
            step_spans.insert(step.step, id);
            chat_at.insert(step.step, chat);
            previous = Some(step);
        }
        // A step's failed attempts on its model call; those of a step never committed
        // (the escalation that ended the run) on the session they happened in.
        for a in self.store.provider_attempts(run.id)? {
            let at = match chat_at.get(&a.step) {
                Some(i) => *i,
                None => session_at[in_session(a.at_ms)],
            };
            super::events::attempt(&mut self.spans[at], &a, content);
        }
        for (ordinal, (s, t)) in sandbox.iter().zip(times).enumerate() {
            let parent = match step_spans.get(&s.step) {
                Some(id) => *id,
                // Its step is not committed yet: it joins the trace with its step, so
                // a live export never sends it under another parent.
                None if run.status == "running" => continue,
                None => session_ids[in_session(t.ended_at_ms)],
            };
            self.session(run.id, ordinal, s, t, parent);
        }
        for child in self.store.children(run.id)? {
            let parent = tool_spans
                .get(&(child.link.step, child.link.call_id.clone()))
                .copied()
                .unwrap_or(session_ids[0]);
            self.run(&child.run, Some(parent), Some(&child.link.name))?;
        }
        Ok(())
    }

    /// The run's sessions from the record; a run stored before sessions were kept is
    /// one session from its start to its end.
    fn sessions(&self, run: &RunRecord) -> Result<Vec<SessionView>, OtelError> {
        let rows = self.store.run_sessions(run.id)?;
        if rows.is_empty() {
            return Ok(vec![SessionView {
                ordinal: 0,
                start: run.started_at_ms,
                end: run.finished_at_ms,
                ended_as: run.outcome.clone(),
            }]);
        }
        let last = rows.len() - 1;
        Ok(rows
            .into_iter()
            .enumerate()
            .map(|(i, r)| SessionView {
                ordinal: r.ordinal,
                // The first session is the run's: it starts with the run's row.
                start: if i == 0 {
                    r.started_at_ms.min(run.started_at_ms)
                } else {
                    r.started_at_ms
                },
                end: r.ended_at_ms,
                ended_as: r
                    .ended_as
                    .or_else(|| (i < last).then(|| sc::SESSION_INTERRUPTED.to_string())),
            })
            .collect())
    }

    /// A session's span: `invoke_agent {agent}`; the first is the run's root (or sits
    /// under the spawning call), each resume's sits under the first, in the same trace.
    /// Everything on it is fixed once the session ends (its own steps' usage, how it
    /// ended), so the span a live export sent is the one an export after the fact
    /// builds.
    fn session_span(
        &self,
        run: &RunRecord,
        v: &SessionView,
        parent: Option<SpanId>,
        name: Option<&str>,
        steps: &[&StepRecord],
    ) -> Span {
        let agent = name.unwrap_or(sc::HARNESS);
        let last_step_end = steps
            .iter()
            .map(|s| s.started_at_ms.saturating_add(ms_i64(s.duration_ms)))
            .max();
        let end = v.end.or(last_step_end).unwrap_or(v.start).max(v.start);
        let key = match v.ordinal {
            0 => format!("run:{}", run.id),
            n => format!("run:{}:session:{n}", run.id),
        };
        let mut s = Span::new(
            self.trace_id.span(&key),
            parent,
            format!("{} {agent}", sc::OP_INVOKE_AGENT),
            SpanKind::Internal,
            v.start,
            u64::try_from(end - v.start).unwrap_or(0),
        );
        let sum = |f: fn(&StepRecord) -> u64| steps.iter().map(|s| f(s)).sum::<u64>();
        s.str(sc::OPERATION_NAME, sc::OP_INVOKE_AGENT)
            .str(sc::AGENT_NAME, agent)
            .str(sc::AGENT_ID, run.id.to_string())
            .str(sc::CONVERSATION_ID, run.id.to_string())
            .int(sc::HARNESS_RUN_ID, run.id)
            .int(sc::HARNESS_SESSION, v.ordinal)
            .int(sc::HARNESS_SESSION_STEPS, steps.len())
            .int(sc::USAGE_INPUT_TOKENS, sum(|s| s.input_tokens))
            .int(sc::USAGE_OUTPUT_TOKENS, sum(|s| s.output_tokens));
        let costs: Vec<f64> = steps.iter().filter_map(|s| s.cost_usd).collect();
        if !costs.is_empty() {
            s.attributes.push((
                sc::HARNESS_COST_USD,
                super::span::Value::Double(costs.iter().sum()),
            ));
        }
        if let Some(ended) = &v.ended_as {
            s.str(sc::HARNESS_SESSION_ENDED, ended.as_str());
            s.status = match ended.as_str() {
                "success" => Status::Ok,
                "awaiting_approval" => Status::Unset,
                other => Status::Error(other.to_string()),
            };
            if ended != sc::SESSION_INTERRUPTED {
                s.str(sc::HARNESS_OUTCOME, ended.as_str());
            }
        }
        s
    }

    /// A step's span, its model call and its tool calls; returns the step's span id and
    /// the model call's index in the trace.
    fn step(
        &mut self,
        run: &RunRecord,
        step: &StepRecord,
        previous: Option<&StepRecord>,
        parent: SpanId,
        tool_spans: &mut HashMap<(u32, String), SpanId>,
    ) -> (SpanId, usize) {
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
        let mut chat = self.chat(run, step, &key, step_id);
        if self.options.content {
            super::content::attach(&mut chat, run, step, previous);
        }
        let chat_at = self.spans.len();
        self.spans.push(chat);
        let mut at = step.started_at_ms.saturating_add(ms_i64(step.model_ms));
        for (seq, call) in step.tool_calls.iter().enumerate() {
            let span = self.tool(call, &format!("{key}:{seq}"), step_id, at);
            at = at.saturating_add(ms_i64(call.duration_ms));
            tool_spans.insert((step.step, call.call_id.clone()), span.id);
            self.spans.push(span);
        }
        (step_id, chat_at)
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
        let name = tool_name(call);
        let mut s = Span::new(
            self.trace_id.span(&format!("tool:{key}")),
            Some(parent),
            format!("{} {name}", sc::OP_EXECUTE_TOOL),
            SpanKind::Internal,
            at,
            call.duration_ms,
        );
        s.str(sc::OPERATION_NAME, sc::OP_EXECUTE_TOOL)
            .str(sc::TOOL_NAME, name)
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

/// The tool's name as a trace may show it: a name the harness offered; a name the model
/// made up (a call answered "unknown tool", or one no tool could have) is the model's
/// text, which goes out only with the content opt-in, so it is `_OTHER` (adversary B3
/// of issue 20: a 20 KB invented name carried a card number into span names).
fn tool_name(call: &ToolCallRecord) -> &str {
    let plausible = !call.name.is_empty()
        && call.name.len() <= 128
        && call
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b));
    let unknown = call.is_error && call.output.starts_with("unknown tool ");
    if plausible && !unknown {
        &call.name
    } else {
        sc::PROVIDER_OTHER
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
