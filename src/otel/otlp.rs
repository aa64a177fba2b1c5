//! A [`Trace`] as an OTLP/HTTP JSON `ExportTraceServiceRequest`, written by hand after
//! the protobuf JSON mapping (no OpenTelemetry SDK: the harness sends one document per
//! export and needs none of an SDK's batching or global state): ids as lowercase hex,
//! 64-bit integers and nanosecond times as decimal strings, enums as their numbers,
//! attributes as `{key, value: {stringValue | intValue | doubleValue | boolValue}}`.

use serde_json::{Value as Json, json};

use super::conventions as sc;
use super::span::{Span, Status, Trace, Value};

/// The request body for `POST {endpoint}/v1/traces`.
pub fn encode(trace: &Trace) -> Json {
    let spans: Vec<Json> = trace.spans.iter().map(|s| span(trace, s)).collect();
    json!({
        "resourceSpans": [{
            "resource": {
                "attributes": [
                    attr(sc::SERVICE_NAME, &Value::Str(sc::HARNESS.into())),
                    attr(sc::SERVICE_VERSION, &Value::Str(env!("CARGO_PKG_VERSION").into())),
                ]
            },
            "scopeSpans": [{
                "scope": { "name": "io-harness", "version": env!("CARGO_PKG_VERSION") },
                "schemaUrl": sc::SCHEMA_URL,
                "spans": spans,
            }],
            "schemaUrl": sc::SCHEMA_URL,
        }]
    })
}

fn span(trace: &Trace, s: &Span) -> Json {
    let mut o = json!({
        "traceId": trace.trace_id.hex(),
        "spanId": s.id.hex(),
        "name": s.name,
        "kind": s.kind.code(),
        "startTimeUnixNano": s.start_ns.to_string(),
        "endTimeUnixNano": s.end_ns.to_string(),
        "attributes": s.attributes.iter().map(|(k, v)| attr(k, v)).collect::<Vec<_>>(),
    });
    if let Some(p) = s.parent {
        o["parentSpanId"] = Json::String(p.hex());
    }
    if !s.events.is_empty() {
        o["events"] = s
            .events
            .iter()
            .map(|e| {
                json!({
                    "timeUnixNano": e.time_ns.to_string(),
                    "name": e.name,
                    "attributes": e.attributes.iter().map(|(k, v)| attr(k, v)).collect::<Vec<_>>(),
                })
            })
            .collect();
    }
    match &s.status {
        Status::Unset => {}
        // STATUS_CODE_OK = 1, STATUS_CODE_ERROR = 2.
        Status::Ok => o["status"] = json!({ "code": 1 }),
        Status::Error(m) => o["status"] = json!({ "code": 2, "message": m }),
    }
    o
}

fn attr(key: &str, v: &Value) -> Json {
    let value = match v {
        Value::Str(s) => json!({ "stringValue": s }),
        Value::Int(i) => json!({ "intValue": i.to_string() }),
        Value::Double(d) if d.is_finite() => json!({ "doubleValue": d }),
        Value::Double(d) => json!({ "stringValue": d.to_string() }),
        Value::Bool(b) => json!({ "boolValue": b }),
        Value::StrArray(a) => json!({
            "arrayValue": { "values": a.iter().map(|s| json!({ "stringValue": s })).collect::<Vec<_>>() }
        }),
    };
    json!({ "key": key, "value": value })
}

#[cfg(test)]
mod tests {
    use super::super::span::{SpanKind, TraceId};
    use super::*;

    #[test]
    fn the_protobuf_json_mapping_is_followed() {
        let t = TraceId::for_root(1, 0, "g");
        let mut root = Span::new(t.span("a"), None, "a".into(), SpanKind::Client, 2, 1);
        root.int("n", 7_u32).str("s", "x");
        root.status = Status::Error("no".into());
        let child = Span::new(
            t.span("b"),
            Some(root.id),
            "b".into(),
            SpanKind::Internal,
            2,
            0,
        );
        let doc = encode(&Trace {
            trace_id: t,
            spans: vec![root, child],
        });
        let spans = &doc["resourceSpans"][0]["scopeSpans"][0]["spans"];
        assert_eq!(spans[0]["traceId"], t.hex());
        assert_eq!(spans[0]["kind"], 3);
        assert_eq!(spans[0]["startTimeUnixNano"], "2000000");
        assert_eq!(spans[0]["endTimeUnixNano"], "3000000");
        assert_eq!(spans[0]["attributes"][0]["value"]["intValue"], "7");
        assert_eq!(spans[0]["attributes"][1]["value"]["stringValue"], "x");
        assert_eq!(spans[0]["status"]["code"], 2);
        assert!(spans[0].get("parentSpanId").is_none());
        assert_eq!(spans[1]["parentSpanId"], spans[0]["spanId"]);
        assert!(spans[1].get("status").is_none());
    }
}
