//! Cross-run memory: notes a run saves are offered to the next run on the workspace,
//! bounded, evicted least-recently-used, and never a way around a read mask.

use io_harness::provider::{ScriptTurn, Scripted};
use io_harness::store::MAX_NOTES;
use io_harness::{RunOutcome, Store, TaskContract, Verification, run};
use serde_json::json;

fn contract(dir: &std::path::Path) -> TaskContract {
    TaskContract::workspace("g", dir, Verification::file_contains("a.txt", "a"))
}

#[tokio::test]
async fn a_later_run_is_offered_the_notes_of_an_earlier_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let store = Store::memory().unwrap();
    let first = Scripted::new(vec![
        ScriptTurn::tool(
            "remember",
            json!({"key": "build", "value": "use cargo test --offline"}),
        ),
        ScriptTurn::text("done"),
    ]);
    let r1 = run(&contract(dir.path()), &first, &store).await.unwrap();
    assert_eq!(r1.outcome, RunOutcome::Success);
    let r2 = run(
        &contract(dir.path()),
        &Scripted::new(vec![ScriptTurn::text("done")]),
        &store,
    )
    .await
    .unwrap();
    let initial = store.run(r2.run_id).unwrap().unwrap().initial_json.unwrap();
    assert!(
        initial.contains("build: use cargo test --offline (from run 1)"),
        "{initial}"
    );
    assert!(initial.contains(" source=\\\"memory\\\">"), "{initial}");
    let first_initial = store.run(r1.run_id).unwrap().unwrap().initial_json.unwrap();
    assert!(
        !first_initial.contains("memory"),
        "nothing to offer the first run"
    );
}

#[tokio::test]
async fn a_note_carrying_a_masked_secret_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    std::fs::write(dir.path().join(".env"), "API_TOKEN=supersecret-123\n").unwrap();
    let store = Store::memory().unwrap();
    let provider = Scripted::new(vec![
        ScriptTurn::tool(
            "remember",
            json!({"key": "token", "value": "it is API_TOKEN=supersecret-123"}),
        ),
        ScriptTurn::text("done"),
    ]);
    let r = run(&contract(dir.path()), &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    let out = &store.steps(r.run_id).unwrap()[0].tool_calls[0];
    assert!(
        out.is_error && out.output.contains("policy denies reading"),
        "{}",
        out.output
    );
    let ws = std::fs::canonicalize(dir.path())
        .unwrap()
        .display()
        .to_string();
    assert!(store.memory_list(&ws).unwrap().is_empty());
}

/// Issue 16, MEM1: the secret value of a `.env` line, alone, inside a sentence, in
/// another case, split by an invisible character, or as the note's key, is refused;
/// a note sharing only short words with the file is saved.
#[tokio::test]
async fn mem1_note_with_secret_value() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    std::fs::write(
        dir.path().join(".env"),
        "DB_USER=admin\nDB_PASSWORD=CANARY_MEM1_pw_7d9f3a\n",
    )
    .unwrap();
    let store = Store::memory().unwrap();
    let note = |k: &str, v: &str| ScriptTurn::tool("remember", json!({"key": k, "value": v}));
    let provider = Scripted::new(vec![
        note("v", "CANARY_MEM1_pw_7d9f3a"),
        note("s", "the db password is CANARY_MEM1_pw_7d9f3a"),
        note("u", "the DB password is canary_mem1_PW_7D9F3A"),
        note("z", "CANARY_MEM1\u{200b}_pw_7d9f3a"),
        note("CANARY_MEM1_pw_7d9f3a", "see key"),
        note("user", "the db user is admin"),
        ScriptTurn::text("done"),
    ]);
    let r = run(&contract(dir.path()), &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    let steps = store.steps(r.run_id).unwrap();
    for (i, refused) in [
        (0, true),
        (1, true),
        (2, true),
        (3, true),
        (4, true),
        (5, false),
    ] {
        let out = &steps[i].tool_calls[0];
        assert_eq!(
            out.is_error && out.output.contains("policy denies reading"),
            refused,
            "note {i}: {}",
            out.output
        );
    }
    let ws = std::fs::canonicalize(dir.path())
        .unwrap()
        .display()
        .to_string();
    let notes = store.memory_list(&ws).unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
}

#[test]
fn notes_are_bounded_and_evicted_least_recently_used_never_the_new_one() {
    let store = Store::memory().unwrap();
    for i in 0..MAX_NOTES {
        assert!(
            store
                .memory_put("/ws", &format!("k{i}"), "v", None)
                .unwrap()
                .is_empty()
        );
    }
    // k0 is used again, so k1 is now the least recently used.
    store.memory_touch("/ws", &["k0".to_string()]).unwrap();
    let evicted = store.memory_put("/ws", "new", "v", None).unwrap();
    assert_eq!(evicted, ["k1"]);
    let keys: Vec<String> = store
        .memory_list("/ws")
        .unwrap()
        .into_iter()
        .map(|n| n.key)
        .collect();
    assert_eq!(keys.len(), MAX_NOTES);
    assert_eq!(keys[0], "new");
    assert!(keys.contains(&"k0".to_string()));
    assert!(store.memory_put("/ws", "", "v", None).is_err());
    assert!(
        store
            .memory_put("/ws", "k", &"x".repeat(1001), None)
            .is_err()
    );
    assert!(
        store.memory_list("/other").unwrap().is_empty(),
        "keyed by workspace"
    );
}
