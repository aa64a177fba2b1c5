//! OpenAI Chat Completions: the request on the wire and the assembled reply.

use io_harness::provider::{ContentBlock, CostSource, OpenAi, Provider, StopReason};
use serde_json::json;

use std::time::Duration;

use super::fake_server::{FakeServer, Reply, awkward, every, whole};
use super::{KEY, config, delta, fixtures, openai_stream, openai_text, usage_chunk};

#[tokio::test]
async fn openai_streams_text_with_bearer_auth_usage_and_price() {
    let sse = openai_stream(&[
        delta(
            json!({"role": "assistant", "content": "", "refusal": null}),
            None,
        ),
        delta(json!({"content": "Hel"}), None),
        delta(json!({"content": "lo, caf\u{e9}!"}), None),
        delta(json!({}), Some("stop")),
        usage_chunk(
            json!({"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020,
            "prompt_tokens_details": {"cached_tokens": 600, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 5}}),
        ),
    ]);
    let server = FakeServer::start(vec![Reply::sse(every(&sse, 9))]).await;
    let p = OpenAi::new(config(&format!("{}/v1", server.url()), "test-priced")).unwrap();
    let request = fixtures::hello();
    let turn = p.complete(&request).await.unwrap();

    let sent = server.only_request();
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(sent.header("accept"), Some("text/event-stream"));
    assert_eq!(sent.header("x-api-key"), None);
    let body = sent.json();
    assert_eq!(body["model"], "test-priced");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_completion_tokens"], 4096);
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "Say hello."}])
    );
    assert!(
        body.get("tools").is_none()
            && body.get("reasoning_effort").is_none()
            && body.get("usage").is_none()
    );
    assert_eq!(
        turn.request_body.as_deref(),
        Some(sent.body.as_slice()),
        "request_body is what went on the wire"
    );

    assert_eq!(turn.text(), "Hello, caf\u{e9}!");
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    assert_eq!(turn.model, "gpt-4o-mini-2024-07-18");
    assert_eq!(
        (
            turn.usage.input_tokens,
            turn.usage.cached_input_tokens,
            turn.usage.output_tokens
        ),
        (Some(400), Some(600), Some(20))
    );
    // test-priced: 1 $/M input, 0.5 $/M cached, 2 $/M output.
    assert_eq!(turn.cost.source, CostSource::PriceTable);
    let usd = turn.cost.usd.unwrap();
    assert!((usd - (400.0 + 300.0 + 40.0) / 1e6).abs() < 1e-12, "{usd}");
    assert_eq!(p.secrets(), vec![KEY.to_string()]);
}

/// The arguments text is cut every 3 characters (inside strings, escapes and
/// `\u` sequences), the id and name arrive late and are repeated, fields are
/// `null`, the stream uses CRLF with keepalive comments, and the bytes on the wire
/// are cut every 5 bytes, then at each awkward place (inside `data:`, characters
/// and CRLFs) with a pause before each piece.
#[tokio::test]
async fn openai_assembles_tool_calls_cut_anywhere() {
    let args = r#"{"path": "src/caf\u00e9.rs", "note": "say \"hi\" \ud83d\ude00 ü"}"#;
    let chars: Vec<char> = args.chars().collect();
    let mut chunks = vec![delta(
        json!({"role": "assistant", "content": null, "tool_calls": null}),
        None,
    )];
    for (i, piece) in chars.chunks(3).enumerate() {
        let piece: String = piece.iter().collect();
        let call = match i {
            0 => {
                json!({"index": 0, "id": null, "type": null, "function": {"name": null, "arguments": piece}})
            }
            1 => {
                json!({"index": 0, "id": "call_late", "type": "function", "function": {"name": "read_file", "arguments": piece}})
            }
            _ => {
                json!({"index": 0, "id": "call_late", "function": {"name": "read_file", "arguments": piece}})
            }
        };
        chunks.push(delta(json!({"content": null, "tool_calls": [call]}), None));
    }
    chunks.push(delta(json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "list", "arguments": ""}}]}), None));
    chunks.push(delta(json!({}), Some("tool_calls")));
    chunks.push(usage_chunk(
        json!({"prompt_tokens": 50, "completion_tokens": 9, "prompt_tokens_details": null}),
    ));
    let sse = openai_stream(&chunks)
        .replace("\n\n", "\r\n: keepalive\r\n\r\n")
        .replace("data: {\"id\"", ":\r\ndata: {\"id\"");
    let replies = vec![
        Reply::sse(every(&sse, 5)),
        Reply::sse(awkward(&sse)).paced(Duration::from_millis(1)),
    ];
    let server = FakeServer::start(replies).await;
    let p = OpenAi::new(config(&format!("{}/v1", server.url()), "gpt-4o-mini")).unwrap();
    let turn = p.complete(&fixtures::with_tools()).await.unwrap();
    let again = p.complete(&fixtures::with_tools()).await.unwrap();
    assert_eq!(
        turn, again,
        "cut every 5 bytes or at each awkward place, the same turn"
    );

    assert_eq!(
        turn.content,
        vec![
            ContentBlock::ToolUse {
                id: "call_late".into(),
                name: "read_file".into(),
                input: json!({"path": "src/caf\u{e9}.rs", "note": "say \"hi\" \u{1f600} \u{fc}"}),
            },
            ContentBlock::ToolUse {
                id: "call_b".into(),
                name: "list".into(),
                input: json!({})
            },
        ]
    );
    assert_eq!(turn.stop_reason, StopReason::ToolUse);
    assert_eq!(
        (turn.usage.input_tokens, turn.usage.cached_input_tokens),
        (Some(50), None)
    );
    assert_eq!(
        turn.cost.source,
        CostSource::PriceTable,
        "gpt-4o-mini is in the built-in table"
    );
}

#[tokio::test]
async fn openai_maps_tool_rounds_and_sends_the_same_bytes_twice() {
    let server = FakeServer::start(vec![
        Reply::sse(whole(&openai_text("ok"))),
        Reply::sse(whole(&openai_text("ok"))),
    ])
    .await;
    let p = OpenAi::new(config(&format!("{}/v1/", server.url()), "gpt-4o")).unwrap();
    let request = fixtures::tool_round();
    p.complete(&request).await.unwrap();
    p.complete(&request).await.unwrap();
    let sent = server.requests();
    assert_eq!(
        sent[0].path, "/v1/chat/completions",
        "a trailing slash on the base is not doubled"
    );
    assert_eq!(sent[0].body, sent[1].body, "same request, same bytes");
    let body = sent[0].json();
    assert_eq!(body["reasoning_effort"], "low");
    assert_eq!(body["max_completion_tokens"], 8192);
    assert_eq!(
        body["tools"][0],
        json!({"type": "function", "function": {"name": "read_file", "description": "Read a file of the workspace.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}})
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are a careful coding agent."},
            {"role": "user", "content": "Read src/café.rs"},
            {"role": "assistant", "content": "Reading it.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"src/café.rs\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "list", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "fn main() {}"},
            {"role": "tool", "tool_call_id": "call_2", "content": "[tool error] no such dir"},
            {"role": "user", "content": "Both done."}
        ])
    );
    // Thinking is Anthropic's: not sent; the tool call keeps no content.
    let body = {
        let server = FakeServer::start(vec![Reply::sse(whole(&openai_text("ok")))]).await;
        let p = OpenAi::new(config(&format!("{}/v1", server.url()), "gpt-4o")).unwrap();
        p.complete(&fixtures::thinking_round()).await.unwrap();
        server.only_request().json()
    };
    assert_eq!(
        body["messages"][2],
        json!({"role": "assistant", "tool_calls": [
        {"id": "toolu_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]})
    );
    assert_eq!(
        body["messages"].as_array().unwrap().len(),
        4,
        "tool-only user message adds no empty user message"
    );
}

#[tokio::test]
async fn openai_unknown_price_is_unknown_cost_and_no_key_sends_no_auth() {
    let server = FakeServer::start(vec![Reply::sse(whole(&openai_text("ok")))]).await;
    let mut cfg = config(&format!("{}/v1", server.url()), "local-model");
    cfg.api_key = None;
    let p = OpenAi::new(cfg).unwrap();
    let mut request = fixtures::hello();
    request.model = "local-model".into();
    let turn = p.complete(&request).await.unwrap();
    assert_eq!(turn.cost.usd, None, "never zero");
    assert_eq!(turn.cost.source, CostSource::Unknown);
    assert_eq!(server.only_request().header("authorization"), None);
    assert!(p.secrets().is_empty());
}
