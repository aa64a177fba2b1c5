//! Every method writes what it reads back.

use io_harness::store::{NewRun, PolicyEvent, RunFinish, SCHEMA_VERSION, StoreError, ToolIntent};
use io_harness::{SandboxEvent, Store};

use super::{raw, sha256_hex, step, temp_store_path};

#[test]
fn open_creates_parent_dirs_and_configures_the_file() {
    let (_dir, path) = temp_store_path();
    let store = Store::open(&path).unwrap();
    assert!(path.exists());
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    let conn = raw(&path);
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn start_run_stores_the_bare_seed_form() {
    let (_dir, path) = temp_store_path();
    let store = Store::open(&path).unwrap();
    let id = store.start_run("fix the parser", "/repo").unwrap();
    let run = store.run(id).unwrap().unwrap();
    assert_eq!(
        (run.goal.as_str(), run.root.as_str()),
        ("fix the parser", "/repo")
    );
    assert_eq!(run.status, "running");
    assert_eq!(run.contract_json, None);
    assert_eq!(run.provider_json, None);
    assert_eq!(run.work_dir, None);
    assert_eq!(
        (run.steps, run.cost_usd, run.cost_unknown_steps),
        (0, None, 0)
    );
    assert!(run.started_at_ms > 0);
    assert_eq!(store.run(id + 1).unwrap(), None);
}

#[test]
fn create_run_stores_contract_provider_and_parent() {
    let (_dir, path) = temp_store_path();
    let store = Store::open(&path).unwrap();
    let parent = store.start_run("parent", "/repo").unwrap();
    let new = NewRun {
        goal: "child".into(),
        root: "/repo".into(),
        work_dir: "/tmp/copy".into(),
        contract_json: "{\"goal\":\"child\"}".into(),
        provider_json: "{\"kind\":\"scripted\",\"cursor\":0}".into(),
        parent_run_id: Some(parent),
        scratch_dir: Some("/cache/run-x".into()),
    };
    let id = store.create_run(&new).unwrap();
    let run = store.run(id).unwrap().unwrap();
    assert_eq!(run.work_dir.as_deref(), Some("/tmp/copy"));
    assert_eq!(run.contract_json.as_deref(), Some("{\"goal\":\"child\"}"));
    assert_eq!(run.provider_json, Some(new.provider_json.clone()));
    assert_eq!(run.parent_run_id, Some(parent));
    assert_eq!(run.scratch_dir.as_deref(), Some("/cache/run-x"));

    let orphan = NewRun {
        parent_run_id: Some(999),
        ..new
    };
    assert!(matches!(
        store.create_run(&orphan),
        Err(StoreError::NoSuchRun(999))
    ));
}

#[test]
fn runs_are_listed_newest_first() {
    let (_dir, path) = temp_store_path();
    let store = Store::open(&path).unwrap();
    let ids: Vec<i64> = (0..3)
        .map(|i| store.start_run(&format!("goal {i}"), "/r").unwrap())
        .collect();
    let listed: Vec<i64> = store.runs().unwrap().iter().map(|r| r.id).collect();
    assert_eq!(listed, ids.iter().rev().copied().collect::<Vec<_>>());
}

#[test]
fn finish_run_then_reopen_run() {
    let (_dir, path) = temp_store_path();
    let store = Store::open(&path).unwrap();
    let id = store.start_run("g", "/r").unwrap();
    let fin = RunFinish {
        outcome: "awaiting_approval".into(),
        outcome_json: "{\"awaiting_approval\":{\"request\":1}}".into(),
        final_message: Some("need approval".into()),
        diff: Some("--- a\n+++ b\n".into()),
    };
    store.finish_run(id, &fin).unwrap();
    let run = store.run(id).unwrap().unwrap();
    assert_eq!(run.status, "finished");
    assert_eq!(run.outcome.as_deref(), Some("awaiting_approval"));
    assert_eq!(run.outcome_json, Some(fin.outcome_json.clone()));
    assert_eq!(run.final_message, fin.final_message);
    assert_eq!(run.diff, fin.diff);
    assert!(run.finished_at_ms.is_some_and(|t| t >= run.started_at_ms));

    store.reopen_run(id).unwrap();
    let run = store.run(id).unwrap().unwrap();
    assert_eq!(run.status, "running");
    assert_eq!(
        (run.outcome, run.outcome_json, run.finished_at_ms),
        (None, None, None)
    );
    assert_eq!((run.final_message, run.diff), (None, None));

    assert!(matches!(
        store.finish_run(77, &fin),
        Err(StoreError::NoSuchRun(77))
    ));
    assert!(matches!(
        store.reopen_run(77),
        Err(StoreError::NoSuchRun(77))
    ));
}

#[test]
fn commit_step_round_trips_everything_and_stores_the_body_by_hash() {
    let (_dir, path) = temp_store_path();
    let store = Store::open(&path).unwrap();
    let id = store.start_run("g", "/r").unwrap();
    let written = [step(id, 1), step(id, 2)];
    for s in &written {
        store.commit_step(s).unwrap();
    }
    let read = store.steps(id).unwrap();
    assert_eq!(read.len(), 2);
    for (w, r) in written.iter().zip(&read) {
        let body = w.request_body.clone().unwrap();
        let hash = sha256_hex(&body);
        let mut expected = w.clone();
        expected.request_body = None;
        expected.request_hash = Some(hash.clone());
        assert_eq!(r, &expected);
        assert_eq!(store.blob(&hash).unwrap(), Some(body));
    }
    assert_eq!(store.blob("0000").unwrap(), None);
}

#[test]
fn run_totals_are_computed_from_committed_steps() {
    let store = Store::memory().unwrap();
    let id = store.start_run("g", "/r").unwrap();
    for (n, cost, cached) in [
        (1, Some(0.5), Some(10)),
        (2, None, None),
        (3, Some(0.25), Some(5)),
    ] {
        let mut s = step(id, n);
        s.cost_usd = cost;
        s.cached_input_tokens = cached;
        store.commit_step(&s).unwrap();
    }
    let run = store.run(id).unwrap().unwrap();
    assert_eq!(run.steps, 3);
    assert_eq!(
        (run.input_tokens, run.output_tokens, run.cached_input_tokens),
        (300, 60, 15)
    );
    assert_eq!(run.cost_usd, Some(0.75));
    assert_eq!(run.cost_unknown_steps, 1);

    let unknown = store.start_run("unknown cost", "/r").unwrap();
    let mut s = step(unknown, 1);
    s.cost_usd = None;
    store.commit_step(&s).unwrap();
    let run = store.run(unknown).unwrap().unwrap();
    assert_eq!(
        (run.steps, run.cost_usd, run.cost_unknown_steps),
        (1, None, 1)
    );
    // The list carries the same totals as the single read.
    let listed = store.runs().unwrap();
    assert_eq!(listed[1], store.run(id).unwrap().unwrap());
}

#[test]
fn committing_a_step_twice_is_refused_and_keeps_the_first() {
    let (_dir, path) = temp_store_path();
    let store = Store::open(&path).unwrap();
    let id = store.start_run("g", "/r").unwrap();
    store.commit_step(&step(id, 1)).unwrap();
    let mut again = step(id, 1);
    again.reply_json = "[\"different\"]".into();
    assert!(matches!(
        store.commit_step(&again),
        Err(StoreError::StepAlreadyCommitted { run_id, step: 1 }) if run_id == id
    ));
    let steps = store.steps(id).unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].reply_json, step(id, 1).reply_json);
    assert_eq!(steps[0].tool_calls.len(), 2);
    assert!(matches!(
        store.commit_step(&step(42, 1)),
        Err(StoreError::NoSuchRun(42))
    ));
}

#[test]
fn identical_request_bodies_are_stored_once() {
    let (_dir, path) = temp_store_path();
    let store = Store::open(&path).unwrap();
    let id = store.start_run("g", "/r").unwrap();
    for n in 1..=2 {
        let mut s = step(id, n);
        s.request_body = Some(b"{\"same\":true}".to_vec());
        store.commit_step(&s).unwrap();
    }
    let steps = store.steps(id).unwrap();
    assert_eq!(steps[0].request_hash, steps[1].request_hash);
    let blobs: i64 = raw(&path)
        .query_row("SELECT COUNT(*) FROM blobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(blobs, 1);
    // A step may name an already stored body by hash alone.
    let mut by_hash = step(id, 3);
    by_hash.request_body = None;
    by_hash.request_hash = steps[0].request_hash.clone();
    store.commit_step(&by_hash).unwrap();
    assert_eq!(
        store.steps(id).unwrap()[2].request_hash,
        steps[0].request_hash
    );
}

#[test]
fn the_intent_journal_round_trips() {
    let (_dir, path) = temp_store_path();
    let store = Store::open(&path).unwrap();
    let id = store.start_run("g", "/r").unwrap();
    let intent = |call: &str| ToolIntent {
        run_id: id,
        step: 1,
        call_id: call.into(),
        tool: "write_file".into(),
        input_json: "{\"path\":\"a.rs\"}".into(),
        actions_json: "[{\"act\":\"write\",\"target\":\"a.rs\"}]".into(),
    };
    let a = store.journal_intent(&intent("a")).unwrap();
    let b = store.journal_intent(&intent("b")).unwrap();
    let c = store.journal_intent(&intent("c")).unwrap();
    store
        .journal_complete(a, true, "{\"a.rs\":[null,\"ab12\"]}", "wrote a.rs")
        .unwrap();
    store.journal_complete(b, false, "{}", "failed").unwrap();
    let journal = store.journal(id).unwrap();
    let summary: Vec<(i64, &str, &str, Option<&str>)> = journal
        .iter()
        .map(|r| {
            (
                r.id,
                r.intent.call_id.as_str(),
                r.status.as_str(),
                r.effects_json.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (a, "a", "done", Some("{\"a.rs\":[null,\"ab12\"]}")),
            (b, "b", "failed", Some("{}")),
            (c, "c", "pending", None),
        ]
    );
    assert_eq!(journal[2].intent, intent("c"));
    assert!(matches!(
        store.journal_complete(999, true, "{}", ""),
        Err(StoreError::NoSuchIntent(999))
    ));
    let stray = ToolIntent {
        run_id: 999,
        ..intent("d")
    };
    assert!(matches!(
        store.journal_intent(&stray),
        Err(StoreError::NoSuchRun(999))
    ));
}

#[test]
fn sandbox_events_of_every_constructor_round_trip_in_order() {
    let (_dir, path) = temp_store_path();
    let store = Store::open(&path).unwrap();
    let id = store.start_run("g", "/r").unwrap();
    let other = store.start_run("other", "/r").unwrap();
    let events = [
        SandboxEvent::create(id, 0, "linux-namespaces"),
        SandboxEvent::exec(id, 1, "linux-namespaces", "cargo test --quiet"),
        SandboxEvent::cap_hit(id, 1, "memory"),
        SandboxEvent::stopped(id, 1, "time_budget"),
        SandboxEvent::gate_phase_failed(id, 2, "criterion-compile"),
        SandboxEvent::gate_output(id, 2, "FAIL\n  expected 2 received 1"),
        SandboxEvent::criterion_restored(id, 2, "command pytest", "restored conftest.py"),
        SandboxEvent::gate_trust(id, 2, "command pytest", "runner-report"),
        SandboxEvent::gate_tests(id, 2, "command pytest", "1 run, 1 passed: t::a"),
        SandboxEvent::quarantined(id, 2, "sub/.git -> /q/run-1/step-2/sub/.git"),
        SandboxEvent::destroy(id, 2),
    ];
    for e in &events {
        store.record_sandbox_event(e).unwrap();
    }
    store
        .record_sandbox_event(&SandboxEvent::destroy(other, 0))
        .unwrap();
    assert_eq!(store.sandbox_events(id).unwrap(), events);
    let kinds: Vec<String> = events.iter().map(|e| e.kind.clone()).collect();
    assert_eq!(
        kinds,
        [
            "create",
            "exec",
            "cap_hit",
            "stopped",
            "gate_phase_failed",
            "gate_output",
            "criterion_restored",
            "gate_trust",
            "gate_tests",
            "quarantined",
            "destroy"
        ]
    );
    assert_eq!(events[1].detail.as_deref(), Some("cargo test --quiet"));
    assert_eq!(events[2].backend, None);
    assert!(matches!(
        store.record_sandbox_event(&SandboxEvent::destroy(999, 0)),
        Err(StoreError::NoSuchRun(999))
    ));
}

#[test]
fn policy_events_from_commits_and_from_outside_them_are_all_listed() {
    let (_dir, path) = temp_store_path();
    let store = Store::open(&path).unwrap();
    let id = store.start_run("g", "/r").unwrap();
    let net = PolicyEvent {
        run_id: id,
        step: 2,
        act: "net".into(),
        target: "api.example.com".into(),
        decision: "deny".into(),
        rule: "net deny *".into(),
        layer: "builtin".into(),
    };
    store.commit_step(&step(id, 1)).unwrap();
    store.record_policy_event(&net).unwrap();
    let all = store.policy_events(id).unwrap();
    assert_eq!(all, [step(id, 1).policy_events[0].clone(), net.clone()]);
    let stray = PolicyEvent { run_id: 999, ..net };
    assert!(matches!(
        store.record_policy_event(&stray),
        Err(StoreError::NoSuchRun(999))
    ));
}

#[test]
fn clones_share_one_connection_and_a_second_handle_sees_commits() {
    let (_dir, path) = temp_store_path();
    let store = Store::open(&path).unwrap();
    let clone = store.clone();
    let id = clone.start_run("g", "/r").unwrap();
    store.commit_step(&step(id, 1)).unwrap();
    let other = Store::open(&path).unwrap();
    assert_eq!(other.run(id).unwrap().unwrap().steps, 1);
}
