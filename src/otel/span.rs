//! The trace as plain data: spans with ids, times and typed attributes, independent of
//! how they are sent. [`super::build`] fills it from the store; [`super::otlp`] writes
//! it as OTLP/HTTP JSON.

use sha2::{Digest, Sha256};

/// A trace id: 16 bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

/// A span id: 8 bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId(pub [u8; 8]);

impl TraceId {
    /// The trace id of a run tree, derived from its root run's row (id, start time,
    /// goal) so every export of the same run — after the fact, again, or from a resumed
    /// session — names the same trace, and two stores' run 1 do not collide.
    pub fn for_root(run_id: i64, started_at_ms: i64, goal: &str) -> Self {
        let d = Sha256::new()
            .chain_update(b"io-harness otel trace\0")
            .chain_update(run_id.to_le_bytes())
            .chain_update(started_at_ms.to_le_bytes())
            .chain_update(goal.as_bytes())
            .finalize();
        let mut id = [0u8; 16];
        id.copy_from_slice(&d[..16]);
        if id == [0; 16] {
            id[15] = 1;
        }
        Self(id)
    }

    /// The id of the span named `key` in this trace (`run:3`, `step:3:2`…): a pure
    /// function of both, so a span exported twice keeps its id and a collector
    /// deduplicates it instead of showing it twice.
    pub fn span(&self, key: &str) -> SpanId {
        let d = Sha256::new()
            .chain_update(b"io-harness otel span\0")
            .chain_update(self.0)
            .chain_update(key.as_bytes())
            .finalize();
        let mut id = [0u8; 8];
        id.copy_from_slice(&d[..8]);
        if id == [0; 8] {
            id[7] = 1;
        }
        SpanId(id)
    }

    /// Lowercase hex, as OTLP/JSON writes it.
    pub fn hex(&self) -> String {
        hex(&self.0)
    }
}

impl SpanId {
    /// Lowercase hex, as OTLP/JSON writes it.
    pub fn hex(&self) -> String {
        hex(&self.0)
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// OTLP's `SpanKind`, the two this trace uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// Work inside the harness (a run, a step, a tool, a sandbox session).
    Internal,
    /// A call to a remote service (a model call).
    Client,
}

impl SpanKind {
    /// The enum's number in the OTLP protobuf (`SPAN_KIND_INTERNAL` = 1,
    /// `SPAN_KIND_CLIENT` = 3).
    pub fn code(self) -> i64 {
        match self {
            Self::Internal => 1,
            Self::Client => 3,
        }
    }
}

/// A span's status: unset (nothing known), ok, or an error with its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Nothing said (a run still going, a step).
    Unset,
    /// Ended as it should (a run that succeeded).
    Ok,
    /// Ended in a failure (a refused tool call, a failed gate, a run that did not
    /// succeed), with why.
    Error(String),
}

/// An attribute value, typed as OTLP's `AnyValue` keeps it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `stringValue`.
    Str(String),
    /// `intValue`.
    Int(i64),
    /// `doubleValue`.
    Double(f64),
    /// `boolValue`.
    Bool(bool),
    /// `arrayValue` of strings.
    StrArray(Vec<String>),
}

/// One span.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// Its id.
    pub id: SpanId,
    /// Its parent; `None` for the root run's span.
    pub parent: Option<SpanId>,
    /// The name (`chat gpt-5-mini`, `execute_tool read_file`…).
    pub name: String,
    /// Internal or client.
    pub kind: SpanKind,
    /// Start, Unix nanoseconds.
    pub start_ns: u64,
    /// End, Unix nanoseconds (never before the start).
    pub end_ns: u64,
    /// Attributes in the order they are written.
    pub attributes: Vec<(&'static str, Value)>,
    /// Status.
    pub status: Status,
    /// What happened at a moment within it (a provider attempt that failed, a policy
    /// decision that was not an allow).
    pub events: Vec<SpanEvent>,
}

/// A timed event within a span (OTLP's `Span.Event`).
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    /// The event's name (`io_harness.provider.attempt`…).
    pub name: &'static str,
    /// When, Unix nanoseconds.
    pub time_ns: u64,
    /// Its attributes.
    pub attributes: Vec<(&'static str, Value)>,
}

impl Span {
    /// A span over `[start_ms, start_ms + duration_ms]`.
    pub fn new(
        id: SpanId,
        parent: Option<SpanId>,
        name: String,
        kind: SpanKind,
        start_ms: i64,
        duration_ms: u64,
    ) -> Self {
        let start_ns = ms_to_ns(start_ms);
        let end_ns = start_ns.saturating_add(duration_ms.saturating_mul(1_000_000));
        Self {
            id,
            parent,
            name,
            kind,
            start_ns,
            end_ns,
            attributes: Vec::new(),
            status: Status::Unset,
            events: Vec::new(),
        }
    }

    /// Adds an event at `at_ms` (held within the span's times).
    pub fn event(
        &mut self,
        name: &'static str,
        at_ms: i64,
        attributes: Vec<(&'static str, Value)>,
    ) -> &mut Self {
        let time_ns = ms_to_ns(at_ms).clamp(self.start_ns, self.end_ns);
        self.events.push(SpanEvent {
            name,
            time_ns,
            attributes,
        });
        self
    }

    /// Adds a string attribute.
    pub fn str(&mut self, key: &'static str, v: impl Into<String>) -> &mut Self {
        self.attributes.push((key, Value::Str(v.into())));
        self
    }

    /// Adds an integer attribute (saturating at `i64::MAX`).
    pub fn int(&mut self, key: &'static str, v: impl TryInto<i64>) -> &mut Self {
        let v = v.try_into().unwrap_or(i64::MAX);
        self.attributes.push((key, Value::Int(v)));
        self
    }

    /// The value of attribute `key`, if set.
    pub fn attr(&self, key: &str) -> Option<&Value> {
        self.attributes
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }
}

/// Unix milliseconds as nanoseconds (0 before 1970: OTLP times are unsigned).
fn ms_to_ns(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0).saturating_mul(1_000_000)
}

/// A whole trace: its id and every span, parents before children.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// The trace id.
    pub trace_id: TraceId,
    /// The spans.
    pub spans: Vec<Span>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_distinct() {
        let t = TraceId::for_root(1, 1_700_000_000_000, "goal");
        assert_eq!(t, TraceId::for_root(1, 1_700_000_000_000, "goal"));
        assert_ne!(t, TraceId::for_root(1, 1_700_000_000_001, "goal"));
        assert_eq!(t.span("run:1"), t.span("run:1"));
        assert_ne!(t.span("run:1"), t.span("step:1:1"));
        assert_eq!(t.hex().len(), 32);
        assert_eq!(t.span("run:1").hex().len(), 16);
    }

    #[test]
    fn a_span_never_ends_before_it_starts() {
        let t = TraceId::for_root(1, 0, "g");
        let s = Span::new(t.span("x"), None, "x".into(), SpanKind::Internal, -5, 3);
        assert_eq!((s.start_ns, s.end_ns), (0, 3_000_000));
    }
}
