//! All-or-nothing steps, concurrent writers, and a writer killed mid-run.

use io_harness::Store;
use io_harness::store::{SCHEMA_VERSION, StoreError};

use super::{raw, sha256_hex, step, temp_store_path};

#[test]
fn a_step_whose_tool_call_insert_fails_leaves_nothing_behind() {
    let (_dir, path) = temp_store_path();
    let store = Store::open(&path).unwrap();
    let id = store.start_run("g", "/r").unwrap();
    // A real SQLite failure on the second tool-call insert, after the step row, the
    // blob and the first tool call are already written in the transaction.
    raw(&path)
        .execute_batch(
            "CREATE TRIGGER boom BEFORE INSERT ON tool_calls WHEN NEW.name = 'explode'
             BEGIN SELECT RAISE(ABORT, 'forced failure'); END;",
        )
        .unwrap();
    let mut doomed = step(id, 1);
    doomed.tool_calls[1].name = "explode".into();
    doomed.request_body = Some(b"a body only this step has".to_vec());
    let err = store.commit_step(&doomed).unwrap_err();
    assert!(matches!(err, StoreError::Sqlite(_)), "{err:?}");
    assert!(err.to_string().contains("forced failure"), "{err}");

    assert_eq!(store.steps(id).unwrap(), []);
    assert_eq!(store.policy_events(id).unwrap(), []);
    assert_eq!(
        store
            .blob(&sha256_hex(b"a body only this step has"))
            .unwrap(),
        None
    );
    let tool_calls: i64 = raw(&path)
        .query_row("SELECT COUNT(*) FROM tool_calls", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tool_calls, 0);
    assert_eq!(store.run(id).unwrap().unwrap().steps, 0);
    // Nothing half-written blocks the step from committing properly.
    store.commit_step(&step(id, 1)).unwrap();
    assert_eq!(store.steps(id).unwrap().len(), 1);
}

#[test]
fn eight_threads_with_their_own_handles_commit_without_busy_errors() {
    const THREADS: usize = 8;
    const STEPS: u32 = 20;
    let (_dir, path) = temp_store_path();
    let results: Vec<Result<i64, StoreError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let path = &path;
                scope.spawn(move || {
                    // Each thread opens the (possibly not yet created) file itself.
                    let store = Store::open(path)?;
                    let id = store.start_run(&format!("thread {t}"), "/r")?;
                    for n in 1..=STEPS {
                        store.commit_step(&step(id, n))?;
                    }
                    Ok(id)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ids: Vec<i64> = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("a writer failed: {e:?}")))
        .collect();
    let store = Store::open(&path).unwrap();
    assert_eq!(store.runs().unwrap().len(), THREADS);
    for id in ids {
        let steps = store.steps(id).unwrap();
        let numbers: Vec<u32> = steps.iter().map(|s| s.step).collect();
        assert_eq!(numbers, (1..=STEPS).collect::<Vec<_>>());
        assert!(steps.iter().all(|s| s.tool_calls.len() == 2));
        assert_eq!(store.run(id).unwrap().unwrap().steps, STEPS);
    }
}

#[test]
fn a_store_newer_than_this_build_is_refused() {
    let (_dir, path) = temp_store_path();
    drop(Store::open(&path).unwrap());
    raw(&path)
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    match Store::open(&path) {
        Err(StoreError::TooNew { found, supported }) => {
            assert_eq!((found, supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
        }
        Err(other) => panic!("expected TooNew, got {other:?}"),
        Ok(_) => panic!("expected TooNew, the store opened"),
    }
}

/// Set in the re-executed test binary: `<store path>\n<run id>`.
#[cfg(unix)]
const KILL_CHILD_ENV: &str = "IO_HARNESS_TEST_STORE_KILL_CHILD";

/// How many commits the child reports before it is killed.
#[cfg(unix)]
const COMMITS_BEFORE_KILL: u32 = 20;

#[cfg(unix)]
#[test]
fn a_sigkilled_writer_loses_no_committed_step() {
    use std::io::BufRead;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};

    if let Ok(spec) = std::env::var(KILL_CHILD_ENV) {
        return writer_child(&spec);
    }
    let (_dir, path) = temp_store_path();
    let run_id = Store::open(&path)
        .unwrap()
        .start_run("killed", "/r")
        .unwrap();

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "store::durability::a_sigkilled_writer_loses_no_committed_step",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(KILL_CHILD_ENV, format!("{}\n{run_id}", path.display()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The child prints `committed N` after each commit returns; kill it as soon as it
    // has reported enough, while it is busy committing the next ones.
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut reported = 0;
    while reported < COMMITS_BEFORE_KILL {
        let Some(line) = lines.next() else { break };
        if let Some(n) = line.unwrap().strip_prefix("committed ") {
            reported = n.parse().unwrap();
        }
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    drop(lines);
    assert_eq!(
        reported, COMMITS_BEFORE_KILL,
        "the child stopped early: {status:?}"
    );
    assert_eq!(status.signal(), Some(libc::SIGKILL));

    let store = Store::open(&path).unwrap();
    let steps = store.steps(run_id).unwrap();
    assert!(
        steps.len() >= COMMITS_BEFORE_KILL as usize,
        "{} steps",
        steps.len()
    );
    for (i, s) in steps.iter().enumerate() {
        let n = i as u32 + 1;
        let mut expected = step(run_id, n);
        expected.request_hash = Some(sha256_hex(&expected.request_body.take().unwrap()));
        assert_eq!(s, &expected, "step {n} survived whole");
    }
    let integrity: String = raw(&path)
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    // And the run carries on where it stopped.
    store
        .commit_step(&step(run_id, steps.len() as u32 + 1))
        .unwrap();
}

/// The child side: commit steps until killed (bounded, in case nobody does).
#[cfg(unix)]
fn writer_child(spec: &str) {
    use std::io::Write;
    let (path, run_id) = spec.split_once('\n').unwrap();
    let run_id: i64 = run_id.parse().unwrap();
    let store = Store::open(path).unwrap();
    let mut out = std::io::stdout().lock();
    for n in 1..=100_000 {
        store.commit_step(&step(run_id, n)).unwrap();
        if writeln!(out, "committed {n}")
            .and_then(|()| out.flush())
            .is_err()
        {
            return;
        }
    }
}
