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
