//! OpenRouter: the OpenAI protocol plus attribution headers and reported cost.

use io_harness::provider::{CostSource, OpenRouter, Provider, ProviderErrorKind};
use serde_json::json;

use super::fake_server::{FakeServer, Reply, whole};
use super::{KEY, config, delta, fixtures, openai_stream, usage_chunk};

fn answer(usage: serde_json::Value) -> String {
    openai_stream(&[
        delta(json!({"role": "assistant", "content": "Hi"}), None),
        delta(json!({}), Some("stop")),
        usage_chunk(usage),
    ])
}

#[tokio::test]
async fn openrouter_sends_attribution_and_uses_the_reported_cost() {
    let usage = json!({"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110, "cost": 0.00042,
        "is_byok": false, "prompt_tokens_details": {"cached_tokens": 0}, "cost_details": {"upstream_inference_cost": null}});
    let server = FakeServer::start(vec![Reply::sse(whole(&answer(usage)))]).await;
    let p = OpenRouter::new(config(
        &format!("{}/api/v1", server.url()),
        "anthropic/claude-sonnet-4.5",
    ))
    .unwrap();
    let turn = p.complete(&fixtures::with_tools()).await.unwrap();

    let sent = server.only_request();
    assert_eq!(sent.path, "/api/v1/chat/completions");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(sent.header("x-title"), Some("io-harness"));
    assert!(!sent.header("http-referer").unwrap_or("").is_empty());
    let body = sent.json();
    assert_eq!(body["usage"], json!({"include": true}));
    assert_eq!(body["max_tokens"], 4096);
    assert!(body.get("max_completion_tokens").is_none());
    assert_eq!(body["stream_options"], json!({"include_usage": true}));

    assert_eq!(turn.text(), "Hi");
    assert_eq!(turn.cost.source, CostSource::Reported);
    assert_eq!(turn.cost.usd, Some(0.00042));
    assert_eq!(
        (turn.usage.input_tokens, turn.usage.cached_input_tokens),
        (Some(100), Some(0))
    );
    assert_eq!(p.identity().kind, "openrouter");
    assert_eq!(p.secrets(), vec![KEY.to_string()]);
}

#[tokio::test]
async fn openrouter_without_reported_cost_uses_the_price_table_else_unknown() {
    let usage = json!({"prompt_tokens": 1000000, "completion_tokens": 0, "cost": null});
    let server = FakeServer::start(vec![
        Reply::sse(whole(&answer(usage.clone()))),
        Reply::sse(whole(&answer(usage))),
    ])
    .await;
    let p = OpenRouter::new(config(&format!("{}/api/v1", server.url()), "x")).unwrap();
    let priced = p.complete(&fixtures::hello()).await.unwrap(); // model test-priced: 1 $/M input
    assert_eq!(
        (priced.cost.source, priced.cost.usd),
        (CostSource::PriceTable, Some(1.0))
    );
    let mut request = fixtures::hello();
    request.model = "vendor/unpriced-model".into();
    let unknown = p.complete(&request).await.unwrap();
    assert_eq!(
        (unknown.cost.source, unknown.cost.usd),
        (CostSource::Unknown, None)
    );
}

/// OpenRouter reports a failure after the stream started as a chunk with an `error`
/// object and `finish_reason: "error"`.
#[tokio::test]
async fn openrouter_mid_stream_error_is_classified() {
    let cases = [
        (
            json!({"code": 429, "message": "Rate limit exceeded upstream"}),
            ProviderErrorKind::RateLimited,
        ),
        (
            json!({"code": "server_error", "message": "Provider disconnected"}),
            ProviderErrorKind::Server,
        ),
        (
            json!({"code": 502, "message": "Overloaded"}),
            ProviderErrorKind::Overloaded,
        ),
    ];
    for (error, kind) in cases {
        let sse = openai_stream(&[
            delta(json!({"content": "partial"}), None),
            json!({"id": "gen-1", "object": "chat.completion.chunk", "created": 1, "model": "m", "error": error,
                "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]}),
        ]);
        let server = FakeServer::start(vec![Reply::sse(whole(&sse))]).await;
        let p = OpenRouter::new(config(&format!("{}/api/v1", server.url()), "m")).unwrap();
        let e = p.complete(&fixtures::hello()).await.unwrap_err();
        assert_eq!(e.kind, kind, "{error}: {e}");
        assert_eq!(e.provider, "openrouter");
    }
}
