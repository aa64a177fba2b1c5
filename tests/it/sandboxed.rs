//! Runs whose commands go through the real sandbox: the agent's `run_command`, the
//! verification gates, and what the record says about them.

use io_harness::audit::AuditLog;
use io_harness::contract::{LimitSettings, NetworkSetting};
use io_harness::provider::{ScriptTurn, Scripted};
use io_harness::run::{RunError, RunOptions};
use io_harness::{RunOutcome, Store, TaskContract, Verification, run_with};
use serde_json::json;

fn cmd(argv: &[&str]) -> ScriptTurn {
    ScriptTurn::tool("run_command", json!({ "argv": argv }))
}

struct Fx {
    _dir: tempfile::TempDir,
    ws: std::path::PathBuf,
    audit: std::path::PathBuf,
}

fn fixture() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let audit = dir.path().join("audit");
    Fx {
        ws,
        audit,
        _dir: dir,
    }
}

fn options(fx: &Fx) -> RunOptions {
    RunOptions {
        audit: Some(AuditLog::new(&fx.audit)),
        ..RunOptions::default()
    }
}

#[tokio::test]
async fn the_agent_builds_in_the_sandbox_and_every_event_kind_is_recorded() {
    let fx = fixture();
    std::fs::write(fx.ws.join(".env"), "TOKEN=canary-secret\n").unwrap();
    let store = Store::memory().unwrap();
    let mut c = TaskContract::workspace(
        "produce out.txt",
        &fx.ws,
        Verification::command(["sh", "-c", "grep -q built out.txt"]),
    )
    .and_verify(Verification::command([
        "sh",
        "-c",
        "echo gate says no >&2; test -f never",
    ]))
    .max_verify_attempts(1);
    c.sandbox.limits = LimitSettings {
        wall_secs: Some(2),
        ..LimitSettings::default()
    };
    let provider = Scripted::new(vec![
        cmd(&["sh", "-c", "echo built > out.txt"]),
        cmd(&["cat", ".env"]),
        cmd(&["sleep", "30"]),
        cmd(&["sh", "-c", "env"]),
        ScriptTurn::text("done"),
    ]);
    // SAFETY: set_var races only with readers of this name; no test reads it.
    unsafe { std::env::set_var("IO_HARNESS_TEST_PROVIDER_KEY", "sk-in-the-harness-only") };
    let r = run_with(&c, &provider, &store, options(&fx)).await.unwrap();
    assert!(
        matches!(r.outcome, RunOutcome::VerificationFailed { ref failed } if failed.len() == 1),
        "{:?}",
        r.outcome
    );
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("out.txt")).unwrap(),
        "built\n"
    );

    let steps = store.steps(r.run_id).unwrap();
    let out = |i: usize| steps[i].tool_calls[0].output.clone();
    assert!(out(0).starts_with("exit code 0"), "{}", out(0));
    assert!(
        !out(1).contains("canary-secret"),
        "a masked file was readable: {}",
        out(1)
    );
    assert!(out(2).contains("wall cap"), "{}", out(2));
    assert!(
        !out(3).contains("sk-in-the-harness-only")
            && !out(3).contains("IO_HARNESS_TEST_PROVIDER_KEY"),
        "{}",
        out(3)
    );

    let events = store.sandbox_events(r.run_id).unwrap();
    let kinds: std::collections::BTreeSet<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    for k in ["create", "exec", "cap_hit", "destroy", "gate_output"] {
        assert!(kinds.contains(k), "kind {k} never emitted: {kinds:?}");
    }
    let backend = events.iter().find_map(|e| e.backend.as_deref()).unwrap();
    assert_eq!(backend, "linux-namespaces");
    assert!(
        events
            .iter()
            .any(|e| e.kind == "cap_hit" && e.detail.as_deref() == Some("wall"))
    );
    assert!(events.iter().any(|e| {
        e.kind == "gate_output"
            && e.detail
                .as_deref()
                .is_some_and(|d| d.contains("gate says no"))
    }));

    let sessions = store.sandbox_sessions(r.run_id).unwrap();
    assert_eq!(sessions.iter().filter(|s| s.purpose == "tool").count(), 4);
    assert_eq!(sessions.iter().filter(|s| s.purpose == "gate").count(), 2);
    let layers: serde_json::Value = serde_json::from_str(&sessions[0].layers_json).unwrap();
    assert!(layers["seccomp"].as_bool().unwrap());
    assert!(
        layers["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "net")
    );
    assert!(
        sessions[0].masked_json.contains(".env"),
        "{}",
        sessions[0].masked_json
    );
    assert_eq!(sessions[0].network, "none");

    let audit = AuditLog::new(&fx.audit).read_all().unwrap();
    assert_eq!(audit.len(), 6);
    assert!(
        audit
            .iter()
            .all(|a| a.backend == "linux-namespaces" && a.run_id == Some(r.run_id))
    );
    assert!(audit.iter().any(|a| a.cap_hit.as_deref() == Some("wall")));
}

#[tokio::test]
async fn a_required_backend_that_is_missing_stops_the_run_before_it_starts() {
    let fx = fixture();
    let store = Store::memory().unwrap();
    let mut c = TaskContract::workspace("g", &fx.ws, Verification::file_contains("a", "b"));
    c.sandbox.require = Some("windows-job-object".into());
    let err = run_with(&c, &Scripted::new(vec![]), &store, options(&fx))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RunError::Sandbox { usage: true, .. }),
        "{err}"
    );
    assert!(err.is_usage());
    assert!(store.runs().unwrap().is_empty());
}

#[tokio::test]
async fn the_floor_names_itself_and_commands_there_are_asked_about() {
    use io_harness::policy::{Approval, ApprovalRequest, Callback};
    let fx = fixture();
    let store = Store::memory().unwrap();
    let mut c = TaskContract::workspace("g", &fx.ws, Verification::command(["true"]));
    c.sandbox.require = Some("portable-floor".into());
    let provider = Scripted::new(vec![cmd(&["ls"]), ScriptTurn::text("done")]);
    let deny =
        Callback::new(|r: &ApprovalRequest| Approval::deny(format!("not {}", r.action.target)));
    let opts = RunOptions {
        approver: Some(std::sync::Arc::new(deny)),
        ..options(&fx)
    };
    let r = run_with(&c, &provider, &store, opts).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    let steps = store.steps(r.run_id).unwrap();
    // Weaker isolation: the agent's command was asked about, and the answer was no.
    assert!(
        steps[0].tool_calls[0]
            .output
            .contains("denied exec ls: not ls"),
        "{}",
        steps[0].tool_calls[0].output
    );
    let events = store.sandbox_events(r.run_id).unwrap();
    // The operator's gate did run, on the floor, and the record says so.
    assert!(
        events
            .iter()
            .all(|e| e.backend.as_deref().is_none_or(|b| b == "portable-floor"))
    );
    assert!(
        events
            .iter()
            .any(|e| e.kind == "exec" && e.backend.as_deref() == Some("portable-floor"))
    );
}

#[tokio::test]
async fn open_network_is_recorded_as_open() {
    let fx = fixture();
    let store = Store::memory().unwrap();
    let mut c = TaskContract::workspace("g", &fx.ws, Verification::command(["true"]));
    c.sandbox.network = NetworkSetting::Open;
    let r = run_with(
        &c,
        &Scripted::new(vec![ScriptTurn::text("done")]),
        &store,
        options(&fx),
    )
    .await
    .unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    let sessions = store.sandbox_sessions(r.run_id).unwrap();
    assert_eq!(sessions[0].network, "open");
}

#[tokio::test]
async fn an_approver_answers_asks_remembering_or_denying_with_a_reason() {
    use io_harness::policy::{Approval, ApprovalRequest, Callback, Remember};
    use std::sync::{Arc, Mutex};
    let fx = fixture();
    let store = Store::memory().unwrap();
    let mut c = TaskContract::workspace("g", &fx.ws, Verification::file_contains("out.txt", "2"));
    c.sandbox.require = Some("portable-floor".into());
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = asked.clone();
    let one = "sh -c 'echo 1 > out.txt'";
    let two = "sh -c 'echo 2 > out.txt'";
    let approver = Callback::new(move |r: &ApprovalRequest| {
        seen.lock().unwrap().push(r.action.target.clone());
        match r.action.target.as_str() {
            t if t == one => Approval::Approve {
                modified: None,
                remember: Remember::Exact,
            },
            t if t == two => Approval::Approve {
                modified: None,
                remember: Remember::Program,
            },
            _ => Approval::deny("no network tools here"),
        }
    });
    let provider = Scripted::new(vec![
        cmd(&["sh", "-c", "echo 1 > out.txt"]),
        cmd(&["curl", "http://example.invalid"]),
        // The same argv: answered by the exact memory.
        cmd(&["sh", "-c", "echo 1 > out.txt"]),
        // Another argv of the same program: asked again, then widened to `sh`.
        cmd(&["sh", "-c", "echo 2 > out.txt"]),
        cmd(&["sh", "-c", "echo 2 >> out.txt"]),
        ScriptTurn::text("done"),
    ]);
    let options = RunOptions {
        approver: Some(Arc::new(approver)),
        ..options(&fx)
    };
    let r = run_with(&c, &provider, &store, options).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    // Each approval shows the whole argv; an exact memory answers only that argv,
    // the widened one any `sh`; `curl` was denied.
    assert_eq!(
        *asked.lock().unwrap(),
        [one, "curl http://example.invalid", two]
    );
    let steps = store.steps(r.run_id).unwrap();
    assert!(
        steps[1].tool_calls[0]
            .output
            .contains("no network tools here"),
        "{}",
        steps[1].tool_calls[0].output
    );
    let policy = store.policy_events(r.run_id).unwrap();
    let at = |step: u32| policy.iter().find(|p| p.step == step).unwrap();
    assert_eq!(
        (
            at(3).target.as_str(),
            at(3).layer.as_str(),
            at(3).rule.as_str()
        ),
        (one, "remembered", "sh -c 'echo 1 > out.txt'")
    );
    assert_eq!(
        (at(5).layer.as_str(), at(5).rule.as_str()),
        ("remembered", "sh"),
        "the widening is on record as the program alone"
    );
    assert!(
        policy
            .iter()
            .any(|p| p.target == "curl http://example.invalid"
                && p.layer == "approval"
                && p.decision == "deny")
    );
}

#[tokio::test]
async fn a_resumed_run_keeps_its_policy_layers_and_remembered_approvals() {
    use io_harness::policy::{Approval, ApprovalRequest, Callback};
    use io_harness::run::{Flow, RunEvent};
    use std::sync::Arc;
    let fx = fixture();
    let store = Store::memory().unwrap();
    let mut c = TaskContract::workspace("g", &fx.ws, Verification::file_contains("out.txt", "2"));
    c.sandbox.require = Some("portable-floor".into());
    let provider = Scripted::new(vec![
        cmd(&["sh", "-c", "echo 1 > out.txt"]),
        cmd(&["sh", "-c", "echo 1 > out.txt"]),
        ScriptTurn::tool("write_file", json!({"path": "out.txt", "content": "2\n"})),
        ScriptTurn::text("done"),
    ]);
    let remember = Callback::new(|_: &ApprovalRequest| Approval::Approve {
        modified: None,
        remember: io_harness::policy::Remember::Exact,
    });
    let stop_after_first = |e: &RunEvent| match e {
        RunEvent::StepCommitted { step: 1, .. } => Flow::Cancel,
        _ => Flow::Continue,
    };
    let first = RunOptions {
        approver: Some(Arc::new(remember)),
        observer: Some(Arc::new(stop_after_first)),
        ..options(&fx)
    };
    let r = run_with(&c, &provider, &store, first).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Cancelled);
    let stored = store.run(r.run_id).unwrap().unwrap().policy_json.unwrap();
    assert!(
        stored.contains("echo 1 > out.txt"),
        "the remembered rule is on record: {stored}"
    );
    // Between the sessions the workspace grows a project file that would deny `sh`:
    // the resumed run keeps the layers it had.
    std::fs::create_dir(fx.ws.join(".io-harness")).unwrap();
    std::fs::write(
        fx.ws.join(".io-harness/policy.toml"),
        "rules = [{ act = \"exec\", target = \"sh\", decision = \"deny\" }]\n",
    )
    .unwrap();
    // No approver now: without the stored remembered rule the ask would defer.
    let r = io_harness::run::resume_with(&store, r.run_id, &provider, None, options(&fx))
        .await
        .unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    let policy = store.policy_events(r.run_id).unwrap();
    assert!(
        policy.iter().any(|p| p.step == 2
            && p.target == "sh -c 'echo 1 > out.txt'"
            && p.layer == "remembered")
    );
}

/// A gate runs a binary it has just copied; a fork elsewhere in the process can still
/// hold the copy's write descriptor when the sandbox executes it (`ETXTBSY`). Here this
/// test holds it for 30 ms: the executor waits the window out instead of failing.
#[test]
fn the_executor_retries_a_binary_briefly_open_for_writing() {
    use std::os::unix::fs::PermissionsExt;
    let fx = fixture();
    let bin = fx.ws.join("fresh-true");
    std::fs::copy("/bin/true", &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let writer = std::fs::OpenOptions::new().write(true).open(&bin).unwrap();
    let store = io_harness::Store::memory().unwrap();
    let run_id = store.start_run("g", "/r").unwrap();
    let exec = io_harness::exec::Executor::new(
        std::sync::Arc::new(io_harness::sandbox::NativeSandbox::new().unwrap()),
        Default::default(),
        &fx.ws,
        store.clone(),
        run_id,
        None,
        Vec::new(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let out = rt
        .block_on(async {
            let closer = tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(30)).await;
                drop(writer);
            });
            let out = exec
                .run(
                    vec![bin.display().to_string()],
                    io_harness::exec::Purpose::Tool,
                    None,
                )
                .await;
            closer.await.unwrap();
            out
        })
        .unwrap();
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    // One session recorded: the one that ran.
    assert_eq!(store.sandbox_sessions(run_id).unwrap().len(), 1);
}

/// A directory the old hide-list view showed (beside the checkout, not in `/tmp` or
/// `$HOME`), so that the cases below can tell an allowlist from a denylist.
fn visible_before() -> tempfile::TempDir {
    let base = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(base).unwrap();
    tempfile::Builder::new()
        .prefix("view-")
        .tempdir_in(base)
        .unwrap()
}

/// Issue #15, class 2: a `copy` run's commands work on the copy and never see the
/// original project at its own path (its `.env` was readable while `read_file`
/// refused it).
#[tokio::test]
async fn a_copy_runs_commands_do_not_see_the_original_project() {
    let dir = visible_before();
    let ws = dir.path().join("project");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join(".env"), "TOKEN=original-secret\n").unwrap();
    let orig = std::fs::canonicalize(&ws).unwrap();
    let store = Store::memory().unwrap();
    let mut c = TaskContract::workspace("look around", &ws, Verification::command(["true"]))
        .max_verify_attempts(1);
    c.workspace = io_harness::contract::WorkspaceMode::Copy;
    let script = format!("cat {0}/.env; ls -A {0}; echo end", orig.display());
    let provider = Scripted::new(vec![cmd(&["sh", "-c", &script]), ScriptTurn::text("done")]);
    let fx = fixture();
    let r = run_with(&c, &provider, &store, options(&fx)).await.unwrap();
    let out = store.steps(r.run_id).unwrap()[0].tool_calls[0]
        .output
        .clone();
    assert!(!out.contains("original-secret"), "{out}");
    assert!(out.contains("No such file") && out.contains("end"), "{out}");
}

/// Issue #15, class 2: a sub-agent's commands do not see its parent's workspace
/// (`../.env`).
#[tokio::test]
async fn a_childs_commands_do_not_see_the_parents_workspace() {
    let dir = visible_before();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/seed.txt"), "seed\n").unwrap();
    std::fs::write(dir.path().join(".env"), "TOKEN=parent-secret\n").unwrap();
    let contract = TaskContract::workspace(
        "let a child look",
        dir.path(),
        Verification::file_contains("sub/seed.txt", "seed"),
    );
    let provider = Scripted::new(vec![
        ScriptTurn::tool(
            "spawn_agent",
            json!({
                "name": "looker",
                "goal": "look at the parent",
                "root": "sub",
                "verify": {"file_contains": {"file": "seed.txt", "needle": "seed"}},
                "budget": {"max_steps": 3}
            }),
        ),
        ScriptTurn::text("the child looked"),
    ])
    .with_agent(
        "looker",
        vec![
            cmd(&["sh", "-c", "cat ../.env; ls -A ..; echo end"]),
            ScriptTurn::text("looked"),
        ],
    );
    let store = Store::memory().unwrap();
    let r = io_harness::run(&contract, &provider, &store).await.unwrap();
    let child = store.children(r.run_id).unwrap()[0].run.id;
    let out = store.steps(child).unwrap()[0].tool_calls[0].output.clone();
    assert!(!out.contains("parent-secret"), "{out}");
    assert!(out.contains("No such file") && out.contains("end"), "{out}");
}

/// The model is told of a cap only as the record has it, and "stopped" only when the
/// cap ended the command: a file cut at the disk cap leaves the shell running to its
/// exit (the adversary of issue #15 saw "stopped by the processes cap" for a command
/// that exited 0).
#[tokio::test]
async fn the_model_hears_of_a_cap_as_it_was_hit() {
    let fx = fixture();
    let store = Store::memory().unwrap();
    let mut c = TaskContract::workspace("g", &fx.ws, Verification::file_contains("ok.txt", "ok"));
    c.sandbox.limits = LimitSettings {
        disk: Some(64 << 20),
        wall_secs: Some(2),
        ..LimitSettings::default()
    };
    let provider = Scripted::new(vec![
        cmd(&["sh", "-c", "head -c 134217728 /dev/zero > big; echo rc=$?"]),
        cmd(&["sh", "-c", "rm -f big; sleep 30"]),
        cmd(&["sh", "-c", "echo ok > ok.txt"]),
        ScriptTurn::text("done"),
    ]);
    let r = run_with(&c, &provider, &store, options(&fx)).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    let steps = store.steps(r.run_id).unwrap();
    let out = |i: usize| steps[i].tool_calls[0].output.clone();
    // `head` died of SIGXFSZ and the shell went on, unless the watcher, seeing the
    // workspace a block past the cap, stopped the shell first.
    let disk = out(0);
    assert!(
        disk.starts_with("exit code 0 (it hit the sandbox's disk cap)")
            || disk.contains("(stopped by the sandbox's disk cap)"),
        "{disk}"
    );
    let wall = out(1);
    assert!(
        wall.contains("(stopped by the sandbox's wall cap)"),
        "{wall}"
    );
    assert!(!out(2).contains("cap"), "{}", out(2));
}
