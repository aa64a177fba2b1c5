//! The trace of a run over several sessions, of every run kind, and the content opt-in,
//! against the real OTLP/HTTP receiver (`otel::Receiver`): a resumed run continues its
//! trace with one `invoke_agent` span per session and sends nothing twice; a session
//! killed before its end is sent by the resume as `interrupted`; each outcome sets the
//! session span's status; prompt and completion content goes out only when asked for.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use crate::otel::{
    Receiver, attrs, export, find, int, live_task, parent_name, run_cli, s, spans_of, text,
};

fn ids(spans: &[Value]) -> Vec<String> {
    spans
        .iter()
        .map(|s| s["spanId"].as_str().unwrap().to_string())
        .collect()
}

/// Every span a receiver got, in the order it got them.
fn all(rx: &Receiver) -> Vec<Value> {
    rx.received().iter().flat_map(spans_of).collect()
}

fn after_the_fact(dir: &Path, run: &str, extra: &[&str]) -> Vec<Value> {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let rx = Receiver::start(dir, &format!("after-{run}-{n}"), &[]);
    let mut args = vec![run, "--endpoint"];
    let url = rx.url();
    args.push(&url);
    args.extend_from_slice(extra);
    let out = export(&dir.join("store.db"), &args, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    all(&rx)
}

fn approval_task(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("t/ws")).unwrap();
    std::fs::write(
        dir.join("t/script.jsonl"),
        "{\"tool_calls\": [{\"name\": \"write_file\", \"input\": {\"path\": \"b.txt\", \"content\": \"b\\n\"}}, {\"name\": \"run_command\", \"input\": {\"argv\": [\"sh\", \"-c\", \"echo approved > c.txt\"]}}]}\n\
         {\"text\": \"done\"}\n",
    )
    .unwrap();
    let task = dir.join("t/task.toml");
    // On the floor, a command needs a decision nobody is there to give: exit 5.
    std::fs::write(
        &task,
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"c.txt\", needle = \"approved\" }\n[sandbox]\nrequire = \"portable-floor\"\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    )
    .unwrap();
    task
}

#[test]
fn a_resumed_run_continues_its_trace_with_one_span_per_session_and_sends_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let task = approval_task(dir.path());
    let rx = Receiver::start(dir.path(), "live", &[]);
    let url = rx.url();
    let out = run_cli(
        dir.path(),
        &[
            "run",
            task.to_str().unwrap(),
            "--otlp-endpoint",
            &url,
            "--json",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    let last: Value = crate::json_schema::last(&out.stdout);
    let request = last["result"]["outcome"]["request_id"]
        .as_str()
        .unwrap()
        .to_string();
    let first = all(&rx);
    let sessions = find(&first, "invoke_agent io-harness");
    assert_eq!(
        sessions.len(),
        1,
        "the first session's span went out at its end"
    );
    let a = attrs(sessions[0]);
    assert_eq!(a["io_harness.session"], int(0));
    assert_eq!(a["io_harness.session.ended"], s("awaiting_approval"));
    assert!(
        sessions[0].get("status").is_none(),
        "awaiting approval is no error: {}",
        sessions[0]
    );

    let out = run_cli(dir.path(), &["approve", "1", &request, "allow"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = run_cli(dir.path(), &["resume", "1", "--otlp-endpoint", &url], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let live = all(&rx);
    let live_ids = ids(&live);
    let unique: HashSet<_> = live_ids.iter().collect();
    assert_eq!(unique.len(), live_ids.len(), "no span was sent twice");
    assert!(live.iter().all(|s| s["traceId"] == live[0]["traceId"]));
    let sessions = find(&live, "invoke_agent io-harness");
    assert_eq!(sessions.len(), 2, "one span per session");
    let resumed = sessions
        .iter()
        .find(|s| attrs(s)["io_harness.session"] == int(1))
        .unwrap();
    assert_eq!(
        resumed["parentSpanId"], sessions[0]["spanId"],
        "the resume's span sits under the run's first"
    );
    assert_eq!(resumed["status"]["code"], "STATUS_CODE_OK");
    assert_eq!(attrs(resumed)["io_harness.run.outcome"], s("success"));
    // Each committed step once, under the session that committed it.
    let steps: Vec<_> = live
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("step "))
        .collect();
    let mut names: Vec<_> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["step 1", "step 2"], "{names:?}");
    for st in &steps {
        assert_eq!(parent_name(&live, st), "invoke_agent io-harness");
    }

    // After the fact: exactly the spans the two sessions sent live.
    let mut after = ids(&after_the_fact(dir.path(), "1", &[]));
    let mut live_ids = live_ids;
    after.sort();
    live_ids.sort();
    assert_eq!(after, live_ids);
}

#[test]
fn a_session_killed_before_its_end_is_sent_by_the_resume_as_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let task = live_task(dir.path());
    let rx = Receiver::start(dir.path(), "live", &[]);
    let url = rx.url();
    let out = run_cli(
        dir.path(),
        &["run", task.to_str().unwrap(), "--otlp-endpoint", &url],
        &[("IO_HARNESS_FAILPOINT", "step.after_commit:2")],
    );
    assert_ne!(out.status.code(), Some(0), "the failpoint killed the run");
    let killed = all(&rx);
    assert!(
        find(&killed, "invoke_agent io-harness").is_empty(),
        "a killed session never sent its span"
    );
    assert!(
        !find(&killed, "step 1").is_empty(),
        "step 1 went out as it committed (during step 2's one-second command)"
    );

    let out = run_cli(dir.path(), &["resume", "1", "--otlp-endpoint", &url], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let live = all(&rx);
    let live_ids = ids(&live);
    let unique: HashSet<&str> = live_ids.iter().map(String::as_str).collect();
    assert_eq!(unique.len(), live_ids.len(), "no span was sent twice");
    let sessions = find(&live, "invoke_agent io-harness");
    assert_eq!(sessions.len(), 2, "{sessions:#?}");
    let interrupted = sessions
        .iter()
        .find(|s| attrs(s)["io_harness.session"] == int(0))
        .unwrap();
    assert_eq!(
        attrs(interrupted)["io_harness.session.ended"],
        s("interrupted")
    );
    assert_eq!(interrupted["status"]["code"], "STATUS_CODE_ERROR");
    assert!(
        !attrs(interrupted).contains_key("io_harness.run.outcome"),
        "an interrupted session ended no run"
    );

    // Everything sent live is in the export after the fact; what it has beyond is
    // only what the killed process had not sent yet: step 2 and what hangs under it.
    let after = after_the_fact(dir.path(), "1", &[]);
    let after_ids: HashSet<String> = ids(&after).into_iter().collect();
    assert!(live_ids.iter().all(|i| after_ids.contains(i)));
    // Adversary B4: a parent never ends before its children (a resume's session,
    // which follows its first, aside).
    let end = |s: &Value| {
        s["endTimeUnixNano"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    for sp in &after {
        let resumed = attrs(sp)
            .get("io_harness.session")
            .is_some_and(|v| *v != int(0));
        if let Some(p) = after.iter().find(|p| p["spanId"] == sp["parentSpanId"])
            && !resumed
        {
            assert!(
                end(p) >= end(sp),
                "{} ends after its parent {}",
                sp["name"],
                p["name"]
            );
        }
    }
    let step2 = find(&after, "step 2")[0]["spanId"].clone();
    for sp in after
        .iter()
        .filter(|s| !unique.contains(&s["spanId"].as_str().unwrap().to_string().as_str()))
    {
        let under_step2 = sp["spanId"] == step2 || sp["parentSpanId"] == step2;
        assert!(under_step2, "only step 2's spans may be missing live: {sp}");
    }
}

/// Prompt and completion content: absent by default, present with `--otlp-content` or
/// the conventions' environment variable, in the conventions' message schema.
#[test]
fn content_goes_out_only_on_the_operators_opt_in() {
    let dir = tempfile::tempdir().unwrap();
    let task = live_task(dir.path());
    let out = run_cli(dir.path(), &["run", task.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let plain = after_the_fact(dir.path(), "1", &[]);
    for sp in &plain {
        let a = attrs(sp);
        assert!(
            !a.contains_key("gen_ai.input.messages") && !a.contains_key("gen_ai.output.messages"),
            "content without an opt-in: {sp}"
        );
    }

    let with = after_the_fact(dir.path(), "1", &["--otlp-content"]);
    let chats = find(&with, "chat scripted");
    assert_eq!(chats.len(), 3);
    let msgs = |c: &Value, k: &str| -> Value {
        serde_json::from_str(attrs(c)[k]["stringValue"].as_str().unwrap()).unwrap()
    };
    let by_step = |n: &str| *chats.iter().find(|c| parent_name(&with, c) == n).unwrap();
    // Step 1 answers the goal; its reply is the write_file call.
    let input = msgs(by_step("step 1"), "gen_ai.input.messages");
    assert_eq!(input[0]["role"], "user");
    assert_eq!(input[0]["parts"][0]["type"], "text");
    let output = msgs(by_step("step 1"), "gen_ai.output.messages");
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(output[0]["parts"][0]["type"], "tool_call");
    assert_eq!(output[0]["parts"][0]["name"], "write_file");
    assert_eq!(output[0]["finish_reason"], "tool_use");
    // Step 2 is given step 1's tool result, as a `tool` message.
    let input = msgs(by_step("step 2"), "gen_ai.input.messages");
    assert_eq!(input[0]["role"], "tool", "{input}");
    assert_eq!(input[0]["parts"][0]["type"], "tool_call_response");
    assert_eq!(
        attrs(by_step("step 2"))["io_harness.input.messages.scope"],
        s("new")
    );
    let output = msgs(by_step("step 3"), "gen_ai.output.messages");
    assert_eq!(output[0]["parts"][0]["content"], "done");

    // The environment variable of the GenAI instrumentations opts in too.
    let rx = Receiver::start(dir.path(), "env", &[]);
    let out = export(
        &dir.path().join("store.db"),
        &["1", "--endpoint", &rx.url()],
        &[("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let env = all(&rx);
    assert!(
        find(&env, "chat scripted")
            .iter()
            .all(|c| attrs(c).contains_key("gen_ai.output.messages"))
    );
}

fn task(dir: &Path, name: &str, script: &[&str], verify: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join(name).join("ws")).unwrap();
    std::fs::write(
        dir.join(name).join("script.jsonl"),
        script.join("\n") + "\n",
    )
    .unwrap();
    let task = dir.join(name).join("task.toml");
    std::fs::write(
        &task,
        format!("goal = \"{name}\"\nroot = \"ws\"\n{verify}\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n"),
    )
    .unwrap();
    task
}

/// Each run kind's session span carries its outcome as the span status: a failed
/// verification and an escalation are errors naming the outcome, a cancelled run too
/// (its session ended it), and the run's gate and steps are there.
#[test]
fn every_run_kind_is_exported_with_its_outcome_as_the_session_status() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let failed = task(
        d,
        "failed",
        &[
            r#"{"tool_calls": [{"name": "read_file", "input": {"path": ".env"}}, {"name": "write_file", "input": {"path": "a.txt", "content": "a"}}]}"#,
            r#"{"text": "done"}"#,
        ],
        "[verify]\nfile_contains = { file = \"a.txt\", needle = \"zzz\" }\nmax_attempts = 1",
    );
    let escalated = task(
        d,
        "escalated",
        &[r#"{"tool_calls": [{"name": "list_dir", "input": {"path": "."}}]}"#],
        "[verify]\nfile_contains = { file = \"a.txt\", needle = \"a\" }",
    );
    for (t, code) in [(&failed, 1), (&escalated, 4)] {
        let out = run_cli(d, &["run", t.to_str().unwrap()], &[]);
        assert_eq!(out.status.code(), Some(code), "{}", text(&out.stderr));
    }
    // Cancelled: SIGINT while its command sleeps.
    let cancelled = task(
        d,
        "cancelled",
        &[r#"{"tool_calls": [{"name": "run_command", "input": {"argv": ["sleep", "30"]}}]}"#],
        "[verify]\nfile_contains = { file = \"a.txt\", needle = \"a\" }",
    );
    let mut c = crate::cli_support::bin();
    c.args(["run", cancelled.to_str().unwrap(), "--json", "--store"])
        .arg(d.join("store.db"))
        .env("XDG_CACHE_HOME", d.join("cache"))
        .env("XDG_DATA_HOME", d.join("data"))
        .env("XDG_CONFIG_HOME", d.join("config"))
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stderr(std::process::Stdio::null());
    let (status, rest) = crate::cli_support::interrupt_at_first_tool(&mut c);
    assert_eq!(status.code(), Some(130), "{rest}");

    for (run, outcome) in [
        ("1", "verification_failed"),
        ("2", "escalated"),
        ("3", "cancelled"),
    ] {
        let spans = after_the_fact(d, run, &[]);
        let roots: Vec<_> = spans
            .iter()
            .filter(|s| s.get("parentSpanId").is_none())
            .collect();
        assert_eq!(roots.len(), 1, "run {run}: {spans:#?}");
        let a = attrs(roots[0]);
        assert_eq!(a["io_harness.run.outcome"], s(outcome), "run {run}");
        assert_eq!(a["io_harness.session.ended"], s(outcome), "run {run}");
        assert_eq!(roots[0]["status"]["code"], "STATUS_CODE_ERROR", "run {run}");
        assert_eq!(roots[0]["status"]["message"], outcome, "run {run}");
        // A cancelled run's step was never committed: the trace shows what the record
        // holds, its session alone.
        let chats = find(&spans, "chat scripted").len();
        assert_eq!(
            chats > 0,
            outcome != "cancelled",
            "run {run}: {chats} chats"
        );
    }
    // The escalation that ended run 2 (its step never committed) is an event on its
    // session's span; the denied `.env` read of run 1 one on its step's span, what it
    // was about only with the content opt-in.
    let spans = after_the_fact(d, "2", &[]);
    let root = spans
        .iter()
        .find(|s| s.get("parentSpanId").is_none())
        .unwrap();
    let events = root["events"]
        .as_array()
        .expect("the escalation is an event");
    let last = events.last().unwrap();
    assert_eq!(last["name"], "io_harness.provider.attempt");
    assert_eq!(attrs(last)["io_harness.next"], s("escalate"), "{last}");
    assert!(!attrs(last).contains_key("io_harness.message"));
    for (extra, target) in [(&[][..], false), (&["--otlp-content"][..], true)] {
        let spans = after_the_fact(d, "1", extra);
        let step = find(&spans, "step 1")[0];
        let denied: Vec<_> = step["events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["name"] == "io_harness.policy.decision")
            .collect();
        assert_eq!(denied.len(), 1, "{step}");
        let a = attrs(denied[0]);
        assert_eq!(a["io_harness.policy.decision"], s("deny"));
        assert_eq!(a["io_harness.policy.act"], s("read"));
        assert_eq!(a.contains_key("io_harness.policy.target"), target, "{a:?}");
    }
}
