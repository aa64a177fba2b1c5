//! Assembles a Chat Completions stream into one assistant turn.
//!
//! Each `data:` event is a `chat.completion.chunk`; the stream ends with
//! `data: [DONE]`. Text arrives in `delta.content` pieces; a tool call arrives in
//! `delta.tool_calls[]` pieces keyed by `index`, its `id` and `name` usually in the
//! first piece and its `arguments` JSON text cut anywhere (mid-string, mid-escape,
//! mid-character). We keep the pieces as text and parse the arguments once, at the
//! end. Servers differ in the details, so every field may be missing or `null`, an
//! `id` or `name` may come late or be repeated, and a piece without `index` belongs
//! to the call whose `id` it names (or else the last one).
//!
//! With `stream_options.include_usage` the last chunk before `[DONE]` has empty
//! `choices` and the `usage`; OpenRouter adds `usage.cost` in USD. An `error` object
//! in a chunk ends the call with that error, classified.

use serde::Deserialize;

use crate::provider::error::{ProviderError, ProviderErrorKind};
use crate::provider::http::{classify_error_object, cut, error_code};
use crate::provider::types::{ContentBlock, StopReason, Usage};

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<ChunkUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize, Default)]
struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    cost: Option<f64>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Default)]
struct PartialCall {
    index: Option<usize>,
    id: String,
    name: String,
    arguments: String,
}

/// The turn as the stream told it.
pub(crate) struct Assembled {
    pub content: Vec<ContentBlock>,
    pub stop_reason: StopReason,
    pub usage: Usage,
    /// USD as the server reported it (OpenRouter).
    pub reported_cost: Option<f64>,
    /// The model that answered, when the server said.
    pub model: Option<String>,
}

/// Collects chunks until `[DONE]`.
pub(crate) struct Assembler {
    provider: &'static str,
    text: String,
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Option<ChunkUsage>,
    model: Option<String>,
}

impl Assembler {
    pub(crate) fn new(provider: &'static str) -> Self {
        Self {
            provider,
            text: String::new(),
            calls: Vec::new(),
            finish_reason: None,
            usage: None,
            model: None,
        }
    }

    fn error(&self, kind: ProviderErrorKind, message: String) -> ProviderError {
        ProviderError::new(kind, self.provider, message)
    }

    /// Takes one event's data; `Ok(true)` once the stream is done.
    pub(crate) fn on_data(&mut self, data: &str) -> Result<bool, ProviderError> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            self.error(
                ProviderErrorKind::Malformed,
                format!("bad chunk ({e}): {}", cut(data)),
            )
        })?;
        if let Some(err) = chunk.error.filter(|e| !e.is_null()) {
            let kind = classify_error_object(&err);
            let mut e = self.error(kind, format!("error in the stream: {err}"));
            e.code = error_code(&err);
            return Err(e);
        }
        if let Some(m) = chunk.model.filter(|m| !m.is_empty()) {
            self.model = Some(m);
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(u);
        }
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
            let Some(delta) = choice.delta else { continue };
            self.text.push_str(delta.content.as_deref().unwrap_or(""));
            self.text.push_str(delta.refusal.as_deref().unwrap_or(""));
            for call in delta.tool_calls.unwrap_or_default() {
                self.on_call(call);
            }
        }
        Ok(false)
    }

    fn on_call(&mut self, d: CallDelta) {
        let id = d.id.filter(|s| !s.is_empty());
        let pos = match (d.index, &id) {
            (Some(i), _) => self.calls.iter().position(|c| c.index == Some(i)),
            (None, Some(id)) => self.calls.iter().position(|c| &c.id == id),
            (None, None) => self.calls.len().checked_sub(1),
        };
        let pos = pos.unwrap_or_else(|| {
            self.calls.push(PartialCall {
                index: d.index,
                ..PartialCall::default()
            });
            self.calls.len() - 1
        });
        let call = &mut self.calls[pos];
        if let Some(id) = id
            && call.id.is_empty()
        {
            call.id = id;
        }
        if let Some(f) = d.function {
            merge_name(&mut call.name, f.name.as_deref().unwrap_or(""));
            call.arguments
                .push_str(f.arguments.as_deref().unwrap_or(""));
        }
    }

    /// The assembled turn.
    /// Whether the choice has said why it ended (`finish_reason`): the reply itself is
    /// complete, whatever follows (the usage chunk, `data: [DONE]`).
    pub(crate) fn has_finished(&self) -> bool {
        self.finish_reason.is_some()
    }

    pub(crate) fn finish(self) -> Result<Assembled, ProviderError> {
        let mut content = Vec::new();
        if !self.text.is_empty() {
            content.push(ContentBlock::Text {
                text: self.text.clone(),
            });
        }
        for (n, call) in self.calls.iter().enumerate() {
            // A call the model got wrong is feedback for it, not a fault of the wire.
            let (name, input) =
                crate::provider::invalid_call::checked_call(&call.name, &call.arguments);
            // Some compatible servers send no ids; the conversation needs one to pair
            // the result with the call.
            let id = if call.id.is_empty() {
                format!("call_{n}")
            } else {
                call.id.clone()
            };
            content.push(ContentBlock::ToolUse { id, name, input });
        }
        let has_calls = !self.calls.is_empty();
        let stop_reason = match self.finish_reason.as_deref() {
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            // Some servers say `stop` (or nothing) after tool calls; the calls decide.
            Some("stop") | None if has_calls => StopReason::ToolUse,
            Some("stop") | None => StopReason::EndTurn,
            Some("length") => StopReason::MaxTokens,
            Some(other) => StopReason::Other(other.to_string()),
        };
        // A stream without a usage chunk (llama.cpp's server, a proxy that drops
        // `stream_options`) reported nothing: `None`, never a count of zero.
        let u = self.usage.unwrap_or_default();
        let cached = u.prompt_tokens_details.and_then(|d| d.cached_tokens);
        let usage = Usage {
            input_tokens: u
                .prompt_tokens
                .map(|p| p.saturating_sub(cached.unwrap_or(0))),
            output_tokens: u.completion_tokens,
            cached_input_tokens: cached,
            cache_write_tokens: None,
            estimate: None,
        };
        let reported_cost = u.cost.filter(|c| c.is_finite() && *c >= 0.0);
        Ok(Assembled {
            content,
            stop_reason,
            usage,
            reported_cost,
            model: self.model,
        })
    }
}

/// An unstreamed `chat.completion` object as the one chunk of a stream: each choice's
/// `message` is its `delta`, each tool call numbered by its place. The assembler then
/// reads it like any chunk, so both paths share every rule of assembly.
pub(crate) fn completion_as_chunk(body: &str) -> Result<String, ProviderError> {
    let malformed = |why: String| ProviderError::new(ProviderErrorKind::Malformed, "openai", why);
    let mut v: serde_json::Value = serde_json::from_str(body)
        .map_err(|e| malformed(format!("bad reply ({e}): {}", cut(body))))?;
    if let Some(choices) = v.get_mut("choices").and_then(|c| c.as_array_mut()) {
        for choice in choices {
            let Some(obj) = choice.as_object_mut() else {
                continue;
            };
            let mut message = obj.remove("message").unwrap_or(serde_json::Value::Null);
            if let Some(calls) = message.get_mut("tool_calls").and_then(|c| c.as_array_mut()) {
                for (i, call) in calls.iter_mut().enumerate() {
                    if let Some(c) = call.as_object_mut() {
                        c.entry("index").or_insert(i.into());
                    }
                }
            }
            obj.insert("delta".into(), message);
        }
    }
    Ok(v.to_string())
}

/// Adds a name piece: a repeat of the whole name (or of what we have) is ignored, a
/// resend of the full name replaces, anything else continues it.
fn merge_name(name: &mut String, piece: &str) {
    if piece.is_empty() || name.as_str() == piece {
        return;
    }
    if piece.starts_with(name.as_str()) {
        *name = piece.to_string();
    } else {
        name.push_str(piece);
    }
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&str]) -> Result<Assembled, ProviderError> {
        let mut a = Assembler::new("openai");
        for c in chunks {
            if a.on_data(c)? {
                break;
            }
        }
        a.finish()
    }

    #[test]
    fn late_ids_repeated_names_and_nulls() {
        let done = run(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]},"finish_reason":null}],"usage":null}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":"th\": \"caf\\u00"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"read_file","arguments":"e9\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":null,"function":{"name":"li","arguments":null}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"name":"st","arguments":""}}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":60}}}"#,
            "[DONE]",
        ])
        .unwrap();
        let calls: Vec<_> = done.content.iter().collect();
        assert_eq!(
            calls,
            [
                &ContentBlock::ToolUse {
                    id: "call_a".into(),
                    name: "read_file".into(),
                    input: serde_json::json!({"path": "café"})
                },
                &ContentBlock::ToolUse {
                    id: "call_1".into(),
                    name: "list".into(),
                    input: serde_json::json!({})
                },
            ]
        );
        assert_eq!(done.stop_reason, StopReason::ToolUse);
        assert_eq!(
            (
                done.usage.input_tokens,
                done.usage.cached_input_tokens,
                done.usage.output_tokens
            ),
            (Some(40), Some(60), Some(7))
        );
    }

    #[test]
    fn a_stream_without_usage_reports_none_not_zero() {
        let done = run(&[
            r#"{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(done.usage.input_tokens, None);
        assert_eq!(done.usage.output_tokens, None);
        assert_eq!(done.usage.source(), crate::provider::TokenSource::Estimated);
    }

    #[test]
    fn bad_chunks_are_malformed_and_bad_arguments_are_the_models_to_fix() {
        let e = run(&[r#"{"choices":[{"delta":{"content":"a"}"#])
            .err()
            .unwrap();
        assert_eq!(e.kind, ProviderErrorKind::Malformed);
        // A call the model got wrong arrives whole: a turn, marked for feedback.
        let t = run(&[r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\":"}}]}}]}"#, "[DONE]"]).unwrap();
        let ContentBlock::ToolUse { name, input, .. } = &t.content[0] else {
            panic!("{:?}", t.content);
        };
        assert_eq!(name, "f");
        let why = crate::provider::invalid_call::problem(input).unwrap();
        assert!(why.contains("not valid JSON"), "{why}");
        let t = run(&[r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"arguments":"{}"}}]}}]}"#, "[DONE]"]).unwrap();
        let ContentBlock::ToolUse { name, input, .. } = &t.content[0] else {
            panic!("{:?}", t.content);
        };
        assert_eq!(name, crate::provider::invalid_call::UNNAMED_CALL);
        assert!(
            crate::provider::invalid_call::problem(input)
                .unwrap()
                .contains("no tool name")
        );
    }

    #[test]
    fn an_unstreamed_completion_assembles_like_a_stream() {
        let body = r#"{"id":"x","object":"chat.completion","model":"smol","choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"list_dir","arguments":"{\"path\":\".\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":3}}"#;
        let chunk = completion_as_chunk(body).unwrap();
        let done = run(&[chunk.as_str()]).unwrap();
        assert_eq!(
            done.content,
            [ContentBlock::ToolUse {
                id: "call_1".into(),
                name: "list_dir".into(),
                input: serde_json::json!({"path": "."})
            }]
        );
        assert_eq!(done.stop_reason, StopReason::ToolUse);
        assert_eq!(done.usage.output_tokens, Some(3));
        assert_eq!(done.model.as_deref(), Some("smol"));
        let e = completion_as_chunk("{\"choices\": [").err().unwrap();
        assert_eq!(e.kind, ProviderErrorKind::Malformed);
    }

    #[test]
    fn names_merge() {
        let mut n = String::new();
        for piece in ["read_", "file", "read_file", ""] {
            merge_name(&mut n, piece);
        }
        assert_eq!(n, "read_file");
    }
}
