//! Every wait observes one deadline and one cancel token (issue 13.2), measured in
//! real time: a command in the real sandbox, a gate, an approval prompt; Ctrl-C to a
//! real `io-harness run`; a dropped `run()` future. The commands sleep far past the
//! budgets, so an implementation that waits for them fails by a wide margin.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use io_harness::policy::{Act, Approval, ApprovalRequest, Approver, Decision, Rule};
use io_harness::provider::{ScriptTurn, Scripted};
use io_harness::run::RunOptions;
use io_harness::{CancelToken, RunOutcome, Store, TaskContract, Verification, run_with};
use serde_json::json;

/// Whether a process whose command line contains `marker` is alive.
fn alive(marker: &str) -> bool {
    let out = Command::new("pgrep").args(["-f", marker]).output().unwrap();
    !out.stdout.is_empty()
}

/// Waits (bounded) until `marker`'s process is gone.
fn gone_within(marker: &str, limit: Duration) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if !alive(marker) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A unique `sleep` argument, so each test finds its own command.
fn marker(n: u32) -> String {
    format!("{}.{n:03}", 40 + std::process::id() % 50)
}

/// Cancels `cancel` `after` the process `probe` is alive (bounded wait); resolves to
/// the moment it cancelled.
fn cancel_once_alive(
    cancel: CancelToken,
    probe: String,
    after: Duration,
) -> tokio::task::JoinHandle<Instant> {
    tokio::task::spawn_blocking(move || {
        let t = Instant::now();
        while !alive(&probe) && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(after);
        cancel.cancel();
        Instant::now()
    })
}

/// The parent of process `pid`, from `/proc/<pid>/stat` (the field after the command
/// name, which is in parentheses and may itself hold spaces).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// A process under `ancestor` whose first argument is `program`.
fn descendant_running(ancestor: i32, program: &str) -> Option<i32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        if cmdline.split(|b| *b == 0).next()? != program.as_bytes() {
            return None;
        }
        let mut p = pid;
        for _ in 0..8 {
            p = parent_of(p)?;
            if p == ancestor {
                return Some(pid);
            }
        }
        None
    })
}

fn sleeper(secs: &str) -> ScriptTurn {
    ScriptTurn::tool("run_command", json!({ "argv": ["sleep", secs] }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_running_past_the_time_budget_is_stopped_at_the_deadline_not_at_its_cap() {
    let dir = tempfile::tempdir().unwrap();
    let secs = marker(1);
    let c = TaskContract::workspace("wait", dir.path(), Verification::file_contains("x", "x"))
        .max_agent_depth(0)
        .max_duration(Duration::from_secs(2));
    let provider = Scripted::new(vec![sleeper(&secs), ScriptTurn::text("done")]);
    let store = Store::memory().unwrap();
    let started = Instant::now();
    let r = run_with(&c, &provider, &store, RunOptions::default())
        .await
        .unwrap();
    let real = started.elapsed();
    assert_eq!(r.outcome, RunOutcome::TimeBudgetExceeded, "{r:?}");
    assert!(
        real < Duration::from_millis(3_500),
        "a 2 s budget ended after {real:?} (the command sleeps {secs} s)"
    );
    assert!(
        !alive(&format!("sleep {secs}")),
        "the sandbox outlived the run"
    );
    let events = store.sandbox_events(r.run_id).unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.kind == "stopped" && e.detail.as_deref() == Some("time_budget")),
        "{events:?}"
    );
    assert!(
        !events.iter().any(|e| e.kind == "cap_hit"),
        "a command stopped by the run's deadline is no cap hit: {events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_stopped_by_the_deadline_is_no_failed_verification() {
    let dir = tempfile::tempdir().unwrap();
    let secs = marker(2);
    let c = TaskContract::workspace("wait", dir.path(), Verification::command(["sleep", &secs]))
        .max_agent_depth(0)
        .max_duration(Duration::from_secs(2));
    let provider = Scripted::new(vec![ScriptTurn::text("done")]);
    let store = Store::memory().unwrap();
    let started = Instant::now();
    let r = run_with(&c, &provider, &store, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(r.outcome, RunOutcome::TimeBudgetExceeded, "{r:?}");
    assert!(started.elapsed() < Duration::from_millis(3_500));
    assert!(!alive(&format!("sleep {secs}")));
    assert_eq!(r.steps, 0, "the halted step is not committed: {r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_mid_command_stops_the_sandbox_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let secs = marker(3);
    let c = TaskContract::workspace("wait", dir.path(), Verification::file_contains("x", "x"))
        .max_agent_depth(0);
    let provider = Scripted::new(vec![sleeper(&secs), ScriptTurn::text("done")]);
    let store = Store::memory().unwrap();
    let cancel = CancelToken::new();
    let opts = RunOptions::default().cancel_token(cancel.clone());
    let probe = format!("sleep {secs}");
    let canceller = cancel_once_alive(cancel, probe, Duration::ZERO);
    let r = run_with(&c, &provider, &store, opts).await.unwrap();
    let ended = Instant::now();
    let cancelled_at = canceller.await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Cancelled, "{r:?}");
    let latency = ended - cancelled_at;
    assert!(latency < Duration::from_secs(1), "cancel took {latency:?}");
    assert!(gone_within(
        &format!("sleep {secs}"),
        Duration::from_millis(500)
    ));
    let events = store.sandbox_events(r.run_id).unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.kind == "stopped" && e.detail.as_deref() == Some("cancelled")),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_run_future_mid_command_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let secs = marker(4);
    let c = TaskContract::workspace("wait", dir.path(), Verification::file_contains("x", "x"))
        .max_agent_depth(0);
    let provider = Scripted::new(vec![sleeper(&secs), ScriptTurn::text("done")]);
    let store = Store::memory().unwrap();
    let probe = format!("sleep {secs}");
    let run = run_with(&c, &provider, &store, RunOptions::default());
    let waited = tokio::time::timeout(Duration::from_millis(1_500), run).await;
    assert!(waited.is_err(), "the command sleeps {secs} s");
    assert!(
        gone_within(&probe, Duration::from_secs(1)),
        "the sandbox outlived the dropped future"
    );
    // The run stays resumable from its last committed step.
    let runs = store.runs().unwrap();
    assert_eq!(runs[0].status, "running");
}

/// An approver that never answers (a person who walked away).
struct Silent;

impl Approver for Silent {
    fn decide(&self, _r: &ApprovalRequest) -> BoxFuture<'_, Approval> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_that_expires_during_an_approval_prompt_defers_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let c = TaskContract::workspace("w", dir.path(), Verification::file_contains("a", "a"))
        .max_agent_depth(0)
        .max_duration(Duration::from_secs(1))
        .policy_rule(Rule::new(Act::Write, "a", Decision::Ask));
    let provider = Scripted::new(vec![
        ScriptTurn::tool("write_file", json!({"path": "a", "content": "a"})),
        ScriptTurn::text("done"),
    ]);
    let store = Store::memory().unwrap();
    let opts = RunOptions {
        approver: Some(std::sync::Arc::new(Silent)),
        ..RunOptions::default()
    };
    let started = Instant::now();
    let r = run_with(&c, &provider, &store, opts).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::TimeBudgetExceeded, "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    let pending: Vec<_> = store
        .approvals(r.run_id)
        .unwrap()
        .into_iter()
        .filter(|a| a.status == "pending")
        .collect();
    assert_eq!(pending.len(), 1, "the request is kept on record");
    assert!(!dir.path().join("a").exists());
}

/// Adversary break (13.2, row 18): `approve` on a request whose run ended with the
/// time budget said "continue with resume", which then refused. It now says the run
/// cannot continue, and the request stays pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_a_request_of_a_run_that_cannot_resume_is_refused_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let c = TaskContract::workspace("w", &ws, Verification::file_contains("a", "a"))
        .max_agent_depth(0)
        .max_duration(Duration::from_secs(1))
        .policy_rule(Rule::new(Act::Write, "a", Decision::Ask));
    let provider = Scripted::new(vec![
        ScriptTurn::tool("write_file", json!({"path": "a", "content": "a"})),
        ScriptTurn::text("done"),
    ]);
    let store = Store::open(dir.path().join("store.db")).unwrap();
    let opts = RunOptions {
        approver: Some(std::sync::Arc::new(Silent)),
        ..RunOptions::default()
    };
    let r = run_with(&c, &provider, &store, opts).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::TimeBudgetExceeded, "{r:?}");
    let request = store.approvals(r.run_id).unwrap()[0].request_id.clone();
    drop(store);
    let out = binary(
        dir.path(),
        &["approve", &r.run_id.to_string(), &request, "allow"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot be resumed"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("continue with"));
}

fn binary(p: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_io-harness"));
    c.args(args)
        .env("IO_HARNESS_STORE", p.join("store.db"))
        .env("XDG_CACHE_HOME", p.join("cache"))
        .env("XDG_CONFIG_HOME", p.join("config"))
        .env_remove("IO_HARNESS_FAILPOINT");
    c
}

#[test]
fn ctrl_c_during_a_command_exits_130_within_a_second_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let secs = marker(5);
    std::fs::create_dir_all(p.join("t/ws")).unwrap();
    let script = [
        json!({"tool_calls": [{"name": "run_command", "input": {"argv": ["sleep", secs]}}]})
            .to_string(),
        json!({"tool_calls": [{"name": "write_file", "input": {"path": "done.txt", "content": "ok"}}]})
            .to_string(),
        r#"{"text": "done"}"#.to_string(),
    ];
    std::fs::write(p.join("t/script.jsonl"), script.join("\n") + "\n").unwrap();
    std::fs::write(
        p.join("t/task.toml"),
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"done.txt\", needle = \"ok\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    )
    .unwrap();
    let task = p.join("t/task.toml");
    let mut child = binary(p, &["run", task.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let probe = format!("sleep {secs}");
    let t = Instant::now();
    while !alive(&probe) && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(alive(&probe), "the command never started");
    let pid = rustix_pid(child.id());
    let sent = Instant::now();
    // SAFETY: `kill(2)` with a pid we spawned and a valid signal number.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(10),
            "Ctrl-C did not end the run"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let latency = sent.elapsed();
    assert_eq!(status.code(), Some(130));
    assert!(
        latency < Duration::from_secs(1),
        "Ctrl-C to exit took {latency:?}"
    );
    eprintln!("ctrl-c to exit: {latency:?}");
    assert!(gone_within(&probe, Duration::from_millis(500)));
    let out = binary(p, &["resume", "1", "--json"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The cut-off command was not run again: the model was told.
    let show = binary(p, &["show", "1", "--json"]).output().unwrap();
    let v: serde_json::Value = crate::json_schema::last(&show.stdout);
    let first = v["steps"][0]["tool_calls"][0]["output"].as_str().unwrap();
    assert!(first.starts_with("interrupted: "), "{first}");
}

fn rustix_pid(id: u32) -> libc::pid_t {
    libc::pid_t::try_from(id).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_reaches_a_running_child_and_the_tree_resumes_as_a_tree() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("sub")).unwrap();
    let secs = marker(6);
    let contract = TaskContract::workspace(
        "get sub/a.txt written",
        dir.path(),
        Verification::file_contains("sub/a.txt", "hi"),
    );
    let provider = Scripted::new(vec![
        ScriptTurn::tool(
            "spawn_agent",
            json!({
                "name": "slow",
                "goal": "wait, then write a.txt",
                "root": "sub",
                "verify": {"file_contains": {"file": "a.txt", "needle": "hi"}},
                "budget": {"max_steps": 4}
            }),
        ),
        ScriptTurn::text("the child did it"),
    ])
    .with_agent(
        "slow",
        vec![
            sleeper(&secs),
            ScriptTurn::tool("write_file", json!({"path": "a.txt", "content": "hi\n"})),
            ScriptTurn::text("wrote a.txt"),
        ],
    );
    let store = Store::memory().unwrap();
    let cancel = CancelToken::new();
    let probe = format!("sleep {secs}");
    let canceller = cancel_once_alive(cancel.clone(), probe.clone(), Duration::ZERO);
    let opts = RunOptions::default().cancel_token(cancel);
    let r = run_with(&contract, &provider, &store, opts).await.unwrap();
    let latency = Instant::now() - canceller.await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Cancelled, "{r:?}");
    assert!(latency < Duration::from_secs(1), "cancel took {latency:?}");
    assert!(gone_within(&probe, Duration::from_millis(500)));
    let children = store.children(r.run_id).unwrap();
    assert_eq!(children[0].run.outcome.as_deref(), Some("cancelled"));
    let r = io_harness::resume(&store, r.run_id, &provider)
        .await
        .unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("sub/a.txt")).unwrap(),
        "hi\n"
    );
}

/// Adversary break (13.2, rows 4–6): a session cancelled mid-step handed none of its
/// time on, so the resume got the whole budget again. The heartbeat keeps the run's
/// wall time: a 4 s budget cancelled at about 1.5 s leaves the resume about 2.5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_after_a_cancel_mid_step_counts_the_cancelled_sessions_time() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (marker(7), marker(8));
    let c = TaskContract::workspace("wait", dir.path(), Verification::file_contains("x", "x"))
        .max_agent_depth(0)
        .max_duration(Duration::from_secs(4));
    let provider = Scripted::new(vec![sleeper(&a), sleeper(&b), ScriptTurn::text("done")]);
    let store = Store::memory().unwrap();
    let cancel = CancelToken::new();
    let probe = format!("sleep {a}");
    let canceller = cancel_once_alive(cancel.clone(), probe, Duration::from_millis(1_500));
    let started = Instant::now();
    let opts = RunOptions::default().cancel_token(cancel);
    let r = run_with(&c, &provider, &store, opts).await.unwrap();
    canceller.await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Cancelled, "{r:?}");
    let first = started.elapsed();
    let resumed = Instant::now();
    let r = io_harness::resume(&store, r.run_id, &provider)
        .await
        .unwrap();
    let second = resumed.elapsed();
    assert_eq!(r.outcome, RunOutcome::TimeBudgetExceeded, "{r:?}");
    let total = first + second;
    assert!(
        total < Duration::from_millis(4_900),
        "a 4 s budget lasted {total:?} over two sessions ({first:?} + {second:?})"
    );
    assert!(
        total >= Duration::from_millis(3_500),
        "ended early: {total:?}"
    );
}

/// Adversary break (13.2, row 13): a command whose own wall cap equals the time left
/// was recorded as both `cap_hit wall` and `stopped time_budget`. The deadline is what
/// ends it; the record says so alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cap_equal_to_the_budget_is_recorded_as_stopped_by_the_budget_only() {
    let dir = tempfile::tempdir().unwrap();
    let secs = marker(9);
    let mut c = TaskContract::workspace("wait", dir.path(), Verification::file_contains("x", "x"))
        .max_agent_depth(0)
        .max_duration(Duration::from_secs(2));
    c.sandbox.limits.wall_secs = Some(2);
    let provider = Scripted::new(vec![sleeper(&secs), ScriptTurn::text("done")]);
    let store = Store::memory().unwrap();
    let r = run_with(&c, &provider, &store, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(r.outcome, RunOutcome::TimeBudgetExceeded, "{r:?}");
    let events = store.sandbox_events(r.run_id).unwrap();
    assert!(!events.iter().any(|e| e.kind == "cap_hit"), "{events:?}");
    assert!(events.iter().any(|e| e.kind == "stopped"), "{events:?}");
}

/// Adversary break (13.2, rows 16–17): with a terminal, the approval prompt's read
/// of stdin kept the process alive after Ctrl-C (or the deadline) ended the run,
/// until someone pressed Enter. Now the run's end is the process's end.
#[test]
fn ctrl_c_during_the_terminal_approval_prompt_exits_130_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("t/ws")).unwrap();
    let script = [
        r#"{"tool_calls": [{"name": "write_file", "input": {"path": "a.txt", "content": "a"}}]}"#,
        r#"{"text": "done"}"#,
    ];
    std::fs::write(p.join("t/script.jsonl"), script.join("\n") + "\n").unwrap();
    std::fs::write(
        p.join("t/task.toml"),
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"a.txt\", needle = \"a\" }\n[policy]\nrules = [{ act = \"write\", target = \"a.txt\", decision = \"ask\" }]\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    )
    .unwrap();
    let inner = format!(
        "{} run {}",
        env!("CARGO_BIN_EXE_io-harness"),
        p.join("t/task.toml").display()
    );
    // `script` gives the harness a terminal; its stdin stays open and silent.
    let mut child = Command::new("script")
        .args(["-qefc", &inner, "/dev/null"])
        .env("IO_HARNESS_STORE", p.join("store.db"))
        .env("XDG_CACHE_HOME", p.join("cache"))
        .env("XDG_CONFIG_HOME", p.join("config"))
        .env_remove("IO_HARNESS_FAILPOINT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut all);
        String::from_utf8_lossy(&all).to_string()
    });
    let store = p.join("store.db");
    let t = Instant::now();
    // The prompt is up once the request is asked: wait for the harness process, found
    // as a descendant of this test's `script` (other tests run the binary at the same
    // time; a SIGINT to one of theirs would leave this prompt waiting).
    let harness = loop {
        if let Some(pid) = descendant_running(child.id() as i32, env!("CARGO_BIN_EXE_io-harness"))
            && store.exists()
        {
            break pid;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the harness never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(700));
    let sent = Instant::now();
    // SAFETY: `kill(2)` with the harness's pid and a valid signal number.
    assert_eq!(unsafe { libc::kill(harness, libc::SIGINT) }, 0);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if sent.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("the process outlived its cancelled run");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let latency = sent.elapsed();
    let text = reader.join().unwrap();
    assert!(text.contains("approval needed"), "{text}");
    assert!(latency < Duration::from_secs(2), "exit took {latency:?}");
    assert_eq!(status.code(), Some(130), "{text}");
    let runs = binary(p, &["runs", "--json"]).output().unwrap();
    let v = serde_json::Value::from(crate::json_schema::runs(&runs.stdout));
    assert_eq!(v[0]["outcome"], "cancelled", "{v}");
}
