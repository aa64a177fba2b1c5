//! `Record` writes what a live provider answered; `Scripted` replays it identically.

use io_harness::provider::{
    Anthropic, ContentBlock, CostSource, Message, Provider, Record, Role, Scripted, StopReason,
};
use serde_json::json;

use super::fake_server::{FakeServer, Reply, whole};
use super::{anthropic_stream, anthropic_text, config, fixtures, message_start};

fn thinking_tool_turn() -> String {
    anthropic_stream(&[
        message_start(
            "claude-haiku-4-5-20251001",
            json!({"input_tokens": 40, "output_tokens": 1, "cache_read_input_tokens": 7}),
        ),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Need the file."}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "c2ln"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_9", "name": "read_file", "input": {}}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"path\":"}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "\"a.rs\"}"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}}),
        json!({"type": "message_stop"}),
    ])
}

#[tokio::test]
async fn record_round_trips_through_scripted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.jsonl");
    let server = FakeServer::start(vec![
        Reply::sse(whole(&thinking_tool_turn())),
        Reply::json(500, "{}"),
        Reply::sse(whole(&anthropic_text("Done."))),
    ])
    .await;
    let live = Record::new(
        Anthropic::new(config(&server.url(), "claude-haiku-4-5")).unwrap(),
        &path,
    )
    .unwrap();
    assert_eq!(live.identity().kind, "anthropic");
    assert_eq!(live.secrets(), vec![super::KEY.to_string()]);

    let mut request = fixtures::with_tools();
    request.model = "claude-haiku-4-5".into();
    let first = live.complete(&request).await.unwrap();
    request.messages.push(first.to_message());
    request.messages.push(Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: "toolu_9".into(),
            content: "fn a() {}".into(),
            is_error: false,
        }],
    });
    live.complete(&request)
        .await
        .expect_err("the 500 is not recorded");
    let second = live.complete(&request).await.unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);

    let replay = Scripted::from_file(&path).unwrap();
    let mut replay_request = fixtures::with_tools();
    let again = replay.complete(&replay_request).await.unwrap();
    assert_eq!(
        again.content, first.content,
        "thinking and its signature survive"
    );
    assert!(
        matches!(&again.content[0], ContentBlock::Thinking { signature: Some(s), .. } if s == "c2ln")
    );
    assert_eq!(
        (again.usage, again.model.as_str()),
        (first.usage, "claude-haiku-4-5-20251001")
    );
    assert_eq!(again.stop_reason, StopReason::ToolUse);
    assert_eq!(
        (again.cost.usd, again.cost.source),
        (first.cost.usd, CostSource::Script)
    );
    assert!(first.cost.usd.is_some());
    replay_request.messages.push(again.to_message());
    let again2 = replay.complete(&replay_request).await.unwrap();
    assert_eq!(
        (again2.content, again2.usage),
        (second.content, second.usage)
    );
}

#[tokio::test]
async fn record_appends_to_an_existing_script() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    std::fs::write(&path, "{\"text\":\"earlier\"}\n").unwrap();
    let live = Record::new(
        Scripted::new(vec![io_harness::provider::ScriptTurn::text("later")]),
        &path,
    )
    .unwrap();
    live.complete(&fixtures::hello()).await.unwrap();
    let replay = Scripted::from_file(&path).unwrap();
    assert_eq!(replay.len(), 2);
}
