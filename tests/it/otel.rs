//! `io-harness export-otlp` against a real OTLP/HTTP receiver
//! (tests/fixtures/otlp_receiver.py, on the OpenTelemetry protobuf definitions from
//! PyPI): the receiver parses what the harness sent into `ExportTraceServiceRequest`
//! with unknown fields refused, and the test reads back what the protobuf types
//! understood — the span tree, the names and the GenAI attributes field by field.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use io_harness::provider::{ScriptTurn, Scripted, Usage};
use io_harness::{RunOutcome, Store, TaskContract, Verification, run};
use serde_json::{Value, json};

/// The receiver process, killed on drop.
pub(crate) struct Receiver {
    child: Child,
    port: u16,
    out: PathBuf,
}

impl Receiver {
    pub(crate) fn start(dir: &Path, name: &str, extra: &[&str]) -> Self {
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/otlp_receiver.py");
        let out = dir.join(format!("{name}.jsonl"));
        let mut child = Command::new(&python)
            .arg(&script)
            .arg(&out)
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{}: {e} (run scripts/setup-test-env.sh)", python.display())
            });
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| {
            panic!("the receiver did not start (is opentelemetry-proto in .venv?): {line:?}")
        });
        Self { child, port, out }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every line it appended.
    pub(crate) fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn usage(mut t: ScriptTurn, input: u64, output: u64) -> ScriptTurn {
    t.usage = Some(Usage {
        input_tokens: Some(input),
        output_tokens: Some(output),
        ..Default::default()
    });
    t
}

/// A finished tree in a store file: the root spawns `writer` (which writes
/// `sub/a.txt`), runs `true` in the sandbox, and ends; its gate is a command.
async fn tree(dir: &Path) -> (PathBuf, i64) {
    let ws = dir.join("ws");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    let contract = TaskContract::workspace(
        "get sub/a.txt written",
        &ws,
        Verification::command(["test", "-f", "sub/a.txt"]),
    );
    let provider = Scripted::new(vec![
        usage(
            ScriptTurn::tool(
                "spawn_agent",
                json!({
                    "name": "writer",
                    "goal": "write a.txt",
                    "root": "sub",
                    "verify": {"file_contains": {"file": "a.txt", "needle": "hi"}},
                    "budget": {"max_steps": 3}
                }),
            ),
            100,
            7,
        ),
        usage(
            ScriptTurn::tool("run_command", json!({"argv": ["true"]})),
            120,
            5,
        ),
        usage(ScriptTurn::text("done"), 130, 3),
    ])
    .with_agent(
        "writer",
        vec![
            usage(
                ScriptTurn::tool("write_file", json!({"path": "a.txt", "content": "hi\n"})),
                50,
                4,
            ),
            usage(ScriptTurn::text("wrote it"), 60, 2),
        ],
    );
    let path = dir.join("store.db");
    let store = Store::open(&path).unwrap();
    let r = run(&contract, &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    (path, r.run_id)
}

pub(crate) fn export(store: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_io-harness"));
    c.arg("export-otlp")
        .args(args)
        .arg("--store")
        .arg(store)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
        .env_remove("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .env_remove("IO_HARNESS_FAILPOINT");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The spans of the one accepted request, and its resource and scope.
pub(crate) fn spans_of(line: &Value) -> Vec<Value> {
    assert!(
        line.get("error").is_none(),
        "the receiver refused it: {line}"
    );
    let rs = &line["request"]["resourceSpans"];
    assert_eq!(rs.as_array().unwrap().len(), 1);
    let scope = &rs[0]["scopeSpans"][0];
    assert_eq!(scope["scope"]["name"], "io-harness");
    assert_eq!(
        scope["schemaUrl"],
        "https://opentelemetry.io/schemas/1.41.0"
    );
    let service = attrs(&rs[0]["resource"]);
    assert_eq!(
        service["service.name"],
        json!({"stringValue": "io-harness"})
    );
    scope["spans"].as_array().unwrap().clone()
}

/// A span's attributes as `key → value object`.
pub(crate) fn attrs(span: &Value) -> serde_json::Map<String, Value> {
    span["attributes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|kv| (kv["key"].as_str().unwrap().to_string(), kv["value"].clone()))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn s(v: &str) -> Value {
    json!({ "stringValue": v })
}

pub(crate) fn int(v: i64) -> Value {
    json!({ "intValue": v.to_string() })
}

pub(crate) fn find<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

pub(crate) fn parent_name<'a>(spans: &'a [Value], span: &Value) -> &'a str {
    let p = &span["parentSpanId"];
    spans
        .iter()
        .find(|s| &s["spanId"] == p)
        .and_then(|s| s["name"].as_str())
        .unwrap_or("<none>")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_tree_is_exported_as_one_trace_in_the_genai_conventions() {
    let dir = tempfile::tempdir().unwrap();
    let (store, run_id) = tree(dir.path()).await;
    let rx = Receiver::start(dir.path(), "rx", &[]);
    let out = export(&store, &[&run_id.to_string(), "--endpoint", &rx.url()], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let got = rx.received();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["path"], "/v1/traces");
    assert_eq!(got[0]["headers"]["content-type"], "application/json");
    let spans = spans_of(&got[0]);

    // One trace; ids of the protobuf's sizes (the receiver refuses any other).
    let trace = spans[0]["traceId"].clone();
    assert!(spans.iter().all(|s| s["traceId"] == trace));
    assert_eq!(trace.as_str().unwrap().len(), 32, "16 bytes");
    assert!(
        spans
            .iter()
            .all(|s| s["spanId"].as_str().unwrap().len() == 16)
    );
    let mut ids: Vec<_> = spans.iter().map(|s| s["spanId"].clone()).collect();
    ids.sort_by_key(|v| v.to_string());
    ids.dedup();
    assert_eq!(ids.len(), spans.len(), "span ids are distinct");

    // The root run: no parent, ok, the agent conventions.
    let roots: Vec<_> = spans
        .iter()
        .filter(|s| s.get("parentSpanId").is_none())
        .collect();
    assert_eq!(roots.len(), 1, "{spans:#?}");
    let root = roots[0];
    assert_eq!(root["name"], "invoke_agent io-harness");
    assert_eq!(root["kind"], "SPAN_KIND_INTERNAL");
    assert_eq!(root["status"]["code"], "STATUS_CODE_OK");
    let a = attrs(root);
    assert_eq!(a["gen_ai.operation.name"], s("invoke_agent"));
    assert_eq!(a["gen_ai.agent.name"], s("io-harness"));
    assert_eq!(a["io_harness.run.outcome"], s("success"));
    assert_eq!(a["io_harness.run.id"], int(run_id));

    // Three steps under the root, each with its model call.
    let steps: Vec<_> = spans
        .iter()
        .filter(|s| s["parentSpanId"] == root["spanId"])
        .collect();
    let names: Vec<_> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["step 1", "step 2", "step 3"]);
    let chats = find(&spans, "chat scripted");
    assert_eq!(chats.len(), 5, "three root steps and two of the child");
    for c in &chats {
        assert_eq!(c["kind"], "SPAN_KIND_CLIENT");
        let a = attrs(c);
        assert_eq!(a["gen_ai.operation.name"], s("chat"));
        assert_eq!(a["gen_ai.provider.name"], s("scripted"));
        assert_eq!(a["gen_ai.request.model"], s("scripted"));
        assert!(
            a["gen_ai.response.finish_reasons"]["arrayValue"]["values"][0]["stringValue"]
                .is_string()
        );
        assert!(parent_name(&spans, c).starts_with("step "));
    }
    let first = attrs(chats[0]);
    assert_eq!(first["gen_ai.usage.input_tokens"], int(100));
    assert_eq!(first["gen_ai.usage.output_tokens"], int(7));
    let reasons = |c: &Value| attrs(c)["gen_ai.response.finish_reasons"].clone();
    assert_eq!(
        reasons(chats[0]),
        json!({"arrayValue": {"values": [s("tool_use")]}})
    );
    let last_root_chat = chats
        .iter()
        .find(|c| parent_name(&spans, c) == "step 3")
        .unwrap();
    assert_eq!(
        reasons(last_root_chat),
        json!({"arrayValue": {"values": [s("end_turn")]}})
    );

    // Tool calls: each `execute_tool {name}` under its step.
    let spawn = find(&spans, "execute_tool spawn_agent");
    assert_eq!(spawn.len(), 1);
    assert_eq!(parent_name(&spans, spawn[0]), "step 1");
    let a = attrs(spawn[0]);
    assert_eq!(a["gen_ai.operation.name"], s("execute_tool"));
    assert_eq!(a["gen_ai.tool.name"], s("spawn_agent"));
    assert_eq!(a["gen_ai.tool.type"], s("function"));
    assert!(
        a["gen_ai.tool.call.id"]["stringValue"]
            .as_str()
            .is_some_and(|v| !v.is_empty())
    );
    let cmd = find(&spans, "execute_tool run_command");
    assert_eq!(cmd.len(), 1);
    assert_eq!(parent_name(&spans, cmd[0]), "step 2");

    // The sub-agent's run under the call that spawned it, its own steps under it.
    let child = find(&spans, "invoke_agent writer");
    assert_eq!(child.len(), 1, "{spans:#?}");
    assert_eq!(child[0]["parentSpanId"], spawn[0]["spanId"]);
    assert_eq!(attrs(child[0])["gen_ai.agent.name"], s("writer"));
    let write = find(&spans, "execute_tool write_file");
    assert_eq!(write.len(), 1);
    let write_step = spans
        .iter()
        .find(|s| s["spanId"] == write[0]["parentSpanId"])
        .unwrap();
    assert_eq!(write_step["parentSpanId"], child[0]["spanId"]);

    // The sandbox session of `true` and the gate, with the backend that ran them.
    let sandbox = find(&spans, "sandbox true");
    assert_eq!(
        sandbox.len(),
        1,
        "{:?}",
        spans.iter().map(|s| &s["name"]).collect::<Vec<_>>()
    );
    assert_eq!(parent_name(&spans, sandbox[0]), "step 2");
    let a = attrs(sandbox[0]);
    assert_eq!(a["io_harness.sandbox.purpose"], s("tool"));
    assert_eq!(a["process.exit.code"], int(0));
    assert_eq!(a["io_harness.sandbox.network"], s("none"));
    assert!(a["io_harness.sandbox.backend"]["stringValue"].is_string());
    let gate = find(&spans, "gate test");
    assert_eq!(gate.len(), 1);
    assert_eq!(parent_name(&spans, gate[0]), "step 3");
    assert!(
        gate[0].get("status").is_none(),
        "a passing gate is no error"
    );

    // Times: every child inside its parent's start, none ending before it starts.
    for sp in &spans {
        let t = |k: &str| sp[k].as_str().unwrap().parse::<u64>().unwrap();
        assert!(t("endTimeUnixNano") >= t("startTimeUnixNano"), "{sp}");
        assert!(t("startTimeUnixNano") > 1_600_000_000_000_000_000, "{sp}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_run_gives_the_same_trace_and_the_headers_go_out_but_are_never_printed_or_stored()
{
    let dir = tempfile::tempdir().unwrap();
    let (store, run_id) = tree(dir.path()).await;
    let rx = Receiver::start(dir.path(), "rx", &[]);
    let token = "otlp-sekrit-7f3a9c21d";
    let headers = format!("authorization=Bearer%20{token},x-tenant=t1");
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url()),
        ("OTEL_EXPORTER_OTLP_HEADERS", headers),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let first = export(&store, &[&run_id.to_string(), "--json"], &env);
    let second = export(&store, &[&run_id.to_string()], &env);
    for out in [&first, &second] {
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(!text(&out.stdout).contains(token) && !text(&out.stderr).contains(token));
    }
    let doc = crate::json_schema::last(&first.stdout);
    assert_eq!(doc["object"], "otlp_export");
    assert_eq!(doc["schema_version"], 1);
    let got = rx.received();
    assert_eq!(got.len(), 2);
    assert_eq!(
        got[0]["headers"]["authorization"],
        format!("Bearer {token}")
    );
    assert_eq!(got[0]["headers"]["x-tenant"], "t1");
    let ids = |l: &Value| {
        spans_of(l)
            .iter()
            .map(|s| (s["spanId"].clone(), s["traceId"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&got[0]), ids(&got[1]), "ids derive from the record");
    assert!(doc["trace_id"].as_str().is_some_and(|t| t.len() == 32));

    // The decision before dialing is in the run's record; the token is nowhere in the
    // store's files.
    let s = Store::open(&store).unwrap();
    let net: Vec<_> = s
        .policy_events(run_id)
        .unwrap()
        .into_iter()
        .filter(|e| e.act == "net" && e.layer == "otlp")
        .collect();
    assert_eq!(net.len(), 2, "one decision per export");
    assert_eq!(net[0].target, format!("127.0.0.1:{}", rx.port));
    assert_eq!(net[0].decision, "allow");
    assert_eq!(net[0].rule, "otlp endpoint (OTEL_EXPORTER_OTLP_ENDPOINT)");
    drop(s);
    for f in std::fs::read_dir(dir.path()).unwrap() {
        let p = f.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("store.db")
        {
            let bytes = std::fs::read(&p).unwrap();
            let found = bytes.windows(token.len()).any(|w| w == token.as_bytes());
            assert!(!found, "{} holds the header value", p.display());
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refusal_or_a_redirect_fails_the_export_and_no_redirect_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let (store, run_id) = tree(dir.path()).await;
    let elsewhere = Receiver::start(dir.path(), "elsewhere", &[]);
    let redirecting = Receiver::start(dir.path(), "redir", &["--redirect", &elsewhere.url()]);
    let out = export(
        &store,
        &[&run_id.to_string(), "--endpoint", &redirecting.url()],
        &[],
    );
    assert_eq!(out.status.code(), Some(70), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("HTTP 307"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(redirecting.received().len(), 1);
    assert!(elsewhere.received().is_empty(), "the redirect was followed");

    let refusing = Receiver::start(dir.path(), "refusing", &["--status", "503"]);
    let out = export(
        &store,
        &[&run_id.to_string(), "--endpoint", &refusing.url()],
        &[],
    );
    assert_eq!(out.status.code(), Some(70));
    assert!(
        text(&out.stderr).contains("HTTP 503"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stderr).contains("refused by the test receiver"));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_an_endpoint_or_with_bad_input_nothing_is_sent_and_it_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let (store, run_id) = tree(dir.path()).await;
    let id = run_id.to_string();
    let out = export(&store, &[&id], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("OTEL_EXPORTER_OTLP_ENDPOINT"),
        "{}",
        text(&out.stderr)
    );
    let out = export(&store, &[&id, "--endpoint", "ftp://x"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let out = export(
        &store,
        &[&id, "--endpoint", "http://127.0.0.1:9"],
        &[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "sekrit-header-value-no-equals",
        )],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        !text(&out.stderr).contains("sekrit"),
        "{}",
        text(&out.stderr)
    );
    let out = export(&store, &["999", "--endpoint", "http://127.0.0.1:9"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// A scripted task file of three steps (a write, a command that takes a second —
/// time for the first step to go out while the run goes on —, then done) in `dir`.
pub(crate) fn live_task(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("t/ws")).unwrap();
    std::fs::write(
        dir.join("t/script.jsonl"),
        "{\"tool_calls\": [{\"name\": \"write_file\", \"input\": {\"path\": \"a.txt\", \"content\": \"a\"}}], \"usage\": {\"input_tokens\": 11, \"output_tokens\": 2}}\n\
         {\"tool_calls\": [{\"name\": \"run_command\", \"input\": {\"argv\": [\"sleep\", \"1\"]}}]}\n\
         {\"text\": \"done\"}\n",
    )
    .unwrap();
    let task = dir.join("t/task.toml");
    std::fs::write(
        &task,
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"a.txt\", needle = \"a\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    )
    .unwrap();
    task
}

pub(crate) fn run_cli(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_io-harness"));
    c.args(args)
        .arg("--store")
        .arg(dir.join("store.db"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
        .env_remove("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .env_remove("IO_HARNESS_FAILPOINT");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn a_live_run_sends_its_steps_as_they_commit_and_the_same_spans_as_the_export() {
    let dir = tempfile::tempdir().unwrap();
    let task = live_task(dir.path());
    let rx = Receiver::start(dir.path(), "live", &[]);
    let out = run_cli(
        dir.path(),
        &["run", task.to_str().unwrap(), "--otlp-endpoint", &rx.url()],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("warning: live OTLP"),
        "{}",
        text(&out.stderr)
    );
    let live = rx.received();
    assert!(
        live.len() >= 2,
        "steps went out as they committed: {live:?}"
    );
    let mut live_ids: Vec<String> = live
        .iter()
        .flat_map(spans_of)
        .map(|s| s["spanId"].as_str().unwrap().to_string())
        .collect();
    let n = live_ids.len();
    live_ids.sort();
    live_ids.dedup();
    assert_eq!(live_ids.len(), n, "no span was sent twice");
    // The root span went out last, once its run had finished.
    let last = spans_of(live.last().unwrap());
    assert!(last.iter().any(|s| s["name"] == "invoke_agent io-harness"));
    let store = Store::open(dir.path().join("store.db")).unwrap();
    assert_eq!(store.otlp_dropped(1).unwrap(), Some(0));

    // The export after the fact names exactly the same spans.
    let after = Receiver::start(dir.path(), "after", &[]);
    let out = export(
        &dir.path().join("store.db"),
        &["1", "--endpoint", &after.url()],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut after_ids: Vec<String> = spans_of(&after.received()[0])
        .iter()
        .map(|s| s["spanId"].as_str().unwrap().to_string())
        .collect();
    after_ids.sort();
    assert_eq!(after_ids, live_ids);
}

#[test]
fn an_unreachable_collector_neither_fails_nor_stops_the_run_and_the_drops_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let task = live_task(dir.path());
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let out = run_cli(
        dir.path(),
        &["run", task.to_str().unwrap()],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &url)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("warning: live OTLP export of run 1"),
        "{}",
        text(&out.stderr)
    );
    let store = Store::open(dir.path().join("store.db")).unwrap();
    let dropped = store.otlp_dropped(1).unwrap();
    assert!(dropped.is_some_and(|n| n >= 1), "{dropped:?}");
    assert_eq!(
        store.run(1).unwrap().unwrap().outcome.as_deref(),
        Some("success")
    );

    // Without an endpoint, nothing is exported: NULL, not 0.
    let other = tempfile::tempdir().unwrap();
    let task = live_task(other.path());
    let out = run_cli(other.path(), &["run", task.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let store = Store::open(other.path().join("store.db")).unwrap();
    assert_eq!(store.otlp_dropped(1).unwrap(), None);
}
