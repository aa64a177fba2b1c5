//! Breaks found by the fresh-eyes attack on the report and the export (issue 20), each
//! a test named after the attack: a proxy from the environment, an operator's ask on
//! the collector, a model-invented tool name in span names, and secrets the store
//! redacted printed by `run` itself (a bearer token from the OTLP headers, a
//! `[sandbox] env` value split by zero-width characters).

use std::path::Path;

use serde_json::Value;

use crate::otel::{Receiver, export, run_cli, spans_of, text};

fn task(dir: &Path, script: &[&str], extra: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("t/ws")).unwrap();
    std::fs::write(dir.join("t/script.jsonl"), script.join("\n") + "\n").unwrap();
    let task = dir.join("t/task.toml");
    std::fs::write(
        &task,
        format!("goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = {{ file = \"a.txt\", needle = \"a\" }}\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n{extra}"),
    )
    .unwrap();
    task
}

const WRITE: &str =
    r#"{"tool_calls": [{"name": "write_file", "input": {"path": "a.txt", "content": "a"}}]}"#;

/// B2: `HTTP_PROXY` sent the trace and its bearer header to the proxy, not to the
/// endpoint the `net` decision judged.
#[test]
fn b2_a_proxy_from_the_environment_is_never_used() {
    let dir = tempfile::tempdir().unwrap();
    let t = task(dir.path(), &[WRITE, r#"{"text": "done"}"#], "");
    let out = run_cli(dir.path(), &["run", t.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    proxy.set_nonblocking(true).unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let rx = Receiver::start(dir.path(), "rx", &[]);
    let out = export(
        &dir.path().join("store.db"),
        &["1", "--endpoint", &rx.url()],
        &[
            ("HTTP_PROXY", &proxy_url),
            ("http_proxy", &proxy_url),
            ("ALL_PROXY", &proxy_url),
            // No exclusion list, so a client that read the proxy would use it here.
            ("NO_PROXY", ""),
            ("no_proxy", ""),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(rx.received().len(), 1, "the collector got the trace");
    assert!(proxy.accept().is_err(), "nothing dialed the proxy");
}

/// B12: an operator's `ask` on the collector was taken for an allow (layer `otlp`) and
/// the trace was sent with nobody asked. An export has nobody to ask: not sent.
#[test]
fn b12_an_operators_ask_on_the_collector_is_not_an_allow() {
    let dir = tempfile::tempdir().unwrap();
    let t = task(
        dir.path(),
        &[WRITE, r#"{"text": "done"}"#],
        "[policy]\nrules = [{ act = \"net\", target = \"127.0.0.1:*\", decision = \"ask\" }]\n",
    );
    let out = run_cli(dir.path(), &["run", t.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let rx = Receiver::start(dir.path(), "rx", &[]);
    let out = export(
        &dir.path().join("store.db"),
        &["1", "--endpoint", &rx.url()],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("nobody to answer"),
        "{}",
        text(&out.stderr)
    );
    assert!(rx.received().is_empty(), "nothing was sent");
}

/// B3: a tool name the model made up (here holding a card number) became a span name
/// and `gen_ai.tool.name` without the content opt-in.
#[test]
fn b3_a_tool_name_the_model_made_up_is_not_exported() {
    let dir = tempfile::tempdir().unwrap();
    let invented = format!("card_4111111111111111_{}", "x".repeat(300));
    let call = format!(r#"{{"tool_calls": [{{"name": "{invented}", "input": {{}}}}]}}"#);
    let t = task(dir.path(), &[&call, WRITE, r#"{"text": "done"}"#], "");
    let out = run_cli(dir.path(), &["run", t.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let rx = Receiver::start(dir.path(), "rx", &[]);
    let out = export(
        &dir.path().join("store.db"),
        &["1", "--endpoint", &rx.url()],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let spans: Vec<Value> = rx.received().iter().flat_map(spans_of).collect();
    let all = serde_json::to_string(&spans).unwrap();
    assert!(
        !all.contains("4111111111111111"),
        "the invented name went out"
    );
    assert!(all.contains("execute_tool _OTHER"), "{all}");
    assert!(
        all.contains("execute_tool write_file"),
        "an offered name still goes out"
    );
}

/// B13 and B7: the bearer token inside `OTEL_EXPORTER_OTLP_HEADERS` (the header value
/// was held, the token alone was not) and a `[sandbox] env` secret split by zero-width
/// characters were stored and printed by `run` in clear.
#[test]
fn b13_b7_secrets_never_reach_the_store_or_what_run_prints() {
    let dir = tempfile::tempdir().unwrap();
    let token = "HDRSECRETabcdef123456";
    let env_secret = "sk-secretTOKENvalue1234567890abcdef";
    let split: String = env_secret.chars().flat_map(|c| [c, '\u{200b}']).collect();
    let write = format!(
        r#"{{"tool_calls": [{{"name": "write_file", "input": {{"path": "a.txt", "content": "a {token}"}}}}]}}"#
    );
    let done = format!(r#"{{"text": "final {token} and {split}"}}"#);
    let t = task(
        dir.path(),
        &[&write, &done],
        "[sandbox]\nenv = [\"MY_SECRET_TOKEN\"]\n",
    );
    let rx = Receiver::start(dir.path(), "rx", &[]);
    let headers = format!("authorization=Bearer%20{token}");
    let out = run_cli(
        dir.path(),
        &["run", t.to_str().unwrap(), "--otlp-endpoint", &rx.url()],
        &[
            ("OTEL_EXPORTER_OTLP_HEADERS", &headers),
            ("MY_SECRET_TOKEN", env_secret),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for (what, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let s = text(bytes);
        assert!(!s.contains(token), "{what} printed the bearer token: {s}");
        assert!(
            !s.contains(env_secret),
            "{what} printed the env secret: {s}"
        );
    }
    let db = std::fs::read(dir.path().join("store.db")).unwrap();
    let hay = String::from_utf8_lossy(&db);
    assert!(!hay.contains(token), "the store holds the bearer token");
    let show = run_cli(dir.path(), &["show", "1"], &[]);
    assert!(!text(&show.stdout).contains(token));
}

/// B11: a header value too short to redact (`x-tenant=ab1`), echoed by a collector
/// that refused the export, was printed. Its body is withheld then; a long value is
/// redacted from it.
#[test]
fn b11_a_collector_echoing_a_short_header_value_shows_nothing_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let t = task(dir.path(), &[WRITE, r#"{"text": "done"}"#], "");
    let out = run_cli(dir.path(), &["run", t.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let rx = Receiver::start(dir.path(), "rx", &["--status", "401"]);
    let store = dir.path().join("store.db");
    let short = export(
        &store,
        &["1", "--endpoint", &rx.url()],
        &[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "x-tenant=ab1,x-key=k3y-long-enough-42",
        )],
    );
    assert_eq!(short.status.code(), Some(70), "{}", text(&short.stderr));
    let err = text(&short.stderr);
    assert!(err.contains("HTTP 401"), "{err}");
    assert!(!err.contains("ab1") && !err.contains("k3y-long"), "{err}");
    assert!(err.contains("not shown"), "{err}");
    let long = export(
        &store,
        &["1", "--endpoint", &rx.url()],
        &[("OTEL_EXPORTER_OTLP_HEADERS", "x-key=k3y-long-enough-42")],
    );
    let err = text(&long.stderr);
    assert!(err.contains("refused by the test receiver"), "{err}");
    assert!(
        !err.contains("k3y-long") && err.contains("[REDACTED]"),
        "{err}"
    );
}
