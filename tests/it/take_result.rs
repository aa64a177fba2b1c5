//! Issue 19.4: cleaning up after runs and taking their result back — the copy removed
//! after a success unless `--keep`, `diff`, `apply` (three-way, `--branch`) and
//! `runs prune`, through the real binary in temporary directories.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::cli::{Fixture, text};

const TEN: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";

/// A copy-mode task over `t/ws` whose script is `turns` (then "done"); passes when
/// `a.txt` contains `needle`.
fn copy_task(f: &Fixture, turns: &[serde_json::Value], needle: &str, extra: &str) -> PathBuf {
    let mut script: String = turns.iter().map(|t| format!("{t}\n")).collect();
    script.push_str("{\"text\": \"done\"}\n");
    f.write("t/script.jsonl", &script);
    f.write(
        "t/task.toml",
        &format!(
            "goal = \"g\"\nroot = \"ws\"\nworkspace = \"copy\"\n{extra}[verify]\nfile_contains = {{ file = \"a.txt\", needle = \"{needle}\" }}\nmax_attempts = 1\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n"
        ),
    )
}

fn write_call(path: &str, content: &str) -> serde_json::Value {
    serde_json::json!({"tool_calls": [{"name": "write_file", "input": {"path": path, "content": content}}]})
}

fn run_json(f: &Fixture, args: &[&str]) -> serde_json::Value {
    let out = f.cmd(args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = crate::json_schema::last(&out.stdout);
    // `runs --json` lists them under `runs`.
    if doc["object"] == "runs" {
        return doc["runs"].clone();
    }
    doc
}

/// The work directory a run recorded.
fn work_dir(f: &Fixture, id: i64) -> PathBuf {
    let show = run_json(f, &["show", &id.to_string(), "--json"]);
    PathBuf::from(show["run"]["work_dir"].as_str().unwrap())
}

#[test]
fn a_successful_copy_is_removed_unless_keep_and_a_failed_one_is_kept_where_show_says() {
    let f = Fixture::new();
    f.write("t/ws/a.txt", "a\n");
    let task = copy_task(&f, &[write_call("a.txt", "b\n")], "b", "");
    let task = task.to_str().unwrap();
    let out = f.cmd(&["run", task]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("copy removed after success"),
        "{}",
        text(&out.stdout)
    );
    let copy = work_dir(&f, 1);
    assert!(copy.ends_with("work") && !copy.exists(), "{copy:?}");
    let show = text(&f.cmd(&["show", "1"]).stdout);
    assert!(show.contains("copy: removed"), "{show}");
    // The diff is still there to take.
    assert!(text(&f.cmd(&["diff", "1"]).stdout).contains("+b"));

    let out = f.cmd(&["run", task, "--keep"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let copy = work_dir(&f, 2);
    assert_eq!(std::fs::read_to_string(copy.join("a.txt")).unwrap(), "b\n");
    let show = text(&f.cmd(&["show", "2"]).stdout);
    assert!(
        show.contains(&format!("copy: {} (kept)", copy.display())),
        "{show}"
    );

    // A failed run keeps its copy without being asked, and says so.
    let task = copy_task(&f, &[write_call("a.txt", "c\n")], "zzz", "");
    let out = f.cmd(&["run", task.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let copy = work_dir(&f, 3);
    assert!(
        text(&out.stdout).contains(&format!(
            "{} (kept: the run did not succeed)",
            copy.display()
        )),
        "{}",
        text(&out.stdout)
    );
    assert!(copy.join("a.txt").exists());
}

#[test]
fn diff_prints_the_stored_diff_byte_for_byte() {
    let f = Fixture::new();
    f.write("t/ws/a.txt", "a\n");
    let task = copy_task(&f, &[write_call("a.txt", "b\n")], "b", "");
    assert_eq!(
        f.cmd(&["run", task.to_str().unwrap()]).status.code(),
        Some(0)
    );
    let stored = run_json(&f, &["show", "1", "--json"])["run"]["diff"]
        .as_str()
        .unwrap()
        .to_string();
    let out = f.cmd(&["diff", "1"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), stored);
    assert!(stored.contains("-a\n+b\n"), "{stored}");
    let out = f.cmd(&["diff", "9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no run with id 9"));
}

#[test]
fn apply_merges_what_the_operator_changed_elsewhere_and_refuses_a_conflict_whole() {
    let f = Fixture::new();
    f.write("t/ws/a.txt", TEN);
    f.write("t/ws/b.txt", "keep\n");
    let edit = serde_json::json!({"tool_calls": [
        {"name": "edit_file", "input": {"path": "a.txt", "old": "2\n", "new": "two\n"}},
        {"name": "write_file", "input": {"path": "new/c.txt", "content": "c\n"}},
        {"name": "write_file", "input": {"path": "private.txt", "content": "hidden\n"}},
    ]});
    let rules =
        "[policy]\nrules = [{ act = \"read\", target = \"private.txt\", decision = \"deny\" }]\n";
    let task = copy_task(&f, &[edit], "two", rules);
    let out = f.cmd(&["run", task.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Since the run started, the operator changed another line of a.txt.
    let a = f.path().join("t/ws/a.txt");
    std::fs::write(&a, TEN.replace("9\n", "nine\n")).unwrap();
    let out = f.cmd(&["apply", "1"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        std::fs::read_to_string(&a).unwrap(),
        TEN.replace("2\n", "two\n").replace("9\n", "nine\n")
    );
    assert_eq!(
        std::fs::read_to_string(f.path().join("t/ws/new/c.txt")).unwrap(),
        "c\n"
    );
    assert!(stdout.contains("M a.txt (merged"), "{stdout}");
    assert!(stdout.contains("A new/c.txt"), "{stdout}");
    assert!(
        stderr.contains("not applied: private.txt (content withheld"),
        "{stderr}"
    );
    assert!(!f.path().join("t/ws/private.txt").exists());
    // Applying again finds everything in place.
    let out = f.cmd(&["apply", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("0 file(s) written"),
        "{}",
        text(&out.stdout)
    );

    // A second run changes line 5 and adds a file; the operator changes line 5 too.
    let edit = serde_json::json!({"tool_calls": [
        {"name": "edit_file", "input": {"path": "a.txt", "old": "5\n", "new": "five\n"}},
        {"name": "write_file", "input": {"path": "d.txt", "content": "d\n"}},
    ]});
    let task = copy_task(&f, &[edit], "five", "");
    let out = f.cmd(&["run", task.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let before = std::fs::read_to_string(&a)
        .unwrap()
        .replace("5\n", "FIVE\n");
    std::fs::write(&a, &before).unwrap();
    let out = f.cmd(&["apply", "2"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("conflict: a.txt"), "{stderr}");
    assert!(stderr.contains("nothing was applied"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&a).unwrap(),
        before,
        "a.txt untouched"
    );
    assert!(
        !f.path().join("t/ws/d.txt").exists(),
        "nothing half-applied"
    );
}

/// Runs git in `dir` as a person would (their hooks and fsmonitor live).
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn apply_branch_commits_with_the_operator_identity_and_runs_no_hook_or_fsmonitor() {
    let f = Fixture::new();
    let ws = f.path().join("t/ws");
    f.write("t/ws/a.txt", TEN);
    git(&ws, &["init", "-q", "-b", "main"]);
    git(&ws, &["config", "user.name", "Op Erator"]);
    git(&ws, &["config", "user.email", "op@example.com"]);
    git(&ws, &["add", "a.txt"]);
    git(&ws, &["commit", "-q", "-m", "start"]);
    let head = git(&ws, &["rev-parse", "HEAD"]);
    // Planted: an fsmonitor program and hooks that each leave a canary.
    let canary = f.path().join("canary");
    let plant = f.write(
        "plant.sh",
        &format!("#!/bin/sh\necho \"$0\" >> {}\n", canary.display()),
    );
    std::fs::set_permissions(&plant, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    git(&ws, &["config", "core.fsmonitor", plant.to_str().unwrap()]);
    for hook in [
        "reference-transaction",
        "pre-commit",
        "post-commit",
        "post-index-change",
    ] {
        let p = ws.join(".git/hooks").join(hook);
        std::fs::copy(&plant, &p).unwrap();
    }
    // The plants are live: a plain git command runs them.
    git(&ws, &["status", "--short"]);
    assert!(canary.exists(), "the planted fsmonitor ran under plain git");
    std::fs::remove_file(&canary).unwrap();

    let edit = serde_json::json!({"tool_calls": [
        {"name": "edit_file", "input": {"path": "a.txt", "old": "3\n", "new": "three\n"}},
        {"name": "write_file", "input": {"path": "sub/new.txt", "content": "n\n"}},
    ]});
    let task = copy_task(&f, &[edit], "three", "");
    let out = f.cmd(&["run", task.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!canary.exists(), "the run ran a planted program");

    let out = f.cmd(&["apply", "1", "--branch", "agent/fix"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("on branch agent/fix"), "{stdout}");
    assert!(
        !canary.exists(),
        "apply ran a planted program: {}",
        std::fs::read_to_string(&canary).unwrap_or_default()
    );
    let show = |what: &str| git(&ws, &["-c", "core.fsmonitor=false", "show", what]);
    assert_eq!(show("agent/fix:a.txt"), TEN.replace("3\n", "three\n"));
    assert_eq!(show("agent/fix:sub/new.txt"), "n\n");
    let who = git(
        &ws,
        &[
            "-c",
            "core.fsmonitor=false",
            "log",
            "-1",
            "--format=%an <%ae>|%ae",
            "agent/fix",
        ],
    );
    assert_eq!(who.trim(), "Op Erator <op@example.com>|op@example.com");
    assert_eq!(
        git(
            &ws,
            &["-c", "core.fsmonitor=false", "rev-parse", "agent/fix~1"]
        ),
        head
    );
    // HEAD and the working tree are as they were.
    assert_eq!(
        git(&ws, &["-c", "core.fsmonitor=false", "rev-parse", "HEAD"]),
        head
    );
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), TEN);
    assert!(!ws.join("sub/new.txt").exists());
    // A branch that exists is not overwritten.
    let out = f.cmd(&["apply", "1", "--branch", "agent/fix"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("exists already"),
        "{}",
        text(&out.stderr)
    );
    assert!(!canary.exists());
}

#[test]
fn prune_removes_old_copies_and_rows_never_following_a_symlink_and_keeps_resumable_runs() {
    let f = Fixture::new();
    f.write("t/ws/a.txt", "a\n");
    // Run 1: a success kept with --keep, then given links to things outside.
    let task = copy_task(&f, &[write_call("a.txt", "b\n")], "b", "");
    assert_eq!(
        f.cmd(&["run", task.to_str().unwrap(), "--keep"])
            .status
            .code(),
        Some(0)
    );
    let copy1 = work_dir(&f, 1);
    let canary = f.write("outside/canary.txt", "alive\n");
    f.write("outside/dir/inner.txt", "alive\n");
    std::os::unix::fs::symlink(&canary, copy1.join("link")).unwrap();
    std::os::unix::fs::symlink(f.path().join("outside/dir"), copy1.join("dirlink")).unwrap();
    // Run 2: fails verification (its copy is kept).
    let task = copy_task(&f, &[write_call("a.txt", "c\n")], "zzz", "");
    assert_eq!(
        f.cmd(&["run", task.to_str().unwrap()]).status.code(),
        Some(1)
    );
    // Run 3: awaits an approval (resumable).
    let ask = serde_json::json!({"tool_calls": [{"name": "run_command", "input": {"argv": ["sh", "-c", "echo b > a.txt"]}}]});
    let task = copy_task(&f, &[ask], "b", "[sandbox]\nrequire = \"portable-floor\"\n");
    assert_eq!(
        f.cmd(&["run", task.to_str().unwrap()]).status.code(),
        Some(5)
    );
    let (copy2, copy3) = (work_dir(&f, 2), work_dir(&f, 3));

    let out = f.cmd(&["runs", "prune", "--older-than", "7d"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("nothing to prune older than 7days"),
        "{}",
        text(&out.stdout)
    );
    assert!(copy1.exists());

    let out = f.cmd(&["runs", "prune", "--older-than", "0s", "--keep-failed"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("pruned 1 run(s)") && stdout.contains("(1)"),
        "{stdout}"
    );
    assert!(stdout.contains("kept 1 resumable run(s)"), "{stdout}");
    assert!(stdout.contains("kept 1 failed run(s)"), "{stdout}");
    assert!(
        !copy1.parent().unwrap().exists(),
        "run 1's scratch directory is gone"
    );
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), "alive\n");
    assert_eq!(
        std::fs::read_to_string(f.path().join("outside/dir/inner.txt")).unwrap(),
        "alive\n"
    );
    assert!(copy2.exists() && copy3.exists());
    // Without --rows the record stays.
    assert_eq!(
        run_json(&f, &["runs", "--json"]).as_array().unwrap().len(),
        3
    );

    let out = f.cmd(&["runs", "prune", "--older-than", "0s", "--rows"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("deleted 2 run(s) from the store"),
        "{stdout}"
    );
    assert!(!copy2.exists() && copy3.exists(), "the resumable run stays");
    let ids: Vec<i64> = run_json(&f, &["runs", "--json"])
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [3]);
    assert_eq!(f.cmd(&["show", "1"]).status.code(), Some(2));

    let out = f.cmd(&[
        "runs",
        "prune",
        "--older-than",
        "0s",
        "--rows",
        "--include-resumable",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!copy3.exists());
    assert!(
        run_json(&f, &["runs", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );
}
