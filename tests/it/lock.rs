//! One workspace, one run: an in-place run holds an exclusive lock on its canonical
//! workspace (a copy run a shared one while it copies), a second run is refused with a
//! message naming the first, the OS releases a dead holder's lock, and a sub-agent
//! working in its parent's tree is not refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use io_harness::provider::{ScriptTurn, Scripted};
use io_harness::{RunOutcome, Store, TaskContract, Verification, run};
use serde_json::json;

use crate::store_truth::{WAIT_FOR_GO, wait_for};

fn bin(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_io-harness"));
    c.env_remove("IO_HARNESS_FAILPOINT")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENROUTER_API_KEY")
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("IO_HARNESS_STORE", home.join("store.db"));
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A task on `<home>/ws` in `mode` whose first step runs `command` (appending `hi` to
/// a.txt) and whose second says it is done.
fn task(home: &Path, name: &str, mode: &str, command: &str) -> PathBuf {
    std::fs::create_dir_all(home.join("ws")).unwrap();
    let turn =
        json!({"tool_calls": [{"name": "run_command", "input": {"argv": ["sh", "-c", command]}}]});
    std::fs::write(
        home.join(format!("{name}.jsonl")),
        format!("{turn}\n{{\"text\": \"done\"}}\n"),
    )
    .unwrap();
    let task = home.join(format!("{name}.toml"));
    std::fs::write(
        &task,
        format!(
            "goal = \"g\"\nroot = \"ws\"\nworkspace = \"{mode}\"\n[verify]\nfile_contains = {{ file = \"a.txt\", needle = \"hi\" }}\n[provider]\nkind = \"scripted\"\nscript = \"{name}.jsonl\"\n"
        ),
    )
    .unwrap();
    task
}

#[test]
fn second_in_place_run_on_one_workspace_is_refused_naming_the_first() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let first_task = task(home, "first", "in-place", WAIT_FOR_GO);
    let second_task = task(home, "second", "in-place", "echo hi >> a.txt");
    let copy_task = task(home, "copy", "copy", "echo hi >> a.txt");
    let first = bin(home)
        .args(["run", first_task.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = first.id();
    wait_for(&home.join("ws/started"));

    // The workspace reached through another spelling of its path is the same one.
    let mut alias = std::fs::read_to_string(&second_task).unwrap();
    alias = alias.replace("root = \"ws\"", "root = \"./ws/../ws\"");
    std::fs::write(&second_task, alias).unwrap();
    for t in [&second_task, &copy_task] {
        let out = bin(home)
            .args(["run", t.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", t.display());
        assert!(
            stderr.contains(&format!("in use by run 1 (pid {pid})")),
            "the refusal names the first run: {stderr}"
        );
    }

    std::fs::write(home.join("ws/go"), "").unwrap();
    let out = first.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(home.join("ws/a.txt")).unwrap(),
        "hi\n",
        "the edit is made once"
    );
    // Once the first is done the workspace is free again.
    let out = bin(home)
        .args(["run", second_task.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// Adversary break: the lock was a file named by the path under the caller's state
/// directory, so a second run with another `XDG_CACHE_HOME` (another user's
/// environment) edited the tree at the same time, and so did one through a bind
/// mount. The lock is now on the directory's inode.
#[test]
fn a_second_run_with_another_state_directory_is_refused_too() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let first_task = task(home, "first", "in-place", WAIT_FOR_GO);
    let second_task = task(home, "second", "in-place", "echo hi >> a.txt");
    let first = bin(home)
        .args(["run", first_task.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&home.join("ws/started"));
    let out = bin(home)
        .args(["run", second_task.to_str().unwrap()])
        .env("XDG_CACHE_HOME", home.join("other-cache"))
        .env("IO_HARNESS_STORE", home.join("other.db"))
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("in use by"), "{stderr}");
    std::fs::write(home.join("ws/go"), "").unwrap();
    let out = first.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(home.join("ws/a.txt")).unwrap(),
        "hi\n"
    );
}

#[cfg(feature = "failpoints")]
#[test]
fn a_dead_holders_workspace_lock_is_released_by_the_os() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let t = task(home, "t", "in-place", "echo hi >> a.txt");
    let killed = bin(home)
        .args(["run", t.to_str().unwrap()])
        .env("IO_HARNESS_FAILPOINT", "step.after_tools:1")
        .output()
        .unwrap();
    assert_ne!(
        killed.status.code(),
        Some(0),
        "the failpoint aborts the run"
    );
    // Both a fresh run and the resume of the dead one get the workspace.
    let out = bin(home).args(["resume", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = bin(home)
        .args(["run", t.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[tokio::test]
async fn a_sub_agent_in_its_parents_workspace_is_not_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let contract = TaskContract::workspace(
        "get a.txt and sub/b.txt written",
        dir.path(),
        Verification::file_contains("sub/b.txt", "b"),
    );
    let spawn = |name: &str, root: &str, file: &str| {
        ScriptTurn::tool(
            "spawn_agent",
            json!({
                "name": name,
                "goal": format!("write {file}"),
                "root": root,
                "verify": {"file_contains": {"file": file, "needle": file.trim_end_matches(".txt")}},
                "budget": {"max_steps": 3}
            }),
        )
    };
    let write = |path: &str, content: &str| {
        ScriptTurn::tool("write_file", json!({"path": path, "content": content}))
    };
    let provider = Scripted::new(vec![
        // The same root as the parent's, then a sub-root of it.
        spawn("same", ".", "a.txt"),
        spawn("below", "sub", "b.txt"),
        ScriptTurn::text("both done"),
    ])
    .with_agent("same", vec![write("a.txt", "a\n"), ScriptTurn::text("ok")])
    .with_agent("below", vec![write("b.txt", "b\n"), ScriptTurn::text("ok")]);
    let store = Store::memory().unwrap();
    let r = run(&contract, &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    let children = store.children(r.run_id).unwrap();
    assert_eq!(children.len(), 2);
    for c in children {
        assert_eq!(c.run.outcome.as_deref(), Some("success"), "{:?}", c.run);
    }
}
