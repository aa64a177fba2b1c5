//! Calling a tool of a connected server: the arguments, the call under its timeout,
//! and what the model is told of each way it can end. Every call is recorded.

use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::ServiceError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

use super::framing::FaultKind;
use super::lock;
use super::server::Server;
use crate::store::McpEvent;
use crate::tools::ToolError;

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The call's arguments: an object, or none.
fn arguments(
    input: &serde_json::Value,
) -> Result<Option<serde_json::Map<String, serde_json::Value>>, ToolError> {
    match input {
        serde_json::Value::Object(m) => Ok(Some(m.clone())),
        serde_json::Value::Null => Ok(None),
        _ => Err(ToolError::BadInput("arguments must be an object".into())),
    }
}

type Answer = Result<Result<CallToolResult, ServiceError>, tokio::time::error::Elapsed>;

impl Server {
    /// Calls `tool` with `input` under the call timeout; records the call.
    pub(crate) async fn call(
        &self,
        tool: &str,
        input: &serde_json::Value,
    ) -> Result<String, ToolError> {
        let name = &self.spec.name;
        let args = arguments(input)?;
        if !self.check_alive() {
            return Err(self.unavailable(tool));
        }
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = args;
        let started = Instant::now();
        let answer =
            tokio::time::timeout(self.spec.call_timeout, self.peer.call_tool(params)).await;
        let took = ms(started.elapsed());
        let (outcome, out) = self.outcome(tool, answer);
        self.shared
            .rec
            .mcp(|r, s| McpEvent::called(r, s, name, tool, took, outcome));
        out
    }

    /// A call to a server that is not running: recorded as `unavailable`, answered
    /// with why it is not.
    fn unavailable(&self, tool: &str) -> ToolError {
        let name = &self.spec.name;
        let why = lock(&self.dead).clone().unwrap_or_default();
        self.shared
            .rec
            .mcp(|r, s| McpEvent::called(r, s, name, tool, 0, "unavailable"));
        ToolError::Failed(format!("MCP server {name} is not running: {why}"))
    }

    /// The recorded outcome (`ok`, `error`, `timeout`, `too_large`,
    /// `protocol_error`) and the answer to the model. A transport that went away
    /// during the call marks the server dead; a reply too large or malformed does not.
    fn outcome(&self, tool: &str, answer: Answer) -> (&'static str, Result<String, ToolError>) {
        let name = &self.spec.name;
        match answer {
            Err(_) => (
                "timeout",
                Err(ToolError::Failed(format!(
                    "MCP tool {tool} of server {name} timed out after {}; the server was asked to cancel it",
                    humantime::format_duration(self.spec.call_timeout)
                ))),
            ),
            Ok(Ok(r)) => {
                let value = serde_json::to_value(&r).unwrap_or_default();
                let text = crate::mcp::tool::render_result(&value);
                if r.is_error == Some(true) {
                    ("error", Err(ToolError::Failed(text)))
                } else {
                    ("ok", Ok(text))
                }
            }
            Ok(Err(e)) => {
                if let Some((kind, why)) = self.fault(&e) {
                    // Answered at once; a stdout that ended also ends the server (its
                    // `failed` record says how its process ended, if it did).
                    if let Some(closed) = self.faults.as_ref().and_then(|f| f.closed()) {
                        self.mark_dead(&closed);
                    }
                    return (
                        kind.outcome(),
                        Err(ToolError::Failed(format!(
                            "MCP tool {tool} of server {name}: {why}"
                        ))),
                    );
                }
                // Over HTTP, rmcp answers a call whose reply stream failed (cut
                // short, or one event over its 16 MiB bound) with "transport closed"
                // while the transport itself lives: that call's fault, not the
                // server's end (adversary H_huge_sse).
                if matches!(e, ServiceError::TransportClosed)
                    && self.faults.is_none()
                    && !self.peer.is_transport_closed()
                {
                    return (
                        FaultKind::Malformed.outcome(),
                        Err(ToolError::Failed(format!(
                            "MCP tool {tool} of server {name}: protocol error: the reply's \
                             stream ended before its answer (cut short, or an event over \
                             {} MiB)",
                            super::framing::MAX_MESSAGE / (1024 * 1024)
                        ))),
                    );
                }
                let closed = matches!(
                    e,
                    ServiceError::TransportClosed | ServiceError::TransportSend(_)
                ) || self.peer.is_transport_closed();
                if closed {
                    self.mark_dead(&format!("the server went away during a call: {e}"));
                }
                (
                    "error",
                    Err(ToolError::Failed(format!("MCP server {name}: {e}"))),
                )
            }
        }
    }

    /// A reply that was not a usable answer, found by the transport: over stdio the
    /// framing's own error reply; over HTTP rmcp's error for a body over its bound
    /// or one that is not a JSON-RPC message. The server is not dead for it.
    fn fault(&self, e: &ServiceError) -> Option<(FaultKind, String)> {
        match e {
            ServiceError::McpError(data) => {
                let kind = self.faults.as_ref()?.kind_of(data)?;
                Some((kind, data.message.to_string()))
            }
            ServiceError::TransportSend(dynamic) => {
                let http = dynamic
                    .error
                    .downcast_ref::<StreamableHttpError<reqwest::Error>>()?;
                match http {
                    StreamableHttpError::ResponseBodyTooLarge { max_size } => Some((
                        FaultKind::TooLarge,
                        format!(
                            "result too large: the reply is longer than {} MiB",
                            max_size / (1024 * 1024)
                        ),
                    )),
                    // One bad answer to one request: the server answered, so it is
                    // not dead (adversary H2: a cut body, a cut SSE event, a one-off
                    // 500 or an HTML page marked a live server dead for the run).
                    StreamableHttpError::Deserialize(_)
                    | StreamableHttpError::UnexpectedServerResponse(_)
                    | StreamableHttpError::UnexpectedContentType(_)
                    | StreamableHttpError::UnexpectedEndOfStream
                    | StreamableHttpError::Sse(_)
                    | StreamableHttpError::HttpStatus(_) => {
                        Some((FaultKind::Malformed, format!("protocol error: {http}")))
                    }
                    StreamableHttpError::Client(e) if e.is_decode() || e.is_body() => Some((
                        FaultKind::Malformed,
                        "protocol error: the reply's body could not be read to its end".into(),
                    )),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}
