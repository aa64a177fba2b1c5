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
    stream: bool,
    stream_options: StreamOptions,
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

/// The request body for `request`, sent to `model`.
pub(crate) fn body(
    request: &CompletionRequest,
    model: &str,
    flavor: &Flavor,
) -> Result<Vec<u8>, serde_json::Error> {
    let mut messages = Vec::new();
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        messages.push(ChatMessage::System { content: system });
    }
    for m in &request.messages {
        map_message(m, &mut messages)?;
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
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
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
            // Content may be left out only when there are tool calls.
            let content = (!text.is_empty() || tool_calls.is_empty()).then_some(text);
            out.push(ChatMessage::Assistant {
                content,
                tool_calls,
            });
        }
    }
    Ok(())
}
