//! The record is the truth or the run stops: a store deleted or replaced underneath, or
//! a record write that fails, ends the run with an internal failure (exit 70), never a
//! success; commands that only read a store never create one.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_harness::provider::{ScriptTurn, Scripted};
use io_harness::run::{Flow, RunError, RunEvent, RunOptions};
use io_harness::store::StoreError;
use io_harness::{RunOutcome, Store, TaskContract, Verification, resume, run_with};
use serde_json::json;

fn write_turn(path: &str, content: &str) -> ScriptTurn {
    ScriptTurn::tool("write_file", json!({"path": path, "content": content}))
}

/// A three-step run on `ws` that writes a.txt, then b.txt, then says it is done.
fn three_steps(ws: &Path) -> (TaskContract, Scripted) {
    let contract = TaskContract::workspace(
        "write a.txt and b.txt",
        ws,
        Verification::file_contains("b.txt", "b"),
    );
    let provider = Scripted::new(vec![
        write_turn("a.txt", "a\n"),
        write_turn("b.txt", "b\n"),
        ScriptTurn::text("done"),
    ]);
    (contract, provider)
}

/// Options whose observer runs `act` once, right after step 1 is committed: a point
/// the run reaches deterministically, with more record writes to come.
fn after_step_one(act: impl Fn() + Send + Sync + 'static) -> RunOptions {
    let observer = move |e: &RunEvent| {
        if let RunEvent::StepCommitted { step: 1, .. } = e {
            act();
        }
        Flow::Continue
    };
    RunOptions::default().observer(Arc::new(observer))
}

fn remove_store_files(db: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

#[tokio::test]
async fn store_deleted_mid_run_ends_with_a_recording_error_not_success() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let db = dir.path().join("store.db");
    let store = Store::open(&db).unwrap();
    let (contract, provider) = three_steps(&ws);
    let gone = db.clone();
    let opts = after_step_one(move || remove_store_files(&gone));
    let r = run_with(&contract, &provider, &store, opts).await;
    let err = match r {
        Ok(r) => panic!("a run whose store was deleted reported {:?}", r.outcome),
        Err(e) => e,
    };
    assert!(
        matches!(&err, RunError::Recording { source: StoreError::Replaced { path }, .. } if path.ends_with("store.db")),
        "{err:?}"
    );
    assert_eq!(err.exit_code(), 70);
    assert!(!err.is_resumable(), "nothing is left to resume from");
    assert!(!db.exists(), "nothing recreated the deleted store");
}

#[tokio::test]
async fn store_renamed_over_mid_run_is_left_untouched_and_the_run_fails() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let db = dir.path().join("store.db");
    let other = dir.path().join("other.db");
    // Another valid store, renamed over the run's path mid-run.
    drop(Store::open(&other).unwrap());
    let store = Store::open(&db).unwrap();
    let (contract, provider) = three_steps(&ws);
    let (from, to) = (other.clone(), db.clone());
    // The replacement comes without the old file's WAL and index (left behind, SQLite
    // would replay the old WAL into the new file).
    let opts = after_step_one(move || {
        std::fs::rename(&from, &to).unwrap();
        for suffix in ["-wal", "-shm"] {
            let mut p = to.as_os_str().to_owned();
            p.push(suffix);
            let _ = std::fs::remove_file(PathBuf::from(p));
        }
    });
    let err = run_with(&contract, &provider, &store, opts)
        .await
        .expect_err("a run whose store was replaced cannot succeed");
    assert!(
        matches!(
            &err,
            RunError::Recording {
                source: StoreError::Replaced { .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.exit_code(), 70);
    // The file now at the path is the other store, and none of the run went into it.
    let now = Store::open_existing(&db).unwrap();
    assert!(now.runs().unwrap().is_empty());
}

/// A record write the engine cannot stop on (here: the sandbox events of a command,
/// refused by a trigger, exactly as a full disk refuses them) ends the run at its next
/// commit; once the store takes writes again, the run resumes to success.
#[tokio::test]
async fn a_lost_sandbox_event_write_ends_the_run_and_it_resumes_once_the_store_is_writable() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let db = dir.path().join("store.db");
    let store = Store::open(&db).unwrap();
    let sql = rusqlite::Connection::open(&db).unwrap();
    sql.execute_batch(
        "CREATE TRIGGER refuse BEFORE INSERT ON sandbox_events
         BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END;",
    )
    .unwrap();
    let contract = TaskContract::workspace(
        "make a.txt say hi",
        &ws,
        Verification::file_contains("a.txt", "hi"),
    );
    let provider = Scripted::new(vec![
        ScriptTurn::tool(
            "run_command",
            json!({"argv": ["sh", "-c", "echo hi > a.txt"]}),
        ),
        ScriptTurn::text("done"),
    ]);
    let err = run_with(&contract, &provider, &store, RunOptions::default())
        .await
        .expect_err("a run that lost its sandbox events cannot succeed");
    let run_id = match &err {
        RunError::Recording {
            run_id,
            source: StoreError::RecordsLost { what, .. },
        } => {
            assert_eq!(*what, "sandbox event");
            *run_id
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(err.exit_code(), 70);
    assert!(err.is_resumable());
    let rec = store.run(run_id).unwrap().unwrap();
    assert_eq!(
        (rec.status.as_str(), rec.steps),
        ("running", 0),
        "no step and no outcome went on record over the gap"
    );

    sql.execute_batch("DROP TRIGGER refuse;").unwrap();
    let store = Store::open(&db).unwrap();
    // The step's reply is on record: the resume replays it (its command answered from
    // the journal), then asks for the script's next turn.
    let r = resume(&store, run_id, &provider).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
}

// --- The binary ---------------------------------------------------------------------

fn bin(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_io-harness"));
    c.env_remove("IO_HARNESS_STORE")
        .env_remove("IO_HARNESS_FAILPOINT")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENROUTER_API_KEY")
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"));
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A task on `<home>/ws` (in place) whose first step runs `command` and whose second
/// says it is done; `a.txt` must contain `hi`.
fn task_with_command(home: &Path, command: &str) -> PathBuf {
    std::fs::create_dir_all(home.join("ws")).unwrap();
    let turn =
        json!({"tool_calls": [{"name": "run_command", "input": {"argv": ["sh", "-c", command]}}]});
    std::fs::write(
        home.join("script.jsonl"),
        format!("{turn}\n{{\"text\": \"done\"}}\n"),
    )
    .unwrap();
    let task = home.join("task.toml");
    std::fs::write(
        &task,
        "goal = \"g\"\nroot = \"ws\"\nworkspace = \"in-place\"\n[verify]\nfile_contains = { file = \"a.txt\", needle = \"hi\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    )
    .unwrap();
    task
}

/// The command of a step that says it started, then waits for the test's `go`.
pub(crate) const WAIT_FOR_GO: &str =
    "echo hi >> a.txt; touch started; while [ ! -e go ]; do sleep 0.02; done";

/// Waits (bounded) until `path` exists.
pub(crate) fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn store_deleted_mid_run_exits_70_not_success() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let task = task_with_command(home, WAIT_FOR_GO);
    let db = home.join("store.db");
    let child = bin(home)
        .args(["run", task.to_str().unwrap()])
        .env("IO_HARNESS_STORE", &db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&home.join("ws/started"));
    remove_store_files(&db);
    std::fs::write(home.join("ws/go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(
        out.status.code(),
        Some(70),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stderr.contains("deleted or replaced"), "{stderr}");
    assert!(stderr.contains("cannot be resumed"), "{stderr}");
    assert!(!stdout.contains("trace: io-harness show"), "{stdout}");
    assert!(!stdout.contains("success"), "{stdout}");
}

#[test]
fn runs_on_a_missing_store_path_creates_nothing() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let missing_dir = home.join("typo");
    let db = missing_dir.join("store.db");
    let ws = home.join("ws");
    std::fs::create_dir(&ws).unwrap();
    let commands: [&[&str]; 5] = [
        &["runs"],
        &["show", "1"],
        &["approve", "1", "r1", "allow"],
        &["memory", ws.to_str().unwrap()],
        &["resume", "1"],
    ];
    for args in commands {
        let out: Output = bin(home)
            .args(args)
            .arg("--store")
            .arg(&db)
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&db.display().to_string()) && stderr.contains("no store"),
            "{args:?} must name the path: {stderr}"
        );
        assert!(
            !missing_dir.exists(),
            "{args:?} created {}",
            missing_dir.display()
        );
    }
}

#[test]
fn an_unwritable_audit_log_never_fails_a_run_counts_each_miss_and_warns_once() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    // Two commands, so two sandbox sessions the log cannot take.
    std::fs::create_dir_all(home.join("ws")).unwrap();
    let turn = |c: &str| {
        json!({"tool_calls": [{"name": "run_command", "input": {"argv": ["sh", "-c", c]}}]})
            .to_string()
    };
    std::fs::write(
        home.join("script.jsonl"),
        format!(
            "{}\n{}\n{{\"text\": \"done\"}}\n",
            turn("echo h > a.txt"),
            turn("echo hi > a.txt")
        ),
    )
    .unwrap();
    let task = home.join("task.toml");
    std::fs::write(
        &task,
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"a.txt\", needle = \"hi\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    )
    .unwrap();
    // The audit directory would be under a regular file: it cannot be created.
    let config = home.join("config-is-a-file");
    std::fs::write(&config, "").unwrap();
    let db = home.join("store.db");
    let out = bin(home)
        .args(["run", task.to_str().unwrap()])
        .env("IO_HARNESS_STORE", &db)
        .env("XDG_CONFIG_HOME", &config)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        stderr.matches("could not be appended").count(),
        1,
        "warned once: {stderr}"
    );
    let store = Store::open_existing(&db).unwrap();
    let run = &store.runs().unwrap()[0];
    assert_eq!(run.audit_failures, 2, "each miss is counted in the store");
    let show = bin(home)
        .args(["show", &run.id.to_string()])
        .env("IO_HARNESS_STORE", &db)
        .output()
        .unwrap();
    assert!(
        text(&show.stdout).contains("audit log: 2 sandbox session(s) could not be appended"),
        "{}",
        text(&show.stdout)
    );
}

/// Adversary break: under `ulimit -f` a store write past the limit raised SIGXFSZ,
/// which killed the harness (exit 153, nothing on stderr). The write now fails, and
/// the run ends with exit 70 and an error, resumable.
#[test]
fn a_file_size_limit_ends_the_run_with_exit_70_not_a_signal() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::create_dir_all(home.join("ws")).unwrap();
    let big = "x".repeat(200_000);
    let turns: Vec<String> = (0..8)
        .map(|i| {
            json!({"tool_calls": [{"name": "run_command", "input": {"argv": ["sh", "-c", format!("echo {i}")]}}], "text": format!("{i} {big}")}).to_string()
        })
        .chain([r#"{"text": "done"}"#.to_string()])
        .collect();
    std::fs::write(home.join("s.jsonl"), turns.join("\n") + "\n").unwrap();
    std::fs::write(
        home.join("t.toml"),
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"never\", needle = \"x\" }\n[budget]\nmax_steps = 20\n[provider]\nkind = \"scripted\"\nscript = \"s.jsonl\"\n",
    )
    .unwrap();
    let inner = format!(
        "ulimit -f 1200; exec {} run {}",
        env!("CARGO_BIN_EXE_io-harness"),
        home.join("t.toml").display()
    );
    let mut sh = Command::new("sh");
    sh.args(["-c", &inner]);
    for (k, v) in bin(home).get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    let out = sh.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(70), "{stderr}");
    assert!(stderr.contains("error:"), "{stderr}");
}
