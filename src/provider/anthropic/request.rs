//! The neutral request as a Messages API body.
//!
//! Built from serde structs, so the same request always gives the same bytes (fields
//! in declaration order, tool schemas as given) and the prompt cache can match it.
//!
//! Mapping: blocks keep their order, except that a user message's `tool_result`
//! blocks go first, as the API requires. Thinking blocks go back unchanged with their
//! signature; one without a signature cannot be verified by the API and is left out,
//! as are empty text blocks (refused by the API) and messages left with no blocks.
//! Prompt caching: up to three cache breakpoints (`cache_control: ephemeral`; the API
//! allows four). The system prompt carries one, which caches the tools and the system
//! prompt (the API orders the cached prefix tools, system, messages); the first message
//! — goal, constraints, instructions, memory notes, which never change during a run —
//! carries one, so that prefix survives even a turn whose context assembly rewrote
//! older observations; and the last message carries one, so each turn reads the
//! conversation so far from the cache.

use serde::Serialize;

use crate::provider::types::{CompletionRequest, ContentBlock, Message, Role, ToolSpec};

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<[SystemBlock<'a>; 1]>,
    messages: Vec<Msg<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    stream: bool,
}

#[derive(Serialize)]
struct SystemBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    cache_control: CacheControl,
}

#[derive(Serialize)]
struct Msg<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a serde_json::Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
}

#[derive(Serialize)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a serde_json::Value,
}

#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
}

/// The request body for `request`, sent to `model`.
pub(crate) fn body(request: &CompletionRequest, model: &str) -> Result<Vec<u8>, serde_json::Error> {
    let mut messages: Vec<Msg<'_>> = request.messages.iter().filter_map(message).collect();
    if messages.len() > 1
        && let Some(first) = messages.first_mut().and_then(|m| m.content.last_mut())
    {
        mark_cache_breakpoint(first);
    }
    if let Some(last) = messages.last_mut().and_then(|m| m.content.last_mut()) {
        mark_cache_breakpoint(last);
    }
    let body = Body {
        model,
        max_tokens: request.max_tokens,
        system: request
            .system
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(|text| {
                [SystemBlock {
                    kind: "text",
                    text,
                    cache_control: CacheControl { kind: "ephemeral" },
                }]
            }),
        messages,
        tools: request.tools.iter().map(tool).collect(),
        thinking: request
            .thinking
            .budget_tokens
            .map(|budget_tokens| Thinking {
                kind: "enabled",
                budget_tokens,
            }),
        stream: true,
    };
    serde_json::to_vec(&body)
}

fn tool(t: &ToolSpec) -> Tool<'_> {
    Tool {
        name: &t.name,
        description: &t.description,
        input_schema: &t.input_schema,
    }
}

fn message(m: &Message) -> Option<Msg<'_>> {
    let mut content: Vec<Block<'_>> = m.content.iter().filter_map(block).collect();
    if m.role == Role::User {
        // Stable: tool results first, everything else after, each in its order.
        content.sort_by_key(|b| !matches!(b, Block::ToolResult { .. }));
    }
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    (!content.is_empty()).then_some(Msg { role, content })
}

fn block(b: &ContentBlock) -> Option<Block<'_>> {
    Some(match b {
        ContentBlock::Text { text } if text.is_empty() => return None,
        ContentBlock::Text { text } => Block::Text {
            text,
            cache_control: None,
        },
        ContentBlock::ToolUse { id, name, input } => Block::ToolUse { id, name, input },
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => Block::ToolResult {
            tool_use_id,
            content,
            is_error: *is_error,
            cache_control: None,
        },
        ContentBlock::Thinking {
            thinking,
            signature,
        } => Block::Thinking {
            thinking,
            signature: signature.as_deref()?,
        },
        ContentBlock::RedactedThinking { data } => Block::RedactedThinking { data },
    })
}

fn mark_cache_breakpoint(b: &mut Block<'_>) {
    if let Block::Text { cache_control, .. } | Block::ToolResult { cache_control, .. } = b {
        *cache_control = Some(CacheControl { kind: "ephemeral" });
    }
}
