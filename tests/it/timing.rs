//! Time as a user meets it: a local model server that answers after a real delay, and
//! budgets measured against the wall clock (no paused tokio time here).

use std::time::{Duration, Instant};

use io_harness::provider::Anthropic;
use io_harness::{RunOutcome, Store, TaskContract, Verification, run};
use serde_json::{Value, json};

use crate::providers::fake_server::{FakeServer, Reply, whole};
use crate::providers::{anthropic_stream, config, message_start};

/// A run that lists the directory until its time `budget` ends (the criterion never
/// passes), without sub-agents.
fn listing_for(dir: &std::path::Path, budget: Duration) -> TaskContract {
    TaskContract::workspace(
        "list the directory",
        dir,
        Verification::file_contains("never.txt", "x"),
    )
    .max_agent_depth(0)
    .max_duration(budget)
}

/// A `list_dir` turn in Anthropic's wire format, sent after `delay`.
fn slow_list_dir(id: &str, delay: Duration) -> Reply {
    let usage = json!({"input_tokens": 100, "output_tokens": 1});
    let turn = anthropic_stream(&[
        message_start("claude-sonnet-4-5-20250929", usage),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": id, "name": "list_dir", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": json!({"path": "."}).to_string()}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 9}}),
        json!({"type": "message_stop"}),
    ]);
    Reply::sse(whole(&turn)).paced(delay)
}

/// Regression (issue 13.1): each commit added the whole session's time again, so with
/// steps of a real 0.4 s the stored elapsed time ran 0.4, 1.2, 2.4 s… and a 2 s budget
/// ended after three steps, at about 1.2 s of real time. Now the budget lasts its
/// real length and the stored figure is the wall time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_time_budget_measures_wall_time_with_a_slow_model() {
    let delay = Duration::from_millis(400);
    let replies = (0..12)
        .map(|i| slow_list_dir(&format!("toolu_{i}"), delay))
        .collect();
    let server = FakeServer::start(replies).await;
    let provider = Anthropic::new(config(&server.url(), "claude-sonnet-4-5")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let contract = listing_for(dir.path(), Duration::from_secs(2));
    let store = Store::memory().unwrap();
    let started = Instant::now();
    let r = run(&contract, &provider, &store).await.unwrap();
    let real = started.elapsed();
    assert_eq!(r.outcome, RunOutcome::TimeBudgetExceeded, "{r:?}");
    assert!(
        real >= Duration::from_millis(1_600),
        "a 2 s budget ended after {real:?} of real time"
    );
    assert!(
        r.steps >= 4,
        "only {} steps of 0.4 s in a 2 s budget",
        r.steps
    );
    let steps = store.steps(r.run_id).unwrap();
    let last = steps.last().expect("a committed step");
    let state: Value = serde_json::from_str(&last.state_json).unwrap();
    let stored = Duration::from_millis(state["elapsed_ms"].as_u64().unwrap());
    assert!(
        stored <= real.mul_f64(1.2) + Duration::from_millis(500),
        "stored elapsed {stored:?} against {real:?} of real time"
    );
}

/// Adversary break (C4): a `Retry-After` longer than the time left ended the run
/// `TimeBudgetExceeded` at once (0.1 s into a 3 s budget) with nothing on record; for a
/// while it then waited out the budget. Issue 17.4 settles it: a server wait the time
/// left cannot hold is not waited for at all — the run ends at once `Escalated`,
/// retryable (resumable), and the refused wait is on record as the escalating attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_past_the_deadline_escalates_resumable_at_once_on_record() {
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let server = FakeServer::start(vec![
        Reply::json(529, overloaded).header("retry-after", "10"),
        Reply::json(529, overloaded).header("retry-after", "10"),
    ])
    .await;
    let provider = Anthropic::new(config(&server.url(), "claude-sonnet-4-5")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let contract = listing_for(dir.path(), Duration::from_secs(2));
    let store = Store::memory().unwrap();
    let started = Instant::now();
    let r = run(&contract, &provider, &store).await.unwrap();
    let real = started.elapsed();
    assert_eq!(
        r.outcome,
        RunOutcome::Escalated {
            kind: io_harness::provider::ProviderErrorKind::Overloaded,
            retryable: true
        },
        "{r:?}"
    );
    assert!(real < Duration::from_millis(1_500), "took {real:?}");
    assert_eq!(server.requests().len(), 1, "no retry inside the 10 s asked");
    let attempts = store.provider_attempts(r.run_id).unwrap();
    let last = attempts.last().expect("the refused wait is on record");
    assert_eq!(last.next, "escalate", "{attempts:?}");
    let msg = last.message.as_deref().unwrap_or_default();
    assert!(msg.contains("left of the time budget"), "{msg}");
}
