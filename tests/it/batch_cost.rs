//! The batch cost budget (issue 21): one live counter shared by the running tasks,
//! checked before each model call, against a loopback model that charges tokens.

use crate::cli::{Fixture, text};
use crate::providers::fake_server::{FakeServer, Reply, whole};
use crate::providers::{delta, openai_stream, usage_chunk};
use serde_json::json;

/// A text reply whose usage costs $0.10 at the task's price (100,000 input tokens
/// at $1 per million).
fn dear_reply() -> Reply {
    Reply::sse(whole(&openai_stream(&[
        delta(json!({"role": "assistant", "content": ""}), None),
        delta(json!({"content": "not yet"}), None),
        delta(json!({}), Some("stop")),
        usage_chunk(
            json!({"prompt_tokens": 100000, "completion_tokens": 0, "total_tokens": 100000}),
        ),
    ])))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_tasks_share_one_cost_budget_and_each_ends_cost_budget_exceeded() {
    let server = FakeServer::start((0..30).map(|_| dear_reply()).collect()).await;
    let f = Fixture::new();
    let mut tasks = Vec::new();
    for n in 1..=3 {
        f.write(&format!("t{n}/ws/a.txt"), "a\n");
        let t = f.write(
            &format!("t{n}/task.toml"),
            &format!(
                "goal = \"g{n}\"\nroot = \"ws\"\n[verify]\nfile_contains = {{ file = \"a.txt\", needle = \"never\" }}\nmax_attempts = 20\n[budget]\nmax_steps = 20\n[provider]\nkind = \"openai\"\nmodel = \"test-dear\"\nbase_url = \"{}/v1\"\n[prices.\"test-dear\"]\ninput = 1.0\noutput = 1.0\n",
                server.url()
            ),
        );
        tasks.push(t.display().to_string());
    }
    let store = f.store();
    let path = f.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        crate::cli::bin()
            .args(["batch", "--jobs", "3", "--max-cost", "0.25", "--json"])
            .args(&tasks)
            .env("OPENAI_API_KEY", crate::providers::KEY)
            .env("XDG_CACHE_HOME", path.join("cache"))
            .env("XDG_DATA_HOME", path.join("data"))
            .env("XDG_CONFIG_HOME", path.join("config"))
            .env("IO_HARNESS_STORE", store)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let doc = crate::json_schema::last(&out.stdout);
    assert_eq!(doc["object"], "batch");
    for t in doc["tasks"].as_array().unwrap() {
        assert_eq!(t["outcome"]["outcome"], "cost_budget_exceeded", "{t}");
    }
    // Checked before each call: once $0.25 is gone no task calls again, so at most
    // one call per running task lands past it (3 calls reach $0.30, 3 more at most).
    let calls = server.requests().len();
    assert!((3..=6).contains(&calls), "{calls} calls");
    let spent = doc["spent_usd"].as_f64().unwrap();
    assert!((0.25..=0.6 + 1e-9).contains(&spent), "{spent}");
    let total = doc["totals"]["cost_usd"].as_f64().unwrap();
    assert!(
        (total - calls as f64 * 0.1).abs() < 1e-9,
        "{total} for {calls} calls"
    );
    assert!(!text(&out.stdout).contains(crate::providers::KEY));
}
