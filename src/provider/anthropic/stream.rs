//! Assembles a Messages API stream into one assistant turn.
//!
//! Events (the `type` inside each `data:` is authoritative; the `event:` name only
//! repeats it): `message_start` (model, input usage), then per block
//! `content_block_start` / `content_block_delta`* / `content_block_stop`, then
//! `message_delta` (stop reason, output usage) and `message_stop`, which ends the
//! stream. `ping` and event types we do not know are skipped, as the API asks; an
//! `error` event ends the call with that error, classified.
//!
//! Deltas: `text_delta`, `input_json_delta` (a tool's input as JSON text cut
//! anywhere, parsed once at the block's end), `thinking_delta` and
//! `signature_delta`. Thinking and redacted thinking are kept verbatim, signature
//! included, to be passed back in the next turn.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::provider::error::{ProviderError, ProviderErrorKind};
use crate::provider::http::{classify_error_object, cut, error_code};
use crate::provider::types::{ContentBlock, StopReason, Usage};

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

enum Partial {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
        start_input: Value,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted(String),
    /// A block type we do not offer (server tools…): skipped.
    Other,
}

/// The turn as the stream told it.
pub(crate) struct Assembled {
    pub content: Vec<ContentBlock>,
    pub stop_reason: StopReason,
    pub usage: Usage,
    pub model: Option<String>,
}

/// Collects events until `message_stop`.
pub(crate) struct Assembler {
    provider: &'static str,
    blocks: BTreeMap<u64, Partial>,
    stop_reason: Option<String>,
    usage: Usage,
    model: Option<String>,
}

fn field<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    v.get(key).filter(|x| !x.is_null())
}

fn text_of(v: &Value, key: &str) -> String {
    field(v, key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

impl Assembler {
    pub(crate) fn new(provider: &'static str) -> Self {
        Self {
            provider,
            blocks: BTreeMap::new(),
            stop_reason: None,
            usage: Usage::default(),
            model: None,
        }
    }

    fn malformed(&self, message: String) -> ProviderError {
        ProviderError::new(ProviderErrorKind::Malformed, self.provider, message)
    }

    /// Takes one event; `Ok(true)` once the message is complete.
    pub(crate) fn on_event(&mut self, event: &str, data: &str) -> Result<bool, ProviderError> {
        let v: Value = serde_json::from_str(data)
            .map_err(|e| self.malformed(format!("bad `{event}` event ({e}): {}", cut(data))))?;
        let kind = field(&v, "type").and_then(Value::as_str).unwrap_or(event);
        match kind {
            "message_start" => {
                let msg = field(&v, "message").cloned().unwrap_or(Value::Null);
                self.model = field(&msg, "model")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                self.add_usage(field(&msg, "usage"))?;
            }
            "content_block_start" => {
                let index = self.index(&v)?;
                let b = field(&v, "content_block").cloned().unwrap_or(Value::Null);
                let partial = match field(&b, "type").and_then(Value::as_str) {
                    Some("text") => Partial::Text(text_of(&b, "text")),
                    Some("tool_use") => Partial::ToolUse {
                        id: text_of(&b, "id"),
                        name: text_of(&b, "name"),
                        json: String::new(),
                        start_input: field(&b, "input")
                            .cloned()
                            .unwrap_or_else(|| serde_json::json!({})),
                    },
                    Some("thinking") => Partial::Thinking {
                        thinking: text_of(&b, "thinking"),
                        signature: text_of(&b, "signature"),
                    },
                    Some("redacted_thinking") => Partial::Redacted(text_of(&b, "data")),
                    _ => Partial::Other,
                };
                self.blocks.insert(index, partial);
            }
            "content_block_delta" => self.on_delta(&v)?,
            "content_block_stop" => {
                let index = self.index(&v)?;
                if !self.blocks.contains_key(&index) {
                    return Err(self.malformed(format!(
                        "content_block_stop for block {index}, which never started"
                    )));
                }
            }
            "message_delta" => {
                let delta = field(&v, "delta").cloned().unwrap_or(Value::Null);
                if let Some(r) = field(&delta, "stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(r.to_string());
                }
                self.add_usage(field(&v, "usage"))?;
            }
            "message_stop" => return Ok(true),
            "error" => {
                let err = field(&v, "error").cloned().unwrap_or(v.clone());
                let kind = classify_error_object(&err);
                let mut e =
                    ProviderError::new(kind, self.provider, format!("error in the stream: {err}"));
                e.code = error_code(&err);
                return Err(e);
            }
            _ => {}
        }
        Ok(false)
    }

    fn index(&self, v: &Value) -> Result<u64, ProviderError> {
        field(v, "index").and_then(Value::as_u64).ok_or_else(|| {
            self.malformed(format!(
                "event without a block index: {}",
                cut(&v.to_string())
            ))
        })
    }

    fn on_delta(&mut self, v: &Value) -> Result<(), ProviderError> {
        let index = self.index(v)?;
        let delta = field(v, "delta").cloned().unwrap_or(Value::Null);
        let kind = field(&delta, "type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let Some(block) = self.blocks.get_mut(&index) else {
            return Err(self.malformed(format!("{kind} for block {index}, which never started")));
        };
        match (&kind[..], block) {
            ("text_delta", Partial::Text(t)) => t.push_str(&text_of(&delta, "text")),
            ("input_json_delta", Partial::ToolUse { json, .. }) => {
                json.push_str(&text_of(&delta, "partial_json"))
            }
            ("thinking_delta", Partial::Thinking { thinking, .. }) => {
                thinking.push_str(&text_of(&delta, "thinking"))
            }
            ("signature_delta", Partial::Thinking { signature, .. }) => {
                signature.push_str(&text_of(&delta, "signature"))
            }
            (_, Partial::Other) => {}
            ("text_delta" | "input_json_delta" | "thinking_delta" | "signature_delta", _) => {
                return Err(self.malformed(format!(
                    "{kind} for block {index}, which is of another type"
                )));
            }
            // Deltas we do not use (citations…).
            _ => {}
        }
        Ok(())
    }

    /// Usage fields are cumulative: each one reported replaces the one before.
    fn add_usage(&mut self, u: Option<&Value>) -> Result<(), ProviderError> {
        let Some(u) = u else { return Ok(()) };
        let w: WireUsage = serde_json::from_value(u.clone())
            .map_err(|e| self.malformed(format!("bad usage ({e}): {u}")))?;
        let usage = &mut self.usage;
        usage.input_tokens = w.input_tokens.or(usage.input_tokens);
        usage.output_tokens = w.output_tokens.or(usage.output_tokens);
        usage.cached_input_tokens = w.cache_read_input_tokens.or(usage.cached_input_tokens);
        usage.cache_write_tokens = w.cache_creation_input_tokens.or(usage.cache_write_tokens);
        Ok(())
    }

    /// The assembled turn.
    pub(crate) fn finish(self) -> Result<Assembled, ProviderError> {
        let mut content = Vec::new();
        for (index, b) in &self.blocks {
            content.push(match b {
                Partial::Text(t) if t.is_empty() => continue,
                Partial::Text(t) => ContentBlock::Text { text: t.clone() },
                Partial::ToolUse {
                    id,
                    name,
                    json,
                    start_input,
                } => {
                    // A call the model got wrong is feedback for it (see
                    // `invalid_call`); the conversation still needs an id to pair
                    // the result with it.
                    let (name, input) = if json.trim().is_empty() {
                        crate::provider::invalid_call::checked_value(
                            name,
                            Ok(start_input.clone()),
                            "",
                        )
                    } else {
                        crate::provider::invalid_call::checked_call(name, json)
                    };
                    let id = if id.is_empty() {
                        format!("toolu_io_harness_{index}")
                    } else {
                        id.clone()
                    };
                    ContentBlock::ToolUse { id, name, input }
                }
                Partial::Thinking {
                    thinking,
                    signature,
                } => ContentBlock::Thinking {
                    thinking: thinking.clone(),
                    signature: (!signature.is_empty()).then(|| signature.clone()),
                },
                Partial::Redacted(data) => ContentBlock::RedactedThinking { data: data.clone() },
                Partial::Other => continue,
            });
        }
        let stop_reason = match self.stop_reason.as_deref() {
            Some("end_turn") | None => StopReason::EndTurn,
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens") => StopReason::MaxTokens,
            Some(other) => StopReason::Other(other.to_string()),
        };
        Ok(Assembled {
            content,
            stop_reason,
            usage: self.usage,
            model: self.model,
        })
    }
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_for_a_block_of_another_type_is_malformed() {
        let mut a = Assembler::new("anthropic");
        a.on_event(
            "",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        )
        .unwrap();
        let e = a.on_event("", r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}"#).err().unwrap();
        assert_eq!(e.kind, ProviderErrorKind::Malformed);
        let e = a.on_event("", r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}"#).err().unwrap();
        assert!(e.message.contains("never started"), "{e}");
    }

    #[test]
    fn unknown_events_and_blocks_are_skipped() {
        let mut a = Assembler::new("anthropic");
        for d in [
            r#"{"type":"ping"}"#,
            r#"{"type":"future_event","x":1}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"hi"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{}}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"pause_turn","stop_sequence":null},"usage":null}"#,
        ] {
            assert!(!a.on_event("", d).unwrap());
        }
        let t = a.finish().unwrap();
        assert_eq!(t.content, vec![ContentBlock::Text { text: "hi".into() }]);
        assert_eq!(t.stop_reason, StopReason::Other("pause_turn".into()));
        assert_eq!(
            (t.usage.input_tokens, t.usage.output_tokens),
            (None, None),
            "no usage was reported: none, not zero"
        );
    }
}
