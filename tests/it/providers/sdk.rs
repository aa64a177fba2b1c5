//! The request bodies on the wire, checked against the official SDKs' request types
//! (PyPI `openai` and `anthropic`) with unknown keys forbidden, by
//! `tests/sdk/validate.py` in the `.venv` that `scripts/setup-test-env.sh` makes.
//! Without that environment these tests fail and say how to create it.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use io_harness::provider::{Anthropic, OpenAi, OpenRouter, Provider};
use serde_json::json;

use super::fake_server::{FakeServer, Reply, whole};
use super::{anthropic_text, config, fixtures, openai_text};

/// Runs the validator on JSON lines.
fn validate(lines: &str) -> Output {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = if cfg!(windows) {
        root.join(".venv/Scripts/python.exe")
    } else {
        root.join(".venv/bin/python")
    };
    assert!(
        python.exists(),
        "{} is missing: run scripts/setup-test-env.sh to create the Python environment \
         (openai, anthropic, pydantic) that validates request bodies",
        python.display()
    );
    let mut child = Command::new(&python)
        .arg(root.join("tests/sdk/validate.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the validator");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(lines.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn line(api: &str, body: serde_json::Value) -> String {
    format!("{}\n", json!({"api": api, "body": body}))
}

#[tokio::test]
async fn sdk_accepts_every_request_body() {
    let mut lines = String::new();
    let mut count = 0;
    for request in fixtures::all() {
        for api in ["openai", "openrouter", "anthropic"] {
            let reply = if api == "anthropic" {
                anthropic_text("ok")
            } else {
                openai_text("ok")
            };
            let server = FakeServer::start(vec![Reply::sse(whole(&reply))]).await;
            let p: Box<dyn Provider> = match api {
                "openai" => {
                    Box::new(OpenAi::new(config(&format!("{}/v1", server.url()), "m")).unwrap())
                }
                "openrouter" => Box::new(
                    OpenRouter::new(config(&format!("{}/api/v1", server.url()), "m")).unwrap(),
                ),
                _ => Box::new(Anthropic::new(config(&server.url(), "m")).unwrap()),
            };
            p.complete(&request).await.unwrap();
            lines.push_str(&line(api, server.only_request().json()));
            count += 1;
        }
    }
    let out = validate(&lines);
    assert!(
        out.status.success(),
        "the SDKs reject a body:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{count} bodies valid")
    );
}

#[test]
fn sdk_validator_rejects_unknown_keys() {
    let lines = [
        line(
            "openai",
            json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}], "temprature": 0.5}),
        ),
        line(
            "anthropic",
            json!({"model": "m", "stream": true, "max_tokens": 10,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "colour": "red"}]}]}),
        ),
        line(
            "openrouter",
            json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}],
            "usage": {"include": true, "extra": 1}}),
        ),
        // A valid body among them is not reported: the failures are about the keys.
        line(
            "openai",
            json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
        ),
    ];
    let out = validate(&lines.concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    for want in [
        "line 1 (openai)",
        "'temprature'",
        "line 2 (anthropic)",
        "'colour'",
        "line 3: ",
        "'extra'",
        "3 of 4 bodies invalid",
    ] {
        assert!(stderr.contains(want), "{want:?} not in:\n{stderr}");
    }
    assert!(!stderr.contains("line 4"), "{stderr}");
}
