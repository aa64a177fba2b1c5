//! The MCP client against a server that speaks JSON-RPC badly on purpose
//! (`tests/fixtures/mcp_hostile.py`, standard-library Python, loopback only): a
//! result over the 16 MiB bound, replies that are not JSON-RPC, a handshake that is
//! not one, a structured result, and deaths with an exit code or a signal. Each must
//! be recorded for what it is, at once — the clock is real and the bounds are small.

use std::time::{Duration, Instant};

use io_harness::mcp::{McpServerSpec, McpServers};
use io_harness::{McpEvent, Store};
use serde_json::json;

use super::{ctx, env, kinds, native_policy, registry};

fn script() -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mcp_hostile.py")
        .display()
        .to_string()
}

/// A hostile stdio server in `mode`, run outside the sandbox (it is ours), with a call
/// timeout far beyond every bound asserted here.
pub(super) fn stdio(name: &str, mode: &str) -> McpServerSpec {
    McpServerSpec::stdio(
        name,
        ["python3".to_string(), script(), "stdio".into(), mode.into()],
    )
    .unsandboxed()
    .call_timeout(Duration::from_secs(60))
    .startup_timeout(Duration::from_secs(30))
}

/// A hostile streamable-HTTP server in `mode`, and its spec.
async fn http(name: &str, mode: &str) -> (tokio::process::Child, McpServerSpec) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new("python3")
        .args([script().as_str(), "http", mode])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let port = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the hostile HTTP server did not start")
        .unwrap()
        .expect("the hostile HTTP server printed no port");
    let spec = McpServerSpec::http(name, format!("http://127.0.0.1:{}/mcp", port.trim()))
        .call_timeout(Duration::from_secs(60))
        .startup_timeout(Duration::from_secs(30));
    (child, spec)
}

/// Connects `specs`, calls tool `t` of `server` once, and returns what the model was
/// told, how long the call took, and the run's MCP events.
async fn call_once(
    specs: &[McpServerSpec],
    server: &str,
) -> (
    io_harness::tools::Dispatched,
    Duration,
    Vec<McpEvent>,
    McpServers,
) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let run_id = store.start_run("g", "/r").unwrap();
    let servers =
        McpServers::connect(specs, env(&store, run_id, dir.path(), native_policy())).await;
    let reg = registry(&servers);
    let started = Instant::now();
    let d = reg
        .dispatch(
            &ctx(dir.path()),
            native_policy().as_ref(),
            &format!("mcp__{server}__t"),
            &json!({}),
        )
        .await;
    let took = started.elapsed();
    let ev = store.mcp_events(run_id).unwrap();
    (d, took, ev, servers)
}

fn called(ev: &[McpEvent]) -> &McpEvent {
    ev.iter()
        .find(|e| e.kind == "called")
        .unwrap_or_else(|| panic!("no call recorded: {ev:?}"))
}

/// Issue 17 item 10: the reply over the bound was dropped by the transport and the
/// call recorded `timeout` after the full call timeout.
#[tokio::test]
async fn a_result_over_16_mib_over_stdio_is_a_too_large_tool_error_at_once() {
    let (d, took, ev, servers) = call_once(&[stdio("big", "huge").required()], "big").await;
    assert!(d.is_error, "{}", d.content);
    assert!(d.content.contains("result too large"), "{}", d.content);
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(called(&ev).outcome.as_deref(), Some("too_large"), "{ev:?}");
    // The server is healthy: still alive, nothing failed.
    assert_eq!(servers.alive(), ["big"]);
    assert_eq!(servers.required_failed(), None);
    servers.close();
}

/// Issue 17 item 10: over HTTP the healthy server was recorded `failed: the server
/// went away`, and a required one ended the run.
#[tokio::test]
async fn a_result_over_16_mib_over_http_is_a_too_large_tool_error_and_the_server_lives() {
    let (_child, spec) = http("web", "huge").await;
    let (d, took, ev, servers) = call_once(&[spec.required()], "web").await;
    assert!(d.is_error, "{}", d.content);
    assert!(d.content.contains("result too large"), "{}", d.content);
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(called(&ev).outcome.as_deref(), Some("too_large"), "{ev:?}");
    assert!(!kinds(&ev).contains(&"failed"), "{ev:?}");
    assert_eq!(servers.required_failed(), None);
    servers.close();
}

/// Issue 17 item 10: a malformed reply waited the full call timeout and was recorded
/// as one.
#[tokio::test]
async fn a_malformed_call_reply_is_a_protocol_error_within_two_seconds() {
    for mode in ["truncated", "no-jsonrpc"] {
        let (d, took, ev, servers) = call_once(&[stdio("bad", mode)], "bad").await;
        assert!(d.is_error, "{mode}: {}", d.content);
        assert!(
            d.content.contains("protocol error"),
            "{mode}: {}",
            d.content
        );
        assert!(took < Duration::from_secs(2), "{mode}: took {took:?}");
        assert_eq!(
            called(&ev).outcome.as_deref(),
            Some("protocol_error"),
            "{mode}: {ev:?}"
        );
        servers.close();
    }
}

/// Stray text on stdout (a log line) is not a reply: the call still gets its answer.
#[tokio::test]
async fn a_stray_log_line_on_stdout_is_not_taken_for_a_reply() {
    let (d, _, ev, servers) = call_once(&[stdio("chatty", "stray")], "chatty").await;
    assert!(!d.is_error, "{}", d.content);
    assert_eq!(d.content, "after the log line");
    assert_eq!(called(&ev).outcome.as_deref(), Some("ok"));
    servers.close();
}

/// Issue 17 item 10: a bad `initialize` reply waited the full startup timeout.
#[tokio::test]
async fn a_malformed_initialize_reply_fails_the_server_as_a_protocol_error_at_once() {
    for mode in ["init-truncated", "init-no-jsonrpc"] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::memory().unwrap();
        let run_id = store.start_run("g", "/r").unwrap();
        let started = Instant::now();
        let servers = McpServers::connect(
            &[stdio("bad", mode)],
            env(&store, run_id, dir.path(), native_policy()),
        )
        .await;
        let took = started.elapsed();
        assert!(took < Duration::from_secs(3), "{mode}: took {took:?}");
        let ev = store.mcp_events(run_id).unwrap();
        assert_eq!(kinds(&ev), ["failed"], "{mode}");
        let why = ev[0].detail.as_deref().unwrap();
        assert!(why.contains("protocol error"), "{mode}: {why}");
        servers.close();
    }
}

/// Issue 17 item 10: a result with text and `structuredContent` (FastMCP wraps a
/// scalar as `{"result": …}`) reached the model twice.
#[tokio::test]
async fn a_structured_result_is_sent_to_the_model_once() {
    let (d, _, _, servers) = call_once(&[stdio("s", "structured")], "s").await;
    assert!(!d.is_error, "{}", d.content);
    assert_eq!(d.content, "42");
    servers.close();
}

/// Issue 17 item 10: `failed` records lacked the exit code or signal.
#[tokio::test]
async fn a_server_that_dies_during_a_call_is_recorded_with_its_exit_code_or_signal() {
    for (mode, expect) in [("exit7", "exit code 7"), ("sigterm", "signal 15")] {
        let (d, took, ev, servers) = call_once(&[stdio("dies", mode)], "dies").await;
        assert!(d.is_error, "{mode}: {}", d.content);
        assert!(took < Duration::from_secs(5), "{mode}: took {took:?}");
        let failed = ev
            .iter()
            .find(|e| e.kind == "failed")
            .unwrap_or_else(|| panic!("{mode}: no failure recorded: {ev:?}"));
        let why = failed.detail.as_deref().unwrap();
        assert!(why.contains(expect), "{mode}: {why}");
        servers.close();
    }
}

/// Issue 17 item 10: each HTTP server death stalled the call 2 s (waiting for the
/// stderr of a process that is not ours).
#[tokio::test]
async fn an_http_server_death_is_recorded_without_a_stall() {
    let (mut child, spec) = http("web", "ok").await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let run_id = store.start_run("g", "/r").unwrap();
    let servers =
        McpServers::connect(&[spec], env(&store, run_id, dir.path(), native_policy())).await;
    let reg = registry(&servers);
    child.kill().await.unwrap();
    let started = Instant::now();
    let d = reg
        .dispatch(
            &ctx(dir.path()),
            native_policy().as_ref(),
            "mcp__web__t",
            &json!({}),
        )
        .await;
    let took = started.elapsed();
    assert!(d.is_error, "{}", d.content);
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    servers.close();
}

/// Adversary M5: a stdio server that sent half a reply, closed its stdout and stayed
/// alive left the call to wait out its timeout (30 s there; 60 s by default). The
/// call is answered at once as a protocol error, and the server, which can answer
/// nothing more, is recorded failed.
#[tokio::test]
async fn a_stdout_closed_mid_reply_is_a_protocol_error_at_once() {
    let (d, took, ev, servers) = call_once(&[stdio("shut", "close-stdout")], "shut").await;
    assert!(d.is_error, "{}", d.content);
    assert!(d.content.contains("closed its stdout"), "{}", d.content);
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(
        called(&ev).outcome.as_deref(),
        Some("protocol_error"),
        "{ev:?}"
    );
    assert!(kinds(&ev).contains(&"failed"), "{ev:?}");
    servers.close();
}

/// Adversary H2: one bad answer over HTTP (an HTML 502 page) marked a live server
/// dead for the rest of the run, and a required one ended it. It is that call's
/// protocol error; the next call is served.
#[tokio::test]
async fn one_bad_http_answer_is_that_calls_protocol_error_and_the_server_lives() {
    let (_child, spec) = http("web", "bad-once").await;
    let (d, _took, ev, servers) = call_once(&[spec.required()], "web").await;
    assert!(d.is_error, "{}", d.content);
    assert_eq!(
        called(&ev).outcome.as_deref(),
        Some("protocol_error"),
        "{ev:?}"
    );
    assert!(!kinds(&ev).contains(&"failed"), "{ev:?}");
    assert_eq!(servers.required_failed(), None);
    let dir = tempfile::tempdir().unwrap();
    let again = registry(&servers)
        .dispatch(
            &ctx(dir.path()),
            native_policy().as_ref(),
            "mcp__web__t",
            &json!({}),
        )
        .await;
    assert!(!again.is_error, "{}", again.content);
    servers.close();
}

/// Adversary H_huge_sse / H3b: a reply over 16 MiB sent as one SSE event closed the
/// call's stream, which rmcp reports as a closed transport, so a live server was
/// recorded `failed` (and a required one ended the run). It is that call's fault; the
/// server lives and the next call is served.
#[tokio::test]
async fn an_sse_reply_over_the_bound_is_that_calls_fault_and_the_server_lives() {
    let (_child, spec) = http("web", "huge-sse-once").await;
    let (d, took, ev, servers) = call_once(&[spec.required()], "web").await;
    assert!(d.is_error, "{}", d.content);
    assert!(
        d.content.len() < 4096,
        "the reply is not passed on: {}",
        d.content.len()
    );
    let outcome = called(&ev).outcome.clone();
    assert!(outcome.as_deref() == Some("protocol_error"), "{ev:?}");
    assert!(took < Duration::from_secs(30), "answered at once: {took:?}");
    assert!(!kinds(&ev).contains(&"failed"), "{ev:?}");
    assert_eq!(servers.required_failed(), None);
    let dir = tempfile::tempdir().unwrap();
    let again = registry(&servers)
        .dispatch(
            &ctx(dir.path()),
            native_policy().as_ref(),
            "mcp__web__t",
            &json!({}),
        )
        .await;
    assert!(!again.is_error, "{}", again.content);
    servers.close();
}
