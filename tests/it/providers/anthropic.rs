//! Anthropic Messages: headers, the body on the wire, thinking passed back, and the
//! assembled reply.

use io_harness::provider::{Anthropic, ContentBlock, CostSource, Provider, StopReason};
use serde_json::json;

use std::time::Duration;

use super::fake_server::{FakeServer, Reply, awkward, every, whole};
use super::{KEY, anthropic_stream, anthropic_text, config, fixtures, message_start};

#[tokio::test]
async fn anthropic_streams_thinking_text_and_tool_use() {
    let input = r#"{"path": "src/caf\u00e9.rs", "q": "a \"b\" ü"}"#;
    let mut events = vec![
        message_start(
            "claude-sonnet-4-5-20250929",
            json!({"input_tokens": 120, "output_tokens": 1, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 3000}),
        ),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me "}}),
        json!({"type": "ping"}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "look."}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAh=="}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "EmwKAhgB"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Reading "}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "it."}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {}}}),
    ];
    let chars: Vec<char> = input.chars().collect();
    for piece in chars.chunks(4) {
        let piece: String = piece.iter().collect();
        events.push(json!({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": piece}}));
    }
    events.extend([
        json!({"type": "content_block_stop", "index": 3}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 89}}),
        json!({"type": "message_stop"}),
    ]);
    let sse = anthropic_stream(&events).replace('\n', "\r\n");
    let replies = vec![
        Reply::sse(every(&sse, 7)),
        Reply::sse(awkward(&sse)).paced(Duration::from_millis(1)),
    ];
    let server = FakeServer::start(replies).await;
    let p = Anthropic::new(config(&server.url(), "claude-sonnet-4-5")).unwrap();
    let mut request = fixtures::with_tools();
    request.model = "claude-sonnet-4-5".into();
    let turn = p.complete(&request).await.unwrap();
    assert_eq!(
        p.complete(&request).await.unwrap(),
        turn,
        "the same turn however the bytes are cut"
    );

    let sent = server.requests().remove(0);
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(turn.request_body.as_deref(), Some(sent.body.as_slice()));

    assert_eq!(
        turn.content,
        vec![
            ContentBlock::Thinking {
                thinking: "Let me look.".into(),
                signature: Some("EqQBCgIYAh==".into())
            },
            ContentBlock::RedactedThinking {
                data: "EmwKAhgB".into()
            },
            ContentBlock::Text {
                text: "Reading it.".into()
            },
            ContentBlock::ToolUse {
                id: "toolu_01".into(),
                name: "read_file".into(),
                input: json!({"path": "src/caf\u{e9}.rs", "q": "a \"b\" \u{fc}"})
            },
        ]
    );
    assert_eq!(turn.stop_reason, StopReason::ToolUse);
    assert_eq!(turn.model, "claude-sonnet-4-5-20250929");
    let u = turn.usage;
    assert_eq!(
        (
            u.input_tokens,
            u.output_tokens,
            u.cached_input_tokens,
            u.cache_write_tokens
        ),
        (Some(120), Some(89), Some(3000), Some(2000))
    );
    // claude-sonnet-4-5 (the dated name falls back): 3 in, 15 out, 0.3 read, 3.75 write per M.
    assert_eq!(turn.cost.source, CostSource::PriceTable);
    let want = (120.0 * 3.0 + 89.0 * 15.0 + 3000.0 * 0.3 + 2000.0 * 3.75) / 1e6;
    assert!(
        (turn.cost.usd.unwrap() - want).abs() < 1e-12,
        "{:?} vs {want}",
        turn.cost
    );
    assert_eq!(p.secrets(), vec![KEY.to_string()]);
}

#[tokio::test]
async fn anthropic_body_passes_thinking_back_and_puts_results_first() {
    let server = FakeServer::start(vec![
        Reply::sse(whole(&anthropic_text("ok"))),
        Reply::sse(whole(&anthropic_text("ok"))),
    ])
    .await;
    let p = Anthropic::new(config(&format!("{}/", server.url()), "claude-haiku-4-5")).unwrap();
    p.complete(&fixtures::thinking_round()).await.unwrap();
    p.complete(&fixtures::tool_round()).await.unwrap();
    let sent = server.requests();
    assert_eq!(sent[0].path, "/v1/messages");

    let body = sent[0].json();
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 1024})
    );
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "You are a careful coding agent.", "cache_control": {"type": "ephemeral"}}]),
        "the system prompt (with the tools before it) is a cache breakpoint"
    );
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(
        body["tools"][1],
        json!({"name": "list", "description": "List a directory.", "input_schema": {"type": "object", "properties": {}}})
    );
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "thinking", "thinking": "The file is small.", "signature": "sig-AbC=="},
            {"type": "redacted_thinking", "data": "opaque-XyZ"},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}}
        ]),
        "signed thinking and redacted thinking go back unchanged; unsigned thinking and empty text do not"
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x", "cache_control": {"type": "ephemeral"}}]})
    );

    let body = sent[1].json();
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(
        body["messages"][2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "call_1", "content": "fn main() {}"},
            {"type": "tool_result", "tool_use_id": "call_2", "content": "no such dir", "is_error": true},
            {"type": "text", "text": "Both done.", "cache_control": {"type": "ephemeral"}}
        ]),
        "tool results first, the cache breakpoint on the last block"
    );
    assert_eq!(
        body["messages"][0],
        json!({"role": "user", "content": [{"type": "text", "text": "Read src/café.rs", "cache_control": {"type": "ephemeral"}}]}),
        "the first message (goal, instructions, notes) is a cache breakpoint"
    );
}

#[tokio::test]
async fn anthropic_same_request_same_bytes_and_reasoning_effort_not_sent() {
    let server = FakeServer::start(vec![
        Reply::sse(whole(&anthropic_text("a"))),
        Reply::sse(whole(&anthropic_text("b"))),
    ])
    .await;
    let p = Anthropic::new(config(&server.url(), "claude-haiku-4-5")).unwrap();
    let request = fixtures::tool_round();
    let first = p.complete(&request).await.unwrap();
    let second = p.complete(&request).await.unwrap();
    assert_eq!(
        (first.text(), second.text()),
        ("a".to_string(), "b".to_string())
    );
    assert_eq!(first.request_body, second.request_body);
    let body = server.requests()[0].json();
    assert!(body.get("reasoning_effort").is_none());
    assert_eq!(
        first.usage.cached_input_tokens, None,
        "not reported means unknown, not zero"
    );
}
