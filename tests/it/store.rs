//! The run store against real SQLite files in temporary directories.

mod durability;
mod fixtures;
mod redaction;
mod round_trip;

use io_harness::store::{PolicyEvent, StepRecord, ToolCallRecord};

/// A temporary directory and a store path inside a not-yet-existing subdirectory.
fn temp_store_path() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nested").join("store.db");
    (dir, path)
}

/// A raw connection to a store file, for what the API deliberately cannot do
/// (inspect pragmas, inject failures, check integrity).
fn raw(path: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).expect("raw open");
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .expect("busy timeout");
    conn
}

/// A realistic step: two tool calls, one policy decision, a request body.
fn step(run_id: i64, n: u32) -> StepRecord {
    StepRecord {
        run_id,
        step: n,
        started_at_ms: 1_700_000_000_000 + i64::from(n),
        duration_ms: 40 + u64::from(n),
        model_ms: 30,
        request_body: Some(format!("{{\"messages\":[\"step {n}\"]}}").into_bytes()),
        request_hash: None,
        reply_json: format!("[{{\"type\":\"text\",\"text\":\"reply {n}\"}}]"),
        messages_json: format!("[{{\"role\":\"assistant\",\"n\":{n}}}]"),
        usage_json: "{\"input_tokens\":100,\"output_tokens\":20}".into(),
        input_tokens: 100,
        output_tokens: 20,
        token_source: "reported".into(),
        estimated_input_tokens: Some(125),
        estimated_output_tokens: Some(18),
        model_call: None,
        stop_reason: Some("tool_use".into()),
        cached_input_tokens: Some(10),
        cost_usd: Some(0.5),
        cost_source: "price_table".into(),
        tool_calls: vec![
            ToolCallRecord {
                call_id: format!("call_{n}_a"),
                name: "read_file".into(),
                input_json: "{\"path\":\"src/lib.rs\"}".into(),
                output: "fn main() {}".into(),
                is_error: false,
                confinement_refusal: None,
                duration_ms: 2,
            },
            ToolCallRecord {
                call_id: format!("call_{n}_b"),
                name: "write_file".into(),
                input_json: "{\"path\":\"../etc/passwd\"}".into(),
                output: "refused: outside the workspace".into(),
                is_error: true,
                confinement_refusal: Some("../etc/passwd".into()),
                duration_ms: 0,
            },
        ],
        policy_events: vec![PolicyEvent {
            run_id,
            step: n,
            act: "write".into(),
            target: "src/lib.rs".into(),
            decision: "allow".into(),
            rule: "write **".into(),
            layer: "task".into(),
        }],
        state_json: format!("{{\"verify_attempts\":0,\"step\":{n}}}"),
        provider: Some("scripted/scripted".into()),
    }
}

/// Lowercase hex SHA-256, computed independently of the store.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
