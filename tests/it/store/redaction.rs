//! Registered secrets never reach the file.

use io_harness::store::{NewRun, RunFinish};
use io_harness::{SandboxEvent, Store};

use super::{raw, step, temp_store_path};

const SECRET: &str = "sk-live-7f3a9c1e5b2d4068";

#[test]
fn registered_secrets_never_reach_the_database_file() {
    let (_dir, path) = temp_store_path();
    let store = Store::open(&path).unwrap();
    store.redact_secrets(&[SECRET.to_string(), "short".to_string(), String::new()]);
    let writer = store.clone(); // registrations are shared by clones
    let id = writer
        .create_run(&NewRun {
            goal: format!("use key {SECRET}"),
            root: "/repo".into(),
            work_dir: "/repo".into(),
            contract_json: format!("{{\"env\":\"{SECRET}\"}}"),
            provider_json: "{}".into(),
            parent_run_id: None,
        scratch_dir: None,
        })
        .unwrap();
    let mut s = step(id, 1);
    s.tool_calls[0].output = format!("OPENAI_API_KEY={SECRET}\n");
    s.request_body = Some(format!("{{\"auth\":\"Bearer {SECRET}\"}}").into_bytes());
    s.messages_json = format!("[\"{SECRET}\"]");
    writer.commit_step(&s).unwrap();
    writer
        .record_sandbox_event(&SandboxEvent::gate_output(
            id,
            1,
            &format!("leaked {SECRET}"),
        ))
        .unwrap();
    writer
        .finish_run(
            id,
            &RunFinish {
                outcome: "success".into(),
                outcome_json: "{}".into(),
                final_message: Some(format!("done; the key was {SECRET}")),
                diff: None,
            },
        )
        .unwrap();

    // Read back through the API: redacted, and the short value left alone.
    let steps = store.steps(id).unwrap();
    assert_eq!(steps[0].tool_calls[0].output, "OPENAI_API_KEY=[REDACTED]\n");
    let body = store
        .blob(steps[0].request_hash.as_deref().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(body, b"{\"auth\":\"Bearer [REDACTED]\"}");
    let run = store.run(id).unwrap().unwrap();
    assert_eq!(
        run.final_message.as_deref(),
        Some("done; the key was [REDACTED]")
    );
    assert_eq!(
        store.sandbox_events(id).unwrap()[0].detail.as_deref(),
        Some("leaked [REDACTED]")
    );

    // And the bytes on disk, after moving the WAL into the main file.
    let conn = raw(&path);
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop((conn, store, writer));
    let mut files = vec![std::fs::read(&path).unwrap()];
    let wal = path.with_extension("db-wal");
    if wal.exists() {
        files.push(std::fs::read(wal).unwrap());
    }
    assert!(contains(&files[0], b"[REDACTED]"));
    for bytes in files {
        assert!(
            !contains(&bytes, SECRET.as_bytes()),
            "the secret is in the file"
        );
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
