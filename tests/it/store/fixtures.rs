//! Stores written by every released schema version still open and read back intact.
//!
//! `tests/fixtures/store-v<N>.db` is written by [`write_store_fixture`] when the schema
//! version changes — `IO_HARNESS_WRITE_FIXTURE=1 cargo test --test it
//! write_store_fixture -- --ignored` — and committed next to the older ones, which are
//! never regenerated.

use std::path::{Path, PathBuf};

use io_harness::store::{NewRun, RunFinish, SCHEMA_VERSION, ToolIntent};
use io_harness::{SandboxEvent, Store};

use super::step;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
}

/// The content every fixture holds.
fn populate(store: &Store) {
    let bare = store.start_run("fixture: bare run", "/repo").unwrap();
    for n in 1..=2 {
        store.commit_step(&step(bare, n)).unwrap();
    }
    store
        .record_sandbox_event(&SandboxEvent::create(bare, 1, "linux-namespaces"))
        .unwrap();
    store
        .record_sandbox_event(&SandboxEvent::gate_phase_failed(bare, 2, "test-run"))
        .unwrap();
    let fin = RunFinish {
        outcome: "verification_failed".into(),
        outcome_json: "{\"verification_failed\":{}}".into(),
        final_message: Some("tests still fail".into()),
        diff: Some("--- a/x\n+++ b/x\n".into()),
    };
    store.finish_run(bare, &fin).unwrap();

    let child = store
        .create_run(&NewRun {
            goal: "fixture: child run".into(),
            root: "/repo".into(),
            work_dir: "/tmp/copy".into(),
            contract_json: "{\"goal\":\"fixture: child run\"}".into(),
            provider_json: "{\"kind\":\"scripted\"}".into(),
            parent_run_id: Some(bare),
        scratch_dir: None,
        })
        .unwrap();
    let mut s = step(child, 1);
    s.cost_usd = None;
    s.cost_source = "unknown".into();
    store.commit_step(&s).unwrap();
    store
        .journal_intent(&ToolIntent {
            run_id: child,
            step: 2,
            call_id: "call_pending".into(),
            tool: "write_file".into(),
            input_json: "{\"path\":\"a.rs\"}".into(),
            actions_json: "[]".into(),
        })
        .unwrap();
}

/// Writes `tests/fixtures/store-v<SCHEMA_VERSION>.db`.
#[test]
#[ignore = "writes a committed fixture; run by hand when the schema version changes"]
fn write_store_fixture() {
    // Gated twice so `--include-ignored` runs cannot rewrite a committed file while the
    // reading test copies it.
    if std::env::var_os("IO_HARNESS_WRITE_FIXTURE").is_none() {
        return;
    }
    let path = fixtures_dir().join(format!("store-v{SCHEMA_VERSION}.db"));
    let _ = std::fs::remove_file(&path);
    let store = Store::open(&path).unwrap();
    populate(&store);
    drop(store); // the last connection to close checkpoints the WAL into the file
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA journal_mode = DELETE; VACUUM;")
        .unwrap();
}

#[test]
fn fixture_stores_of_every_schema_version_open_and_read_back() {
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("store-v") && n.ends_with(".db"))
        })
        .collect();
    fixtures.sort();
    assert!(!fixtures.is_empty(), "no fixture stores found");
    for fixture in fixtures {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("store.db");
        std::fs::copy(&fixture, &copy).unwrap();
        let store = Store::open(&copy).unwrap_or_else(|e| panic!("{fixture:?}: {e}"));
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        check(&store, &fixture);
    }
}

fn check(store: &Store, fixture: &Path) {
    let runs = store.runs().unwrap();
    let goals: Vec<&str> = runs.iter().map(|r| r.goal.as_str()).collect();
    assert_eq!(
        goals,
        ["fixture: child run", "fixture: bare run"],
        "{fixture:?}"
    );
    let (child, bare) = (&runs[0], &runs[1]);

    assert_eq!(bare.status, "finished");
    assert_eq!(bare.outcome.as_deref(), Some("verification_failed"));
    assert_eq!(bare.final_message.as_deref(), Some("tests still fail"));
    assert_eq!(
        (bare.steps, bare.input_tokens, bare.cost_usd),
        (2, 200, Some(1.0))
    );
    let steps = store.steps(bare.id).unwrap();
    for (i, s) in steps.iter().enumerate() {
        let expected = step(bare.id, i as u32 + 1);
        assert_eq!(s.reply_json, expected.reply_json);
        assert_eq!(s.tool_calls, expected.tool_calls);
        assert_eq!(s.policy_events, expected.policy_events);
        let body = store.blob(s.request_hash.as_deref().unwrap()).unwrap();
        assert_eq!(body, expected.request_body);
    }
    let kinds: Vec<String> = store
        .sandbox_events(bare.id)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["create", "gate_phase_failed"]);

    assert_eq!(child.status, "running");
    assert_eq!(child.parent_run_id, Some(bare.id));
    assert_eq!(
        child.provider_json.as_deref(),
        Some("{\"kind\":\"scripted\"}")
    );
    assert_eq!(
        (child.steps, child.cost_usd, child.cost_unknown_steps),
        (1, None, 1)
    );
    let journal = store.journal(child.id).unwrap();
    assert_eq!(journal.len(), 1);
    assert_eq!(journal[0].status, "pending");

    // The migrated file takes new writes.
    store.commit_step(&step(child.id, 2)).unwrap();
    assert_eq!(store.run(child.id).unwrap().unwrap().steps, 2);
}
