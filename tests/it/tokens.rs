//! Reported and estimated tokens (issue #13): a server that reports no usage counts
//! the harness's estimate against the budget, marked as one; a call whose reply was
//! lost after its request went out counts its estimated input, in the session and
//! after a kill, in the one that resumes the run.

use std::time::Duration;

use io_harness::contract::ModelPrice;
use io_harness::provider::{OpenAi, RetryPolicy};
use io_harness::{RunOutcome, Store, TaskContract, Verification, run};
use serde_json::json;

use crate::providers::fake_server::{End, FakeServer, Reply, whole};
use crate::providers::{config, delta, openai_stream, openai_text};

/// The model the provider tests price at 1 $/M input and 2 $/M output.
const MODEL: &str = "test-priced";

fn price() -> ModelPrice {
    ModelPrice {
        input: 1.0,
        output: 2.0,
        cached_input: Some(0.5),
        cache_write: Some(4.0),
    }
}

/// Writing hello.txt under a 1,000-token budget, at the test price.
fn hello_under_1000_tokens(dir: &std::path::Path) -> TaskContract {
    TaskContract::workspace(
        "write hello.txt",
        dir,
        Verification::file_contains("hello.txt", "hello"),
    )
    .max_tokens(1_000)
    .price(MODEL, price())
}

fn client(server: &FakeServer) -> OpenAi {
    OpenAi::new(config(&format!("{}/v1", server.url()), MODEL)).unwrap()
}

/// A tool call to write hello.txt, streamed as llama.cpp's server does: no usage chunk.
fn write_hello_without_usage() -> String {
    openai_stream(&[
        delta(json!({"role": "assistant", "content": ""}), None),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {
                "name": "write_file", "arguments": "{\"path\":\"hello.txt\",\"content\":\"hello\\n\"}"}}]}),
            Some("tool_calls"),
        ),
    ])
}

#[tokio::test]
async fn a_stream_without_usage_counts_the_estimate_against_max_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let server = FakeServer::start(vec![
        Reply::sse(whole(&write_hello_without_usage())),
        Reply::sse(whole(&openai_text("done"))),
    ])
    .await;
    // The first request alone (system prompt, goal, tool specs) is well over 1,000
    // tokens by the harness's count; the server says nothing of it.
    let c = hello_under_1000_tokens(dir.path());
    let r = run(&c, &client(&server), &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::TokenBudgetExceeded, "{r:?}");
    assert_eq!(r.steps, 1);
    assert_eq!(server.requests().len(), 1, "no second call past the budget");
    assert!(r.total_tokens >= 1_000, "{}", r.total_tokens);
    assert_eq!(
        r.estimated_tokens, r.total_tokens,
        "every token is an estimate"
    );
    // Cost follows the tokens: price × the estimate, marked as such.
    assert!(r.cost_estimated);
    let usd = r.cost_usd.unwrap();
    let want = (r.input_tokens as f64 * 1.0 + r.output_tokens as f64 * 2.0) / 1e6;
    assert!((usd - want).abs() < 1e-12, "{usd} vs {want}");

    let step = &store.steps(r.run_id).unwrap()[0];
    assert_eq!(step.token_source, "estimated");
    assert_eq!(step.cost_source, "estimated");
    assert_eq!(step.estimated_input_tokens, Some(step.input_tokens));
    assert!(step.estimated_output_tokens.unwrap() > 0);
    let usage: serde_json::Value = serde_json::from_str(&step.usage_json).unwrap();
    assert!(
        usage.get("input_tokens").is_none() && usage.get("output_tokens").is_none(),
        "nothing reported is stored as reported: {usage}"
    );
}

/// The write_hello turn with the usage chunk `usage`.
fn write_hello_with_usage(usage: serde_json::Value) -> String {
    openai_stream(&[
        delta(json!({"role": "assistant", "content": ""}), None),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {
                "name": "write_file", "arguments": "{\"path\":\"hello.txt\",\"content\":\"hello\\n\"}"}}]}),
            Some("tool_calls"),
        ),
        crate::providers::usage_chunk(usage),
    ])
}

/// Adversary breaks: a server that reports `0` tokens (meaning "not counted") was
/// believed, so `max_tokens` never fired and the cost read $0 as reported; a count of
/// `u64::MAX` overflowed the totals and panicked the run, and its resume. An
/// impossible report is no report: the estimate counts, marked as one.
#[tokio::test]
async fn a_zero_or_absurd_reported_usage_counts_the_estimate_instead() {
    for usage in [
        json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}),
        json!({"prompt_tokens": u64::MAX, "completion_tokens": u64::MAX, "total_tokens": u64::MAX}),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::memory().unwrap();
        let server = FakeServer::start(vec![
            Reply::sse(whole(&write_hello_with_usage(usage.clone()))),
            Reply::sse(whole(&openai_text("done"))),
        ])
        .await;
        let c = hello_under_1000_tokens(dir.path());
        let r = run(&c, &client(&server), &store).await.unwrap();
        assert_eq!(r.outcome, RunOutcome::TokenBudgetExceeded, "{usage}: {r:?}");
        assert_eq!(r.estimated_tokens, r.total_tokens, "{usage}: {r:?}");
        assert!(
            r.total_tokens >= 1_000 && r.total_tokens < 1_000_000,
            "{usage}: {r:?}"
        );
        assert!(r.cost_estimated, "{usage}");
        let step = &store.steps(r.run_id).unwrap()[0];
        assert_eq!(step.token_source, "estimated", "{usage}");
        // The record's totals say the same, and which part is estimated.
        let rec = store.run(r.run_id).unwrap().unwrap();
        assert_eq!(rec.estimated_tokens, r.estimated_tokens, "{usage}");
    }
}

#[tokio::test]
async fn reported_usage_is_counted_as_reported_beside_the_estimate() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hello.txt"), "hello\n").unwrap();
    let store = Store::memory().unwrap();
    let server = FakeServer::start(vec![Reply::sse(whole(&openai_text("done")))]).await;
    let c = TaskContract::workspace(
        "say done",
        dir.path(),
        Verification::file_contains("hello.txt", "hello"),
    );
    let r = run(&c, &client(&server), &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    assert_eq!((r.total_tokens, r.estimated_tokens), (12, 0));
    assert!(!r.cost_estimated);
    let step = &store.steps(r.run_id).unwrap()[0];
    assert_eq!(step.token_source, "reported");
    assert_eq!(step.cost_source, "price_table");
    assert!(
        step.estimated_input_tokens.unwrap() > 100,
        "the estimate is kept beside"
    );
}

#[tokio::test]
async fn a_reply_lost_after_the_request_counts_its_estimated_input() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hello.txt"), "hello\n").unwrap();
    let store = Store::memory().unwrap();
    // The server takes the request and the connection drops mid-reply; the retry gets
    // a whole reply reporting 10 + 2 tokens.
    let server = FakeServer::start(vec![
        Reply::sse(whole(
            "data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"do",
        ))
        .end(End::Cut),
        Reply::sse(whole(&openai_text("done"))),
    ])
    .await;
    let c = TaskContract::workspace(
        "say done",
        dir.path(),
        Verification::file_contains("hello.txt", "hello"),
    )
    .price(MODEL, price())
    .retry_policy(RetryPolicy {
        max_attempts: 2,
        base: Duration::from_millis(5),
        cap: Duration::from_millis(10),
        jitter: false,
        ..RetryPolicy::default()
    });
    let r = run(&c, &client(&server), &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    assert_eq!(r.lost_calls, 1);
    let attempts = store.provider_attempts(r.run_id).unwrap();
    assert_eq!(attempts.len(), 1);
    assert!(attempts[0].reply_lost, "{attempts:?}");
    let lost_input = attempts[0].estimated_input_tokens.unwrap();
    assert!(lost_input > 100);
    assert_eq!(
        r.total_tokens,
        12 + lost_input,
        "reported 12 plus the lost input"
    );
    assert_eq!(r.estimated_tokens, lost_input);
    assert!(r.cost_estimated, "the lost input is priced, as an estimate");
    let calls = store.model_calls(r.run_id).unwrap();
    let statuses: Vec<&str> = calls.iter().map(|c| c.status.as_str()).collect();
    assert_eq!(statuses, ["committed", "lost"], "{calls:?}");
}

/// A call in flight when the process dies (SIGKILL while a real local server takes
/// its time to answer) is on record before its request went out: the resumed session
/// counts its estimated input, and `show` says it is an estimate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_off_by_a_kill_counts_its_estimated_input_on_resume() {
    use crate::providers::{KEY, anthropic_text, anthropic_tool};
    use std::process::Command;
    let write = anthropic_tool(
        "toolu_1",
        "write_file",
        json!({"path": "a.txt", "content": "one\n"}),
    );
    let server = FakeServer::start(vec![
        Reply::sse(whole(&anthropic_text("too late"))).paced(Duration::from_secs(30)),
        Reply::sse(whole(&write)),
        Reply::sse(whole(&anthropic_text("done"))),
    ])
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t");
    std::fs::create_dir_all(t.join("ws")).unwrap();
    std::fs::write(
        t.join("task.toml"),
        format!(
            "goal = \"write a\"\nroot = \"ws\"\n[verify]\nfile_contains = {{ file = \"a.txt\", needle = \"one\" }}\n[provider]\nkind = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = \"{}\"\n",
            server.url()
        ),
    )
    .unwrap();
    let home = tmp.path().to_path_buf();
    let cmd = move |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_io-harness"));
        c.args(args)
            .env("IO_HARNESS_STORE", home.join("store.db"))
            .env("XDG_CACHE_HOME", home.join("cache"))
            .env("XDG_DATA_HOME", home.join("data"))
            .env("ANTHROPIC_API_KEY", KEY)
            .env_remove("IO_HARNESS_FAILPOINT");
        c
    };
    let task = t.join("task.toml");
    let mut child = cmd(&["run", task.to_str().unwrap(), "--json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while server.requests().is_empty() && started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.requests().len(), 1, "the first request went out");
    child.kill().unwrap();
    child.wait().unwrap();
    let resume = cmd.clone();
    let out =
        tokio::task::spawn_blocking(move || resume(&["resume", "1", "--json"]).output().unwrap())
            .await
            .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap()
        .to_string();
    let end: serde_json::Value = serde_json::from_str(&last).unwrap();
    let result = &end["result"];
    assert_eq!(result["lost_calls"], 1, "{result}");
    // The two answered calls reported their usage; the lost one is an estimate.
    let estimated = result["estimated_tokens"].as_u64().unwrap();
    assert!(
        estimated > 0 && estimated < result["total_tokens"].as_u64().unwrap(),
        "{result}"
    );
    let show = cmd(&["show", "1"]).output().unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains("1 model call(s) lost their reply"), "{text}");
    // `runs` counts what the result counted: the lost call's estimated input too.
    let runs = cmd(&["runs", "--json"]).output().unwrap();
    let listed = serde_json::Value::from(crate::json_schema::runs(&runs.stdout));
    assert_eq!(listed[0]["lost_calls"], 1, "{listed}");
    assert_eq!(
        listed[0]["input_tokens"], result["input_tokens"],
        "{listed}"
    );
    assert_eq!(
        listed[0]["estimated_tokens"], result["estimated_tokens"],
        "{listed}"
    );
}
