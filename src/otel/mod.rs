//! OpenTelemetry traces of runs, in the GenAI semantic conventions (pinned:
//! [`conventions::SEMCONV_VERSION`]), over OTLP/HTTP JSON — so teams watch agents in
//! the tools they already run (Jaeger, Tempo, Langfuse, Phoenix…).
//!
//! # Why from the store
//!
//! The store already holds everything a trace shows, and it is the record that
//! survives a crash: the trace is built from it ([`build::trace_of`]), after the fact
//! as well as for a run that just ended, and the same run always gives the same trace
//! (ids derived from the run's row, times from the record), so exporting twice or
//! after a resume names the same spans.
//!
//! # The spans
//!
//! - each session of the run: `invoke_agent {agent}` (`io-harness` for a root run, the
//!   name its parent gave a sub-agent), status ok on success, unset awaiting approval,
//!   error with the outcome otherwise;
//! - each committed step: `step {n}`;
//! - its model call: `chat {model}` (kind client) with `gen_ai.operation.name`,
//!   `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.usage.input_tokens`,
//!   `gen_ai.usage.output_tokens` (`io_harness.usage.source` says whether those are
//!   the provider's report or the harness's estimate) and
//!   `gen_ai.response.finish_reasons` (the stored stop reason);
//! - its tool calls: `execute_tool {name}` with `gen_ai.tool.name`,
//!   `gen_ai.tool.call.id` and `gen_ai.tool.type`;
//! - each sandbox session: `sandbox {program}` for a command, `gate {program}` for a
//!   verification gate, with the backend, the network posture and how it ended;
//! - each sub-agent's run under the `execute_tool spawn_agent` span that spawned it.
//!
//! Prompt and completion content goes out only on the operator's opt-in
//! ([`TraceOptions`]: `--otlp-content` or `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
//! A model call's failed provider attempts (retries, fallbacks, the escalation) are
//! events on its span (on the session's span when the step was never committed), a
//! step's policy decisions other than allow are events on the step's span.
//!
//! A run is one `invoke_agent` span per session — the process that started it and each
//! resume — in one trace: the first is the root, each resume's sits under it.
//!
//! # Sending
//!
//! [`send::Exporter`] posts one JSON document to `{endpoint}/v1/traces`, after a
//! `net` decision of the run's own policy ([`send::decide`]) that [`export`] records
//! in the run's `policy_events`; the headers of `OTEL_EXPORTER_OTLP_HEADERS` are
//! never stored or printed. [`live::LiveExport`] does the same while a run goes,
//! step by step, without ever making the run wait.

pub mod build;
mod content;
pub mod conventions;
mod events;
pub mod live;
pub mod otlp;
pub mod send;
pub mod span;

pub use build::{CONTENT_ENV, TraceOptions, trace_of, trace_with};
pub use live::{LiveExport, LiveSummary};
pub use send::{Endpoint, Exporter, Sent};
pub use span::{Span, SpanEvent, SpanId, SpanKind, Status, Trace, TraceId, Value};

use crate::store::{PolicyEvent, Store, StoreError};

/// Failure of an export.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtelError {
    /// No run of that id.
    #[error("no run with id {0}")]
    NoSuchRun(i64),
    /// Neither `--endpoint` nor `OTEL_EXPORTER_OTLP_ENDPOINT` was given.
    #[error("no OTLP endpoint: pass --endpoint URL or set {}", send::ENDPOINT_ENV)]
    NoEndpoint,
    /// The endpoint is not a usable URL.
    #[error("OTLP endpoint from {given_by}: {why}")]
    BadEndpoint {
        /// Where it came from.
        given_by: &'static str,
        /// What is wrong.
        why: String,
    },
    /// `OTEL_EXPORTER_OTLP_HEADERS` cannot be read (the message never holds a value).
    #[error("OTEL_EXPORTER_OTLP_HEADERS: {0}")]
    BadHeaders(String),
    /// An operator's rule denies connecting to the endpoint.
    #[error(
        "the policy denies connecting to the OTLP endpoint {target} (rule {rule:?}, layer {layer})"
    )]
    EndpointDenied {
        /// `host:port`.
        target: String,
        /// The rule.
        rule: String,
        /// Its layer.
        layer: String,
    },
    /// The run's stored policy could not be rebuilt.
    #[error("the run's stored policy cannot be read: {0}")]
    StoredPolicy(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The request did not get an answer (connect, timeout, transport).
    #[error("OTLP export to {endpoint} failed: {why}")]
    Send {
        /// The URL posted to.
        endpoint: String,
        /// Why (redacted of the header values).
        why: String,
    },
    /// The collector answered with a non-2xx status (a redirect is never followed).
    #[error("OTLP collector at {endpoint} refused the export: HTTP {status}: {body}")]
    Rejected {
        /// The URL posted to.
        endpoint: String,
        /// The status.
        status: u16,
        /// The start of its body (redacted).
        body: String,
    },
}

impl OtelError {
    /// Whether the operator's input is at fault (nothing was sent): exit 2 in the CLI.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::NoSuchRun(_)
                | Self::NoEndpoint
                | Self::BadEndpoint { .. }
                | Self::BadHeaders(_)
                | Self::EndpointDenied { .. }
        )
    }
}

/// What one export did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// The trace id (hex).
    pub trace_id: String,
    /// The collector's answer.
    pub sent: Sent,
}

/// Builds the trace of `run_id`'s tree from the store and sends it: the `net`
/// decision on the endpoint is taken under the run's stored policy and recorded in its
/// `policy_events` (at its last committed step) before anything dials; a denied
/// endpoint is recorded too, and nothing is sent.
pub async fn export(
    store: &Store,
    run_id: i64,
    exporter: &Exporter,
    options: TraceOptions,
) -> Result<Exported, OtelError> {
    let run = store.run(run_id)?.ok_or(OtelError::NoSuchRun(run_id))?;
    let trace = trace_with(store, run_id, options)?;
    let endpoint = exporter.endpoint();
    let decision = send::decide(endpoint, run.policy_json.as_deref());
    record_decision(store, &run, endpoint, &decision)?;
    decision?;
    let sent = exporter.send(&trace).await?;
    Ok(Exported {
        trace_id: trace.trace_id.hex(),
        sent,
    })
}

/// Records the `net` decision on the endpoint in the run's `policy_events`, at its
/// last committed step (a denial by an operator's rule too).
fn record_decision(
    store: &Store,
    run: &crate::store::RunRecord,
    endpoint: &Endpoint,
    decision: &Result<crate::policy::PolicyDecision, OtelError>,
) -> Result<(), OtelError> {
    let (verdict, rule, layer) = match decision {
        Ok(d) => (d.decision.as_str(), d.rule.clone(), d.layer.clone()),
        Err(OtelError::EndpointDenied { rule, layer, .. }) => ("deny", rule.clone(), layer.clone()),
        Err(_) => return Ok(()),
    };
    store.record_policy_event(&PolicyEvent {
        run_id: run.id,
        step: run.steps,
        act: "net".into(),
        target: endpoint.target.clone(),
        decision: verdict.into(),
        rule,
        layer,
    })?;
    Ok(())
}
