//! Optional features: what a build says it has, and what it refuses without them.
//! The refusals are only observable in a build without the feature:
//! `cargo test --no-default-features --features cli,failpoints --test features`
//! (and `scripts/check-features`).

use io_harness::mcp::McpServerSpec;
use io_harness::provider::{ScriptTurn, Scripted};
use io_harness::{Store, TaskContract, Verification, run};

fn contract_with_a_server(dir: &std::path::Path) -> TaskContract {
    TaskContract::workspace(
        "write hello.txt",
        dir,
        Verification::file_contains("hello.txt", "hello"),
    )
    .mcp_server(McpServerSpec::stdio("fs", ["node", "server.js"]).unsandboxed())
}

#[test]
fn the_build_reports_its_features() {
    assert_eq!(io_harness::mcp::AVAILABLE, cfg!(feature = "mcp"));
    assert_eq!(
        io_harness::context::tokens::EXACT_AVAILABLE,
        cfg!(feature = "exact-tokens")
    );
}

/// A task file declaring one stdio server at line 4.
const WITH_A_SERVER: &str =
    "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[[mcp]]\nname = \"fs\"\ncommand = \"node\"\n";

#[test]
fn a_task_file_declaring_mcp_servers_parses_in_any_build() {
    // The description of servers exists in every build; a loader of a build without
    // the feature may refuse the file, naming the key and the feature.
    match load(WITH_A_SERVER) {
        Ok(c) => assert_eq!(c.mcp.len(), 1),
        Err(e) if !io_harness::mcp::AVAILABLE => {
            let msg = e.to_string();
            assert!(msg.contains("mcp"), "{msg}");
        }
        Err(e) => panic!("{e}"),
    }
}

#[cfg(not(feature = "mcp"))]
#[tokio::test]
async fn without_the_mcp_feature_a_run_declaring_servers_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let model = Scripted::new(vec![ScriptTurn::text("done")]);
    let err = run(&contract_with_a_server(dir.path()), &model, &store)
        .await
        .unwrap_err();
    assert!(err.is_usage(), "exit 2: {err:?}");
    let msg = err.to_string();
    assert!(msg.starts_with("mcp[0]: "), "{msg}");
    assert!(msg.contains("`mcp` feature"), "{msg}");
    assert!(store.runs().unwrap().is_empty(), "nothing was recorded");
}

/// Writes `text` as a task file and loads it.
fn load(text: &str) -> Result<TaskContract, io_harness::contract::ContractError> {
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("task.toml");
    std::fs::write(&task, text).unwrap();
    TaskContract::from_file(&task)
}

/// The line and key of an `Invalid` load error.
fn invalid(text: &str) -> (usize, String, String) {
    match load(text) {
        Err(io_harness::contract::ContractError::Invalid {
            line, key, message, ..
        }) => (line, key, message),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[cfg(not(feature = "mcp"))]
#[test]
fn without_the_mcp_feature_a_task_file_declaring_servers_is_refused_naming_file_line_and_key() {
    let (line, key, message) = invalid(WITH_A_SERVER);
    assert_eq!((line, key.as_str()), (4, "mcp[0]"), "{message}");
    assert!(message.contains("`mcp` feature"), "{message}");
}

#[cfg(not(feature = "exact-tokens"))]
#[test]
fn without_exact_tokens_a_task_asking_for_exact_counts_is_refused_naming_the_key() {
    let (line, key, message) =
        invalid("goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[context]\ntokens = \"exact\"\n");
    assert_eq!((line, key.as_str()), (5, "context.tokens"), "{message}");
    assert!(message.contains("`exact-tokens` feature"), "{message}");
}

#[test]
fn an_unknown_token_counting_is_refused_naming_file_line_and_key() {
    let (line, key, message) =
        invalid("goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[context]\ntokens = \"often\"\n");
    assert_eq!((line, key.as_str()), (5, "context.tokens"), "{message}");
    assert!(
        message.contains("\"auto\", \"exact\" or \"estimate\""),
        "{message}"
    );
}

#[test]
fn token_counting_defaults_to_auto_and_reads_estimate() {
    let c = load("goal = \"g\"\n[verify]\ncommand = [\"true\"]\n").unwrap();
    assert_eq!(c.context.tokens, io_harness::contract::TokenCounting::Auto);
    let c =
        load("goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[context]\ntokens = \"estimate\"\n")
            .unwrap();
    assert_eq!(
        c.context.tokens,
        io_harness::contract::TokenCounting::Estimate
    );
}

#[cfg(feature = "exact-tokens")]
#[tokio::test]
async fn exact_counts_for_a_model_without_an_encoder_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut contract = TaskContract::workspace(
        "write hello.txt",
        dir.path(),
        Verification::file_contains("hello.txt", "hello"),
    );
    contract.context.tokens = io_harness::contract::TokenCounting::Exact;
    let store = Store::memory().unwrap();
    let model = Scripted::new(vec![ScriptTurn::text("done")]);
    let err = run(&contract, &model, &store).await.unwrap_err();
    assert!(err.is_usage(), "exit 2: {err:?}");
    assert!(err.to_string().starts_with("context.tokens: "), "{err}");
    assert!(store.runs().unwrap().is_empty(), "nothing was recorded");
}

#[cfg(feature = "mcp")]
#[tokio::test]
async fn with_the_mcp_feature_a_failing_server_is_no_start_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let model = Scripted::new(vec![ScriptTurn::text("done")]);
    // The server cannot start (no such script): an observation, not a refusal.
    let res = run(&contract_with_a_server(dir.path()), &model, &store).await;
    assert!(res.is_ok(), "{res:?}");
}

#[cfg(not(feature = "mcp"))]
#[test]
fn without_the_mcp_feature_mcp_list_is_a_usage_error_naming_the_feature() {
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("task.toml");
    std::fs::write(&task, WITH_A_SERVER).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_io-harness"))
        .args(["mcp", "list", task.to_str().unwrap()])
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("`mcp` feature"), "{err}");
}
