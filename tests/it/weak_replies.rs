//! A reply the model got wrong is feedback, not a crash (issue 17.1): real runs against
//! a local server speaking the OpenAI and Anthropic wire formats, whose model sends a
//! tool call with arguments that are not JSON, or one with no name. On the main before
//! this, each ended the run `escalated malformed` with nothing stored about the reply.

use io_harness::provider::{Anthropic, OpenAi, Provider};
use io_harness::store::StepRecord;
use io_harness::{RunOutcome, StallPolicy, Store, TaskContract, Verification, run};
use serde_json::{Value, json};

use crate::providers::fake_server::{FakeServer, Reply, whole};
use crate::providers::{
    anthropic_stream, anthropic_text, config, delta, message_start, openai_stream, openai_text,
    usage_chunk,
};

/// An OpenAI turn with one tool call whose name and raw arguments are as given.
fn openai_call(id: &str, name: &str, arguments: &str) -> Reply {
    let call = json!({"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": arguments}});
    Reply::sse(whole(&openai_stream(&[
        delta(
            json!({"role": "assistant", "content": null, "tool_calls": [call]}),
            None,
        ),
        delta(json!({}), Some("tool_calls")),
        usage_chunk(json!({"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25})),
    ])))
}

/// An Anthropic turn with one `tool_use` whose input arrives as `partial_json`.
fn anthropic_call(id: &str, name: &str, partial_json: &str) -> Reply {
    Reply::sse(whole(&anthropic_stream(&[
        message_start(
            "claude-sonnet-4-5-20250929",
            json!({"input_tokens": 20, "output_tokens": 1}),
        ),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": partial_json}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 9}}),
        json!({"type": "message_stop"}),
    ])))
}

fn contract(dir: &std::path::Path) -> TaskContract {
    TaskContract::workspace(
        "write hello.txt",
        dir,
        Verification::file_contains("hello.txt", "hello"),
    )
    .max_agent_depth(0)
}

async fn run_against(provider: &dyn Provider, c: &TaskContract) -> (RunOutcome, Vec<StepRecord>) {
    let store = Store::memory().unwrap();
    let r = run(c, provider, &store).await.unwrap();
    (r.outcome, store.steps(r.run_id).unwrap())
}

/// The tool result the model was sent for the first call of `step`.
fn first_output(steps: &[StepRecord], step: usize) -> String {
    steps[step].tool_calls[0].output.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_with_broken_arguments_or_no_name_is_answered_and_the_run_goes_on() {
    let good = json!({"path": "hello.txt", "content": "hello\n"}).to_string();
    let server = FakeServer::start(vec![
        openai_call(
            "call_1",
            "write_file",
            r#"{"path": "hello.txt", "content": "hel"#,
        ),
        openai_call("call_2", "", &good),
        openai_call("call_3", "write_file", "[1, 2]"),
        openai_call("call_4", "write_file", &good),
        Reply::sse(whole(&openai_text("done"))),
    ])
    .await;
    let provider = OpenAi::new(config(&format!("{}/v1", server.url()), "gpt-4o-mini")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (outcome, steps) = run_against(&provider, &contract(dir.path())).await;
    assert_eq!(outcome, RunOutcome::Success, "{steps:?}");
    // Each wrong call is on record with what the model sent, and answered with why.
    let broken = &steps[0].tool_calls[0];
    assert!(broken.is_error);
    assert!(
        broken.input_json.contains(r#"\"content\": \"hel"#),
        "the raw arguments are kept: {}",
        broken.input_json
    );
    assert!(
        first_output(&steps, 0)
            .contains("your call to `write_file` was not run: its arguments are not valid JSON"),
        "{}",
        first_output(&steps, 0)
    );
    assert!(first_output(&steps, 1).contains("it has no tool name"));
    assert!(first_output(&steps, 2).contains("JSON but not an object"));
    // The model saw the feedback in its next request, paired with its call.
    let second: Value = server.requests()[1].json();
    let messages = second["messages"].as_array().unwrap();
    let tool_msg = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool_msg["tool_call_id"], "call_1");
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
    // A nameless call goes back under a name the API accepts.
    let third: Value = server.requests()[2].json();
    let names: Vec<&str> = third["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
        .filter_map(|c| c["function"]["name"].as_str())
        .collect();
    assert_eq!(names, ["write_file", "unnamed_tool_call"]);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hello.txt")).unwrap(),
        "hello\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_tool_input_that_is_not_json_is_feedback_too() {
    let server = FakeServer::start(vec![
        anthropic_call(
            "toolu_1",
            "write_file",
            r#"{"path": "hello.txt", "content": "#,
        ),
        anthropic_call(
            "toolu_2",
            "write_file",
            r#"{"path": "hello.txt", "content": "hello\n"}"#,
        ),
        Reply::sse(whole(&anthropic_text("done"))),
    ])
    .await;
    let provider = Anthropic::new(config(&server.url(), "claude-sonnet-4-5")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (outcome, steps) = run_against(&provider, &contract(dir.path())).await;
    assert_eq!(outcome, RunOutcome::Success, "{steps:?}");
    assert!(first_output(&steps, 0).contains("not valid JSON"));
    let second: Value = server.requests()[1].json();
    let result = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .find(|b| b["type"] == "tool_result")
        .unwrap()
        .clone();
    assert_eq!(result["tool_use_id"], "toolu_1");
    assert_eq!(result["is_error"], true);
}

/// Repeated malformed calls are no progress, however their raw text differs: the
/// stall detector ends the run `Stalled` after its replans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_malformed_calls_count_toward_a_stall() {
    let replies = (0..12)
        .map(|i| {
            openai_call(
                &format!("call_{i}"),
                "write_file",
                &format!("{{\"path\": {i}"),
            )
        })
        .collect();
    let server = FakeServer::start(replies).await;
    let provider = OpenAi::new(config(&format!("{}/v1", server.url()), "gpt-4o-mini")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let c = contract(dir.path()).stall_policy(StallPolicy {
        window: 2,
        max_replans: 1,
    });
    let (outcome, steps) = run_against(&provider, &c).await;
    assert_eq!(outcome, RunOutcome::Stalled, "{} steps", steps.len());
    assert_eq!(steps.len(), 4, "two windows of two idle steps");
}

/// Issue 17.3: a wrong model ended the run `escalated request` with the server's
/// message stored nowhere, and every escalating attempt was stored as attempt 0. Each
/// attempt now keeps its status, kind and message, its real number, and its own time,
/// written when it happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_failed_attempt_keeps_what_the_server_said_its_number_and_its_time() {
    let busy = r#"{"error":{"message":"The server is busy, sorry","type":"server_error"}}"#;
    let missing = r#"{"error":{"message":"The model `gpt-nope` does not exist","type":"invalid_request_error","code":"model_not_found"}}"#;
    let server = FakeServer::start(vec![
        Reply::json(500, busy),
        Reply::json(500, busy),
        Reply::json(404, missing),
    ])
    .await;
    let provider = OpenAi::new(config(&format!("{}/v1", server.url()), "gpt-nope")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let c = contract(dir.path()).retry_policy(io_harness::provider::RetryPolicy {
        max_attempts: 5,
        base: std::time::Duration::from_millis(300),
        jitter: false,
        ..io_harness::provider::RetryPolicy::default()
    });
    let store = Store::memory().unwrap();
    let r = run(&c, &provider, &store).await.unwrap();
    assert!(
        matches!(r.outcome, RunOutcome::Escalated { .. }),
        "{:?}",
        r.outcome
    );
    let attempts = store.provider_attempts(r.run_id).unwrap();
    let rows: Vec<(u32, &str, Option<u16>, &str)> = attempts
        .iter()
        .map(|a| (a.attempt, a.kind.as_str(), a.status, a.next.as_str()))
        .collect();
    assert_eq!(
        rows,
        [
            (1, "server", Some(500), "retry"),
            (2, "server", Some(500), "retry"),
            (3, "request", Some(404), "escalate"),
        ]
    );
    assert!(
        attempts[0]
            .message
            .as_deref()
            .unwrap()
            .contains("The server is busy")
    );
    assert!(
        attempts[2]
            .message
            .as_deref()
            .unwrap()
            .contains("The model `gpt-nope` does not exist"),
        "{:?}",
        attempts[2].message
    );
    // Written as they happened: the second waited 300 ms after the first, the third
    // 600 ms after the second.
    assert!(attempts[1].at_ms - attempts[0].at_ms >= 250, "{attempts:?}");
    assert!(attempts[2].at_ms - attempts[1].at_ms >= 550, "{attempts:?}");
}

/// Issue 17.3, as the operator sees it: the outcome line, `--json` and `show` say
/// what the server said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_prints_the_servers_reason_for_an_escalation() {
    let missing = r#"{"error":{"message":"The model `gpt-nope` does not exist","type":"invalid_request_error","code":"model_not_found"}}"#;
    let server =
        FakeServer::start(vec![Reply::json(404, missing), Reply::json(404, missing)]).await;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    std::fs::create_dir_all(p.join("ws")).unwrap();
    std::fs::write(
        p.join("task.toml"),
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"a\", needle = \"b\" }\n",
    )
    .unwrap();
    let base = format!("{}/v1", server.url());
    let out = tokio::task::spawn_blocking(move || {
        let cli = |args: &[&str]| {
            std::process::Command::new(env!("CARGO_BIN_EXE_io-harness"))
                .args(args)
                .env("IO_HARNESS_STORE", p.join("store.db"))
                .env("XDG_CACHE_HOME", p.join("cache"))
                .env("XDG_CONFIG_HOME", p.join("config"))
                .env("OPENAI_API_KEY", crate::providers::KEY)
                .env_remove("IO_HARNESS_FAILPOINT")
                .output()
                .unwrap()
        };
        let task = p.join("task.toml").display().to_string();
        let flags = [
            "--provider",
            "openai",
            "--model",
            "gpt-nope",
            "--base-url",
            &base,
        ];
        let text = cli(&[&["run", &task][..], &flags].concat());
        let json = cli(&[&["run", &task, "--json"][..], &flags].concat());
        let show = cli(&["show", "1"]);
        (text, json, show)
    })
    .await
    .unwrap();
    let (text, json, show) = out;
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert_eq!(text.status.code(), Some(4), "{stdout}");
    assert!(
        stdout.contains("provider error: openai/gpt-nope request (HTTP 404) after 1 attempt(s): ")
            && stdout.contains("The model `gpt-nope` does not exist"),
        "{stdout}"
    );
    let last = crate::json_schema::last(&json.stdout);
    assert!(
        last["provider_error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{last}"
    );
    assert_eq!(last["provider_error"]["attempt"], 1);
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(
        shown.contains("(not committed)") && shown.contains("does not exist"),
        "{shown}"
    );
}
