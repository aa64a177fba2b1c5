//! The neutral request as a Chat Completions body.
//!
//! Built from serde structs, so the bytes depend only on the request: fields come out
//! in declaration order and tool schemas exactly as given (prompt caching needs the
//! same prefix to give the same bytes).
//!
//! Mapping: a user message's `ToolResult` blocks become `role: "tool"` messages, sent
//! before the message's text (the API wants tool messages right after the assistant
//! message that called); an assistant's `ToolUse` blocks become `tool_calls` with the
//! input serialized as the `arguments` string. Thinking blocks are Anthropic's and
//! are not sent. A failed tool result has no flag in this protocol, so its content is
//! prefixed with `[tool error] ` for the model to see.

use serde::Serialize;

use super::Flavor;
use crate::provider::types::{
    CompletionRequest, ContentBlock, Message, Role, ToolSpec, concat_text,
};

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<ChatMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    stream: bool,
    /// Only with a stream: vLLM refuses `stream_options` on an unstreamed request.
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    /// OpenRouter's usage accounting: the final chunk then reports `usage.cost`.
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<UsageAccounting>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct UsageAccounting {
    include: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum ChatMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: String,
    },
    Assistant {
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: String,
    },
}

#[derive(Serialize)]
struct ToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: CallFunction<'a>,
}

#[derive(Serialize)]
struct CallFunction<'a> {
    name: &'a str,
    arguments: String,
}

#[derive(Serialize)]
struct Tool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: ToolFunction<'a>,
}

#[derive(Serialize)]
struct ToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
}

/// Which field carries the output cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaxTokensField {
    /// `max_completion_tokens`: OpenAI's current name (reasoning models refuse the old one).
    MaxCompletionTokens,
    /// `max_tokens`: what OpenRouter documents.
    MaxTokens,
}

/// What the client adds to every body besides the flavor's fields.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    /// `tool_choice`, sent when tools are offered (`None`: not sent).
    pub tool_choice: Option<crate::contract::ToolChoice>,
    /// Ask for a stream.
    pub stream: bool,
}

/// The request body for `request`, sent to `model`.
pub(crate) fn body(
    request: &CompletionRequest,
    model: &str,
    flavor: &Flavor,
    options: Options,
) -> Result<Vec<u8>, serde_json::Error> {
    let mut messages = Vec::new();
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        messages.push(ChatMessage::System { content: system });
    }
    for m in &request.messages {
        map_message(m, flavor.assistant_content, &mut messages)?;
    }
    let cap = Some(request.max_tokens);
    let (max_completion_tokens, max_tokens) = match flavor.max_tokens {
        MaxTokensField::MaxCompletionTokens => (cap, None),
        MaxTokensField::MaxTokens => (None, cap),
    };
    let body = Body {
        model,
        messages,
        tools: request.tools.iter().map(tool).collect(),
        max_completion_tokens,
        max_tokens,
        reasoning_effort: request.thinking.effort.map(|e| e.as_str()),
        tool_choice: options
            .tool_choice
            .filter(|_| !request.tools.is_empty())
            .map(|c| c.as_str()),
        stream: options.stream,
        stream_options: options.stream.then_some(StreamOptions {
            include_usage: true,
        }),
        usage: flavor
            .usage_accounting
            .then_some(UsageAccounting { include: true }),
    };
    serde_json::to_vec(&body)
}

fn tool(t: &ToolSpec) -> Tool<'_> {
    Tool {
        kind: "function",
        function: ToolFunction {
            name: &t.name,
            description: &t.description,
            parameters: &t.input_schema,
        },
    }
}

fn map_message<'a>(
    m: &'a Message,
    always_content: bool,
    out: &mut Vec<ChatMessage<'a>>,
) -> Result<(), serde_json::Error> {
    match m.role {
        Role::User => {
            for b in &m.content {
                if let ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } = b
                {
                    let content = if *is_error {
                        format!("[tool error] {content}")
                    } else {
                        content.clone()
                    };
                    out.push(ChatMessage::Tool {
                        tool_call_id: tool_use_id,
                        content,
                    });
                }
            }
            let text = concat_text(&m.content);
            let only_results = m
                .content
                .iter()
                .all(|b| matches!(b, ContentBlock::ToolResult { .. }));
            if !(only_results && text.is_empty()) {
                out.push(ChatMessage::User { content: text });
            }
        }
        Role::Assistant => {
            let mut tool_calls = Vec::new();
            for b in &m.content {
                if let ContentBlock::ToolUse { id, name, input } = b {
                    let arguments = serde_json::to_string(input)?;
                    tool_calls.push(ToolCall {
                        id,
                        kind: "function",
                        function: CallFunction { name, arguments },
                    });
                }
            }
            let text = concat_text(&m.content);
            // Content may be left out only when there are tool calls, and only for a
            // server that allows it.
            let content =
                (always_content || !text.is_empty() || tool_calls.is_empty()).then_some(text);
            out.push(ChatMessage::Assistant {
                content,
                tool_calls,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::ToolChoice;
    use crate::provider::ToolSpec;

    fn called() -> CompletionRequest {
        let mut r = CompletionRequest::new("m", vec![Message::user("go")]);
        r.tools = vec![ToolSpec {
            name: "list".into(),
            description: "List.".into(),
            input_schema: serde_json::json!({"type": "object"}),
        }];
        r.messages.push(Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: "c".into(),
                name: "list".into(),
                input: serde_json::json!({}),
            }],
        });
        r
    }

    /// Issue 17.8: llama.cpp answered an assistant tool-call message without `content`
    /// with a 500, ignored `max_completion_tokens` and made no calls without
    /// `tool_choice`.
    #[test]
    fn a_compatible_body_has_max_tokens_content_and_tool_choice_and_may_not_stream() {
        let flavor = Flavor {
            kind: "openai-compatible",
            max_tokens: MaxTokensField::MaxTokens,
            usage_accounting: false,
            assistant_content: true,
        };
        let options = Options {
            tool_choice: Some(ToolChoice::Required),
            stream: false,
        };
        let b: serde_json::Value =
            serde_json::from_slice(&body(&called(), "m", &flavor, options).unwrap()).unwrap();
        assert_eq!(b["max_tokens"], 4096);
        assert!(b.get("max_completion_tokens").is_none());
        assert_eq!(b["tool_choice"], "required");
        assert_eq!(b["stream"], false);
        assert!(b.get("stream_options").is_none());
        assert_eq!(b["messages"][1]["content"], "");
        assert_eq!(b["messages"][1]["tool_calls"][0]["id"], "c");
        // Without tools there is no tool_choice to send.
        let bare = CompletionRequest::new("m", vec![Message::user("go")]);
        let b: serde_json::Value =
            serde_json::from_slice(&body(&bare, "m", &flavor, options).unwrap()).unwrap();
        assert!(b.get("tool_choice").is_none());
        // OpenAI's own flavor is unchanged.
        let openai = Flavor {
            kind: "openai",
            max_tokens: MaxTokensField::MaxCompletionTokens,
            usage_accounting: false,
            assistant_content: false,
        };
        let plain = Options {
            tool_choice: None,
            stream: true,
        };
        let b: serde_json::Value =
            serde_json::from_slice(&body(&called(), "m", &openai, plain).unwrap()).unwrap();
        assert!(b["messages"][1].get("content").is_none());
        assert!(b.get("tool_choice").is_none());
        assert_eq!(b["stream_options"]["include_usage"], true);
    }
}
