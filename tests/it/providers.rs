//! The HTTP providers against a local server that speaks each wire protocol.
//!
//! Every test builds its request from [`fixtures`], and `sdk` sends each fixture
//! through each client and validates the bodies on the wire against the official
//! SDKs' request types, so the bodies these tests send are the ones validated.

mod aimock;
mod anthropic;
mod breaker;
mod compatible;
mod errors;
pub(crate) mod fake_server;
mod openai;
mod openrouter;
mod record;
mod reply_size;
mod retrying;
mod sdk;

use std::time::Duration;

use io_harness::provider::{HttpConfig, ModelPrice, PriceTable};
use serde_json::{Value, json};

/// The key every test client sends; errors must never show it.
pub const KEY: &str = "sk-test-5ecret-Key-0123456789";

/// A client config for `server`'s `base` (`/v1` for OpenAI style, `` for Anthropic).
pub fn config(url: &str, model: &str) -> HttpConfig {
    let mut cfg = HttpConfig::new(url, model, Some(KEY.to_string()));
    cfg.idle_timeout = Duration::from_secs(20);
    cfg.connect_timeout = Duration::from_secs(20);
    let mut prices = PriceTable::builtin();
    prices.insert(
        "test-priced",
        ModelPrice {
            input: 1.0,
            output: 2.0,
            cached_input: Some(0.5),
            cache_write: Some(4.0),
        },
    );
    cfg.prices = prices;
    cfg
}

/// An OpenAI-style stream: each item a `data:` event, then `data: [DONE]`.
pub fn openai_stream(chunks: &[Value]) -> String {
    let mut s = String::new();
    for c in chunks {
        s.push_str(&format!("data: {c}\n\n"));
    }
    s.push_str("data: [DONE]\n\n");
    s
}

/// An OpenAI chunk whose only choice carries `delta` (and `finish_reason`).
pub fn delta(delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        "usage": null
    })
}

/// The final usage chunk of an OpenAI stream.
pub fn usage_chunk(usage: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini-2024-07-18", "choices": [], "usage": usage})
}

/// A plain text answer in OpenAI's format.
pub fn openai_text(text: &str) -> String {
    openai_stream(&[
        delta(json!({"role": "assistant", "content": ""}), None),
        delta(json!({"content": text}), None),
        delta(json!({}), Some("stop")),
        usage_chunk(json!({"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12})),
    ])
}

/// An Anthropic-style stream: `event: <type>` and `data: <json>` for each event.
pub fn anthropic_stream(events: &[Value]) -> String {
    let mut s = String::new();
    for e in events {
        s.push_str(&format!(
            "event: {}\ndata: {e}\n\n",
            e["type"].as_str().unwrap()
        ));
    }
    s
}

/// Anthropic's `message_start`.
pub fn message_start(model: &str, usage: Value) -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
        "model": model, "stop_reason": null, "stop_sequence": null, "usage": usage}})
}

/// A plain text answer in Anthropic's format.
pub fn anthropic_text(text: &str) -> String {
    anthropic_stream(&[
        message_start(
            "claude-sonnet-4-5-20250929",
            json!({"input_tokens": 10, "output_tokens": 1}),
        ),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 2}}),
        json!({"type": "message_stop"}),
    ])
}

/// One tool call in Anthropic's format (10 input tokens, 9 output tokens reported).
pub fn anthropic_tool(id: &str, name: &str, input: Value) -> String {
    anthropic_stream(&[
        message_start(
            "claude-sonnet-4-5-20250929",
            json!({"input_tokens": 10, "output_tokens": 1}),
        ),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 9}}),
        json!({"type": "message_stop"}),
    ])
}

/// The requests the tests send: one per shape of conversation the mappers handle.
pub mod fixtures {
    use io_harness::provider::{
        CompletionRequest, ContentBlock, Message, ReasoningEffort, Role, ThinkingSettings, ToolSpec,
    };
    use serde_json::json;

    /// The tools offered.
    pub fn tools() -> Vec<ToolSpec> {
        vec![
            ToolSpec {
                name: "read_file".into(),
                description: "Read a file of the workspace.".into(),
                input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            },
            ToolSpec {
                name: "list".into(),
                description: "List a directory.".into(),
                input_schema: json!({"type": "object", "properties": {}}),
            },
        ]
    }

    /// One user message, nothing else.
    pub fn hello() -> CompletionRequest {
        CompletionRequest::new("test-priced", vec![Message::user("Say hello.")])
    }

    /// System prompt, tools, a goal.
    pub fn with_tools() -> CompletionRequest {
        let mut r = hello();
        r.system = Some("You are a careful coding agent.".into());
        r.tools = tools();
        r.messages = vec![Message::user("Read src/café.rs")];
        r
    }

    /// A tool round: assistant text and two calls, then their results (one failed)
    /// and a note, with reasoning settings.
    pub fn tool_round() -> CompletionRequest {
        let mut r = with_tools();
        r.thinking = ThinkingSettings {
            budget_tokens: Some(2048),
            effort: Some(ReasoningEffort::Low),
        };
        r.max_tokens = 8192;
        r.messages.push(Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Text {
                    text: "Reading it.".into(),
                },
                ContentBlock::ToolUse {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    input: json!({"path": "src/café.rs"}),
                },
                ContentBlock::ToolUse {
                    id: "call_2".into(),
                    name: "list".into(),
                    input: json!({}),
                },
            ],
        });
        r.messages.push(Message {
            role: Role::User,
            content: vec![
                ContentBlock::Text {
                    text: "Both done.".into(),
                },
                ContentBlock::ToolResult {
                    tool_use_id: "call_1".into(),
                    content: "fn main() {}".into(),
                    is_error: false,
                },
                ContentBlock::ToolResult {
                    tool_use_id: "call_2".into(),
                    content: "no such dir".into(),
                    is_error: true,
                },
            ],
        });
        r
    }

    /// A conversation whose assistant turn holds thinking (signed, redacted, and one
    /// without a signature) before a tool call.
    pub fn thinking_round() -> CompletionRequest {
        let mut r = with_tools();
        r.thinking = ThinkingSettings {
            budget_tokens: Some(1024),
            effort: Some(ReasoningEffort::High),
        };
        r.messages.push(Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Thinking {
                    thinking: "The file is small.".into(),
                    signature: Some("sig-AbC==".into()),
                },
                ContentBlock::RedactedThinking {
                    data: "opaque-XyZ".into(),
                },
                ContentBlock::Thinking {
                    thinking: "unsigned".into(),
                    signature: None,
                },
                ContentBlock::Text {
                    text: String::new(),
                },
                ContentBlock::ToolUse {
                    id: "toolu_1".into(),
                    name: "read_file".into(),
                    input: json!({"path": "a"}),
                },
            ],
        });
        r.messages.push(Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "toolu_1".into(),
                content: "x".into(),
                is_error: false,
            }],
        });
        r
    }

    /// Every fixture.
    pub fn all() -> Vec<CompletionRequest> {
        vec![hello(), with_tools(), tool_round(), thinking_round()]
    }
}
