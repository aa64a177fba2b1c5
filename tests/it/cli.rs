//! The `io-harness` binary as an operator uses it, in isolated temp dirs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub(crate) use crate::cli_support::bin;
use crate::cli_support::interrupt_at_first_tool;

pub(crate) struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
    pub(crate) fn store(&self) -> PathBuf {
        self.path().join("store.db")
    }
    /// Runs the binary; with `--json`, every line it printed is checked against the
    /// committed schema.
    pub(crate) fn cmd(&self, args: &[&str]) -> Output {
        let out = bin()
            .args(args)
            .env("XDG_CACHE_HOME", self.path().join("cache"))
            .env("XDG_DATA_HOME", self.path().join("data"))
            .env("IO_HARNESS_STORE", self.store())
            .output()
            .unwrap();
        if args.contains(&"--json") {
            crate::json_schema::documents(&out.stdout);
        }
        out
    }
    pub(crate) fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
}

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn quickstart_runs_offline_to_success_and_show_tells_the_story() {
    let f = Fixture::new();
    let task = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/quickstart/task.toml");
    let out = f.cmd(&["run", task.to_str().unwrap(), "--json"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        text(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = lines.iter().filter_map(|v| v["event"].as_str()).collect();
    for k in [
        "run_started",
        "step_started",
        "model_replied",
        "tool_called",
        "tool_finished",
        "policy_decision",
        "verified",
        "step_committed",
        "finished",
    ] {
        assert!(kinds.contains(&k), "missing event {k}: {kinds:?}");
    }
    let result = &lines.last().unwrap()["result"];
    assert_eq!(result["outcome"]["outcome"], "success");
    assert_eq!(result["steps"], 6);
    assert!(
        result["diff"]
            .as_str()
            .unwrap()
            .contains("+        .filter(|part| !part.trim().is_empty())")
    );
    // One failed verification fed back, then a pass.
    let verdicts: Vec<bool> = lines
        .iter()
        .filter(|v| v["event"] == "verified")
        .map(|v| v["passed"].as_bool().unwrap())
        .collect();
    assert_eq!(verdicts, [false, true]);
    // The example itself is untouched: the run worked on a copy.
    let original = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/quickstart/project/src/lib.rs"),
    )
    .unwrap();
    assert!(!original.contains(".filter("));

    let run_id = result["run_id"].as_i64().unwrap().to_string();
    let show = f.cmd(&["show", &run_id]);
    let s = text(&show.stdout);
    assert_eq!(show.status.code(), Some(0), "{}", text(&show.stderr));
    for needle in [
        "step 6",
        "tool edit_file",
        "Verification failed",
        "final message",
        "diff:",
        "outcome",
    ] {
        assert!(s.contains(needle), "show lacks {needle:?}:\n{s}");
    }
    let runs = f.cmd(&["runs", "--json"]);
    let v = crate::json_schema::runs(&runs.stdout);
    assert_eq!(v[0]["outcome"], "success");
    let show_json = f.cmd(&["show", &run_id, "--json"]);
    let v: serde_json::Value = crate::json_schema::last(&show_json.stdout);
    assert_eq!(v["steps"].as_array().unwrap().len(), 6);
}

#[test]
fn malformed_task_exits_2_naming_file_line_and_key() {
    let f = Fixture::new();
    let task = f.write(
        "t/task.toml",
        "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[budget]\nmax_stepz = 4\n",
    );
    let out = f.cmd(&["run", task.to_str().unwrap(), "--provider", "openai"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("task.toml:5") && err.contains("max_stepz"),
        "{err}"
    );
    assert!(!f.store().exists(), "nothing ran, nothing was stored");
}

#[test]
fn missing_provider_key_is_a_usage_error() {
    let f = Fixture::new();
    let task = f.write(
        "t/task.toml",
        "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n",
    );
    let out = f.cmd(&[
        "run",
        task.to_str().unwrap(),
        "--provider",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("ANTHROPIC_API_KEY"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn verification_failure_exits_1() {
    let f = Fixture::new();
    f.write("t/ws/a.txt", "a\n");
    f.write(
        "t/script.jsonl",
        "{\"text\": \"done\"}\n{\"text\": \"done\"}\n",
    );
    let task = f.write(
        "t/task.toml",
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"a.txt\", needle = \"b\" }\nmax_attempts = 2\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    );
    let out = f.cmd(&["run", task.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("verification_failed"));
}

/// A run killed between its tools and its commit resumes without applying the
/// interrupted step's edit twice.
#[test]
#[cfg(feature = "failpoints")]
fn killed_mid_step_resumes_without_double_applying() {
    let f = Fixture::new();
    f.write("t/ws/counter.txt", "count = 1\n");
    let script = [
        r#"{"tool_calls": [{"name": "read_file", "input": {"path": "counter.txt"}}]}"#,
        r#"{"tool_calls": [{"name": "edit_file", "input": {"path": "counter.txt", "old": "count = 1", "new": "count = 2"}}]}"#,
        r#"{"text": "bumped"}"#,
    ];
    f.write("t/script.jsonl", &(script.join("\n") + "\n"));
    let task = f.write(
        "t/task.toml",
        "goal = \"bump\"\nroot = \"ws\"\n[verify]\nfile_equals = { file = \"counter.txt\", content = \"count = 2\\n\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    );
    let out = bin()
        .args(["run", task.to_str().unwrap(), "--json"])
        .env("IO_HARNESS_STORE", f.store())
        .env("XDG_CACHE_HOME", f.path().join("cache"))
        .env("IO_HARNESS_FAILPOINT", "step.before_commit:2")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        None,
        "aborted by the failpoint: {}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(f.path().join("t/ws/counter.txt")).unwrap(),
        "count = 2\n"
    );

    let runs = crate::json_schema::runs(&f.cmd(&["runs", "--json"]).stdout);
    assert_eq!(runs[0]["status"], "interrupted");
    assert_eq!(runs[0]["steps"], 1);
    let id = runs[0]["id"].as_i64().unwrap().to_string();

    let out = f.cmd(&["resume", &id, "--json"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(f.path().join("t/ws/counter.txt")).unwrap(),
        "count = 2\n"
    );
    let show: serde_json::Value = crate::json_schema::last(&f.cmd(&["show", &id, "--json"]).stdout);
    let step2 = &show["steps"][1]["tool_calls"][0];
    assert_eq!(step2["is_error"], false, "{step2}");
    // Answered from the journal with the result it had, not applied again.
    assert_eq!(step2["output"], "edited counter.txt at line 1", "{step2}");
}

#[test]
fn unknown_run_is_a_usage_error() {
    let f = Fixture::new();
    let out = f.cmd(&["show", "999"]);
    assert_eq!(out.status.code(), Some(2));
    let out = f.cmd(&["resume", "999"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn doctor_reports_what_the_probe_found() {
    let f = Fixture::new();
    let out = f.cmd(&["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = crate::json_schema::last(&out.stdout);
    assert_eq!(v["selected"], "linux-namespaces", "{v}");
    assert_eq!(v["native"]["available"], true);
    assert!(v["native"]["layers"]["seccomp"].as_bool().unwrap());
    assert_eq!(v["floor"]["available"], true);
}

#[test]
fn sandbox_command_passes_output_and_exit_code_and_is_audited() {
    let f = Fixture::new();
    let ws = f.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let run = |args: &[&str]| {
        bin()
            .args(args)
            .env("XDG_CONFIG_HOME", f.path().join("config"))
            .output()
            .unwrap()
    };
    let ws_arg = ws.to_str().unwrap();
    let out = run(&[
        "sandbox",
        "--workdir",
        ws_arg,
        "--",
        "sh",
        "-c",
        "echo made > f; echo hi; exit 7",
    ]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hi\n");
    assert_eq!(std::fs::read_to_string(ws.join("f")).unwrap(), "made\n");
    let out = run(&[
        "sandbox",
        "--workdir",
        ws_arg,
        "--limit",
        "wall=1",
        "--",
        "sleep",
        "30",
    ]);
    assert_eq!(out.status.code(), Some(137), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("wall cap"));
    let out = run(&["sandbox", "--workdir", ws_arg, "--", "no-such-program-here"]);
    assert_eq!(out.status.code(), Some(127));
    let out = run(&["audit", "--json"]);
    let lines: Vec<serde_json::Value> = crate::json_schema::documents(&out.stdout);
    assert_eq!(lines.len(), 2, "a failed launch writes no line: {lines:?}");
    assert_eq!(lines[0]["exit_code"], 7);
    assert_eq!(lines[1]["cap_hit"], "wall");
    assert!(lines.iter().all(|l| l["backend"] == "linux-namespaces"));
    let mode = std::fs::metadata(f.path().join("config/io-harness/audit/sessions.jsonl")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(mode.permissions().mode() & 0o777, 0o600);
}

/// Ctrl-C stops the running command at once (exit 130), the step is not committed,
/// and the resume tells the model the command was interrupted, then goes on to
/// success.
#[test]
fn ctrl_c_stops_the_running_command_and_the_run_resumes() {
    let f = Fixture::new();
    f.write("t/ws/a.txt", "a\n");
    let script = [
        r#"{"tool_calls": [{"name": "run_command", "input": {"argv": ["sleep", "1.5"]}}]}"#,
        r#"{"tool_calls": [{"name": "write_file", "input": {"path": "b.txt", "content": "b\n"}}]}"#,
        r#"{"text": "done"}"#,
    ];
    f.write("t/script.jsonl", &(script.join("\n") + "\n"));
    let task = f.write(
        "t/task.toml",
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"b.txt\", needle = \"b\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    );
    // Wait until the command of step 1 is running, then interrupt.
    let (status, rest) = interrupt_at_first_tool(
        bin()
            .args(["run", task.to_str().unwrap(), "--json"])
            .env("XDG_CACHE_HOME", f.path().join("cache"))
            .env("XDG_CONFIG_HOME", f.path().join("config"))
            .env("IO_HARNESS_STORE", f.store())
            .stderr(std::process::Stdio::null()),
    );
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(rest.contains("\"cancelled\""), "{rest}");
    assert!(
        !f.path().join("t/ws/b.txt").exists(),
        "stopped before step 2"
    );
    let runs = crate::json_schema::runs(&f.cmd(&["runs", "--json"]).stdout);
    assert_eq!(runs[0]["outcome"], "cancelled");
    assert_eq!(runs[0]["steps"], 0, "the interrupted step is not committed");
    let id = runs[0]["id"].to_string();
    let out = f.cmd(&["resume", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(f.path().join("t/ws/b.txt")).unwrap(),
        "b\n"
    );
    let show: serde_json::Value = crate::json_schema::last(&f.cmd(&["show", &id, "--json"]).stdout);
    let told = show["steps"][0]["tool_calls"][0]["output"]
        .as_str()
        .unwrap();
    assert!(told.starts_with("interrupted: "), "{told}");
}

/// An ask with nobody to answer it defers: exit 5, `approve`, `resume` continues from
/// exactly that action.
#[test]
fn a_deferred_approval_round_trips_through_the_cli() {
    let f = Fixture::new();
    f.write("t/ws/a.txt", "a\n");
    let script = [
        r#"{"tool_calls": [{"name": "write_file", "input": {"path": "b.txt", "content": "b\n"}}, {"name": "run_command", "input": {"argv": ["sh", "-c", "echo approved > c.txt"]}}]}"#,
        r#"{"text": "done"}"#,
    ];
    f.write("t/script.jsonl", &(script.join("\n") + "\n"));
    // On the floor, a command needs a decision.
    let task = f.write(
        "t/task.toml",
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"c.txt\", needle = \"approved\" }\n[sandbox]\nrequire = \"portable-floor\"\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    );
    let out = f.cmd(&["run", task.to_str().unwrap(), "--json"]);
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let result: serde_json::Value = crate::json_schema::last(&out.stdout);
    let outcome = &result["result"]["outcome"];
    assert_eq!(outcome["outcome"], "awaiting_approval");
    let request = outcome["request_id"].as_str().unwrap().to_string();
    let id = result["result"]["run_id"].to_string();
    assert!(
        f.path().join("t/ws/b.txt").exists(),
        "the call before the ask ran"
    );
    assert!(
        !f.path().join("t/ws/c.txt").exists(),
        "the asked command did not run"
    );

    let out = f.cmd(&["resume", &id]);
    assert_eq!(out.status.code(), Some(2), "pending: resume refuses");
    assert!(
        text(&out.stderr).contains("still pending"),
        "{}",
        text(&out.stderr)
    );
    let out = f.cmd(&["approve", &id, "no-such-request", "allow"]);
    assert_eq!(out.status.code(), Some(2));
    let out = f.cmd(&["approve", &id, &request, "allow"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let out = f.cmd(&["resume", &id, "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(f.path().join("t/ws/c.txt")).unwrap(),
        "approved\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.path().join("t/ws/b.txt")).unwrap(),
        "b\n"
    );
    let show: serde_json::Value = crate::json_schema::last(&f.cmd(&["show", &id, "--json"]).stdout);
    let calls = &show["steps"][0]["tool_calls"];
    // The write before the ask ran once; its result comes from the journal.
    assert_eq!(calls[0]["output"], "created b.txt (2 bytes)", "{calls}");
    assert!(
        calls[1]["output"]
            .as_str()
            .unwrap()
            .starts_with("exit code 0"),
        "{calls}"
    );
    let decisions: Vec<(String, String)> = show["policy_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["act"] == "exec" && p["target"] == "sh -c 'echo approved > c.txt'")
        .map(|p| {
            (
                p["decision"].as_str().unwrap().to_string(),
                p["layer"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            ("ask".to_string(), "builtin".to_string()),
            ("allow".to_string(), "approval".to_string())
        ]
    );
}

/// On a terminal, an ask is put to the person at the keyboard (driven here through a
/// real pty by util-linux `script`).
#[test]
fn the_interactive_prompt_answers_an_ask_through_a_pty() {
    let f = Fixture::new();
    let script = [
        r#"{"tool_calls": [{"name": "run_command", "input": {"argv": ["sh", "-c", "echo yes > c.txt"]}}]}"#,
        r#"{"text": "done"}"#,
    ];
    f.write("t/ws/a.txt", "a\n");
    f.write("t/script.jsonl", &(script.join("\n") + "\n"));
    let task = f.write(
        "t/task.toml",
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"c.txt\", needle = \"yes\" }\n[sandbox]\nrequire = \"portable-floor\"\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    );
    let line = format!(
        "{} run {}",
        env!("CARGO_BIN_EXE_io-harness"),
        task.display()
    );
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .env("IO_HARNESS_STORE", f.store())
        .env("XDG_CACHE_HOME", f.path().join("cache"))
        .env("XDG_CONFIG_HOME", f.path().join("config"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.as_mut().unwrap().write_all(b"a\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let screen = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{screen}\n{}",
        text(&out.stderr)
    );
    assert!(screen.contains("approval needed"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(f.path().join("t/ws/c.txt")).unwrap(),
        "yes\n"
    );
}

#[test]
fn require_sandbox_refuses_to_run_weaker() {
    let f = Fixture::new();
    f.write("t/ws/a.txt", "a\n");
    f.write("t/script.jsonl", "{\"text\": \"done\"}\n");
    let task = f.write(
        "t/task.toml",
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"a.txt\", needle = \"a\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    );
    let out = f.cmd(&[
        "run",
        task.to_str().unwrap(),
        "--require-sandbox",
        "macos-sandbox-exec",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("macos-sandbox-exec"),
        "{}",
        text(&out.stderr)
    );
    let out = f.cmd(&[
        "run",
        task.to_str().unwrap(),
        "--require-sandbox",
        "linux-namespaces",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn memory_command_lists_and_forgets_and_show_prints_the_exact_request() {
    let f = Fixture::new();
    f.write("t/ws/a.txt", "a\n");
    let script = [
        r#"{"tool_calls": [{"name": "remember", "input": {"key": "hint", "value": "tests live in tests/"}}]}"#,
        r#"{"text": "done"}"#,
    ];
    f.write("t/script.jsonl", &(script.join("\n") + "\n"));
    let task = f.write(
        "t/task.toml",
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"a.txt\", needle = \"a\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    );
    assert_eq!(
        f.cmd(&["run", task.to_str().unwrap()]).status.code(),
        Some(0)
    );
    let ws = f.path().join("t/ws");
    let out = f.cmd(&["memory", ws.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = crate::json_schema::last(&out.stdout);
    assert_eq!(v["notes"][0]["key"], "hint");
    assert_eq!(v["notes"][0]["source_run"], 1);
    let out = f.cmd(&["show", "1", "--prompt", "2"]);
    let body = text(&out.stdout);
    assert!(
        body.contains("remembered") && body.contains("\"messages\""),
        "{body}"
    );
    assert_eq!(
        f.cmd(&["memory", ws.to_str().unwrap(), "forget", "hint"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        f.cmd(&["memory", ws.to_str().unwrap(), "forget", "hint"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn closed_sets_of_values_are_refused_by_clap_with_the_valid_ones() {
    let f = Fixture::new();
    let ws = f.path().to_str().unwrap().to_string();
    let cases: [(&[&str], &str); 5] = [
        (
            &["sandbox", "--network", "bogus", "--", "true"],
            "none, allowlist, open",
        ),
        (
            &["sandbox", "--require-sandbox", "nope", "--", "true"],
            "linux-namespaces, macos-sandbox-exec, windows-job-object, portable-floor",
        ),
        (&["approve", "1", "r1", "maybe"], "allow, deny"),
        (&["memory", &ws, "bogus"], "list, forget, clear"),
        (
            &["run", "t.toml", "--require-sandbox", "nope"],
            "portable-floor",
        ),
    ];
    for (args, valid) in cases {
        let out = f.cmd(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(valid), "{args:?}: {err}");
    }
    // `forget` needs its KEY; `list` and `clear` take none.
    assert_eq!(f.cmd(&["memory", &ws, "forget"]).status.code(), Some(2));
    let out = f.cmd(&["memory", &ws, "clear", "k"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("clear k: expected list, forget KEY or clear"));
}

/// Runs `args` with standard output a pipe whose reader is already gone.
fn with_closed_stdout(f: &Fixture, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    bin()
        .args(args)
        .env("XDG_CACHE_HOME", f.path().join("cache"))
        .env("XDG_DATA_HOME", f.path().join("data"))
        .env("IO_HARNESS_STORE", f.store())
        .stdout(std::process::Stdio::from(writer))
        .output()
        .unwrap()
}

/// A scripted task that writes one file and passes: a run in a fraction of a second.
fn quick_task(f: &Fixture) -> PathBuf {
    std::fs::create_dir_all(f.path().join("t/ws")).unwrap();
    f.write(
        "t/script.jsonl",
        "{\"tool_calls\": [{\"name\": \"write_file\", \"input\": {\"path\": \"a.txt\", \"content\": \"a\"}}]}\n{\"text\": \"done\"}\n",
    );
    f.write(
        "t/task.toml",
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"a.txt\", needle = \"a\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    )
}

/// Issue 19.2: `io-harness runs | head -1` panicked on the broken pipe (exit 101 with a
/// backtrace), as did `show` and `show --prompt`. A read-only command now exits 0
/// quietly; a run whose reader left goes on to its outcome and exits with its code.
#[test]
fn a_closed_pipe_ends_read_only_commands_quietly_and_a_run_keeps_its_outcome() {
    let f = Fixture::new();
    let task = quick_task(&f);
    let task = task.to_str().unwrap();
    let first = f.cmd(&["run", task]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    for args in [
        &["runs"][..],
        &["runs", "--json"],
        &["show", "1"],
        &["show", "1", "--json"],
        &["show", "1", "--prompt", "1"],
        &["doctor"],
    ] {
        let out = with_closed_stdout(&f, args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // A run (its JSON events on the closed stdout) finishes and keeps its code.
    let out = with_closed_stdout(&f, &["run", task, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let runs = f.cmd(&["runs", "--json"]);
    let v = crate::json_schema::runs(&runs.stdout);
    let outcomes: Vec<&str> = v.iter().map(|r| r["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["success", "success"]);
}

/// Issue 19.2: `runs` takes `--limit` and `--since` (a duration back or a time).
#[test]
fn runs_takes_a_limit_and_a_since() {
    let f = Fixture::new();
    let task = quick_task(&f);
    for _ in 0..3 {
        let out = f.cmd(&["run", task.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let ids = |args: &[&str]| -> Vec<i64> {
        let out = f.cmd(args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        crate::json_schema::runs(&out.stdout)
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(ids(&["runs", "--json"]), [3, 2, 1]);
    assert_eq!(ids(&["runs", "--json", "--limit", "2"]), [3, 2]);
    assert_eq!(ids(&["runs", "--json", "--since", "1h"]), [3, 2, 1]);
    assert_eq!(
        ids(&[
            "runs",
            "--json",
            "--since",
            "2000-01-01T00:00:00Z",
            "--limit",
            "1"
        ]),
        [3]
    );
    assert!(ids(&["runs", "--json", "--since", "2999-01-01T00:00:00Z"]).is_empty());
    let bad = f.cmd(&["runs", "--since", "last tuesday"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("neither a duration"),
        "{}",
        text(&bad.stderr)
    );
}

/// Issue 19.1: without a terminal and without `--json`, nothing was printed until the
/// run ended. On a non-terminal stderr each event a person needs is one timestamped
/// line, written as it happens: the first arrives while the run is still going
/// (here, while a command of step 1 sleeps 3 s), within a second of the start.
#[test]
fn a_ci_log_gets_one_timestamped_line_per_event_while_the_run_goes() {
    use std::io::BufRead;
    let f = Fixture::new();
    std::fs::create_dir_all(f.path().join("t/ws")).unwrap();
    f.write(
        "t/script.jsonl",
        "{\"tool_calls\": [{\"name\": \"run_command\", \"input\": {\"argv\": [\"sleep\", \"3\"]}}]}\n\
         {\"tool_calls\": [{\"name\": \"write_file\", \"input\": {\"path\": \"a.txt\", \"content\": \"a\"}}]}\n\
         {\"text\": \"done\"}\n",
    );
    let task = f.write(
        "t/task.toml",
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"a.txt\", needle = \"a\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    );
    let started = std::time::Instant::now();
    let mut child = bin()
        .args(["run", task.to_str().unwrap()])
        .env("XDG_CACHE_HOME", f.path().join("cache"))
        .env("XDG_DATA_HOME", f.path().join("data"))
        .env("IO_HARNESS_STORE", f.store())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let first_at = started.elapsed();
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{first}\n{}", rest.join("\n"));
    assert!(
        first_at < std::time::Duration::from_secs(1),
        "first line after {first_at:?}"
    );
    assert!(first.contains("run 1 started: g"), "{first}");
    // `2026-12-01T16:59:01.123Z message`.
    let stamp = first.split(' ').next().unwrap();
    assert!(humantime::parse_rfc3339(stamp).is_ok(), "{first}");
    let all = rest.join("\n");
    for needle in [
        "step 1/",
        "tool run_command",
        "tool run_command: exit code 0",
        "tool write_file a.txt",
        "verification passed",
        "outcome: ",
    ] {
        assert!(all.contains(needle), "{needle:?} not in\n{all}");
    }
}

/// Issue 19.1: `--json` event lines carry the time they were written.
#[test]
fn json_event_lines_carry_their_time() {
    let f = Fixture::new();
    let task = quick_task(&f);
    let out = f.cmd(&["run", task.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = crate::json_schema::documents(&out.stdout);
    let events: Vec<&serde_json::Value> =
        lines.iter().filter(|v| v.get("event").is_some()).collect();
    assert!(events.len() >= 5, "{lines:?}");
    let mut last = std::time::UNIX_EPOCH;
    for e in events {
        let at = humantime::parse_rfc3339(e["at"].as_str().unwrap()).unwrap();
        assert!(at >= last, "{e}");
        last = at;
    }
}

/// Adversary of issue #15, B8: a path with newlines in it forged lines at the start of
/// the run's stderr log ("verification passed", an outcome) and a hunk of the final
/// diff. The log escapes each event onto one line, the diff quotes such a path.
#[test]
fn a_path_with_newlines_forges_no_line_of_the_log_or_the_diff() {
    let f = Fixture::new();
    let forged = "notes.txt\n2026-12-01T00:00:00Z verification passed\ndiff --harness a/README.md b/README.md";
    let turn = serde_json::json!({"tool_calls": [{"name": "write_file", "input": {"path": forged, "content": "x\n"}}]});
    f.write(
        "t/script.jsonl",
        &format!("{turn}\n{{\"text\": \"done\"}}\n"),
    );
    f.write(
        "t/task.toml",
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"a.txt\", needle = \"a\" }\n[budget]\nmax_steps = 3\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    );
    f.write("t/ws/a.txt", "a\n");
    let out = f.cmd(&["run", f.path().join("t/task.toml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    for line in stderr.lines().chain(stdout.lines()) {
        assert!(
            !line.starts_with("2026-12-01T00:00:00Z"),
            "forged log line: {line:?}"
        );
        assert!(
            !line.starts_with("diff --harness a/README.md"),
            "forged diff header: {line:?}\n{stdout}"
        );
    }
    assert!(
        stdout.contains("a/\"notes.txt\\n2026"),
        "the path is quoted: {stdout}"
    );
}

/// Issue 16's adversary (AP2): the pending approval was printed with invisible
/// characters dropped, so what the operator read (`xy`) was not what would run
/// (`x\u{200b}y`). It is printed escaped, byte for byte.
#[test]
fn a_pending_approval_shows_exactly_the_bytes_it_would_run() {
    let f = Fixture::new();
    f.write("t/ws/a.txt", "a\n");
    let script = [
        "{\"tool_calls\": [{\"name\": \"run_command\", \"input\": {\"argv\": [\"echo\", \"x\u{200b}y\"]}}]}",
        r#"{"text": "done"}"#,
    ];
    f.write("t/script.jsonl", &(script.join("\n") + "\n"));
    let task = f.write(
        "t/task.toml",
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"c.txt\", needle = \"x\" }\n[sandbox]\nrequire = \"portable-floor\"\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    );
    let out = f.cmd(&["run", task.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(shown.contains("x\\u{200b}y"), "{shown}");
    assert!(!shown.contains('\u{200b}'), "{shown}");
}

/// Issue 19.2: every kind of `--json` document the schema names is printed by some
/// command, and each one printed is valid: run's events and result, runs, show, doctor,
/// memory, audit (one session a line), mcp list, config, tools and export-otlp.
#[test]
fn every_json_document_kind_is_produced_and_matches_the_schema() {
    let f = Fixture::new();
    let task = quick_task(&f);
    let task = task.to_str().unwrap();
    let cmd = |args: &[&str]| -> Vec<serde_json::Value> {
        let out = bin()
            .args(args)
            .env("XDG_CACHE_HOME", f.path().join("cache"))
            .env("XDG_DATA_HOME", f.path().join("data"))
            .env("XDG_CONFIG_HOME", f.path().join("config"))
            .env("IO_HARNESS_STORE", f.store())
            .output()
            .unwrap();
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{args:?}: {}",
            text(&out.stderr)
        );
        crate::json_schema::documents(&out.stdout)
    };
    let mut seen = std::collections::BTreeSet::new();
    let ws = f.path().join("t/ws");
    // A server that cannot start is still listed (with its failure).
    let with_mcp = f.write(
        "t/mcp.toml",
        "goal = \"g\"\nroot = \"ws\"\n[verify]\ncommand = [\"true\"]\n[[mcp]]\nname = \"absent\"\ncommand = \"/nonexistent/mcp\"\n",
    );
    for args in [
        vec!["run", task, "--json"],
        vec!["runs", "--json"],
        vec!["show", "1", "--json"],
        vec!["doctor", "--json"],
        vec!["memory", ws.to_str().unwrap(), "--json"],
        vec!["sandbox", "--workdir", ws.to_str().unwrap(), "--", "true"],
        vec!["audit", "--json"],
        vec!["mcp", "list", with_mcp.to_str().unwrap(), "--json"],
        vec!["config", "--task", task, "--json"],
        vec!["tools", "--json"],
        vec!["batch", task, "--json"],
    ] {
        for doc in cmd(&args) {
            seen.insert(doc["object"].as_str().unwrap().to_string());
        }
    }
    #[cfg(feature = "otel")]
    {
        let rx = crate::otel::Receiver::start(f.path(), "otlp", &[]);
        for doc in cmd(&["export-otlp", "1", "--endpoint", &rx.url(), "--json"]) {
            seen.insert(doc["object"].as_str().unwrap().to_string());
        }
    }
    #[cfg(not(feature = "otel"))]
    seen.insert("otlp_export".to_string());
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema/output.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let named: std::collections::BTreeSet<String> = schema["properties"]["object"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(seen, named);
}

/// Issue 19.1: on a terminal the progress line is live and shows a retry and its wait
/// (it showed neither), under a real pty (`script`), against a server that answers 429
/// with `Retry-After: 1` once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terminal_progress_line_shows_a_retry_and_its_wait() {
    use crate::providers::fake_server::{FakeServer, Reply, whole};
    let server = FakeServer::start(vec![
        Reply::json(429, r#"{"error":{"message":"slow down"}}"#).header("Retry-After", "1"),
        Reply::sse(whole(&crate::providers::openai_text("done"))),
    ])
    .await;
    let f = Fixture::new();
    f.write("t/ws/a.txt", "a\n");
    let task = f.write(
        "t/task.toml",
        &format!(
            "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = {{ file = \"a.txt\", needle = \"a\" }}\n[provider]\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"{}/v1\"\n",
            server.url()
        ),
    );
    let line = format!(
        "{} run {}",
        env!("CARGO_BIN_EXE_io-harness"),
        task.display()
    );
    let store = f.store();
    let root = f.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("script")
            .args(["-q", "-e", "-c", &line, "/dev/null"])
            .env("IO_HARNESS_STORE", store)
            .env("XDG_CACHE_HOME", root.join("cache"))
            .env("XDG_CONFIG_HOME", root.join("config"))
            .env("OPENAI_API_KEY", crate::providers::KEY)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let screen = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{screen}");
    assert!(
        screen.contains("failed (rate-limited): retry in 1.0 s"),
        "{screen:?}"
    );
    assert!(screen.contains("verified"), "{screen:?}");
    // Redrawn in place: carriage returns and erase-line, not one line per event.
    assert!(screen.contains("\r\u{1b}[2K"), "{screen:?}");
}
