//! The schema and the migration runner.
//!
//! The version lives in `PRAGMA user_version` (0 for a new file). [`MIGRATIONS`] is an
//! ordered list: entry `i` moves a file from version `i` to `i + 1`. Each entry runs in
//! its own `IMMEDIATE` transaction together with the version bump, so a migration is
//! applied entirely or not at all, and two processes opening an old file at once
//! serialise: the second sees the new version and does nothing. Entries are never edited
//! once released — a change is a new entry — so every store ever written can be walked
//! forward to the current layout.

use rusqlite::{Connection, TransactionBehavior};

use super::{Result, StoreError};

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Migrations in order; `MIGRATIONS[i]` takes version `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    V1,
    V2,
    V3,
    V4,
    V5,
    V6,
    V7,
    V8,
    V9,
    V10,
    V_EGRESS_SESSIONS,
    V_AGENTS,
    V_MCP_EVENTS,
    V_CONTEXT_EVENTS,
    V_STEP_REPLIES,
    V_TOKEN_SOURCES,
    V_AUDIT_FAILURES,
    V_RUN_ELAPSED,
    V_ATTEMPT_MESSAGES,
    V_RUN_SETTINGS,
    V_OTLP_DROPPED,
    V_STOP_REASONS,
    V_RUN_SESSIONS,
    V_BATCHES,
    V_BLOB_DELTAS,
];

/// Each session of a run — the first and every resume — with when it began and how it
/// ended (issue 20: a trace has one span per session, and a session killed before its
/// end has no `ended_at_ms`).
const V_RUN_SESSIONS: &str = "
CREATE TABLE run_sessions (
    run_id        INTEGER NOT NULL REFERENCES runs(id),
    ordinal       INTEGER NOT NULL,
    started_at_ms INTEGER NOT NULL,
    ended_at_ms   INTEGER,
    ended_as      TEXT,
    PRIMARY KEY (run_id, ordinal)
);
";

/// Batches (issue 21): tasks run together under one id, each with its resolved
/// contract and, once it started, its run (`runs --batch`, `show`, `batch --resume`).
const V_BATCHES: &str = "
CREATE TABLE batches (
    id             INTEGER PRIMARY KEY,
    created_at_ms  INTEGER NOT NULL,
    finished_at_ms INTEGER,
    jobs           INTEGER NOT NULL,
    max_cost_usd   REAL,
    status         TEXT NOT NULL
);
CREATE TABLE batch_tasks (
    batch_id      INTEGER NOT NULL REFERENCES batches(id),
    position      INTEGER NOT NULL,
    source        TEXT NOT NULL,
    contract_json TEXT NOT NULL,
    settings_json TEXT NOT NULL,
    run_id        INTEGER REFERENCES runs(id),
    refused       TEXT,
    PRIMARY KEY (batch_id, position)
);
CREATE UNIQUE INDEX batch_tasks_run ON batch_tasks(run_id);
";

/// Request bodies stored incrementally (issue #18): a blob with `chunked = 2` lists
/// its chunks as a delta of blob `base`'s list (the count of its first digests kept,
/// then the new digests), so a step stores what is new in its request.
const V_BLOB_DELTAS: &str = "ALTER TABLE blobs ADD COLUMN base TEXT;";

/// Every resolved configuration value of a run with its source (issue 19.3: flags,
/// environment, task file, project and user config, defaults).
const V_RUN_SETTINGS: &str = "
CREATE TABLE run_settings (
    run_id  INTEGER NOT NULL REFERENCES runs(id),
    seq     INTEGER NOT NULL,
    key     TEXT NOT NULL,
    value   TEXT NOT NULL,
    source  TEXT NOT NULL,
    layer   TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
";

/// Why the model stopped at each step (`end_turn`, `tool_use`, `max_tokens`, or the
/// provider's own word), written at commit: the trace's `gen_ai.response.finish_reasons`
/// (issue #20). NULL in steps stored before it was kept.
const V_STOP_REASONS: &str = "ALTER TABLE steps ADD COLUMN stop_reason TEXT;";

/// Live OpenTelemetry export (issue #20): the exports of a run's spans that never
/// reached the collector (the bounded queue was full, or the collector failed or
/// refused); NULL when the run exported nothing live ("not exported" differs from 0).
const V_OTLP_DROPPED: &str = "ALTER TABLE runs ADD COLUMN otlp_dropped INTEGER;";

/// What the server said of each failed attempt (issue #17: a wrong model or base URL
/// ended a run with the reason stored nowhere).
const V_ATTEMPT_MESSAGES: &str = "ALTER TABLE provider_attempts ADD COLUMN message TEXT;";

/// The run's wall time kept while a session runs, not only at commits: a session
/// killed or cancelled mid-step hands the time it spent on to the resume (issue #13).
const V_RUN_ELAPSED: &str = "ALTER TABLE runs ADD COLUMN elapsed_ms INTEGER;";

/// A step's reply on record before its tools run (resume replays it), and a journaled
/// call's result (resume reuses it instead of running the call again).
const V_STEP_REPLIES: &str = "
CREATE TABLE step_replies (
    run_id         INTEGER NOT NULL REFERENCES runs(id),
    step           INTEGER NOT NULL,
    reply_json     TEXT NOT NULL,
    provider       TEXT,
    model_ms       INTEGER NOT NULL,
    created_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (run_id, step)
);
ALTER TABLE tool_intents ADD COLUMN output TEXT;
";

/// Reported and estimated tokens kept apart (issue #13): a step's counts say whether
/// they are the provider's or the harness's estimate, with the estimate beside them; a
/// failed attempt keeps its request's estimate and whether its reply was lost; and
/// every model call is written before its request goes out (`model_calls`), so a call
/// whose reply was lost — a broken stream, a cancel or kill in flight — is counted,
/// by a resumed session too. Old steps read as `reported`, which is what they claimed.
const V_TOKEN_SOURCES: &str = "
ALTER TABLE steps ADD COLUMN token_source TEXT NOT NULL DEFAULT 'reported';
ALTER TABLE steps ADD COLUMN estimated_input_tokens INTEGER;
ALTER TABLE steps ADD COLUMN estimated_output_tokens INTEGER;
ALTER TABLE provider_attempts ADD COLUMN estimated_input_tokens INTEGER;
ALTER TABLE provider_attempts ADD COLUMN reply_lost INTEGER NOT NULL DEFAULT 0;
CREATE TABLE model_calls (
    id                     INTEGER PRIMARY KEY,
    run_id                 INTEGER NOT NULL REFERENCES runs(id),
    step                   INTEGER NOT NULL,
    provider               TEXT NOT NULL,
    estimated_input_tokens INTEGER NOT NULL,
    estimated_cost_usd     REAL,
    status                 TEXT NOT NULL,
    at_ms                  INTEGER NOT NULL
);
CREATE INDEX model_calls_run ON model_calls(run_id, step);
";

/// Failed appends to the audit log, per run (SPEC C18: an unwritable log never fails a
/// run, so the store is where the gap is counted).
const V_AUDIT_FAILURES: &str = "
ALTER TABLE runs ADD COLUMN audit_failures INTEGER NOT NULL DEFAULT 0;
";

/// Sandbox egress per session (SPEC C15): the resolved allowlist in force, and what the
/// egress proxy reported — refusals, admitted connections and the first refused hosts.
/// The counts are NULL when no proxy watched the session ("not observed"), which differs
/// from 0 ("observed, none").
const V_EGRESS_SESSIONS: &str = "
ALTER TABLE sandbox_sessions ADD COLUMN allow_hosts_json TEXT NOT NULL DEFAULT '[]';
ALTER TABLE sandbox_sessions ADD COLUMN egress_refusals_reported INTEGER;
ALTER TABLE sandbox_sessions ADD COLUMN egress_admitted_reported INTEGER;
ALTER TABLE sandbox_sessions ADD COLUMN egress_refused_hosts_json TEXT NOT NULL DEFAULT '[]';
";

/// Sub-agents (C12): a child run's depth in its tree, its name, and the parent's step
/// and tool call that spawned it (unique, so a resumed parent adopts the child instead
/// of starting a second one); and the parent's model reply of a step that spawned, so
/// a resume replays exactly the calls whose children exist.
const V_AGENTS: &str = "
ALTER TABLE runs ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN agent_name TEXT;
ALTER TABLE runs ADD COLUMN spawn_step INTEGER;
ALTER TABLE runs ADD COLUMN spawn_call_id TEXT;
CREATE UNIQUE INDEX runs_spawn ON runs(parent_run_id, spawn_step, spawn_call_id)
    WHERE spawn_call_id IS NOT NULL;
CREATE TABLE agent_spawns (
    id            INTEGER PRIMARY KEY,
    run_id        INTEGER NOT NULL REFERENCES runs(id),
    step          INTEGER NOT NULL,
    reply_json    TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    UNIQUE (run_id, step)
);
";

/// MCP events (C14): each server connected, its tools discovered, each tool call, a
/// disconnect, a failure. One row per event; new kinds are values, not tables.
const V_MCP_EVENTS: &str = "
CREATE TABLE mcp_events (
    id          INTEGER PRIMARY KEY,
    run_id      INTEGER NOT NULL REFERENCES runs(id),
    step        INTEGER NOT NULL,
    server      TEXT NOT NULL,
    kind        TEXT NOT NULL,
    tool        TEXT,
    duration_ms INTEGER,
    outcome     TEXT,
    detail      TEXT,
    at_ms       INTEGER NOT NULL
);
CREATE INDEX mcp_events_run ON mcp_events(run_id);
";

/// Context assembly (C16): one row per request assembled and per observation sent
/// other than whole, with the estimate beside the provider's reported usage and the
/// assembled request as a blob.
const V_CONTEXT_EVENTS: &str = "
CREATE TABLE context_events (
    id                    INTEGER PRIMARY KEY,
    run_id                INTEGER NOT NULL REFERENCES runs(id),
    step                  INTEGER NOT NULL,
    kind                  TEXT NOT NULL,
    obs_step              INTEGER,
    tool                  TEXT,
    target                TEXT,
    tokens_before         INTEGER,
    tokens_after          INTEGER,
    budget                INTEGER,
    reported_input_tokens INTEGER,
    cached_input_tokens   INTEGER,
    cache_write_tokens    INTEGER,
    state_json            TEXT,
    detail                TEXT,
    request_hash          TEXT REFERENCES blobs(hash),
    at_ms                 INTEGER NOT NULL
);
CREATE INDEX context_events_run ON context_events(run_id, step);
";

/// Version 10: cross-run memory (notes keyed to the canonical workspace path), and the
/// run's first messages as sent, so a resume replays them even if the notes or the
/// instructions file changed since.
const V10: &str = "
CREATE TABLE memory (
    workspace     TEXT NOT NULL,
    key           TEXT NOT NULL,
    value         TEXT NOT NULL,
    source_run    INTEGER,
    created_at_ms INTEGER NOT NULL,
    used_at_ms    INTEGER NOT NULL,
    PRIMARY KEY (workspace, key)
);
ALTER TABLE runs ADD COLUMN initial_json TEXT;
";

/// Version 9: the run's policy layers, so a resumed run applies exactly the policy it
/// had — remembered approvals included — never one rebuilt from a changed project file.
const V9: &str = "ALTER TABLE runs ADD COLUMN policy_json TEXT;";

/// Version 8: approval requests — an `ask` deferred to a human, with the model reply
/// of the step it interrupted so the resumed run continues from exactly that action.
const V8: &str = "
CREATE TABLE approvals (
    id            INTEGER PRIMARY KEY,
    run_id        INTEGER NOT NULL REFERENCES runs(id),
    request_id    TEXT NOT NULL,
    step          INTEGER NOT NULL,
    call_id       TEXT NOT NULL,
    tool          TEXT NOT NULL,
    input_json    TEXT NOT NULL,
    action_json   TEXT NOT NULL,
    reply_json    TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('pending', 'allowed', 'denied')),
    reason        TEXT,
    remember      INTEGER NOT NULL DEFAULT 0,
    created_at_ms INTEGER NOT NULL,
    decided_at_ms INTEGER,
    UNIQUE (run_id, request_id)
);
";

/// Version 7: an intent can be `uncertain` — a command interrupted by a crash, whose
/// effects no one can reconcile. SQLite cannot change a CHECK in place, so the table is
/// rebuilt with its rows.
const V7: &str = "
CREATE TABLE tool_intents_v7 (
    id             INTEGER PRIMARY KEY,
    run_id         INTEGER NOT NULL REFERENCES runs(id),
    step           INTEGER NOT NULL,
    call_id        TEXT NOT NULL,
    tool           TEXT NOT NULL,
    input_json     TEXT NOT NULL,
    actions_json   TEXT NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('pending', 'done', 'failed', 'uncertain')),
    effects_json   TEXT,
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL
);
INSERT INTO tool_intents_v7 SELECT * FROM tool_intents;
DROP TABLE tool_intents;
ALTER TABLE tool_intents_v7 RENAME TO tool_intents;
CREATE INDEX tool_intents_run ON tool_intents(run_id);
";

/// Version 6: the provider's own error code of a failed attempt, and the size of the
/// request (what a context overflow is about).
const V6: &str = "
ALTER TABLE provider_attempts ADD COLUMN code TEXT;
ALTER TABLE provider_attempts ADD COLUMN request_bytes INTEGER;
";

/// Version 5: one row per sandboxed command with the layers really applied, its
/// limits, network posture, masks and how it ended.
const V5: &str = "
CREATE TABLE sandbox_sessions (
    id           INTEGER PRIMARY KEY,
    run_id       INTEGER NOT NULL REFERENCES runs(id),
    step         INTEGER NOT NULL,
    purpose      TEXT NOT NULL,
    backend      TEXT NOT NULL,
    argv_json    TEXT NOT NULL,
    layers_json  TEXT NOT NULL,
    limits_json  TEXT NOT NULL,
    network      TEXT NOT NULL,
    masked_json  TEXT NOT NULL,
    env_names_json TEXT NOT NULL,
    exit_code    INTEGER,
    signal       INTEGER,
    cap_hit      TEXT,
    duration_ms  INTEGER NOT NULL,
    at_ms        INTEGER NOT NULL
);
CREATE INDEX sandbox_sessions_run ON sandbox_sessions(run_id, step);
";

/// Version 4: large request bodies stored as content-defined chunks, each chunk once
/// (a `chunked` blob's bytes are the list of its chunks' SHA-256 digests).
const V4: &str = "
ALTER TABLE blobs ADD COLUMN chunked INTEGER NOT NULL DEFAULT 0;
CREATE TABLE chunks (
    id    INTEGER PRIMARY KEY,
    hash  BLOB NOT NULL UNIQUE,
    bytes BLOB NOT NULL
);
";

/// Version 3: which provider served each step, and every failed provider attempt
/// (retried or fallen back from).
const V3: &str = "
ALTER TABLE steps ADD COLUMN provider TEXT;
CREATE TABLE provider_attempts (
    id        INTEGER PRIMARY KEY,
    run_id    INTEGER NOT NULL REFERENCES runs(id),
    step      INTEGER NOT NULL,
    provider  TEXT NOT NULL,
    attempt   INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    status    INTEGER,
    delay_ms  INTEGER NOT NULL,
    next      TEXT NOT NULL,
    at_ms     INTEGER NOT NULL
);
CREATE INDEX provider_attempts_run ON provider_attempts(run_id, step);
";

/// Version 2: the run's scratch directory (its workspace copy or baseline), so a resumed
/// run diffs against the same baseline.
const V2: &str = "ALTER TABLE runs ADD COLUMN scratch_dir TEXT;";

/// Version 1: runs, steps with their tool calls, content-addressed blobs, the tool
/// intent journal, sandbox and policy events.
const V1: &str = "
CREATE TABLE runs (
    id              INTEGER PRIMARY KEY,
    goal            TEXT NOT NULL,
    root            TEXT NOT NULL,
    work_dir        TEXT,
    status          TEXT NOT NULL CHECK (status IN ('running', 'finished')),
    outcome         TEXT,
    outcome_json    TEXT,
    contract_json   TEXT,
    provider_json   TEXT,
    parent_run_id   INTEGER REFERENCES runs(id),
    started_at_ms   INTEGER NOT NULL,
    finished_at_ms  INTEGER,
    final_message   TEXT,
    diff            TEXT
);
CREATE INDEX runs_parent ON runs(parent_run_id);

CREATE TABLE blobs (
    hash  TEXT PRIMARY KEY,
    bytes BLOB NOT NULL,
    size  INTEGER NOT NULL
);

CREATE TABLE steps (
    id                  INTEGER PRIMARY KEY,
    run_id              INTEGER NOT NULL REFERENCES runs(id),
    step                INTEGER NOT NULL,
    started_at_ms       INTEGER NOT NULL,
    duration_ms         INTEGER NOT NULL,
    model_ms            INTEGER NOT NULL,
    request_hash        TEXT REFERENCES blobs(hash),
    reply_json          TEXT NOT NULL,
    messages_json       TEXT NOT NULL,
    usage_json          TEXT NOT NULL,
    input_tokens        INTEGER NOT NULL,
    output_tokens       INTEGER NOT NULL,
    cached_input_tokens INTEGER,
    cost_usd            REAL,
    cost_source         TEXT NOT NULL,
    state_json          TEXT NOT NULL,
    UNIQUE (run_id, step)
);

CREATE TABLE tool_calls (
    id                  INTEGER PRIMARY KEY,
    run_id              INTEGER NOT NULL,
    step                INTEGER NOT NULL,
    seq                 INTEGER NOT NULL,
    call_id             TEXT NOT NULL,
    name                TEXT NOT NULL,
    input_json          TEXT NOT NULL,
    output              TEXT NOT NULL,
    is_error            INTEGER NOT NULL CHECK (is_error IN (0, 1)),
    confinement_refusal TEXT,
    duration_ms         INTEGER NOT NULL,
    UNIQUE (run_id, step, seq),
    FOREIGN KEY (run_id, step) REFERENCES steps(run_id, step)
);

CREATE TABLE tool_intents (
    id             INTEGER PRIMARY KEY,
    run_id         INTEGER NOT NULL REFERENCES runs(id),
    step           INTEGER NOT NULL,
    call_id        TEXT NOT NULL,
    tool           TEXT NOT NULL,
    input_json     TEXT NOT NULL,
    actions_json   TEXT NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
    effects_json   TEXT,
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL
);
CREATE INDEX tool_intents_run ON tool_intents(run_id);

CREATE TABLE sandbox_events (
    id      INTEGER PRIMARY KEY,
    run_id  INTEGER NOT NULL REFERENCES runs(id),
    step    INTEGER NOT NULL,
    kind    TEXT NOT NULL,
    backend TEXT,
    detail  TEXT,
    at_ms   INTEGER NOT NULL
);
CREATE INDEX sandbox_events_run ON sandbox_events(run_id);

CREATE TABLE policy_events (
    id       INTEGER PRIMARY KEY,
    run_id   INTEGER NOT NULL REFERENCES runs(id),
    step     INTEGER NOT NULL,
    act      TEXT NOT NULL,
    target   TEXT NOT NULL,
    decision TEXT NOT NULL,
    rule     TEXT NOT NULL,
    layer    TEXT NOT NULL,
    at_ms    INTEGER NOT NULL
);
CREATE INDEX policy_events_run ON policy_events(run_id, step);
";

/// The version recorded in the file.
pub(crate) fn version(conn: &Connection) -> Result<u32> {
    Ok(conn.pragma_query_value(None, "user_version", |r| r.get(0))?)
}

/// Brings the file up to `migrations.len()`, one transaction per migration.
/// Returns the version the file is at afterwards.
pub(crate) fn migrate(conn: &mut Connection, migrations: &[&str]) -> Result<u32> {
    let supported = migrations.len() as u32;
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found = version(&tx)?;
        if found > supported {
            return Err(StoreError::TooNew { found, supported });
        }
        if found == supported {
            tx.commit()?;
            return Ok(found);
        }
        tx.execute_batch(migrations[found as usize])?;
        tx.pragma_update(None, "user_version", found + 1)?;
        tx.commit()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEXT_TEST: &str = "ALTER TABLE runs ADD COLUMN label TEXT NOT NULL DEFAULT 'none';
         CREATE TABLE notes (id INTEGER PRIMARY KEY, run_id INTEGER REFERENCES runs(id));";

    fn with_next(next: &'static str) -> Vec<&'static str> {
        let mut v = MIGRATIONS.to_vec();
        v.push(next);
        v
    }

    fn v1_with_a_run() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        assert_eq!(migrate(&mut conn, &[V1]).unwrap(), 1);
        conn.execute(
            "INSERT INTO runs (goal, root, status, started_at_ms) VALUES ('g', '/r', 'running', 5)",
            [],
        )
        .unwrap();
        conn
    }

    #[test]
    fn a_v1_file_moves_forward_through_every_migration_keeping_its_rows() {
        let mut conn = v1_with_a_run();
        let all = with_next(NEXT_TEST);
        let top = all.len() as u32;
        assert_eq!(migrate(&mut conn, &all).unwrap(), top);
        assert_eq!(version(&conn).unwrap(), top);
        let scratch: Option<String> = conn
            .query_row("SELECT scratch_dir FROM runs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(scratch, None, "v2 added the column to the old row");
        let (goal, label): (String, String) = conn
            .query_row("SELECT goal, label FROM runs", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((goal.as_str(), label.as_str()), ("g", "none"));
        conn.execute("INSERT INTO notes (run_id) VALUES (1)", [])
            .unwrap();
        // Running again is a no-op.
        assert_eq!(migrate(&mut conn, &all).unwrap(), top);
    }

    #[test]
    fn a_failing_migration_leaves_the_file_at_its_old_version() {
        let mut conn = v1_with_a_run();
        let broken = "ALTER TABLE runs ADD COLUMN x TEXT; THIS IS NOT SQL;";
        assert!(migrate(&mut conn, &with_next(broken)).is_err());
        assert_eq!(
            version(&conn).unwrap(),
            SCHEMA_VERSION,
            "the good migrations landed"
        );
        // The first half of the broken step was rolled back with it.
        let cols: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM pragma_table_info('runs') WHERE name = 'x'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(cols, 0);
    }

    #[test]
    fn a_newer_file_is_refused() {
        let mut conn = v1_with_a_run();
        migrate(&mut conn, &with_next(NEXT_TEST)).unwrap();
        match migrate(&mut conn, MIGRATIONS) {
            Err(StoreError::TooNew { found, supported }) => {
                assert_eq!((found, supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
            }
            other => panic!("expected TooNew, got {other:?}"),
        }
    }
}
