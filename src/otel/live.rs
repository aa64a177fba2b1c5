//! Live export while a run goes: the run's observer calls [`LiveExport::notify`] at
//! each step commit (and at the end), which only puts the run id in a bounded queue
//! (`try_send`: it never waits, and a full queue counts a dropped export instead); an
//! exporter task on the runtime takes notices off the queue, builds the tree's trace
//! from its own handle on the store ([`super::trace_with`]) and sends the spans it has
//! not sent yet. A session's span goes out once the session has ended (a span is
//! immutable once sent), its steps as they commit. Only this process's work goes out:
//! spans that began before the exporter started belong to earlier sessions, which
//! sent them — except the span of a session killed before its end, which no process
//! sent, and which the session right after it sends as `interrupted`. A failed or refused send counts as dropped
//! too, and its spans go out with the next notice. Nothing here can fail or slow the
//! run: errors become counts and one warning.
//!
//! The `net` decision on the endpoint is taken at the first notice, when the run's
//! stored policy exists, and recorded like [`super::export`]'s; a denied endpoint
//! stops the exporter (every later notice is dropped).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::span::{Span, SpanId, Value};
use super::{Exporter, OtelError, TraceOptions, conventions as sc, record_decision, trace_with};
use crate::store::Store;

/// Notices the queue holds: a step commit is one, so a collector slower than the run
/// by this many steps starts dropping.
pub const QUEUE: usize = 64;

enum Msg {
    Export(i64),
    Final(i64, oneshot::Sender<()>),
}

/// The live exporter of one CLI session.
#[derive(Debug)]
pub struct LiveExport {
    tx: mpsc::Sender<Msg>,
    dropped: Arc<AtomicU64>,
    first_error: Arc<Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<()>,
}

/// How a live export went, for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveSummary {
    /// Exports that never reached the collector (recorded in the run's record).
    pub dropped: u64,
    /// The first failure, when there was one (redacted of the header values).
    pub first_error: Option<String>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Export(id) => write!(f, "Export({id})"),
            Self::Final(id, _) => write!(f, "Final({id})"),
        }
    }
}

impl LiveExport {
    /// Starts the exporter task (on the current tokio runtime) reading `store`; start
    /// it before the run's session opens (what began earlier is not this process's).
    pub fn start(store: Store, exporter: Exporter, options: TraceOptions) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let first_error = Arc::new(Mutex::new(None));
        let floor_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .saturating_mul(1_000_000);
        let st = State {
            store,
            exporter,
            options,
            floor_ns,
            sent: HashSet::new(),
            allowed: None,
            dropped: dropped.clone(),
            first_error: first_error.clone(),
        };
        let task = tokio::spawn(worker(st, rx));
        Self {
            tx,
            dropped,
            first_error,
            task,
        }
    }

    /// A step of `run_id` (or of a run of its tree) was committed: never waits; a
    /// full queue counts a dropped export.
    pub fn notify(&self, run_id: i64) {
        if self.tx.try_send(Msg::Export(run_id)).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// After the run: sends what is left (the run's own span), waiting at most `wait`,
    /// stops the task and records the dropped count in the run's record (0 when every
    /// export arrived).
    pub async fn finish(&self, store: &Store, run_id: i64, wait: Duration) -> LiveSummary {
        let (done_tx, done_rx) = oneshot::channel();
        let flushed = tokio::time::timeout(wait, async {
            self.tx.send(Msg::Final(run_id, done_tx)).await.is_ok() && done_rx.await.is_ok()
        })
        .await
        .unwrap_or(false);
        if !flushed {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        self.task.abort();
        let dropped = self.dropped.load(Ordering::Relaxed);
        if let Err(e) = store.set_otlp_dropped(run_id, dropped) {
            tracing::warn!(error = %e, "could not record the dropped OTLP exports");
        }
        let mut first_error = self
            .first_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if !flushed && first_error.is_none() {
            first_error = Some(format!("the last export did not finish within {wait:?}"));
        }
        LiveSummary {
            dropped,
            first_error,
        }
    }
}

struct State {
    store: Store,
    exporter: Exporter,
    options: TraceOptions,
    /// When this process's exporter started (whole ms, as the record keeps times).
    floor_ns: u64,
    sent: HashSet<SpanId>,
    /// `None` before the decision, then whether the endpoint is allowed.
    allowed: Option<bool>,
    dropped: Arc<AtomicU64>,
    first_error: Arc<Mutex<Option<String>>>,
}

async fn worker(mut st: State, mut rx: mpsc::Receiver<Msg>) {
    while let Some(msg) = rx.recv().await {
        match msg {
            Msg::Export(run_id) => st.pass(run_id).await,
            Msg::Final(run_id, done) => {
                st.pass(run_id).await;
                let _ = done.send(());
            }
        }
    }
}

impl State {
    async fn pass(&mut self, run_id: i64) {
        if let Err(e) = self.try_pass(run_id).await {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, "live OTLP export failed; the run goes on");
            let mut first = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert_with(|| e.to_string());
        }
    }

    async fn try_pass(&mut self, run_id: i64) -> Result<(), OtelError> {
        if self.allowed.is_none() {
            let run = self
                .store
                .run(run_id)?
                .ok_or(OtelError::NoSuchRun(run_id))?;
            let decision =
                super::send::decide(self.exporter.endpoint(), run.policy_json.as_deref());
            record_decision(&self.store, &run, self.exporter.endpoint(), &decision)?;
            self.allowed = Some(decision.is_ok());
            decision?;
        }
        if self.allowed == Some(false) {
            return Err(OtelError::EndpointDenied {
                target: self.exporter.endpoint().target.clone(),
                rule: "(decided at the first export)".into(),
                layer: "-".into(),
            });
        }
        let (store, options) = (self.store.clone(), self.options);
        let mut trace = tokio::task::spawn_blocking(move || trace_with(&store, run_id, options))
            .await
            .map_err(|e| OtelError::Send {
                endpoint: String::new(),
                why: e.to_string(),
            })??;
        let latest = latest_sessions(&trace.spans);
        trace
            .spans
            .retain(|s| !self.sent.contains(&s.id) && self.ours(s, &latest));
        if trace.spans.is_empty() {
            return Ok(());
        }
        self.exporter.send(&trace).await?;
        self.sent.extend(trace.spans.iter().map(|s| s.id));
        Ok(())
    }
}

impl State {
    /// Whether `span` is this process's to send now.
    fn ours(&self, span: &Span, latest: &std::collections::HashMap<i64, i64>) -> bool {
        let Some(Value::Int(ordinal)) = span.attr(sc::HARNESS_SESSION) else {
            return span.start_ns >= self.floor_ns;
        };
        match span.attr(sc::HARNESS_SESSION_ENDED) {
            None => false,
            Some(Value::Str(e)) if e == sc::SESSION_INTERRUPTED => {
                run_of(span).and_then(|r| latest.get(&r)) == Some(&(ordinal + 1))
            }
            Some(_) => span.start_ns >= self.floor_ns,
        }
    }
}

/// The latest session ordinal of each run in the trace.
fn latest_sessions(spans: &[Span]) -> std::collections::HashMap<i64, i64> {
    let mut latest = std::collections::HashMap::new();
    for s in spans {
        if let (Some(Value::Int(n)), Some(run)) = (s.attr(sc::HARNESS_SESSION), run_of(s)) {
            let e = latest.entry(run).or_insert(*n);
            *e = (*e).max(*n);
        }
    }
    latest
}

fn run_of(span: &Span) -> Option<i64> {
    match span.attr(sc::HARNESS_RUN_ID) {
        Some(Value::Int(r)) => Some(*r),
        _ => None,
    }
}
