//! Retry against a fault-injecting server in each wire format: the real clients, the
//! real retry loop, real time where the figure matters (Retry-After), short backoff
//! elsewhere.

use std::time::{Duration, Instant};

use io_harness::provider::{
    Anthropic, OpenAi, Provider, ProviderErrorKind as K, RetryError, RetryPolicy,
    complete_with_retry,
};

use super::fake_server::{End, FakeServer, Reply, whole};
use super::{anthropic_text, config, fixtures, openai_text};

#[derive(Clone, Copy, Debug)]
enum Api {
    OpenAi,
    Anthropic,
}

fn client(api: Api, url: &str) -> Box<dyn Provider> {
    let mut cfg = match api {
        Api::OpenAi => config(&format!("{url}/v1"), "m"),
        Api::Anthropic => config(url, "m"),
    };
    cfg.idle_timeout = Duration::from_millis(400);
    match api {
        Api::OpenAi => Box::new(OpenAi::new(cfg).unwrap()),
        Api::Anthropic => Box::new(Anthropic::new(cfg).unwrap()),
    }
}

fn ok(api: Api) -> Reply {
    Reply::sse(whole(&match api {
        Api::OpenAi => openai_text("recovered"),
        Api::Anthropic => anthropic_text("recovered"),
    }))
}

fn fast() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        base: Duration::from_millis(10),
        cap: Duration::from_millis(50),
        jitter: true,
        ..RetryPolicy::default()
    }
}

/// Runs the retry loop; returns the result, the kinds of the failed attempts and the
/// number of requests the server saw.
async fn attempt(api: Api, replies: Vec<Reply>) -> (Result<String, RetryError>, Vec<K>, usize) {
    let server = FakeServer::start(replies).await;
    let p = client(api, &server.url());
    let mut kinds = Vec::new();
    let r = complete_with_retry(p.as_ref(), &fixtures::hello(), &fast(), None, &mut |a| {
        kinds.push(a.kind)
    })
    .await
    .map(|c| c.text());
    (r, kinds, server.requests().len())
}

#[tokio::test]
async fn retryable_failures_are_retried_to_success_in_both_protocols() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let cases: Vec<(Reply, K)> = vec![
            (
                Reply::json(500, r#"{"error":{"message":"boom"}}"#),
                K::Server,
            ),
            (Reply::json(502, "bad gateway"), K::Server),
            (
                Reply::json(503, r#"{"error":{"message":"The server is overloaded"}}"#),
                K::Overloaded,
            ),
            (
                Reply::json(
                    529,
                    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                ),
                K::Overloaded,
            ),
            (
                Reply::sse(whole("data: {\"choices\": [")).end(End::Cut),
                K::Transport,
            ),
            (Reply::sse(Vec::new()).end(End::Hang), K::Timeout),
        ];
        for (fault, kind) in cases {
            let (r, kinds, requests) = attempt(api, vec![fault, ok(api)]).await;
            assert_eq!(
                r.as_deref().ok(),
                Some("recovered"),
                "{api:?} {kind:?}: {r:?}"
            );
            assert_eq!(kinds, [kind], "{api:?}");
            assert_eq!(requests, 2);
        }
    }
}

#[tokio::test]
async fn non_retryable_failures_are_not_retried() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let overflow = match api {
            Api::OpenAi => {
                r#"{"error":{"message":"This model's maximum context length is 128000 tokens","code":"context_length_exceeded"}}"#
            }
            Api::Anthropic => {
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#
            }
        };
        for (fault, kind) in [
            (
                Reply::json(401, r#"{"error":{"message":"bad key"}}"#),
                K::Auth,
            ),
            (Reply::json(400, overflow), K::ContextOverflow),
        ] {
            let (r, kinds, requests) = attempt(api, vec![fault, ok(api)]).await;
            match r {
                Err(RetryError::Exhausted { error, attempts: 1 }) => assert_eq!(error.kind, kind),
                other => panic!("{api:?}: {other:?}"),
            }
            assert!(kinds.is_empty());
            assert_eq!(requests, 1, "{api:?} {kind:?} must not be retried");
        }
    }
}

/// The measured figure of the issue: from the first 429 to success, against the
/// server's Retry-After, within 10 % (no jitter applies to a server's wait).
#[tokio::test]
async fn retry_after_is_honoured_to_within_ten_percent() {
    for (api, reply, expect) in [
        (
            Api::OpenAi,
            Reply::json(429, r#"{"error":{"message":"slow down"}}"#).header("Retry-After", "1"),
            1.0,
        ),
        (
            Api::Anthropic,
            Reply::json(
                429,
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"Please try again in 0.6s."}}"#,
            ),
            0.6,
        ),
    ] {
        let started = Instant::now();
        let (r, kinds, _) = attempt(api, vec![reply, ok(api)]).await;
        let took = started.elapsed().as_secs_f64();
        assert_eq!(r.as_deref().ok(), Some("recovered"));
        assert_eq!(kinds, [K::RateLimited]);
        println!(
            "{api:?}: first 429 to success in {took:.3} s against a server wait of {expect} s"
        );
        // The figure is the printed one; the bound leaves room for a loaded 2-core machine
        // (other tests compile in parallel) without letting a computed backoff pass.
        assert!(
            took >= expect && took <= expect * 1.1 + 0.3,
            "{api:?}: {took} s for {expect} s"
        );
    }
}

/// A reply broken on the wire, in each way a server or proxy breaks one.
fn malformed(api: Api, n: usize) -> Reply {
    match (api, n % 3) {
        (Api::OpenAi, 0) => Reply::sse(whole("data: {\"choices\": [\n\ndata: [DONE]\n\n")),
        (Api::Anthropic, 0) => Reply::sse(whole("event: message_start\ndata: {not json}\n\n")),
        (_, 1) => Reply::json(200, "<html>hi</html>").header("Content-Type", "text/plain"),
        _ => Reply::json(200, "<html>hi</html>").header("Content-Type", "text/html"),
    }
}

/// Issue 17.2: a malformed 200 ended the run at once, with neither retry nor fallback
/// (8 of 12 chaos runs died so). It is a transient fault now, retried within its own
/// bound (`malformed_attempts`, default 2 attempts in all), then handed to the fallback.
#[tokio::test]
async fn a_malformed_reply_is_retried_within_its_own_bound_then_falls_back() {
    use io_harness::provider::{ChainError, complete_chain};
    for api in [Api::OpenAi, Api::Anthropic] {
        for n in 0..3 {
            // Once broken, then fine: retried to success.
            let (r, kinds, requests) = attempt(api, vec![malformed(api, n), ok(api)]).await;
            assert_eq!(r.unwrap(), "recovered", "{api:?} case {n}");
            assert_eq!(kinds, [K::Malformed]);
            assert_eq!(requests, 2);
        }
        // Broken twice: the bound (2 of the 4 attempts) is reached, not max_attempts.
        let (r, kinds, requests) = attempt(
            api,
            vec![malformed(api, 0), malformed(api, 1), ok(api), ok(api)],
        )
        .await;
        match r {
            Err(RetryError::Exhausted { error, attempts: 2 }) => {
                assert_eq!(error.kind, K::Malformed)
            }
            other => panic!("{api:?}: {other:?}"),
        }
        assert_eq!((kinds.len(), requests), (1, 2));
        // In a chain, the next provider serves.
        let broken = FakeServer::start(vec![malformed(api, 0), malformed(api, 2)]).await;
        let live = FakeServer::start(vec![ok(api)]).await;
        let (a, b) = (client(api, &broken.url()), client(api, &live.url()));
        let mut next = Vec::new();
        let (c, i) = complete_chain(
            &[a.as_ref(), b.as_ref()],
            &fixtures::hello(),
            &fast(),
            None,
            &mut |at| next.push(at.next),
        )
        .await
        .unwrap_or_else(|e: ChainError| panic!("{api:?}: {e}"));
        assert_eq!((c.text().as_str(), i), ("recovered", 1));
        assert_eq!(next, ["retry", "fallback"]);
    }
}

/// Issue 17.4: `Retry-After: 600` slept 600 s with nothing on record. A server wait
/// over `[retry] max_wait` is not waited: the chain moves to the fallback at once, and
/// with none left escalates retryable; either way the decision is an attempt. Real
/// time: a 2 s Retry-After against a max_wait of 1 s.
#[tokio::test]
async fn a_retry_after_over_max_wait_falls_back_or_escalates_at_once() {
    use io_harness::provider::{ChainError, complete_chain};
    let policy = RetryPolicy {
        max_wait: Duration::from_secs(1),
        ..fast()
    };
    let limited =
        || Reply::json(429, r#"{"error":{"message":"slow down"}}"#).header("Retry-After", "2");
    for api in [Api::OpenAi, Api::Anthropic] {
        let primary = FakeServer::start(vec![limited(), ok(api)]).await;
        let live = FakeServer::start(vec![ok(api)]).await;
        let (a, b) = (client(api, &primary.url()), client(api, &live.url()));
        let mut seen = Vec::new();
        let started = Instant::now();
        let (c, i) = complete_chain(
            &[a.as_ref(), b.as_ref()],
            &fixtures::hello(),
            &policy,
            None,
            &mut |at| seen.push((at.next, at.attempt.message.clone())),
        )
        .await
        .unwrap_or_else(|e: ChainError| panic!("{api:?}: {e}"));
        assert!(started.elapsed() < Duration::from_millis(900), "{api:?}");
        assert_eq!((c.text().as_str(), i), ("recovered", 1));
        assert_eq!(primary.requests().len(), 1, "{api:?}: not retried");
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].0, "fallback");
        assert!(seen[0].1.contains("max_wait"), "{}", seen[0].1);

        let alone = FakeServer::start(vec![limited(), ok(api)]).await;
        let a = client(api, &alone.url());
        let started = Instant::now();
        let err = complete_chain(
            &[a.as_ref()],
            &fixtures::hello(),
            &policy,
            None,
            &mut |_| {},
        )
        .await
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_millis(900), "{api:?}");
        match err {
            ChainError::Escalated {
                error,
                retryable: true,
                attempts: 1,
                provider_index: 0,
            } => assert_eq!(error.kind, K::RateLimited),
            other => panic!("{api:?}: {other:?}"),
        }
        // Within max_wait the server's wait is taken, over the computed backoff.
        let ok_wait = FakeServer::start(vec![
            Reply::json(429, r#"{"error":{"message":"slow down"}}"#).header("Retry-After", "1"),
            ok(api),
        ])
        .await;
        let a = client(api, &ok_wait.url());
        let policy = RetryPolicy {
            max_wait: Duration::from_millis(1500),
            ..fast()
        };
        let started = Instant::now();
        let c = complete_with_retry(a.as_ref(), &fixtures::hello(), &policy, None, &mut |_| {})
            .await
            .unwrap();
        assert_eq!(c.text(), "recovered");
        assert!(started.elapsed() >= Duration::from_secs(1), "{api:?}");
    }
}
