//! Resume never repeats an effect (issue 13.3), measured with real `kill -9`: a run
//! of file tools and idempotent commands is SIGKILLed at moments spread over its
//! length, resumed, and its final workspace compared with an uninterrupted run's;
//! and a cut-off command that is not idempotent is told to the model, never re-run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

/// File tools and commands that are safe to run twice (marked so: the scripted model
/// re-issues one the harness reports interrupted, as a model would).
fn script() -> Vec<String> {
    let cmd = |argv: &[&str]| {
        json!({"tool_calls": [{"name": "run_command", "input": {"argv": argv}, "idempotent": true}]})
            .to_string()
    };
    vec![
        json!({"tool_calls": [{"name": "read_file", "input": {"path": "log.txt"}}]}).to_string(),
        json!({"tool_calls": [{"name": "edit_file", "input": {"path": "log.txt", "old": "entries:\n", "new": "entries:\n- one\n"}}]}).to_string(),
        cmd(&["mkdir", "-p", "out/deep"]),
        json!({"tool_calls": [
            {"name": "write_file", "input": {"path": "out/a.txt", "content": "alpha\n".repeat(2000)}},
            {"name": "edit_file", "input": {"path": "log.txt", "old": "- one\n", "new": "- one\n- two\n"}}
        ]})
        .to_string(),
        cmd(&["cp", "out/a.txt", "out/deep/b.txt"]),
        cmd(&["sh", "-c", "sort -r log.txt > out/sorted.txt"]),
        json!({"tool_calls": [{"name": "write_file", "input": {"path": "out/c.txt", "content": "gamma\n"}}]}).to_string(),
        cmd(&["sh", "-c", "cat out/c.txt out/sorted.txt > out/d.txt"]),
        json!({"tool_calls": [{"name": "edit_file", "input": {"path": "log.txt", "old": "- two\n", "new": "- two\n- three\n"}}]}).to_string(),
        r#"{"text": "done"}"#.to_string(),
    ]
}

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("t/ws")).unwrap();
        std::fs::write(p.join("t/ws/log.txt"), "entries:\n").unwrap();
        std::fs::write(p.join("t/script.jsonl"), script().join("\n") + "\n").unwrap();
        std::fs::write(
            p.join("t/task.toml"),
            "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"log.txt\", needle = \"three\" }\n[budget]\nmax_steps = 30\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
        )
        .unwrap();
        Self { dir }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let p = self.dir.path();
        let mut c = Command::new(env!("CARGO_BIN_EXE_io-harness"));
        c.args(args)
            .env("IO_HARNESS_STORE", p.join("store.db"))
            .env("XDG_CACHE_HOME", p.join("cache"))
            .env("XDG_CONFIG_HOME", p.join("config"))
            .env_remove("IO_HARNESS_FAILPOINT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    }

    fn task(&self) -> PathBuf {
        self.dir.path().join("t/task.toml")
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("t/ws")
    }

    fn runs(&self) -> Vec<serde_json::Value> {
        let out = self
            .cmd(&["runs", "--json"])
            .stdout(Stdio::piped())
            .output()
            .unwrap();
        if out.stdout.is_empty() {
            return Vec::new();
        }
        crate::json_schema::runs(&out.stdout)
    }
}

/// Every file under `root` with its content.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let path = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// Runs the case to its end, killing the first session after `after` (none: no
/// kill); resumes until the run is no longer running. Returns the final tree.
fn run_killed(case: &Case, after: Option<Duration>) -> BTreeMap<String, Vec<u8>> {
    let mut child = case
        .cmd(&["run", case.task().to_str().unwrap()])
        .spawn()
        .unwrap();
    if let Some(after) = after {
        std::thread::sleep(after);
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    if after.is_none() {
        assert_eq!(status.code(), Some(0), "the uninterrupted run failed");
    }
    let runs = case.runs();
    if runs.is_empty() {
        // Killed before the run was on record: nothing happened; run it again.
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
    } else if !status.success() && runs[0]["status"] != "finished" {
        let id = runs[0]["id"].as_i64().unwrap().to_string();
        let out = case.cmd(&["resume", &id]).output().unwrap();
        if out.status.code() != Some(0) {
            let show = case
                .cmd(&["show", &id])
                .stdout(Stdio::piped())
                .output()
                .unwrap();
            panic!(
                "resume after a kill at {after:?} exited {:?}: {}\nshow:\n{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&show.stdout)
            );
        }
    }
    tree(&case.ws())
}

#[test]
fn sigkill_at_twenty_moments_resumes_to_the_uninterrupted_workspace() {
    let reference_case = Case::new();
    let t = Instant::now();
    let reference = run_killed(&reference_case, None);
    let length = t.elapsed();
    let kills = 20;
    let mut identical = 0;
    let mut differing = Vec::new();
    for i in 0..kills {
        // Spread over the run's length, from its first moments to its last.
        let at = length.mul_f64((f64::from(i) + 0.5) / f64::from(kills));
        let case = Case::new();
        let got = run_killed(&case, Some(at));
        let temps: Vec<&String> = got.keys().filter(|k| k.contains(".io-harness-")).collect();
        assert!(temps.is_empty(), "kill at {at:?} left {temps:?}");
        if got == reference {
            identical += 1;
        } else {
            let diff: Vec<&String> = reference
                .keys()
                .chain(got.keys())
                .filter(|k| reference.get(*k) != got.get(*k))
                .collect();
            differing.push(format!("{at:?}: {diff:?}"));
        }
    }
    eprintln!("identical {identical} of {kills} (run length {length:?})");
    assert_eq!(identical, kills, "differing: {differing:#?}");
}

#[test]
fn a_cut_off_command_that_is_not_idempotent_is_told_and_never_repeated() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("t/ws")).unwrap();
    let script = [
        json!({"tool_calls": [{"name": "run_command", "input": {"argv": ["sh", "-c", "echo ran >> runs.txt; exec sleep 37.25"]}}]}).to_string(),
        r#"{"text": "done"}"#.to_string(),
    ];
    std::fs::write(p.join("t/script.jsonl"), script.join("\n") + "\n").unwrap();
    std::fs::write(
        p.join("t/task.toml"),
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"runs.txt\", needle = \"ran\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    )
    .unwrap();
    let case = Case { dir };
    let mut child = case
        .cmd(&["run", case.task().to_str().unwrap()])
        .spawn()
        .unwrap();
    let runs_txt = case.ws().join("runs.txt");
    let t = Instant::now();
    while !runs_txt.exists() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let out = case.cmd(&["resume", "1"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&runs_txt).unwrap(),
        "ran\n",
        "the appending command ran again"
    );
    let store = io_harness::Store::open(case.dir.path().join("store.db")).unwrap();
    let steps = store.steps(1).unwrap();
    let told = &steps[0].tool_calls[0];
    assert!(told.output.starts_with("interrupted: "), "{told:?}");
    assert!(told.is_error);
    let journal = store.journal(1).unwrap();
    assert_eq!(journal[0].status, "uncertain", "{journal:?}");
}

#[test]
fn a_kill_mid_write_leaves_no_temporary_file_once_resumed() {
    let case = Case::new();
    let out = case
        .cmd(&["run", case.task().to_str().unwrap()])
        .env("IO_HARNESS_FAILPOINT", "confine.before_rename")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        None,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let debris: Vec<String> = tree(&case.ws())
        .into_keys()
        .filter(|k| k.contains(".io-harness-"))
        .collect();
    assert_eq!(
        debris.len(),
        1,
        "the crash left its temporary file: {debris:?}"
    );
    let out = case.cmd(&["resume", "1"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = tree(&case.ws());
    assert!(
        !after.keys().any(|k| k.contains(".io-harness-")),
        "resume removed the journaled temporary file: {:?}",
        after.keys()
    );
    let reference = Case::new();
    assert_eq!(after, run_killed(&reference, None));
}

/// The reply of a step cut off during its tools is on record: resume replays it and
/// never asks the model for that step again (a model asked twice may answer
/// differently; here the second answer would be the next turn's, which fails the run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_a_crash_during_the_tools_never_asks_the_model_again() {
    use crate::providers::fake_server::{FakeServer, Reply, whole};
    use crate::providers::{KEY, anthropic_text, anthropic_tool};
    let write = anthropic_tool(
        "toolu_1",
        "write_file",
        json!({"path": "a.txt", "content": "a"}),
    );
    let server = FakeServer::start(vec![
        Reply::sse(whole(&write)),
        Reply::sse(whole(&anthropic_text("done"))),
        Reply::sse(whole(&anthropic_text("asked again"))),
    ])
    .await;
    let case = Case::new();
    std::fs::write(
        case.task(),
        format!(
            "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = {{ file = \"a.txt\", needle = \"a\" }}\n[provider]\nkind = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = \"{}\"\n",
            server.url()
        ),
    )
    .unwrap();
    let run = |args: Vec<String>, failpoint: Option<&'static str>| {
        let mut c = case.cmd(&args.iter().map(String::as_str).collect::<Vec<_>>());
        c.env("ANTHROPIC_API_KEY", KEY);
        if let Some(f) = failpoint {
            c.env("IO_HARNESS_FAILPOINT", f);
        }
        c
    };
    let task = case.task().display().to_string();
    let mut first = run(vec!["run".into(), task], Some("tool.after_apply:1"));
    let out = tokio::task::spawn_blocking(move || first.output().unwrap())
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        None,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut again = run(vec!["resume".into(), "1".into()], None);
    let out = tokio::task::spawn_blocking(move || again.output().unwrap())
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    // The second request is step 2's: it carries step 1's reply and its result. Asked
    // for step 1 again, it would hold the first message alone.
    let messages = requests[1].json()["messages"].as_array().unwrap().len();
    assert_eq!(
        messages, 3,
        "the model was asked for the interrupted step again"
    );
}
