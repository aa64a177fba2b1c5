//! Resume needs only the store: a retryable escalation resumes, and the operator files
//! outside the workspace a later session needs (a scripted provider's script, a Rust
//! gate's criterion) are kept by content when the run starts, so a resume works from
//! any directory and after those files moved.

use std::sync::Arc;
use std::time::Duration;

use io_harness::provider::{
    HttpConfig, OpenAi, ProviderErrorKind, RetryPolicy, ScriptTurn, Scripted,
};
use io_harness::run::{Flow, RunEvent, RunOptions};
use io_harness::{RunOutcome, Store, TaskContract, Verification, resume, run, run_with};
use serde_json::json;

use crate::providers::fake_server::{FakeServer, Reply};

fn write_turn(path: &str, content: &str) -> ScriptTurn {
    ScriptTurn::tool("write_file", json!({"path": path, "content": content}))
}

/// A run whose provider's retries ran out on a server error ends `Escalated` with
/// `retryable: true`; a later session (the outage over) continues it to success.
#[tokio::test]
async fn retryable_escalation_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let server = FakeServer::start(vec![
        Reply::json(500, r#"{"error":{"message":"boom"}}"#),
        Reply::json(500, r#"{"error":{"message":"boom"}}"#),
    ])
    .await;
    let down = OpenAi::new(HttpConfig::new(
        format!("{}/v1", server.url()),
        "m",
        Some("k".into()),
    ))
    .unwrap();
    let c = TaskContract::workspace(
        "write hello.txt",
        dir.path(),
        Verification::file_contains("hello.txt", "hello"),
    )
    .retry_policy(RetryPolicy {
        max_attempts: 2,
        base: Duration::from_millis(5),
        cap: Duration::from_millis(10),
        jitter: false,
        ..RetryPolicy::default()
    });
    let r = run(&c, &down, &store).await.unwrap();
    assert_eq!(
        r.outcome,
        RunOutcome::Escalated {
            kind: ProviderErrorKind::Server,
            retryable: true
        }
    );
    assert!(r.outcome.is_resumable());
    assert_eq!(server.requests().len(), 2);

    let up = Scripted::new(vec![
        write_turn("hello.txt", "hello\n"),
        ScriptTurn::text("done"),
    ]);
    let resumed = resume(&store, r.run_id, &up).await.unwrap();
    assert_eq!(resumed.outcome, RunOutcome::Success);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hello.txt")).unwrap(),
        "hello\n"
    );
}

/// A non-retryable escalation still cannot be resumed: the same request would fail
/// the same way.
#[tokio::test]
async fn a_non_retryable_escalation_is_not_resumable() {
    let outcome = RunOutcome::Escalated {
        kind: ProviderErrorKind::Auth,
        retryable: false,
    };
    assert!(!outcome.is_resumable());
}

/// A Rust gate's criterion lives outside the workspace; the run keeps its content when
/// it starts, so a resume after the file was removed still verifies against it (and
/// the stored contract names its path and hash as provenance).
#[tokio::test]
async fn a_rust_criterion_is_kept_by_content_and_a_resume_verifies_after_it_moved() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let criteria = dir.path().join("criteria");
    std::fs::create_dir_all(&criteria).unwrap();
    let crit = criteria.join("add_test.rs");
    let crit_text = "#[test]\nfn adds() { assert_eq!(subject::add(2, 3), 5); }\n";
    std::fs::write(&crit, crit_text).unwrap();
    let store = Store::memory().unwrap();
    let provider = Scripted::new(vec![
        write_turn("add.rs", "pub fn add(a: i32, b: i32) -> i32 { a + b }\n"),
        ScriptTurn::text("done"),
    ]);
    let c = TaskContract::workspace("write add", &ws, Verification::rust("add.rs", &crit));
    let cancel_after_first = |e: &RunEvent| match e {
        RunEvent::StepCommitted { step: 1, .. } => Flow::Cancel,
        _ => Flow::Continue,
    };
    let r = run_with(
        &c,
        &provider,
        &store,
        RunOptions::default().observer(Arc::new(cancel_after_first)),
    )
    .await
    .unwrap();
    assert_eq!(r.outcome, RunOutcome::Cancelled);

    let stored = io_harness::run::stored_contract(&store, r.run_id).unwrap();
    let Verification::Rust {
        criterion_source: Some(kept),
        ..
    } = &stored.verify.criteria[0]
    else {
        panic!("criterion not kept: {:?}", stored.verify.criteria);
    };
    assert_eq!(kept.source, crit_text);
    assert_eq!(kept.path, crit, "the path stays as provenance");
    assert_eq!(kept.sha256.as_deref().map(str::len), Some(64));

    std::fs::rename(&criteria, dir.path().join("moved")).unwrap();
    let resumed = resume(&store, r.run_id, &provider).await.unwrap();
    assert_eq!(
        resumed.outcome,
        RunOutcome::Success,
        "the gate used the kept criterion"
    );
}

/// The CLI end to end: a scripted run started from the task's directory with
/// relative paths, killed after its first commit, resumes from another directory
/// after its script was renamed away: the script comes from the store.
#[cfg(feature = "failpoints")]
#[test]
fn scripted_run_resumes_from_another_directory_after_the_script_moved() {
    use std::process::Command;
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t");
    std::fs::create_dir_all(t.join("ws")).unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let script = [
        r#"{"tool_calls": [{"name": "write_file", "input": {"path": "a.txt", "content": "one\n"}}]}"#,
        r#"{"tool_calls": [{"name": "write_file", "input": {"path": "b.txt", "content": "two\n"}}]}"#,
        r#"{"text": "done"}"#,
    ];
    std::fs::write(t.join("script.jsonl"), script.join("\n") + "\n").unwrap();
    std::fs::write(
        t.join("task.toml"),
        "goal = \"write a and b\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"b.txt\", needle = \"two\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    )
    .unwrap();
    let cmd = |cwd: &std::path::Path, args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_io-harness"));
        c.args(args)
            .current_dir(cwd)
            .env("IO_HARNESS_STORE", tmp.path().join("store.db"))
            .env("XDG_CACHE_HOME", tmp.path().join("cache"))
            .env("XDG_DATA_HOME", tmp.path().join("data"))
            .env_remove("IO_HARNESS_FAILPOINT");
        c
    };
    let out = cmd(&t, &["run", "task.toml", "--json"])
        .env("IO_HARNESS_FAILPOINT", "step.after_commit:1")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        None,
        "the failpoint aborts: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(t.join("script.jsonl"), t.join("renamed.jsonl")).unwrap();
    let out = cmd(&elsewhere, &["resume", "1", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "resume from elsewhere: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(t.join("ws/b.txt")).unwrap(),
        "two\n"
    );
}
