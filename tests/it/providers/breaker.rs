//! Issue 17.5: after the primary escalated, every later step went through its whole
//! retry schedule again. The circuit breaker sends later steps to the provider that
//! served, probes the primary with one attempt once `probe_steps` steps and
//! `probe_interval` have passed, and keeps its state with the run (a resume goes on
//! with the provider that served). Real servers, real (short) time.

use std::sync::Arc;
use std::time::Duration;

use io_harness::provider::{OpenAi, Provider, RetryPolicy};
use io_harness::{RunOptions, RunOutcome, Store, TaskContract, Verification};
use serde_json::json;

use super::fake_server::{FakeServer, Reply, whole};
use super::{config, delta, openai_stream, openai_text};

fn dead() -> Reply {
    Reply::json(500, r#"{"error":{"message":"down"}}"#)
}

/// A `list_dir` call in OpenAI's format, sent after `pause`.
fn list_dir(n: usize, pause: Duration) -> Reply {
    let call = json!({"tool_calls": [{"index": 0, "id": format!("call_{n}"), "type": "function",
        "function": {"name": "list_dir", "arguments": "{\"path\": \".\"}"}}]});
    Reply::sse(whole(&openai_stream(&[delta(call, Some("tool_calls"))]))).paced(pause)
}

fn client(server: &FakeServer) -> Arc<dyn Provider> {
    Arc::new(OpenAi::new(config(&format!("{}/v1", server.url()), "m")).unwrap())
}

fn policy(probe_steps: u32, probe_interval: Duration) -> RetryPolicy {
    RetryPolicy {
        max_attempts: 2,
        base: Duration::from_millis(10),
        cap: Duration::from_millis(20),
        probe_steps,
        probe_interval,
        ..RetryPolicy::default()
    }
}

fn contract(dir: &std::path::Path, retry: RetryPolicy, steps: u32) -> TaskContract {
    TaskContract::workspace(
        "list the directory",
        dir,
        Verification::file_contains("never.txt", "x"),
    )
    .max_agent_depth(0)
    .max_steps(steps)
    .retry_policy(retry)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_steps_go_to_the_provider_that_served_and_the_primary_is_probed_once() {
    let primary = FakeServer::start((0..20).map(|_| dead()).collect()).await;
    // Each fallback reply takes 60 ms: the 200 ms interval comes after the 2 steps.
    let pause = Duration::from_millis(60);
    let live = FakeServer::start((0..8).map(|n| list_dir(n, pause)).collect()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let c = contract(dir.path(), policy(2, Duration::from_millis(200)), 8);
    let opts = RunOptions::default().fallback(client(&live));
    let r = io_harness::run_with(&c, client(&primary).as_ref(), &store, opts)
        .await
        .unwrap();
    assert_eq!(r.outcome, RunOutcome::StepCapReached, "{r:?}");
    let attempts = store.provider_attempts(r.run_id).unwrap();
    let rows: Vec<(u32, &str)> = attempts.iter().map(|a| (a.step, a.next.as_str())).collect();
    // Step 1: the primary's retries, then the fallback. Later steps skip the primary
    // but for one-attempt probes, the first no earlier than step 3 and 200 ms on.
    assert_eq!(&rows[..2], [(1, "retry"), (1, "fallback")], "{rows:?}");
    let probes: Vec<_> = attempts
        .iter()
        .filter(|a| a.next == "probe-failed")
        .collect();
    assert!(!probes.is_empty(), "{rows:?}");
    assert!(probes[0].step >= 3, "{rows:?}");
    assert!(
        probes[0].at_ms - attempts[1].at_ms >= 200,
        "probed {} ms after the fallback took over",
        probes[0].at_ms - attempts[1].at_ms
    );
    assert_eq!(
        rows.len(),
        2 + probes.len(),
        "no retry of the primary: {rows:?}"
    );
    assert_eq!(primary.requests().len(), 2 + probes.len());
    assert!(probes.len() <= 3, "at most every 2 steps: {rows:?}");
    let steps = store.steps(r.run_id).unwrap();
    let state: serde_json::Value = serde_json::from_str(&steps[0].state_json).unwrap();
    assert_eq!(state["breaker"]["serving"], 1, "{state}");
}

/// The breaker is stored with each commit: a run that escalated after the fallback took
/// over resumes at the fallback, not at the dead primary's retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_goes_on_with_the_provider_that_served() {
    let primary = FakeServer::start((0..20).map(|_| dead()).collect()).await;
    let live = FakeServer::start(vec![
        list_dir(0, Duration::ZERO),
        dead(),
        dead(),
        Reply::sse(whole(&openai_text("done"))),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    // Probes far off: only the breaker's order is under test.
    let c = contract(dir.path(), policy(100, Duration::from_secs(3600)), 2);
    let opts = || RunOptions::default().fallback(client(&live));
    let r = io_harness::run_with(&c, client(&primary).as_ref(), &store, opts())
        .await
        .unwrap();
    // Step 2: the fallback (first now) fails twice, then the primary twice: escalated.
    assert!(
        matches!(
            r.outcome,
            RunOutcome::Escalated {
                retryable: true,
                ..
            }
        ),
        "{r:?}"
    );
    assert_eq!(primary.requests().len(), 4);
    let resumed =
        io_harness::run::resume_with(&store, r.run_id, client(&primary).as_ref(), None, opts())
            .await
            .unwrap();
    assert_eq!(
        live.requests().len(),
        4,
        "the resumed step went to the fallback"
    );
    assert_eq!(primary.requests().len(), 4, "and not to the primary");
    assert!(
        !matches!(resumed.outcome, RunOutcome::Escalated { .. }),
        "{resumed:?}"
    );
}

/// SPEC §6: every documented `next` of a provider attempt (`ProviderAttempt::next`) is
/// produced by a real run against real servers, the values issue 17 added included
/// (`probe-failed`, and `tool-error` of kind `reply-too-large`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_attempt_next_value_is_produced() {
    let mut seen = std::collections::BTreeSet::new();
    let mut collect = |store: &Store, run_id: i64| {
        for a in store.provider_attempts(run_id).unwrap() {
            seen.insert(a.next);
        }
    };
    let dir = tempfile::tempdir().unwrap();

    // retry, fallback, probe-failed: a dead primary, probed at every step.
    let primary = FakeServer::start((0..20).map(|_| dead()).collect()).await;
    let live = FakeServer::start((0..3).map(|n| list_dir(n, Duration::ZERO)).collect()).await;
    let store = Store::memory().unwrap();
    let c = contract(dir.path(), policy(1, Duration::ZERO), 3);
    let opts = RunOptions::default().fallback(client(&live));
    let r = io_harness::run_with(&c, client(&primary).as_ref(), &store, opts)
        .await
        .unwrap();
    collect(&store, r.run_id);

    // escalate: a wait over max_wait with no fallback.
    let limited = FakeServer::start(vec![
        Reply::json(429, r#"{"error":{"message":"slow"}}"#).header("Retry-After", "5"),
    ])
    .await;
    let store = Store::memory().unwrap();
    let c = contract(
        dir.path(),
        RetryPolicy {
            max_wait: Duration::from_secs(1),
            ..policy(10, Duration::ZERO)
        },
        3,
    );
    let r = io_harness::run(&c, client(&limited).as_ref(), &store)
        .await
        .unwrap();
    collect(&store, r.run_id);

    // deadline: a computed backoff past a 1.5 s budget.
    let store = Store::memory().unwrap();
    let c = contract(
        dir.path(),
        RetryPolicy {
            base: Duration::from_secs(5),
            cap: Duration::from_secs(5),
            jitter: false,
            ..policy(10, Duration::ZERO)
        },
        3,
    )
    .max_duration(Duration::from_millis(1500));
    let r = io_harness::run(&c, client(&primary).as_ref(), &store)
        .await
        .unwrap();
    collect(&store, r.run_id);

    // tool-error: a reply cut at max_reply_bytes.
    let big = Reply::sse(whole(&openai_text(&"z".repeat(4096))));
    let cut = FakeServer::start(vec![big, Reply::sse(whole(&openai_text("done")))]).await;
    let mut cfg = config(&format!("{}/v1", cut.url()), "m");
    cfg.max_reply_bytes = 1024;
    let store = Store::memory().unwrap();
    let c = contract(dir.path(), policy(10, Duration::ZERO), 2);
    let r = io_harness::run(&c, &OpenAi::new(cfg).unwrap(), &store)
        .await
        .unwrap();
    collect(&store, r.run_id);

    let documented = [
        "deadline",
        "escalate",
        "fallback",
        "probe-failed",
        "retry",
        "tool-error",
    ];
    let documented: std::collections::BTreeSet<String> =
        documented.iter().map(|s| s.to_string()).collect();
    assert_eq!(seen, documented);
}

/// Found by the aimock chaos runs: the request names the model of the chain's first
/// provider, and a fallback configured with another model was sent that name (a real
/// fallback from one model to another would have been refused as an unknown model,
/// or served by the wrong one). Each provider is asked for its own model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fallback_is_asked_for_its_own_model_not_the_primarys() {
    let primary = FakeServer::start((0..3).map(|_| dead()).collect()).await;
    let live = FakeServer::start(vec![Reply::sse(whole(&openai_text("done")))]).await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let c = contract(dir.path(), policy(100, Duration::from_secs(3600)), 1);
    let primary_client: Arc<dyn Provider> = Arc::new(
        OpenAi::new(config(
            &format!("{}/v1", primary.url()),
            "model-of-the-primary",
        ))
        .unwrap(),
    );
    let fallback: Arc<dyn Provider> = Arc::new(
        OpenAi::new(config(
            &format!("{}/v1", live.url()),
            "model-of-the-fallback",
        ))
        .unwrap(),
    );
    let opts = RunOptions::default().fallback(fallback);
    io_harness::run_with(&c, primary_client.as_ref(), &store, opts)
        .await
        .unwrap();
    let asked = |s: &FakeServer| -> Vec<String> {
        s.requests()
            .iter()
            .map(|r| {
                let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
                v["model"].as_str().unwrap_or_default().to_string()
            })
            .collect()
    };
    assert_eq!(asked(&primary), ["model-of-the-primary"; 2]);
    assert_eq!(asked(&live), ["model-of-the-fallback"]);
}

/// Adversary A23: when the fallback, of the same kind as the primary, failed last, its
/// `escalate` row named the primary (the provider was found by kind). The chain says
/// which provider failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_escalate_row_names_the_provider_that_failed_last() {
    let primary = FakeServer::start((0..4).map(|_| dead()).collect()).await;
    let fallback = FakeServer::start((0..4).map(|_| dead()).collect()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let c = contract(dir.path(), policy(100, Duration::from_secs(3600)), 1);
    let p: Arc<dyn Provider> =
        Arc::new(OpenAi::new(config(&format!("{}/v1", primary.url()), "first")).unwrap());
    let f: Arc<dyn Provider> =
        Arc::new(OpenAi::new(config(&format!("{}/v1", fallback.url()), "second")).unwrap());
    let r = io_harness::run_with(&c, p.as_ref(), &store, RunOptions::default().fallback(f))
        .await
        .unwrap();
    assert!(matches!(r.outcome, RunOutcome::Escalated { .. }), "{r:?}");
    let rows: Vec<(String, String)> = store
        .provider_attempts(r.run_id)
        .unwrap()
        .into_iter()
        .map(|a| (a.provider, a.next))
        .collect();
    let last = rows.last().unwrap();
    assert_eq!(
        (last.0.as_str(), last.1.as_str()),
        ("openai/second", "escalate"),
        "{rows:?}"
    );
}
