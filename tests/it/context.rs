//! Context assembly end to end: real runs, real tools and store, the requests checked
//! as recorded. The model is scripted, or the real Anthropic client against a local
//! server speaking its wire format (for context-overflow errors and reported usage).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::future::BoxFuture;
use io_harness::context::ContextSettings;
use io_harness::context::tokens::{self, Family};
use io_harness::policy::{Act, Action, Decision, PolicyDecision, PolicyGate};
use io_harness::provider::{
    Anthropic, Completion, CompletionRequest, ContentBlock, Provider, ProviderError,
    ProviderIdentity, Role, ScriptTurn, Scripted,
};
use io_harness::run::{Flow, RunEvent, RunOptions};
use io_harness::store::ContextEvent;
use io_harness::{RunOutcome, Store, TaskContract, Verification, run, run_with};
use serde_json::{Value, json};

use crate::providers::fake_server::{FakeServer, Reply, whole};
use crate::providers::{anthropic_stream, config, message_start};

#[path = "../support/context_trajectory.rs"]
mod trajectory;

/// The budget of the trajectory run.
const BUDGET: u64 = 12_000;

/// The requests a run sent, in step order, as recorded with its steps.
fn step_requests(store: &Store, run_id: i64) -> Vec<CompletionRequest> {
    store
        .steps(run_id)
        .unwrap()
        .iter()
        .map(|s| {
            let body = store
                .blob(s.request_hash.as_deref().unwrap())
                .unwrap()
                .unwrap();
            serde_json::from_slice(&body).unwrap()
        })
        .collect()
}

/// (path, content) of every read_file result in `r`.
fn reads(r: &CompletionRequest) -> Vec<(String, String)> {
    let mut paths = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for m in &r.messages {
        for b in &m.content {
            match b {
                ContentBlock::ToolUse { id, name, input } if name == "read_file" => {
                    paths.insert(id.clone(), input["path"].as_str().unwrap().to_string());
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } => {
                    if let Some(p) = paths.get(tool_use_id) {
                        out.push((p.clone(), content.clone()));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Stale reads sent in `requests`: (step, path, version shown, version on disk).
fn stale_reads(
    requests: &[CompletionRequest],
    versions: &[std::collections::BTreeMap<String, u32>],
) -> Vec<(usize, String, u32, u32)> {
    let mut stale = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        for (path, content) in reads(r) {
            let now = versions[i][&path];
            if let Some(shown) = trajectory::version_shown(&content)
                && shown != now
            {
                stale.push((i + 1, path, shown, now));
            }
        }
    }
    stale
}

async fn trajectory_run(settings: ContextSettings) -> (Store, io_harness::RunResult) {
    let dir = tempfile::tempdir().unwrap();
    trajectory::workspace(dir.path());
    let (turns, _) = trajectory::script();
    let mut contract = TaskContract::workspace(
        "read every module and bump the versions",
        dir.path(),
        Verification::command(["grep", "-q", "// version: 2", "src/f0.rs"]),
    )
    .max_steps(trajectory::STEPS + 5);
    contract.context = settings;
    let store = Store::memory().unwrap();
    let r = run(&contract, &Scripted::new(turns), &store).await.unwrap();
    (store, r)
}

#[tokio::test]
async fn the_trajectory_stays_under_budget_sends_no_stale_read_and_costs_a_third() {
    let (_, versions) = trajectory::script();
    let (store, r) = trajectory_run(ContextSettings {
        max_tokens: Some(BUDGET),
        assemble: true,
        ..ContextSettings::default()
    })
    .await;
    assert_eq!(r.outcome, RunOutcome::Success);
    assert_eq!(r.steps, trajectory::STEPS + 1);
    let sent = step_requests(&store, r.run_id);
    assert_eq!(sent.len(), 61);
    assert_eq!(stale_reads(&sent, &versions), vec![]);

    let events = store.context_events(r.run_id).unwrap();
    let assembled: Vec<&ContextEvent> = events.iter().filter(|e| e.kind == "assembled").collect();
    assert_eq!(assembled.len(), 61);
    for e in &assembled {
        assert_eq!(e.budget, Some(BUDGET));
        assert!(
            e.tokens_after.unwrap() <= BUDGET,
            "step {} sent {:?} tokens",
            e.step,
            e.tokens_after
        );
    }
    // The request on record for each step is the one assembled for it.
    for (e, body) in assembled.iter().zip(&sent) {
        let stored: CompletionRequest = serde_json::from_slice(
            &store
                .blob(e.request_hash.as_deref().unwrap())
                .unwrap()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(&stored, body, "step {}", e.step);
    }
    for kind in ["reread", "dropped"] {
        assert!(
            events.iter().any(|e| e.kind == kind),
            "no {kind} event in {:?}",
            events.iter().map(|e| &e.kind).collect::<Vec<_>>()
        );
    }
    // Batches, not every step: most requests extend the one before unchanged.
    let batches = assembled
        .iter()
        .filter(|e| {
            e.detail
                .as_deref()
                .unwrap_or("")
                .contains("\"batched\":true")
        })
        .count();
    assert!(
        (1..=30).contains(&batches),
        "{batches} batches in {} requests",
        assembled.len()
    );
    // Goal and verification texts are never touched.
    for r in &sent {
        let first = r.messages[0].text();
        assert!(
            first
                .lines()
                .nth(1)
                .unwrap()
                .starts_with("Goal: read every module"),
            "{first}"
        );
    }

    // The baseline: the same run sending the full history.
    let (naive_store, naive) = trajectory_run(ContextSettings {
        max_tokens: None,
        assemble: false,
        ..ContextSettings::default()
    })
    .await;
    assert_eq!(naive.outcome, r.outcome, "the same outcome");
    let naive_sent = step_requests(&naive_store, naive.run_id);
    assert!(
        !stale_reads(&naive_sent, &versions).is_empty(),
        "the check can fail: full history does send stale reads"
    );
    let ours = trajectory::figures(&sent);
    let full = trajectory::figures(&naive_sent);
    let ratio = full.raw as f64 / ours.raw as f64;
    if std::env::var("CONTEXT_DEBUG").is_ok() {
        for (i, b) in trajectory::breaks(&sent).iter().enumerate() {
            eprintln!(
                "step {}: {} tokens, {} uncached; first change: {}",
                i + 1,
                b.0,
                b.1,
                b.2
            );
        }
    }
    eprintln!(
        "budget {BUDGET}: raw {} vs {} ({ratio:.2}x); Anthropic-billed {:.0} vs {:.0}; OpenAI-billed {:.0} vs {:.0}; {batches} batches",
        ours.raw,
        full.raw,
        ours.anthropic_billed,
        full.anthropic_billed,
        ours.openai_billed,
        full.openai_billed
    );
    assert!(
        ratio >= 3.0,
        "raw input tokens only {ratio:.2}× fewer ({} vs {})",
        ours.raw,
        full.raw
    );
}

/// A tool-use turn in Anthropic's wire format, with its reported usage.
fn anthropic_tool(id: &str, name: &str, input: Value, usage: Value) -> String {
    anthropic_stream(&[
        message_start("claude-sonnet-4-5-20250929", usage),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 9}}),
        json!({"type": "message_stop"}),
    ])
}

fn anthropic_done() -> String {
    crate::providers::anthropic_text("Done.")
}

const TOO_LONG: &str = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#;

fn big_file(lines: usize, tag: &str) -> String {
    (1..=lines)
        .map(|i| format!("{tag} line {i}: some words to make the line a realistic length\n"))
        .collect()
}

async fn overflow_run(replies: Vec<Reply>) -> (FakeServer, Store, io_harness::RunResult) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.txt"), big_file(300, "big")).unwrap();
    std::fs::write(dir.path().join("done.txt"), "done\n").unwrap();
    let server = FakeServer::start(replies).await;
    let provider = Anthropic::new(config(&server.url(), "claude-sonnet-4-5")).unwrap();
    // No sub-agents: their tool's schema would change the sizes these tests are cut to.
    let contract = TaskContract::workspace(
        "read big.txt",
        dir.path(),
        Verification::file_contains("done.txt", "done"),
    )
    .max_agent_depth(0);
    let store = Store::memory().unwrap();
    let r = run(&contract, &provider, &store).await.unwrap();
    (server, store, r)
}

fn read_big(id: &str) -> Reply {
    Reply::sse(whole(&anthropic_tool(
        id,
        "read_file",
        json!({"path": "big.txt"}),
        json!({"input_tokens": 120, "cache_read_input_tokens": 2000, "cache_creation_input_tokens": 300, "output_tokens": 1}),
    )))
}

#[tokio::test]
async fn an_overflow_compacts_harder_and_the_retry_succeeds() {
    let (server, store, r) = overflow_run(vec![
        read_big("toolu_1"),
        read_big("toolu_2"),
        Reply::json(400, TOO_LONG),
        Reply::sse(whole(&anthropic_done())),
    ])
    .await;
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    let sent = server.requests();
    assert_eq!(sent.len(), 4);
    let (overflowed, retried) = (sent[2].json(), sent[3].json());
    assert!(
        retried.to_string().len() * 10 < overflowed.to_string().len() * 7,
        "the retry is compacted"
    );
    assert!(
        retried
            .to_string()
            .contains("superseded by the read at step 2")
    );
    assert!(
        store
            .context_events(r.run_id)
            .unwrap()
            .iter()
            .any(|e| e.kind == "stubbed" && e.obs_step == Some(1) && e.step == 3)
    );
    // The stable prefix keeps its cache breakpoints through compaction.
    assert_eq!(retried["system"], overflowed["system"]);
    assert_eq!(retried["messages"][0], overflowed["messages"][0]);
    assert_eq!(
        retried["messages"][0]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );

    let events = store.context_events(r.run_id).unwrap();
    let kinds: Vec<(u32, &str)> = events
        .iter()
        .filter(|e| matches!(e.kind.as_str(), "assembled" | "overflow_retry"))
        .map(|e| (e.step, e.kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (1, "assembled"),
            (2, "assembled"),
            (3, "assembled"),
            (3, "overflow_retry"),
            (3, "assembled")
        ]
    );
    // Reported usage sits beside the estimate, cache reads and writes included.
    let first = &events[0];
    assert_eq!(first.reported_input_tokens, Some(120 + 2000 + 300));
    assert_eq!(first.cached_input_tokens, Some(2000));
    assert_eq!(first.cache_write_tokens, Some(300));
    assert!(first.tokens_after.unwrap() > 0);
    let failed = events
        .iter()
        .find(|e| e.step == 3 && e.kind == "assembled")
        .unwrap();
    assert_eq!(
        failed.reported_input_tokens, None,
        "the failed call reported nothing"
    );
    let last = events.iter().rev().find(|e| e.kind == "assembled").unwrap();
    let state: Value = serde_json::from_str(last.state_json.as_deref().unwrap()).unwrap();
    assert!(
        state["cap"].as_u64().is_some(),
        "the overflow leaves a learnt cap: {state}"
    );
    // The step's stored request is the compacted one actually sent.
    let step3 = &store.steps(r.run_id).unwrap()[2];
    let body = store
        .blob(step3.request_hash.as_deref().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap(), retried);
}

#[tokio::test]
async fn a_second_overflow_ends_the_run_context_overflow() {
    let (server, store, r) = overflow_run(vec![
        read_big("toolu_1"),
        Reply::json(400, TOO_LONG),
        Reply::json(400, TOO_LONG),
    ])
    .await;
    assert_eq!(r.outcome, RunOutcome::ContextOverflow);
    assert_eq!(
        server.requests().len(),
        3,
        "compacted and retried once, no more"
    );
    assert_eq!(r.steps, 1);
    let events = store.context_events(r.run_id).unwrap();
    assert_eq!(
        events.iter().filter(|e| e.kind == "overflow_retry").count(),
        1
    );
    // Both requests of the failed step are on record, the last one readable by step.
    let last = events
        .iter()
        .rev()
        .find(|e| e.step == 2 && e.kind == "assembled")
        .unwrap();
    assert!(
        store
            .blob(last.request_hash.as_deref().unwrap())
            .unwrap()
            .is_some()
    );
}

/// Allows everything, except reading `notes.txt` once step 1 is committed.
struct ClosingGate(Arc<AtomicBool>);

impl PolicyGate for ClosingGate {
    fn decide(&self, action: &Action) -> PolicyDecision {
        let deny = action.act == Act::Read
            && action.target == "notes.txt"
            && self.0.load(Ordering::SeqCst);
        PolicyDecision {
            action: action.clone(),
            decision: if deny {
                Decision::Deny
            } else {
                Decision::Allow
            },
            rule: if deny {
                "notes.txt".into()
            } else {
                "test".into()
            },
            layer: "task".into(),
        }
    }
}

/// A read, then a command that changes the file while the policy closes on it.
async fn refused_reread_run() -> (Store, io_harness::RunResult) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "public v1\n").unwrap();
    let closed = Arc::new(AtomicBool::new(false));
    let flag = closed.clone();
    let observer = move |e: &RunEvent| {
        // Closed after the command: a file the policy denies is masked from
        // commands too, so closing it before would keep the command from writing it.
        if let RunEvent::StepCommitted { step: 2, .. } = e {
            flag.store(true, Ordering::SeqCst);
        }
        Flow::Continue
    };
    let opts = RunOptions {
        policy: Some(Arc::new(ClosingGate(closed))),
        ..RunOptions::default()
    }
    .observer(Arc::new(observer));
    let contract = TaskContract::workspace(
        "look at the notes",
        dir.path(),
        Verification::file_contains("notes.txt", "SECRET"),
    );
    let script = Scripted::new(vec![
        ScriptTurn::tool("read_file", json!({"path": "notes.txt"})),
        // A command changes the file behind the read's back.
        ScriptTurn::tool(
            "run_command",
            json!({"argv": ["sh", "-c", "echo 'SECRET v2' > notes.txt"]}),
        ),
        ScriptTurn::text("done"),
    ]);
    let store = Store::memory().unwrap();
    let r = run_with(&contract, &script, &store, opts).await.unwrap();
    (store, r)
}

#[tokio::test]
async fn a_stale_read_the_policy_now_refuses_is_stubbed_not_re_read() {
    let (store, r) = refused_reread_run().await;
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    let sent = step_requests(&store, r.run_id);
    let shown = reads(&sent[2]);
    assert_eq!(shown.len(), 1);
    let shown = &shown[0].1;
    assert!(!shown.contains("SECRET v2"), "the refused file was re-read");
    assert!(!shown.contains("public v1"), "the stale content was sent");
    assert!(
        shown.contains("reading it again was not allowed"),
        "{shown}"
    );
    let events = store.context_events(r.run_id).unwrap();
    let refused = events.iter().find(|e| e.kind == "reread_refused").unwrap();
    assert_eq!(
        (refused.step, refused.obs_step, refused.target.as_deref()),
        (3, Some(1), Some("notes.txt"))
    );
    let denied = store
        .policy_events(r.run_id)
        .unwrap()
        .into_iter()
        .find(|p| p.decision == "deny")
        .unwrap();
    assert_eq!(
        (denied.step, denied.act.as_str(), denied.target.as_str()),
        (3, "read", "notes.txt")
    );
}

#[tokio::test]
async fn a_changed_file_is_re_read_through_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha v1\n").unwrap();
    let contract = TaskContract::workspace(
        "edit a",
        dir.path(),
        Verification::file_contains("a.txt", "v2"),
    );
    let script = Scripted::new(vec![
        ScriptTurn::tool("read_file", json!({"path": "a.txt"})),
        ScriptTurn::tool(
            "edit_file",
            json!({"path": "a.txt", "old": "v1", "new": "v2"}),
        ),
        ScriptTurn::text("done"),
    ]);
    let store = Store::memory().unwrap();
    let r = run(&contract, &script, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    let sent = step_requests(&store, r.run_id);
    let reads3 = reads(&sent[2]);
    assert_eq!(reads3.len(), 1);
    assert!(
        reads3[0]
            .1
            .starts_with("[a.txt changed after this read at step 1; its current content:]")
    );
    assert!(reads3[0].1.contains("alpha v2") && !reads3[0].1.contains("alpha v1"));
    assert!(
        reads(&sent[1])[0].1.contains("alpha v1"),
        "unchanged at step 2: sent as read"
    );
    let re = store
        .policy_events(r.run_id)
        .unwrap()
        .into_iter()
        .filter(|p| p.act == "read" && p.target == "a.txt")
        .map(|p| p.step)
        .collect::<Vec<_>>();
    // `edit_file` reads the file it edits, so step 2 is a read decision too (issue
    // 16's adversary, ED1).
    assert_eq!(
        re,
        [1, 2, 3],
        "the read, the edit's read, then the re-read, each decided by the policy"
    );
}

#[tokio::test]
async fn a_huge_observation_is_cut_to_head_and_tail_with_the_cut_stated() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("log.txt"), big_file(600, "log")).unwrap();
    let contract = TaskContract::workspace(
        "read the log",
        dir.path(),
        Verification::file_contains("log.txt", "log line 1:"),
    )
    .context_max_tokens(8_000);
    let script = Scripted::new(vec![
        ScriptTurn::tool("read_file", json!({"path": "log.txt"})),
        ScriptTurn::text("done"),
    ]);
    let store = Store::memory().unwrap();
    let r = run(&contract, &script, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    let sent = step_requests(&store, r.run_id);
    let shown = &reads(&sent[1])[0].1;
    assert!(shown.contains("log line 1: "), "head kept");
    assert!(
        shown.contains("[lines 1-"),
        "the tool's own tail note kept: {}",
        &shown[shown.len() - 200..]
    );
    assert!(shown.contains("lines (about "), "the cut is stated");
    assert!(shown.contains("cut here to fit the context budget"));
    let e = store
        .context_events(r.run_id)
        .unwrap()
        .into_iter()
        .find(|e| e.kind == "trimmed")
        .unwrap();
    assert!(
        e.tokens_after.unwrap() < e.tokens_before.unwrap() / 2,
        "{e:?}"
    );
    assert!(
        sent[1]
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count()
            == 1
    );
}

/// Every documented context event kind is produced by a real run: this test runs the
/// trajectory, an overflow and a refused re-read, and reads the kinds from their stores.
#[tokio::test]
async fn every_context_event_kind_is_produced_by_a_test() {
    let documented = include_str!("../../src/store/context_events.rs");
    let mut seen = std::collections::BTreeSet::new();
    let mut collect = |store: &Store, run_id: i64| {
        for e in store.context_events(run_id).unwrap() {
            assert!(
                ContextEvent::KINDS.contains(&e.kind.as_str()),
                "undocumented kind {:?}",
                e.kind
            );
            seen.insert(e.kind);
        }
    };
    let (store, r) = trajectory_run(ContextSettings {
        max_tokens: Some(BUDGET),
        assemble: true,
        ..ContextSettings::default()
    })
    .await;
    collect(&store, r.run_id);
    let (_server, store, r) = overflow_run(vec![
        read_big("toolu_1"),
        read_big("toolu_2"),
        Reply::json(400, TOO_LONG),
        Reply::sse(whole(&anthropic_done())),
    ])
    .await;
    collect(&store, r.run_id);
    let (store, r) = refused_reread_run().await;
    collect(&store, r.run_id);
    for kind in ContextEvent::KINDS {
        assert!(
            documented.contains(&format!("`{kind}`")),
            "{kind} undocumented"
        );
        assert!(seen.contains(*kind), "no run produced {kind}: {seen:?}");
    }
}

/// The trajectory's scripted turns under the identity of OpenAI's `gpt-4o`, so the
/// assembler counts with the exact `o200k` encoder instead of the estimate.
struct NamedGpt4o(Scripted);

impl Provider for NamedGpt4o {
    fn identity(&self) -> ProviderIdentity {
        ProviderIdentity {
            kind: "openai".into(),
            model: "gpt-4o".into(),
            base_url: None,
        }
    }

    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        self.0.complete(request)
    }
}

/// The trajectory's provider: plain scripted, or named `gpt-4o`.
fn trajectory_provider(gpt4o: bool) -> Box<dyn Provider> {
    let (turns, _) = trajectory::script();
    if gpt4o {
        Box::new(NamedGpt4o(Scripted::new(turns)))
    } else {
        Box::new(Scripted::new(turns))
    }
}

/// Runs the trajectory under the budget with `provider`, cancelled after step
/// `cancel_at` and resumed when given; the store and the run's id.
async fn budget_run(provider: &dyn Provider, cancel_at: Option<u32>) -> (Store, i64) {
    let dir = tempfile::tempdir().unwrap();
    trajectory::workspace(dir.path());
    let mut contract = TaskContract::workspace(
        "read every module and bump the versions",
        dir.path(),
        Verification::command(["grep", "-q", "// version: 2", "src/f0.rs"]),
    )
    .max_steps(trajectory::STEPS + 5);
    contract.context = ContextSettings {
        max_tokens: Some(BUDGET),
        assemble: true,
        ..ContextSettings::default()
    };
    let store = Store::memory().unwrap();
    let Some(at) = cancel_at else {
        let r = run(&contract, provider, &store).await.unwrap();
        assert_eq!(r.outcome, RunOutcome::Success);
        return (store, r.run_id);
    };
    let cancel = move |e: &RunEvent| match e {
        RunEvent::StepCommitted { step, .. } if *step == at => Flow::Cancel,
        _ => Flow::Continue,
    };
    let first = run_with(
        &contract,
        provider,
        &store,
        RunOptions::default().observer(Arc::new(cancel)),
    )
    .await
    .unwrap();
    assert_eq!((first.outcome, first.steps), (RunOutcome::Cancelled, at));
    let resumed = io_harness::resume(&store, first.run_id, provider)
        .await
        .unwrap();
    assert_eq!(resumed.outcome, RunOutcome::Success);
    (store, first.run_id)
}

/// A run interrupted mid-trajectory and resumed sends, request for request, the bytes
/// an uninterrupted run sends: the assembler's state comes back from `context_events`.
/// The same with the exact `o200k` counts of an OpenAI model.
#[tokio::test]
async fn a_resumed_run_assembles_the_same_requests_as_an_uninterrupted_one() {
    for gpt4o in [false, true] {
        let provider = trajectory_provider(gpt4o);
        let (whole_store, whole_id) = budget_run(&*provider, None).await;
        let uninterrupted = step_requests(&whole_store, whole_id);
        let provider = trajectory_provider(gpt4o);
        let (store, id) = budget_run(&*provider, Some(29)).await;
        let sent = step_requests(&store, id);
        assert_eq!(sent.len(), uninterrupted.len());
        // Each run frames untrusted text with its own random boundary; the rest of
        // every request is the same byte for byte.
        let unframed = |store: &Store, id: i64, r: &CompletionRequest| {
            let initial = store.run(id).unwrap().unwrap().initial_json.unwrap();
            let initial: Vec<io_harness::provider::Message> =
                serde_json::from_str(&initial).unwrap();
            let b =
                io_harness::untrusted::Boundary::from_first_message(&initial[0].text()).unwrap();
            String::from_utf8(serde_json::to_vec(r).unwrap())
                .unwrap()
                .replace(b.as_str(), "BOUNDARY")
        };
        for (i, (a, b)) in sent.iter().zip(&uninterrupted).enumerate() {
            assert_eq!(
                unframed(&store, id, a),
                unframed(&whole_store, whole_id, b),
                "gpt-4o {gpt4o}: request of step {} differs",
                i + 1
            );
        }
        // The counts recorded are the family's: exact o200k for gpt-4o.
        let family = if gpt4o { Family::O200k } else { Family::Other };
        let first = store
            .context_events(id)
            .unwrap()
            .into_iter()
            .find(|e| e.kind == "assembled")
            .unwrap();
        assert_eq!(
            first.tokens_before,
            Some(tokens::estimate_request(&sent[0], family))
        );
        assert_ne!(
            tokens::estimate_request(&sent[0], Family::O200k),
            tokens::estimate_request(&sent[0], Family::Other),
            "the two counts differ, so the check above tells them apart"
        );
    }
}

/// `io-harness show --prompt` prints the request as sent: the step's stored body, or
/// for a step that never committed (a double overflow) the last request assembled.
#[tokio::test]
async fn show_prompt_prints_the_assembled_request_of_any_step() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.txt"), big_file(300, "big")).unwrap();
    std::fs::write(dir.path().join("done.txt"), "done\n").unwrap();
    let server = FakeServer::start(vec![
        read_big("toolu_1"),
        read_big("toolu_2"),
        Reply::json(400, TOO_LONG),
        Reply::json(400, TOO_LONG),
    ])
    .await;
    let provider = Anthropic::new(config(&server.url(), "claude-sonnet-4-5")).unwrap();
    // No sub-agents: their tool's schema would change the sizes these tests are cut to.
    let contract = TaskContract::workspace(
        "read big.txt",
        dir.path(),
        Verification::file_contains("done.txt", "done"),
    )
    .max_agent_depth(0);
    // The store beside the workspace: one inside it is refused.
    let records = tempfile::tempdir().unwrap();
    let db = records.path().join("store.db");
    let store = Store::open(&db).unwrap();
    let r = run(&contract, &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::ContextOverflow);
    let sent = server.requests();
    let show = |step: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_io-harness"))
            .args(["show", &r.run_id.to_string(), "--prompt", step, "--store"])
            .arg(&db)
            .env_remove("IO_HARNESS_STORE")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The request as it went out: the provider's wire body, not a --json document.
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    assert_eq!(
        show("2"),
        sent[1].json(),
        "a committed step: the wire body sent"
    );
    let last: Value = show("3");
    assert!(
        last["messages"].is_array(),
        "the uncommitted step's assembled request"
    );
    assert!(
        last.to_string()
            .contains("superseded by the read at step 2"),
        "the harder assembly, as last sent: {last}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_io-harness"))
        .args(["show", &r.run_id.to_string(), "--store"])
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("context: estimated"), "{text}");
}

/// Texts of the calibration corpus: every block of the trajectory's last full-history
/// request (the system prompt, file reads, edits, command output, tool inputs as JSON),
/// and this repository's Rust source, one text per file.
async fn calibration_corpus() -> (Vec<String>, Vec<String>) {
    let (store, r) = trajectory_run(ContextSettings {
        max_tokens: None,
        assemble: false,
        ..ContextSettings::default()
    })
    .await;
    let last = step_requests(&store, r.run_id).pop().unwrap();
    let mut trajectory: Vec<String> = last.system.iter().cloned().collect();
    for b in last.messages.iter().flat_map(|m| m.content.iter()) {
        match b {
            ContentBlock::Text { text } => trajectory.push(text.clone()),
            ContentBlock::ToolUse { input, .. } => trajectory.push(input.to_string()),
            ContentBlock::ToolResult { content, .. } => trajectory.push(content.clone()),
            _ => {}
        }
    }
    let mut source = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(d) = dirs.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                source.push(std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    (trajectory, source)
}

/// (estimate, exact o200k) summed over `texts`, and the worst relative error of one text
/// of at least 200 tokens.
fn calibration(texts: &[String]) -> (u64, u64, f64) {
    use io_harness::context::tokens::{Family, estimate_text, exact_tokens};
    let (mut est, mut exact, mut worst) = (0, 0, 0f64);
    for t in texts {
        let e = estimate_text(t);
        let x = exact_tokens(t, Family::O200k).unwrap();
        est += e;
        exact += x;
        if x >= 200 {
            let err = (e as f64 - x as f64) / x as f64;
            if err.abs() > worst.abs() {
                worst = err;
            }
        }
    }
    (est, exact, worst)
}

/// The estimate (used for Anthropic and unknown models) against the real `o200k` encoder
/// on the trajectory's requests and this repository's source: the error the module
/// docs of `context::tokens` state.
#[tokio::test]
async fn the_estimate_stays_within_its_stated_error_of_o200k() {
    let (trajectory, source) = calibration_corpus().await;
    for (name, texts) in [("trajectory", &trajectory), ("source", &source)] {
        let (est, exact, worst) = calibration(texts);
        let err = (est as f64 - exact as f64) / exact as f64;
        eprintln!(
            "{name}: {} texts, estimate {est}, o200k {exact}, error {:+.1}%, worst text {:+.1}%",
            texts.len(),
            err * 100.0,
            worst * 100.0
        );
        // Measured: trajectory -1.9% (worst text -2.4%), source +0.8% (worst file
        // -9.9%); the bounds leave room for the source to change.
        assert!(err.abs() <= 0.06, "{name}: total error {err:+.3}");
        assert!(worst.abs() <= 0.20, "{name}: worst text {worst:+.3}");
    }
}
