//! The time budget against the wall clock (issue 13.1): a run against a local model
//! server that answers each step after a real delay (1 s, then 5 s), under a time
//! budget, ends `TimeBudgetExceeded` after about the budget's length. Prints the real
//! duration against the configured one (the goal is within 5%) and the stored elapsed
//! time against the real one.
//!
//! `cargo bench --bench time_budget` (about 45 s; `BUDGET_BENCH_SCALE=0.2` for a
//! shorter pass with 0.2 s and 1 s steps).

#[path = "../tests/it/providers/fake_server.rs"]
#[allow(dead_code)]
mod fake_server;

use std::time::{Duration, Instant};

use fake_server::{FakeServer, Reply, whole};
use io_harness::provider::{Anthropic, HttpConfig};
use io_harness::{RunOutcome, Store, TaskContract, Verification, run};
use serde_json::{Value, json};

fn stream(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

/// A `list_dir` turn in Anthropic's wire format, sent after `delay`.
fn slow_turn(i: usize, delay: Duration) -> Reply {
    let turn = stream(&[
        json!({"type": "message_start", "message": {"id": "msg", "type": "message", "role": "assistant", "content": [],
            "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 100, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": format!("toolu_{i}"), "name": "list_dir", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"path\":\".\"}"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 9}}),
        json!({"type": "message_stop"}),
    ]);
    Reply::sse(whole(&turn)).paced(delay)
}

async fn case(per_step: Duration, budget: Duration) {
    let steps = (budget.as_secs_f64() / per_step.as_secs_f64()).ceil() as usize + 3;
    let server = FakeServer::start((0..steps).map(|i| slow_turn(i, per_step)).collect()).await;
    let mut cfg = HttpConfig::new(server.url(), "claude-sonnet-4-5", Some("sk-bench".into()));
    cfg.idle_timeout = Duration::from_secs(60);
    let provider = Anthropic::new(cfg).expect("client");
    let dir = tempfile::tempdir().expect("workspace");
    let contract = TaskContract::workspace(
        "list the directory",
        dir.path(),
        Verification::file_contains("never.txt", "x"),
    )
    .max_agent_depth(0)
    .max_steps(1000)
    .max_duration(budget);
    let store = Store::memory().expect("store");
    let started = Instant::now();
    let r = run(&contract, &provider, &store).await.expect("run");
    let real = started.elapsed();
    assert_eq!(r.outcome, RunOutcome::TimeBudgetExceeded, "{r:?}");
    let stored = store
        .steps(r.run_id)
        .expect("steps")
        .last()
        .and_then(|s| serde_json::from_str::<Value>(&s.state_json).ok())
        .and_then(|v| v["elapsed_ms"].as_u64())
        .map(Duration::from_millis)
        .unwrap_or_default();
    println!(
        "{:>5.1} s per step, budget {:>5.1} s: ended after {:>6.2} s real (ratio {:.3}), {} steps, stored elapsed {:.2} s at the last commit",
        per_step.as_secs_f64(),
        budget.as_secs_f64(),
        real.as_secs_f64(),
        real.as_secs_f64() / budget.as_secs_f64(),
        r.steps,
        stored.as_secs_f64(),
    );
}

fn main() {
    let scale: f64 = std::env::var("BUDGET_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    for (per_step, budget) in [(1.0, 10.0), (5.0, 30.0)] {
        rt.block_on(case(
            Duration::from_secs_f64(per_step * scale),
            Duration::from_secs_f64(budget * scale),
        ));
    }
}
