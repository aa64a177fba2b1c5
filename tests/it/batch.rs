//! `io-harness batch` (issue 21 item 1): many task files in one process, each a real
//! run with its own record under one batch id.

use std::io::BufRead;
use std::path::PathBuf;

use crate::cli::{Fixture, bin, text};

/// Task `n` of a set: one sandboxed command that appends to a log (a second run of
/// it would show as a second line), a write, then "done"; its gate is a sandboxed
/// `grep`.
fn task(f: &Fixture, n: usize, sleep: &str) -> PathBuf {
    f.write(&format!("set/t{n:02}/ws/in.txt"), "in\n");
    let script = [
        format!(
            r#"{{"tool_calls": [{{"name": "run_command", "input": {{"argv": ["sh", "-c", "echo ran >> log.txt; sleep {sleep}"]}}}}]}}"#
        ),
        format!(
            r#"{{"tool_calls": [{{"name": "write_file", "input": {{"path": "out.txt", "content": "task {n}\n"}}}}]}}"#
        ),
        r#"{"text": "done"}"#.to_string(),
    ];
    f.write(
        &format!("set/t{n:02}/script.jsonl"),
        &(script.join("\n") + "\n"),
    );
    f.write(
        &format!("set/t{n:02}/task.toml"),
        &format!(
            "goal = \"task {n}\"\nroot = \"ws\"\n[verify]\ncommand = [\"grep\", \"-qx\", \"task {n}\", \"out.txt\"]\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n"
        ),
    )
}

fn batch_doc(stdout: &[u8]) -> serde_json::Value {
    let doc = crate::json_schema::last(stdout);
    assert_eq!(doc["object"], "batch", "{doc}");
    doc
}

/// 20 tasks at --jobs 4, a Ctrl-C (SIGINT to the real binary) part way, then
/// `batch --resume`: every task ends exactly once, with one run each, its command
/// run at most once and no step recorded twice; `runs --batch`, `show` and
/// `report --batch` know the batch.
#[test]
fn twenty_tasks_at_four_jobs_survive_a_ctrl_c_and_resume_to_success() {
    let f = Fixture::new();
    for n in 1..=20 {
        task(&f, n, "0.3");
    }
    let set = f.path().join("set");
    let mut child = bin()
        .args(["batch", set.to_str().unwrap(), "--jobs", "4", "--json"])
        .env("XDG_CACHE_HOME", f.path().join("cache"))
        .env("XDG_DATA_HOME", f.path().join("data"))
        .env("XDG_CONFIG_HOME", f.path().join("config"))
        .env("IO_HARNESS_STORE", f.store())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    let mut finished = 0;
    let mut running = std::collections::BTreeSet::new();
    while finished < 4 {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "ended early: {seen}"
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if v["event"] == "run_started" {
            running.insert(v["task"].as_u64().unwrap());
        }
        finished += usize::from(v["event"] == "finished");
        seen.push_str(&line);
    }
    // SAFETY: kill(2) on the child we spawned.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let mut rest = Vec::new();
    std::io::Read::read_to_end(&mut stdout, &mut rest).unwrap();
    let status = child.wait().unwrap();
    let mut all = seen.into_bytes();
    all.extend_from_slice(&rest);
    crate::json_schema::documents(&all);
    assert_eq!(status.code(), Some(130), "{}", text(&rest));
    let first = batch_doc(&rest);
    assert_eq!(first["status"], "cancelled");
    let id = first["batch_id"].to_string();
    let tasks = first["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 20);
    let ended = tasks.iter().filter(|t| t["state"] == "ended").count();
    assert!((4..20).contains(&ended), "{first}");
    assert!(
        tasks.iter().any(|t| t["state"] == "not_started"),
        "at most 4 ran at once, so some had not started: {first}"
    );
    assert!(running.len() >= 4);

    let out = f.cmd(&["batch", "--resume", &id, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let done = batch_doc(&out.stdout);
    assert_eq!(done["status"], "finished");
    assert_eq!(done["totals"]["succeeded"], 20, "{done}");
    assert_eq!(done["totals"]["pass_rate"], 1.0);
    let mut run_ids = std::collections::BTreeSet::new();
    for t in done["tasks"].as_array().unwrap() {
        assert_eq!(t["outcome"]["outcome"], "success", "{t}");
        assert!(
            run_ids.insert(t["run_id"].as_i64().unwrap()),
            "one run per task"
        );
        let n = t["position"].as_u64().unwrap();
        let ws = f.path().join(format!("set/t{n:02}/ws"));
        let log = std::fs::read_to_string(ws.join("log.txt")).unwrap_or_default();
        assert!(
            log.lines().count() <= 1,
            "task {n}'s command ran twice: {log:?}"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("out.txt")).unwrap(),
            format!("task {n}\n")
        );
    }
    // Every run of the store is one of the batch's, and no step is recorded twice.
    let runs = crate::json_schema::runs(&f.cmd(&["runs", "--json"]).stdout);
    assert_eq!(runs.len(), 20);
    let listed = crate::json_schema::runs(&f.cmd(&["runs", "--batch", &id, "--json"]).stdout);
    assert_eq!(listed.len(), 20);
    let store = io_harness::Store::open(f.store()).unwrap();
    for run in &run_ids {
        let steps: Vec<u32> = store.steps(*run).unwrap().iter().map(|s| s.step).collect();
        let want: Vec<u32> = (1..=steps.len() as u32).collect();
        assert_eq!(steps, want, "run {run}");
    }
    let any = run_ids.iter().next().unwrap().to_string();
    let show = crate::json_schema::last(&f.cmd(&["show", &any, "--json"]).stdout);
    assert_eq!(show["batch"]["batch_id"].to_string(), id);
    let shown = text(&f.cmd(&["show", &any]).stdout);
    assert!(shown.contains(&format!("batch: {id} (task ")), "{shown}");
    // Nothing is left: a second resume runs nothing and says the same.
    let again = f.cmd(&["batch", "--resume", &id]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert!(text(&again.stdout).contains("pass rate 100.0%"));

    let pages = f.path().join("pages");
    let out = f.cmd(&["report", "--batch", &id, "-o", pages.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let index = std::fs::read_to_string(pages.join(format!("batch-{id}.html"))).unwrap();
    for run in &run_ids {
        assert!(
            index.contains(&format!("href=\"run-{run}.html\"")),
            "{index}"
        );
        assert!(pages.join(format!("run-{run}.html")).is_file());
    }
    assert!(index.contains("Content-Security-Policy"));
    assert!(index.contains("20 of 20 succeeded (pass rate 100.0%)"));
}

/// Every task file is checked before any runs: one bad file refuses the batch with
/// exit 2 naming it and the key, and nothing is recorded.
#[test]
fn a_bad_task_file_refuses_the_whole_batch_before_anything_runs() {
    let f = Fixture::new();
    let good = task(&f, 1, "0");
    let bad = f.write(
        "bad/task.toml",
        "goal = \"g\"\nroot = \"ws\"\nmax_stepz = 3\n[verify]\ncommand = [\"true\"]\n",
    );
    f.write("bad/ws/a.txt", "a\n");
    let out = f.cmd(&["batch", good.to_str().unwrap(), bad.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("1 of 2 task file(s) refused, nothing ran"),
        "{err}"
    );
    assert!(
        err.contains(&bad.display().to_string()) && err.contains("max_stepz"),
        "{err}"
    );
    assert!(!f.path().join("set/t01/ws/out.txt").exists());
    let list = f.write("list.jsonl", "\"set/t01/task.toml\"\n{\"task\": 7}\n");
    let out = f.cmd(&["batch", list.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(&format!("{}:2", list.display())));
    let out = f.cmd(&["batch", good.to_str().unwrap(), "--jobs", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The exit precedence: a failed verification beside a success is 1; a task refused
/// when it was to start (its required sandbox backend is not on this machine) makes
/// it 2 whatever else ended; tasks on one in-place workspace take turns instead of
/// failing.
#[test]
fn the_batch_exit_code_follows_the_precedence_and_one_workspace_is_shared_in_turn() {
    let f = Fixture::new();
    let ok = task(&f, 1, "0");
    f.write("fail/script.jsonl", "{\"text\": \"done\"}\n");
    let fail = f.write(
        "fail/task.toml",
        "goal = \"g\"\nroot = \"../set/t01/ws\"\n[verify]\nfile_contains = { file = \"in.txt\", needle = \"absent\" }\nmax_attempts = 1\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    );
    let out = f.cmd(&[
        "batch",
        ok.to_str().unwrap(),
        fail.to_str().unwrap(),
        "--jobs",
        "2",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc = batch_doc(&out.stdout);
    assert_eq!(doc["exit_code"], 1);
    let outcomes: Vec<_> = doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["outcome"]["outcome"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(outcomes, ["success", "verification_failed"], "{doc}");
    assert_eq!(doc["totals"]["pass_rate"], 0.5);

    let refused = f.write(
        "refused/task.toml",
        "goal = \"g\"\nroot = \"ws\"\n[verify]\ncommand = [\"true\"]\n[sandbox]\nrequire = \"macos-sandbox-exec\"\n[provider]\nkind = \"scripted\"\nscript = \"s.jsonl\"\n",
    );
    f.write("refused/s.jsonl", "{\"text\": \"done\"}\n");
    f.write("refused/ws/a.txt", "a\n");
    let out = f.cmd(&["batch", fail.to_str().unwrap(), refused.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("refused"), "{stdout}");
    assert!(stdout.contains("macos-sandbox-exec"), "{stdout}");
}

/// A workspace another process's run holds in place is waited for, not refused: the
/// batch task says it waits, then runs once the other run ends.
#[test]
fn a_batch_task_waits_for_a_workspace_another_process_holds() {
    let f = Fixture::new();
    let task_file = task(&f, 1, "0");
    f.write(
        "holder/script.jsonl",
        "{\"tool_calls\": [{\"name\": \"run_command\", \"input\": {\"argv\": [\"sleep\", \"1.5\"]}}]}\n{\"text\": \"done\"}\n",
    );
    let holder = f.write(
        "holder/task.toml",
        "goal = \"hold\"\nroot = \"../set/t01/ws\"\n[verify]\nfile_contains = { file = \"in.txt\", needle = \"in\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    );
    let mut child = bin()
        .args(["run", holder.to_str().unwrap(), "--json"])
        .env("XDG_CACHE_HOME", f.path().join("cache"))
        .env("XDG_DATA_HOME", f.path().join("data"))
        .env("IO_HARNESS_STORE", f.path().join("other.db"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    crate::cli_support::read_until(&mut stdout, "\"tool_called\"");
    let out = f.cmd(&["batch", task_file.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("[task 1] waiting for workspace"), "{err}");
    assert!(child.wait().unwrap().success());
}
