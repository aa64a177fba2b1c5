//! Every way a call can fail, through both protocols, classified into its kind.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use io_harness::provider::{Anthropic, OpenAi, Provider, ProviderError, ProviderErrorKind as K};

use super::fake_server::{End, FakeServer, Reply, whole};
use super::{KEY, anthropic_text, config, delta, fixtures, openai_stream, openai_text};
use serde_json::json;

#[derive(Clone, Copy, Debug)]
enum Api {
    OpenAi,
    Anthropic,
}
const BOTH: [Api; 2] = [Api::OpenAi, Api::Anthropic];

fn client(api: Api, url: &str, idle: Duration) -> Box<dyn Provider> {
    let mut cfg = match api {
        Api::OpenAi => config(&format!("{url}/v1"), "m"),
        Api::Anthropic => config(url, "m"),
    };
    cfg.idle_timeout = idle;
    cfg.connect_timeout = idle;
    match api {
        Api::OpenAi => Box::new(OpenAi::new(cfg).unwrap()),
        Api::Anthropic => Box::new(Anthropic::new(cfg).unwrap()),
    }
}

async fn fail_with(api: Api, replies: Vec<Reply>) -> (ProviderError, usize) {
    let server = FakeServer::start(replies).await;
    let e = client(api, &server.url(), Duration::from_secs(20))
        .complete(&fixtures::hello())
        .await
        .expect_err("the call must fail");
    assert!(!e.message.contains(KEY), "key leaked: {e}");
    (e, server.requests().len())
}

async fn fail(api: Api, reply: Reply) -> ProviderError {
    fail_with(api, vec![reply]).await.0
}

/// `t` as an IMF-fixdate, the `Retry-After` date form.
fn http_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil from days (H. Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let wd = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][days.rem_euclid(7) as usize];
    let mon = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][m as usize - 1];
    format!(
        "{wd}, {d:02} {mon} {y} {:02}:{:02}:{:02} GMT",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[tokio::test]
async fn http_statuses_are_classified() {
    let openai_ctx = r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
    let anthropic_ctx = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#;
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let cases = [
        (
            Reply::json(
                401,
                &format!(
                    r#"{{"error":{{"message":"Incorrect API key provided: {KEY}","code":"invalid_api_key"}}}}"#
                ),
            ),
            K::Auth,
        ),
        (
            Reply::json(
                403,
                r#"{"type":"error","error":{"type":"permission_error","message":"no"}}"#,
            ),
            K::Auth,
        ),
        (
            Reply::json(
                429,
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
            ),
            K::RateLimited,
        ),
        (Reply::json(529, overloaded), K::Overloaded),
        (Reply::json(503, overloaded), K::Overloaded),
        (
            Reply::json(
                500,
                r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#,
            ),
            K::Server,
        ),
        (
            Reply::json(502, "<html>Bad Gateway</html>").header("Content-Type", "text/html"),
            K::Server,
        ),
        (Reply::json(400, openai_ctx), K::ContextOverflow),
        (Reply::json(400, anthropic_ctx), K::ContextOverflow),
        (
            Reply::json(
                400,
                r#"{"error":{"message":"Unknown parameter","type":"invalid_request_error"}}"#,
            ),
            K::Request,
        ),
        (Reply::json(404, r#"{"error":"not found"}"#), K::Request),
    ];
    for api in BOTH {
        for (reply, kind) in cases.iter().cloned() {
            let e = fail(api, reply).await;
            assert_eq!(e.kind, kind, "{api:?}: {e}");
            assert!(e.status.is_some());
        }
    }
    let e = fail(Api::OpenAi, cases[0].0.clone()).await;
    assert!(
        e.message.contains("Incorrect API key provided: [REDACTED]"),
        "{e}"
    );
}

#[tokio::test]
async fn retry_after_seconds_and_http_date_are_parsed() {
    let e = fail(
        Api::Anthropic,
        Reply::json(429, "{}").header("Retry-After", "17"),
    )
    .await;
    assert_eq!(
        (e.kind, e.retry_after),
        (K::RateLimited, Some(Duration::from_secs(17)))
    );
    let e = fail(
        Api::OpenAi,
        Reply::json(429, "{}")
            .header("retry-after-ms", "1500")
            .header("Retry-After", "2"),
    )
    .await;
    assert_eq!(e.retry_after, Some(Duration::from_millis(1500)));
    let at = http_date(SystemTime::now() + Duration::from_secs(120));
    let e = fail(
        Api::OpenAi,
        Reply::json(503, "{}").header("Retry-After", &at),
    )
    .await;
    let wait = e
        .retry_after
        .unwrap_or_else(|| panic!("no retry_after from {at}"));
    assert!(
        wait > Duration::from_secs(100) && wait <= Duration::from_secs(120),
        "{at} gave {wait:?}"
    );
    assert_eq!(e.kind, K::Server);
}

#[tokio::test]
async fn redirects_are_not_followed() {
    for api in BOTH {
        let reply = Reply::json(307, "").header("Location", "http://127.0.0.1:9/elsewhere");
        let (e, requests) =
            fail_with(api, vec![reply, Reply::sse(whole(&openai_text("no")))]).await;
        assert_eq!((e.kind, e.status), (K::Request, Some(307)), "{e}");
        assert!(e.message.contains("http://127.0.0.1:9/elsewhere"), "{e}");
        assert_eq!(requests, 1);
    }
}

#[tokio::test]
async fn a_stream_without_its_terminator_is_transport() {
    // Cut before the choice said why it ended: incomplete.
    let openai = openai_stream(&[
        delta(json!({"role": "assistant", "content": ""}), None),
        delta(json!({"content": "hi"}), None),
    ])
    .replace("data: [DONE]\n\n", "");
    let e = fail(Api::OpenAi, Reply::sse(whole(&openai))).await;
    assert_eq!(e.kind, K::Transport, "{e}");
    assert!(e.message.contains("[DONE]"), "{e}");
    let openai = openai_text("hi").replace("data: [DONE]\n\n", "");
    let anthropic = anthropic_text("hi").replace(
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        "",
    );
    assert!(!anthropic.contains("message_stop"));
    let e = fail(Api::Anthropic, Reply::sse(whole(&anthropic))).await;
    assert_eq!(e.kind, K::Transport, "{e}");
    assert!(e.message.contains("message_stop"), "{e}");
    // Ends inside an event: said so.
    let e = fail(Api::OpenAi, Reply::sse(whole(&(openai + "data: {\"choi")))).await;
    assert_eq!(e.kind, K::Transport);
    assert!(e.message.contains("a line without its line end"), "{e}");
    // The connection drops mid-body (no terminating chunk).
    for api in BOTH {
        let e = fail(api, Reply::sse(whole("data: {}\n\n")).end(End::Cut)).await;
        assert_eq!(e.kind, K::Transport, "{api:?}: {e}");
    }
}

#[tokio::test]
async fn malformed_chunks_are_malformed() {
    let e = fail(
        Api::OpenAi,
        Reply::sse(whole("data: {\"choices\": [\n\ndata: [DONE]\n\n")),
    )
    .await;
    assert_eq!(e.kind, K::Malformed, "{e}");
    let e = fail(
        Api::Anthropic,
        Reply::sse(whole("event: message_start\ndata: {not json}\n\n")),
    )
    .await;
    assert_eq!(e.kind, K::Malformed, "{e}");
    let e = fail(
        Api::OpenAi,
        Reply::sse(vec![b"data: \xff\xfe\n\n".to_vec()]),
    )
    .await;
    assert_eq!(e.kind, K::Malformed, "{e}");
    assert!(e.message.contains("UTF-8"), "{e}");
    let e = fail(
        Api::OpenAi,
        Reply::json(200, "<html>hi</html>").header("Content-Type", "text/html"),
    )
    .await;
    assert_eq!(e.kind, K::Malformed, "{e}");
}

#[tokio::test]
async fn an_error_inside_a_200_stream_is_classified() {
    let openai = |error: &str| format!("data: {{\"error\": {error}}}\n\n");
    let cases = [
        (Api::OpenAi, openai(r#"{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}"#), K::RateLimited),
        (Api::OpenAi, openai(r#"{"message":"The server had an error","type":"server_error","code":null}"#), K::Server),
        (Api::OpenAi, openai(&format!(r#"{{"message":"bad key {KEY}","type":"invalid_request_error","code":"invalid_api_key"}}"#)), K::Auth),
        (Api::Anthropic, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n".into(), K::Overloaded),
        (Api::Anthropic, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal\"}}\n\n".into(), K::Server),
        (Api::Anthropic, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow\"}}\n\n".into(), K::RateLimited),
    ];
    for (api, sse, kind) in cases {
        let e = fail(api, Reply::sse(whole(&sse))).await;
        assert_eq!(e.kind, kind, "{api:?}: {e}");
    }
    // A JSON error with status 200 instead of a stream.
    let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let e = fail(Api::Anthropic, Reply::json(200, body)).await;
    assert_eq!(e.kind, K::Overloaded, "{e}");
}

#[tokio::test]
async fn silence_between_chunks_is_an_idle_timeout() {
    for (api, first) in [
        (Api::OpenAi, openai_text("x")),
        (Api::Anthropic, anthropic_text("x")),
    ] {
        let first: String = first.split_inclusive("\n\n").take(2).collect();
        let server = FakeServer::start(vec![Reply::sse(whole(&first)).end(End::Hang)]).await;
        let started = Instant::now();
        let e = client(api, &server.url(), Duration::from_millis(300))
            .complete(&fixtures::hello())
            .await
            .unwrap_err();
        assert_eq!(e.kind, K::Timeout, "{api:?}: {e}");
        assert!(started.elapsed() < Duration::from_secs(15));
    }
}

/// Issue 17.6: a stream that only sent `: ping` comments never tripped the idle
/// timeout (150 s until the server closed). Keep-alive comments alone are idle now:
/// with 400 ms of idle, a server pinging every 100 ms for 6 s fails within a second,
/// measured in real time; real content keeps the same stream alive.
#[tokio::test]
async fn keep_alive_comments_alone_are_idle() {
    for (api, first) in [
        (Api::OpenAi, openai_text("x")),
        (Api::Anthropic, anthropic_text("x")),
    ] {
        let head: String = first.split_inclusive("\n\n").take(1).collect();
        let mut pieces = vec![head.into_bytes()];
        pieces.extend((0..60).map(|_| b": ping\n\n".to_vec()));
        let server = FakeServer::start(vec![
            Reply::sse(pieces)
                .paced(Duration::from_millis(100))
                .end(End::Hang),
        ])
        .await;
        let started = Instant::now();
        let e = client(api, &server.url(), Duration::from_millis(400))
            .complete(&fixtures::hello())
            .await
            .unwrap_err();
        assert_eq!(e.kind, K::Timeout, "{api:?}: {e}");
        assert!(
            e.message.contains("keep-alive comments do not count"),
            "{e}"
        );
        assert!(
            started.elapsed() < Duration::from_millis(1_500),
            "{api:?}: {:?}",
            started.elapsed()
        );
        // The same pacing with real content between the pings completes.
        let mut pieces: Vec<Vec<u8>> = Vec::new();
        for event in first.split_inclusive("\n\n") {
            pieces.push(b": ping\n\n".to_vec());
            pieces.push(event.as_bytes().to_vec());
        }
        let server =
            FakeServer::start(vec![Reply::sse(pieces).paced(Duration::from_millis(150))]).await;
        let done = client(api, &server.url(), Duration::from_millis(400))
            .complete(&fixtures::hello())
            .await
            .unwrap();
        assert_eq!(done.text(), "x", "{api:?}");
    }
}

#[tokio::test]
async fn no_listener_is_transport_and_no_headers_is_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    for api in BOTH {
        let e = client(api, &url, Duration::from_secs(5))
            .complete(&fixtures::hello())
            .await
            .unwrap_err();
        assert_eq!(e.kind, K::Transport, "{api:?}: {e}");
    }
    // Accepts, reads, never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let hold = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let e = client(Api::OpenAi, &url, Duration::from_millis(300))
        .complete(&fixtures::hello())
        .await
        .unwrap_err();
    assert_eq!(e.kind, K::Timeout, "{e}");
    hold.abort();
}

/// llama-cpp-python's server (chatml-function-calling, tools offered) closes a streamed
/// reply cleanly after the chunk carrying `finish_reason`, without `data: [DONE]`: the
/// reply is whole, and was reported as a cut stream. It is taken; the same body cut
/// inside an event, or reset, is still a transport failure.
#[tokio::test]
async fn a_stream_closed_cleanly_after_its_finish_reason_is_a_whole_reply() {
    let call = json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
        "function": {"name": "list_dir", "arguments": "{\"path\": \".\"}"}}]});
    let body = openai_stream(&[
        delta(json!({"role": "assistant", "content": null}), None),
        delta(call, None),
        delta(json!({}), Some("tool_calls")),
    ])
    .replace("data: [DONE]\n\n", "");
    let server = FakeServer::start(vec![Reply::sse(whole(&body))]).await;
    let client = OpenAi::new(config(&format!("{}/v1", server.url()), "m")).unwrap();
    let turn = client.complete(&fixtures::with_tools()).await.unwrap();
    let calls: Vec<_> = turn.tool_calls().map(|(_, name, _)| name).collect();
    assert_eq!(calls, ["list_dir"], "{turn:?}");
    let e = fail(Api::OpenAi, Reply::sse(whole(&body)).end(End::Cut)).await;
    assert_eq!(e.kind, K::Transport, "{e}");
}

/// Adversary A13g: Anthropic's `ping` events are its keep-alives; a stream of pings
/// alone ran 60 s past a 2 s idle timeout. They count as idle, like comments.
#[tokio::test]
async fn anthropic_ping_events_alone_are_idle() {
    let first = anthropic_text("x");
    let head: String = first.split_inclusive("\n\n").take(1).collect();
    let mut pieces = vec![head.into_bytes()];
    pieces.extend((0..60).map(|_| b"event: ping\ndata: {\"type\": \"ping\"}\n\n".to_vec()));
    let server = FakeServer::start(vec![
        Reply::sse(pieces)
            .paced(Duration::from_millis(100))
            .end(End::Hang),
    ])
    .await;
    let started = Instant::now();
    let e = client(Api::Anthropic, &server.url(), Duration::from_millis(400))
        .complete(&fixtures::hello())
        .await
        .unwrap_err();
    assert_eq!(e.kind, K::Timeout, "{e}");
    assert!(
        started.elapsed() < Duration::from_millis(1_500),
        "{:?}",
        started.elapsed()
    );
}

/// Adversary A13e: an OpenAI stream of chunks whose delta is empty (`{}` or an empty
/// `content`) kept the stream alive forever. They count as idle; a chunk with a token
/// in it resets the clock.
#[tokio::test]
async fn openai_empty_delta_chunks_alone_are_idle() {
    let first = openai_text("x");
    let head: String = first.split_inclusive("\n\n").take(1).collect();
    let mut pieces = vec![head.into_bytes()];
    for i in 0..60 {
        let d = if i % 2 == 0 {
            delta(json!({}), None)
        } else {
            delta(json!({"content": ""}), None)
        };
        pieces.push(format!("data: {d}\n\n").into_bytes());
    }
    let server = FakeServer::start(vec![
        Reply::sse(pieces)
            .paced(Duration::from_millis(100))
            .end(End::Hang),
    ])
    .await;
    let started = Instant::now();
    let e = client(Api::OpenAi, &server.url(), Duration::from_millis(400))
        .complete(&fixtures::hello())
        .await
        .unwrap_err();
    assert_eq!(e.kind, K::Timeout, "{e}");
    assert!(
        started.elapsed() < Duration::from_millis(1_500),
        "{:?}",
        started.elapsed()
    );

    // Tokens paced under the idle bound keep the same stream alive to its end.
    let tokens: Vec<String> = (0..8)
        .map(|i| {
            format!(
                "data: {}\n\n",
                delta(json!({"content": format!("t{i}")}), None)
            )
        })
        .chain([
            format!("data: {}\n\n", delta(json!({}), Some("stop"))),
            "data: [DONE]\n\n".to_string(),
        ])
        .collect();
    let server = FakeServer::start(vec![
        Reply::sse(tokens.into_iter().map(String::into_bytes).collect())
            .paced(Duration::from_millis(100)),
    ])
    .await;
    let turn = client(Api::OpenAi, &server.url(), Duration::from_millis(400))
        .complete(&fixtures::hello())
        .await
        .unwrap();
    assert!(format!("{turn:?}").contains("t7"), "{turn:?}");
}

/// A stream's headers may come late (llama.cpp holds them while it reads a long
/// prompt): the wait for them is the stream's idle bound, not the shorter connect
/// bound; past the idle bound it is a timeout.
#[tokio::test]
async fn a_streams_headers_wait_as_long_as_its_idle_bound() {
    for api in BOTH {
        let body = match api {
            Api::OpenAi => openai_text("late"),
            Api::Anthropic => anthropic_text("late"),
        };
        let server = FakeServer::start(vec![
            Reply::sse(whole(&body)).headers_after(Duration::from_millis(700)),
            Reply::sse(whole(&body)).headers_after(Duration::from_millis(2_500)),
        ])
        .await;
        let mut cfg = match api {
            Api::OpenAi => config(&format!("{}/v1", server.url()), "m"),
            Api::Anthropic => config(&server.url(), "m"),
        };
        cfg.connect_timeout = Duration::from_millis(200);
        cfg.idle_timeout = Duration::from_millis(1_500);
        let p: Box<dyn Provider> = match api {
            Api::OpenAi => Box::new(OpenAi::new(cfg).unwrap()),
            Api::Anthropic => Box::new(Anthropic::new(cfg).unwrap()),
        };
        let turn = p.complete(&fixtures::hello()).await;
        assert!(turn.is_ok(), "{api:?}: headers after 0.7 s: {turn:?}");
        let started = Instant::now();
        let e = p.complete(&fixtures::hello()).await.unwrap_err();
        assert_eq!(e.kind, K::Timeout, "{api:?}: {e}");
        assert!(started.elapsed() < Duration::from_millis(2_400), "{api:?}");
    }
}
