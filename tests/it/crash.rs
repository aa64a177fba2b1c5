//! Crash-proof resume: a real `io-harness run` killed at each named failpoint (and once
//! by SIGKILL at a random moment) resumes to the same workspace as an uninterrupted
//! run, with no file-tool call applied twice.

use std::path::{Path, PathBuf};
use std::process::Command;

const SCRIPT: &[&str] = &[
    r#"{"tool_calls": [{"name": "read_file", "input": {"path": "log.txt"}}]}"#,
    r#"{"tool_calls": [{"name": "edit_file", "input": {"path": "log.txt", "old": "entries:\n", "new": "entries:\n- one\n"}}]}"#,
    r#"{"tool_calls": [{"name": "write_file", "input": {"path": "new.txt", "content": "fresh\n"}}, {"name": "edit_file", "input": {"path": "log.txt", "old": "- one\n", "new": "- one\n- two\n"}}]}"#,
    r#"{"text": "done"}"#,
];

const FINAL_LOG: &str = "entries:\n- one\n- two\n";

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new(verify_delay: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("t/ws")).unwrap();
        std::fs::write(p.join("t/ws/log.txt"), "entries:\n").unwrap();
        std::fs::write(p.join("t/script.jsonl"), SCRIPT.join("\n") + "\n").unwrap();
        let task = format!(
            "goal = \"log two entries\"\nroot = \"ws\"\n[verify]\ncommand = [\"sh\", \"-c\", \"sleep {verify_delay}; grep -q two log.txt && test -f new.txt\"]\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n"
        );
        std::fs::write(p.join("t/task.toml"), task).unwrap();
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_io-harness"));
        c.args(args)
            .env("IO_HARNESS_STORE", self.path().join("store.db"))
            .env("XDG_CACHE_HOME", self.path().join("cache"))
            .env_remove("IO_HARNESS_FAILPOINT");
        c
    }

    fn task(&self) -> PathBuf {
        self.path().join("t/task.toml")
    }

    fn run_id(&self) -> String {
        let out = self.cmd(&["runs", "--json"]).output().unwrap();
        let v = crate::json_schema::runs(&out.stdout);
        v[0]["id"].as_i64().unwrap().to_string()
    }

    fn assert_final(&self) {
        let ws = self.path().join("t/ws");
        assert_eq!(
            std::fs::read_to_string(ws.join("log.txt")).unwrap(),
            FINAL_LOG
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("new.txt")).unwrap(),
            "fresh\n"
        );
    }
}

fn crash_then_resume(point: &str) {
    let case = Case::new("0");
    let out = case
        .cmd(&["run", case.task().to_str().unwrap(), "--json"])
        .env("IO_HARNESS_FAILPOINT", point)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        None,
        "{point}: the failpoint should abort the process; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = case.run_id();
    let out = case.cmd(&["resume", &id, "--json"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{point}: resume failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    case.assert_final();
    // No tool call of the resumed session failed: nothing was applied twice (a second
    // edit would find its text already replaced and fail).
    let show = case.cmd(&["show", &id, "--json"]).output().unwrap();
    let v: serde_json::Value = crate::json_schema::last(&show.stdout);
    for s in v["steps"].as_array().unwrap() {
        for c in s["tool_calls"].as_array().unwrap() {
            assert_eq!(c["is_error"], false, "{point}: {c}");
        }
    }
}

#[test]
fn uninterrupted_reference_run() {
    let case = Case::new("0");
    let out = case
        .cmd(&["run", case.task().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    case.assert_final();
}

#[test]
fn crash_after_the_model_reply() {
    crash_then_resume("step.after_reply:3");
}

#[test]
fn crash_mid_tool_call_after_the_write_landed() {
    crash_then_resume("tool.after_apply:3");
}

#[test]
fn crash_after_tools_before_commit() {
    crash_then_resume("step.before_commit:3");
}

#[test]
fn crash_after_commit() {
    crash_then_resume("step.after_commit:2");
}

#[test]
fn crash_during_verification() {
    crash_then_resume("verify.before:4");
}

#[test]
fn sigkill_at_a_random_moment() {
    let case = Case::new("0.3");
    let mut child = case
        .cmd(&["run", case.task().to_str().unwrap(), "--json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    std::thread::sleep(std::time::Duration::from_millis(
        20 + u64::from(nanos % 250),
    ));
    let _ = child.kill();
    let status = child.wait().unwrap();
    let runs = case.cmd(&["runs", "--json"]).output().unwrap();
    let listed = if runs.stdout.is_empty() {
        Vec::new()
    } else {
        crate::json_schema::runs(&runs.stdout)
    };
    if listed.is_empty() {
        // Killed before the run was recorded: nothing happened, nothing to resume.
        assert_eq!(
            std::fs::read_to_string(case.path().join("t/ws/log.txt")).unwrap(),
            "entries:\n"
        );
        return;
    }
    let id = case.run_id();
    if status.success() {
        // It finished before the kill landed: nothing to resume.
        case.assert_final();
        return;
    }
    let out = case.cmd(&["resume", &id]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    case.assert_final();
}

/// A command cut off by a crash cannot be reconciled: the journal says `uncertain`,
/// the command is not run again, and the model is told in the call's own result.
#[test]
fn an_interrupted_command_is_uncertain_and_the_model_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("t/ws")).unwrap();
    let script = [
        r#"{"tool_calls": [{"name": "run_command", "input": {"argv": ["sh", "-c", "echo ran >> runs.txt"]}}]}"#,
        r#"{"text": "done"}"#,
    ];
    std::fs::write(p.join("t/script.jsonl"), script.join("\n") + "\n").unwrap();
    std::fs::write(
        p.join("t/task.toml"),
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"runs.txt\", needle = \"ran\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    )
    .unwrap();
    let cmd = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_io-harness"));
        c.args(args)
            .env("IO_HARNESS_STORE", p.join("store.db"))
            .env("XDG_CACHE_HOME", p.join("cache"))
            .env("XDG_CONFIG_HOME", p.join("config"))
            .env_remove("IO_HARNESS_FAILPOINT");
        c
    };
    let task = p.join("t/task.toml");
    let out = cmd(&["run", task.to_str().unwrap()])
        .env("IO_HARNESS_FAILPOINT", "tool.after_apply:1")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        None,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cmd(&["resume", "1", "--json"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let show = cmd(&["show", "1", "--json"]).output().unwrap();
    let v: serde_json::Value = crate::json_schema::last(&show.stdout);
    // The reply was on record: the same call is answered, not asked for again, and
    // not run again.
    let first = v["steps"][0]["tool_calls"][0]["output"].as_str().unwrap();
    assert!(first.starts_with("interrupted: "), "{first}");
    assert_eq!(
        std::fs::read_to_string(p.join("t/ws/runs.txt")).unwrap(),
        "ran\n"
    );
    let store = io_harness::Store::open(p.join("store.db")).unwrap();
    let statuses: Vec<String> = store
        .journal(1)
        .unwrap()
        .into_iter()
        .map(|j| j.status)
        .collect();
    assert_eq!(
        statuses.first().map(String::as_str),
        Some("uncertain"),
        "{statuses:?}"
    );
}

/// A full disk stops the run with an error naming it and loses nothing: the run
/// resumes from its last committed step once there is room, and no write is applied
/// twice.
#[tokio::test]
async fn a_full_disk_stops_the_run_and_it_resumes_losing_nothing() {
    // The disk fills at different points of the run: in a journal write, in a step
    // commit, in an event record.
    for extra_pages in [3, 5, 9, 14] {
        full_disk_case(extra_pages).await;
    }
}

async fn full_disk_case(extra_pages: u32) {
    use io_harness::provider::{ScriptTurn, Scripted};
    use io_harness::run::RunError;
    use io_harness::{RunOutcome, Store, TaskContract, Verification};
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("log.txt"), "entries:\n").unwrap();
    let db = dir.path().join("store.db");
    let big = "x".repeat(6000);
    let mut turns = Vec::new();
    for i in 0..6 {
        turns.push(ScriptTurn::tool(
            "edit_file",
            json!({"path": "log.txt", "old": "entries:\n", "new": format!("entries:\n- {i} {}\n", &big[..10])}),
        ));
        turns.push(ScriptTurn::tool(
            "write_file",
            json!({"path": format!("n{i}.txt"), "content": big}),
        ));
    }
    turns.push(ScriptTurn::text("done"));
    let provider = Scripted::new(turns);
    let c = TaskContract::workspace("g", &ws, Verification::file_contains("n5.txt", "xxx"))
        .max_steps(20);
    let store = Store::open(&db).unwrap();
    store.fill_disk_after(extra_pages).unwrap();
    let err = io_harness::run(&c, &provider, &store).await.unwrap_err();
    // A store failure after the run started is a failure of its record, resumable.
    assert!(
        matches!(err, RunError::Recording { .. }) && err.is_resumable(),
        "{err}"
    );
    assert_eq!(err.exit_code(), 70);
    assert!(err.to_string().contains("full"), "{err}");
    drop(store);

    let store = Store::open(&db).unwrap();
    let run = store.runs().unwrap().remove(0);
    assert!(
        run.steps > 0 && run.steps < 13,
        "stopped part way: {} (extra pages {extra_pages})",
        run.steps
    );
    let r = io_harness::resume(&store, run.id, &provider).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    assert_eq!(r.steps, 13);
    let log = std::fs::read_to_string(ws.join("log.txt")).unwrap();
    for i in 0..6 {
        assert_eq!(
            log.matches(&format!("- {i} ")).count(),
            1,
            "edit {i} applied once: {log}"
        );
    }
}
