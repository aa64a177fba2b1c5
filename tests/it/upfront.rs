//! Issue 19.6: what would only fail once the run is under way is refused before
//! anything runs (exit 2, naming file, line and key, nothing stored), or, where a
//! default is meant, a line says which default was taken.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use super::cli::{Fixture, bin, text};

const SCRIPT: &str = "{\"text\": \"done\"}\n";
const VERIFY: &str = "[verify]\nfile_contains = { file = \"a.txt\", needle = \"a\" }\n";
const PROVIDER: &str = "[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n";

/// Runs `task` and expects a configuration error naming `line` and `key`.
fn refused(f: &Fixture, task: &str, line: usize, key: &str) -> String {
    let path = f.write("t/task.toml", task);
    let out = f.cmd(&["run", path.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("task.toml:{line}: {key}: ")), "{err}");
    assert!(
        !f.store().exists(),
        "nothing ran, nothing was stored: {err}"
    );
    err
}

#[test]
fn a_task_without_root_says_it_works_on_its_folder_and_a_missing_root_is_refused() {
    let f = Fixture::new();
    f.write("t/a.txt", "a\n");
    f.write("t/script.jsonl", SCRIPT);
    let task = f.write("t/task.toml", &format!("goal = \"g\"\n{VERIFY}{PROVIDER}"));
    let out = f.cmd(&["run", task.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let folder = f.path().join("t");
    assert!(
        err.contains(&format!(
            "sets no root; working on its directory {}",
            folder.display()
        )),
        "{err}"
    );
    std::fs::remove_file(f.store()).unwrap();
    let err = refused(
        &f,
        &format!("goal = \"g\"\nroot = \"nowhere\"\n{VERIFY}{PROVIDER}"),
        2,
        "root",
    );
    assert!(
        err.contains("nowhere") && err.contains("No such file"),
        "{err}"
    );
}

#[test]
fn a_missing_instructions_file_is_refused_naming_the_key() {
    let f = Fixture::new();
    f.write("t/ws/a.txt", "a\n");
    f.write("t/script.jsonl", SCRIPT);
    let err = refused(
        &f,
        &format!("goal = \"g\"\nroot = \"ws\"\ninstructions = \"AGENTS.md\"\n{VERIFY}{PROVIDER}"),
        3,
        "instructions",
    );
    assert!(
        err.contains("AGENTS.md is not a file in the workspace"),
        "{err}"
    );
}

/// Before, an unusable base URL was found by eleven seconds of retries.
#[test]
fn an_invalid_base_url_is_refused_at_once_from_the_file_or_the_flag() {
    let f = Fixture::new();
    f.write("t/ws/a.txt", "a\n");
    let started = Instant::now();
    let provider = "[provider]\nkind = \"openai\"\nmodel = \"m\"\n";
    let task = format!(
        "goal = \"g\"\nroot = \"ws\"\n{VERIFY}{provider}base_url = \"localhost:8080/v1\"\n"
    );
    // The key's own line.
    let err = refused(&f, &task, 8, "provider.base_url");
    assert!(err.contains("must be an http:// or https:// URL"), "{err}");
    let task = f.write(
        "t/task.toml",
        &format!("goal = \"g\"\nroot = \"ws\"\n{VERIFY}{provider}"),
    );
    let out = bin()
        .args(["run", task.to_str().unwrap(), "--base-url", "ftp://host/v1"])
        .env("OPENAI_API_KEY", "sk-test-0123456789")
        .env("IO_HARNESS_STORE", f.store())
        .env("XDG_CACHE_HOME", f.path().join("cache"))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("provider.base_url") && err.contains("http:// or https://"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(!f.store().exists());
}

#[test]
fn a_verify_program_the_gate_would_not_find_is_refused_before_the_run() {
    let f = Fixture::new();
    f.write("t/ws/a.txt", "a\n");
    f.write("t/script.jsonl", SCRIPT);
    let task = |command: &str, extra: &str| {
        format!("goal = \"g\"\nroot = \"ws\"\n{extra}[verify]\ncommand = {command}\n{PROVIDER}")
    };
    let err = refused(
        &f,
        &task("[\"no-such-checker\", \"--all\"]", ""),
        4,
        "verify.command",
    );
    assert!(
        err.contains("`no-such-checker` is not found on PATH"),
        "{err}"
    );
    // A workspace script counts when it is there.
    let err = refused(&f, &task("[\"./check.sh\"]", ""), 4, "verify.command");
    assert!(
        err.contains("./check.sh") && err.contains("No such file"),
        "{err}"
    );
    let check = f.write("t/ws/check.sh", "#!/bin/sh\nexit 0\n");
    std::fs::set_permissions(&check, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = f.write("t/task.toml", &task("[\"./check.sh\"]", ""));
    let out = f.cmd(&["run", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    std::fs::remove_file(f.store()).unwrap();

    // On PATH, but in a directory the sandbox's view does not hold.
    let tools = f.path().join("tools");
    let tool = f.write("tools/my-check", "#!/bin/sh\nexit 0\n");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let host_path = std::env::var("PATH").unwrap();
    let with_tools = format!("{}:{host_path}", tools.display());
    let run = |task: &str| {
        let p = f.write("t/task.toml", task);
        bin()
            .args(["run", p.to_str().unwrap()])
            .env("PATH", &with_tools)
            .env("IO_HARNESS_STORE", f.store())
            .env("XDG_CACHE_HOME", f.path().join("cache"))
            .output()
            .unwrap()
    };
    // On the host's PATH only: the gate's PATH is the sandbox's own.
    let out = run(&task("[\"my-check\"]", ""));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("verify.command") && err.contains("is not on the gate's PATH"),
        "{err}"
    );
    // The host's PATH passed in, but the directory outside the sandbox's view.
    let out = run(&task("[\"my-check\"]", "[sandbox]\nenv = [\"PATH\"]\n"));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("outside the sandbox's view"), "{err}");
    // Both: it is found, and the gate really runs it there.
    let extra = format!(
        "[sandbox]\nenv = [\"PATH\"]\nread_only_paths = [\"{}\"]\n",
        tools.display()
    );
    let out = run(&task("[\"my-check\"]", &extra));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}
