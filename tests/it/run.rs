//! The loop end to end: scripted model turns, real tools, real store, real commands.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use io_harness::provider::{
    Completion, CompletionRequest, ContentBlock, Provider, ProviderError, ProviderErrorKind,
    ProviderIdentity, ScriptTurn, Scripted,
};
use io_harness::run::{Flow, RunError, RunEvent, RunOptions};
use io_harness::{RunOutcome, Store, TaskContract, Verification, resume, run, run_with};
use serde_json::json;

fn write_turn(path: &str, content: &str) -> ScriptTurn {
    ScriptTurn::tool("write_file", json!({"path": path, "content": content}))
}

fn with_usage(mut t: ScriptTurn, input: u64, output: u64, cost: Option<f64>) -> ScriptTurn {
    t.usage = Some(io_harness::provider::Usage {
        input_tokens: Some(input),
        output_tokens: Some(output),
        ..Default::default()
    });
    t.cost_usd = cost;
    t
}

fn contract(dir: &std::path::Path) -> TaskContract {
    TaskContract::workspace(
        "write hello.txt saying hello",
        dir,
        Verification::file_contains("hello.txt", "hello"),
    )
}

#[tokio::test]
async fn success_is_recorded_with_steps_tool_calls_policy_and_diff() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let provider = Scripted::new(vec![
        with_usage(write_turn("hello.txt", "hello\n"), 100, 10, Some(0.001)),
        with_usage(
            ScriptTurn::text("Done: wrote hello.txt."),
            120,
            5,
            Some(0.002),
        ),
    ]);
    let r = run(&contract(dir.path()), &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    assert_eq!(r.steps, 2);
    assert_eq!(
        (r.input_tokens, r.output_tokens, r.total_tokens),
        (220, 15, 235)
    );
    assert!((r.cost_usd.unwrap() - 0.003).abs() < 1e-12);
    assert_eq!(r.final_message, "Done: wrote hello.txt.");
    assert!(r.diff.contains("+hello"), "{}", r.diff);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hello.txt")).unwrap(),
        "hello\n"
    );

    let rec = store.run(r.run_id).unwrap().unwrap();
    assert_eq!(rec.status, "finished");
    assert_eq!(rec.outcome.as_deref(), Some("success"));
    assert_eq!(rec.steps, 2);
    assert!(rec.diff.unwrap().contains("+hello"));
    let steps = store.steps(r.run_id).unwrap();
    assert_eq!(steps[0].tool_calls[0].name, "write_file");
    assert!(
        !steps[0].tool_calls[0].is_error,
        "{}",
        steps[0].tool_calls[0].output
    );
    assert!(
        steps[0].request_hash.is_some(),
        "the exact request is stored"
    );
    let policy = store.policy_events(r.run_id).unwrap();
    assert!(
        policy
            .iter()
            .any(|p| p.act == "write" && p.target == "hello.txt" && p.decision == "allow")
    );
}

#[tokio::test]
async fn failed_verification_is_the_next_observation_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let provider = Scripted::new(vec![
        write_turn("hello.txt", "goodbye\n"),
        ScriptTurn::text("done"),
        write_turn("hello.txt", "hello\n"),
        ScriptTurn::text("done now"),
    ]);
    let r = run(&contract(dir.path()), &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    let steps = store.steps(r.run_id).unwrap();
    assert!(
        steps[1].messages_json.contains("Verification failed"),
        "{}",
        steps[1].messages_json
    );
    assert!(
        steps[1].messages_json.contains("does not contain"),
        "{}",
        steps[1].messages_json
    );
}

#[tokio::test]
async fn verification_attempts_run_out() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let provider = Scripted::new(vec![
        ScriptTurn::text("done"),
        ScriptTurn::text("really done"),
    ]);
    let c = contract(dir.path()).max_verify_attempts(2);
    let r = run(&c, &provider, &store).await.unwrap();
    assert_eq!(
        r.outcome,
        RunOutcome::VerificationFailed {
            failed: vec!["file_contains hello.txt".into()]
        }
    );
    assert_eq!(r.outcome.exit_code(), 1);
}

#[tokio::test]
async fn step_cap_ends_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let turns = (0..10)
        .map(|_| ScriptTurn::tool("list_dir", json!({})))
        .collect();
    let r = run(
        &contract(dir.path()).max_steps(3),
        &Scripted::new(turns),
        &store,
    )
    .await
    .unwrap();
    assert_eq!(r.outcome, RunOutcome::StepCapReached);
    assert_eq!(r.steps, 3);
}

#[tokio::test]
async fn token_and_cost_budgets_have_their_own_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let turns: Vec<_> = (0..5)
        .map(|_| with_usage(ScriptTurn::tool("list_dir", json!({})), 400, 100, Some(0.4)))
        .collect();
    let r = run(
        &contract(dir.path()).max_tokens(1000),
        &Scripted::new(turns.clone()),
        &store,
    )
    .await
    .unwrap();
    assert_eq!((r.outcome, r.steps), (RunOutcome::TokenBudgetExceeded, 2));
    let r = run(
        &contract(dir.path()).max_cost_usd(1.0),
        &Scripted::new(turns),
        &store,
    )
    .await
    .unwrap();
    assert_eq!((r.outcome, r.steps), (RunOutcome::CostBudgetExceeded, 3));
}

/// A model that never answers in time (a fake of a remote API: the only thing faked).
struct Slow;
impl Provider for Slow {
    fn identity(&self) -> ProviderIdentity {
        ProviderIdentity {
            kind: "slow".into(),
            model: "slow".into(),
            base_url: None,
        }
    }
    fn complete<'a>(
        &'a self,
        _: &'a CompletionRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Err(ProviderError::new(
                ProviderErrorKind::Timeout,
                "slow",
                "never",
            ))
        })
    }
}

#[tokio::test(start_paused = true)]
async fn time_budget_bounds_a_hanging_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let c = contract(dir.path()).max_duration(Duration::from_secs(30));
    let r = run(&c, &Slow, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::TimeBudgetExceeded);
    assert_eq!(r.steps, 0);
}

struct Failing(ProviderErrorKind);
impl Provider for Failing {
    fn identity(&self) -> ProviderIdentity {
        ProviderIdentity {
            kind: "failing".into(),
            model: "m".into(),
            base_url: None,
        }
    }
    fn complete<'a>(
        &'a self,
        _: &'a CompletionRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        let k = self.0;
        Box::pin(async move { Err(ProviderError::new(k, "failing", "no")) })
    }
}

#[tokio::test]
async fn provider_failures_escalate_with_their_kind() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let r = run(
        &contract(dir.path()),
        &Failing(ProviderErrorKind::Auth),
        &store,
    )
    .await
    .unwrap();
    assert_eq!(
        r.outcome,
        RunOutcome::Escalated {
            kind: ProviderErrorKind::Auth,
            retryable: false
        }
    );
    assert_eq!(r.outcome.exit_code(), 4);
    let r = run(
        &contract(dir.path()),
        &Failing(ProviderErrorKind::ContextOverflow),
        &store,
    )
    .await
    .unwrap();
    assert_eq!(r.outcome, RunOutcome::ContextOverflow);
    let last = store.provider_attempts(r.run_id).unwrap().pop().unwrap();
    assert_eq!(
        (last.kind.as_str(), last.next.as_str()),
        ("context-overflow", "escalate")
    );
    assert!(
        last.request_bytes.unwrap() > 100,
        "the request size is on record"
    );
}

#[tokio::test]
async fn observer_cancels_then_resume_finishes_from_the_last_committed_step() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let provider = Scripted::new(vec![
        ScriptTurn::tool("list_dir", json!({})),
        write_turn("hello.txt", "hello\n"),
        ScriptTurn::text("done"),
    ]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let observer = move |e: &RunEvent| {
        seen2.lock().unwrap().push(e.clone());
        match e {
            RunEvent::StepCommitted { step: 1, .. } => Flow::Cancel,
            _ => Flow::Continue,
        }
    };
    let c = contract(dir.path());
    let r = run_with(
        &c,
        &provider,
        &store,
        RunOptions::default().observer(Arc::new(observer)),
    )
    .await
    .unwrap();
    assert_eq!((r.outcome.clone(), r.steps), (RunOutcome::Cancelled, 1));
    assert_eq!(r.outcome.exit_code(), 130);
    assert!(seen.lock().unwrap().iter().any(|e| matches!(
        e,
        RunEvent::Finished {
            outcome: RunOutcome::Cancelled,
            ..
        }
    )));

    let other = contract(dir.path()).max_steps(7);
    let err = io_harness::run::resume_with(
        &store,
        r.run_id,
        &provider,
        Some(&other),
        RunOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, RunError::ContractMismatch { .. }), "{err}");

    let r2 = resume(&store, r.run_id, &provider).await.unwrap();
    assert_eq!(r2.run_id, r.run_id);
    assert_eq!((r2.outcome, r2.steps), (RunOutcome::Success, 3));
    let err = resume(&store, r.run_id, &provider).await.unwrap_err();
    assert!(matches!(err, RunError::NotResumable { .. }), "{err}");
}

#[tokio::test]
async fn copy_mode_leaves_the_original_untouched() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hello.txt"), "old\n").unwrap();
    let store = Store::memory().unwrap();
    let provider = Scripted::new(vec![
        write_turn("hello.txt", "hello\n"),
        ScriptTurn::text("done"),
    ]);
    let r = run(&contract(dir.path()).on_copy(), &provider, &store)
        .await
        .unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hello.txt")).unwrap(),
        "old\n"
    );
    assert!(
        r.diff.contains("-old") && r.diff.contains("+hello"),
        "{}",
        r.diff
    );
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&r.work_dir).join("hello.txt")).unwrap(),
        "hello\n"
    );
    assert_ne!(std::path::Path::new(&r.work_dir), dir.path());
}

#[tokio::test]
async fn refusals_are_observations_and_records_not_crashes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    std::fs::write(dir.path().join(".git/config"), "[core]\n").unwrap();
    let store = Store::memory().unwrap();
    let provider = Scripted::new(vec![
        write_turn(".git/config", "[core]\n\thooksPath = /tmp/evil\n"),
        ScriptTurn::tool("read_file", json!({"path": "../../etc/passwd"})),
        write_turn("hello.txt", "hello\n"),
        ScriptTurn::text("done"),
    ]);
    let r = run(&contract(dir.path()), &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".git/config")).unwrap(),
        "[core]\n"
    );
    let steps = store.steps(r.run_id).unwrap();
    let git = &steps[0].tool_calls[0];
    assert!(
        git.is_error && git.output.contains("refused"),
        "{}",
        git.output
    );
    let escape = &steps[1].tool_calls[0];
    assert!(escape.confinement_refusal.is_some(), "{escape:?}");
    let policy = store.policy_events(r.run_id).unwrap();
    assert!(
        policy
            .iter()
            .any(|p| p.decision == "deny" && p.target == ".git/config" && p.layer == "builtin")
    );
    // The model saw both refusals.
    assert!(steps[0].messages_json.contains("refused"));
    assert!(steps[1].messages_json.contains("error"));
}

#[tokio::test]
async fn unknown_tools_and_bad_arguments_are_observations() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let provider = Scripted::new(vec![
        ScriptTurn::tool("rm_rf", json!({})),
        ScriptTurn::tool("write_file", json!({"path": 7})),
        write_turn("hello.txt", "hello\n"),
        ScriptTurn::text("done"),
    ]);
    let r = run(&contract(dir.path()), &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    let steps = store.steps(r.run_id).unwrap();
    assert!(steps[0].tool_calls[0].output.contains("unknown tool"));
    assert!(steps[1].tool_calls[0].is_error);
}

#[tokio::test]
async fn a_command_gate_failure_is_recorded_as_gate_output() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let c = TaskContract::workspace(
        "make check.sh pass",
        dir.path(),
        Verification::command(["sh", "-c", "echo expected 2 received 1; exit 1"]),
    )
    .max_verify_attempts(1);
    let r = run(&c, &Scripted::new(vec![ScriptTurn::text("done")]), &store)
        .await
        .unwrap();
    assert!(matches!(r.outcome, RunOutcome::VerificationFailed { .. }));
    let events = store.sandbox_events(r.run_id).unwrap();
    assert!(events.iter().any(|e| {
        e.kind == "gate_output"
            && e.detail
                .as_deref()
                .is_some_and(|d| d.contains("expected 2 received 1"))
    }));
}

#[tokio::test]
async fn invalid_contract_is_refused_before_anything_runs() {
    let store = Store::memory().unwrap();
    let c = TaskContract::workspace(
        "g",
        "/definitely/not/here",
        Verification::file_contains("a", "b"),
    );
    let err = run(&c, &Scripted::new(vec![]), &store).await.unwrap_err();
    assert!(err.is_usage());
    assert!(err.to_string().contains("root"), "{err}");
    assert!(store.runs().unwrap().is_empty());
}

/// A provider holding a key that the model echoes back.
struct Leaky(Scripted);
impl Provider for Leaky {
    fn identity(&self) -> ProviderIdentity {
        self.0.identity()
    }
    fn secrets(&self) -> Vec<String> {
        vec!["sk-test-0123456789abcdef".into()]
    }
    fn complete<'a>(
        &'a self,
        r: &'a CompletionRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        self.0.complete(r)
    }
}

#[tokio::test]
async fn held_keys_never_reach_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.db");
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let store = Store::open(&db).unwrap();
    let provider = Leaky(Scripted::new(vec![
        write_turn("hello.txt", "hello sk-test-0123456789abcdef\n"),
        ScriptTurn::text("my key is sk-test-0123456789abcdef"),
    ]));
    let r = run(&contract(&ws), &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    drop(store);
    let mut bytes = std::fs::read(&db).unwrap();
    if let Ok(wal) = std::fs::read(dir.path().join("store.db-wal")) {
        bytes.extend(wal);
    }
    let needle = b"sk-test-0123456789abcdef";
    assert!(
        !bytes.windows(needle.len()).any(|w| w == needle),
        "the key reached the store file"
    );
    let store = Store::open(&db).unwrap();
    let rec = store.run(r.run_id).unwrap().unwrap();
    assert!(rec.final_message.unwrap().contains("[REDACTED]"));
}

#[tokio::test]
async fn eight_runs_in_parallel_on_one_store_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.db");
    let mut tasks = Vec::new();
    for i in 0..8 {
        let db = db.clone();
        let ws = dir.path().join(format!("ws{i}"));
        std::fs::create_dir(&ws).unwrap();
        tasks.push(tokio::spawn(async move {
            let store = Store::open(&db).unwrap();
            let mut turns: Vec<_> = (0..5)
                .map(|_| ScriptTurn::tool("list_dir", json!({})))
                .collect();
            turns.push(write_turn("hello.txt", "hello\n"));
            turns.push(ScriptTurn::text("done"));
            run(&contract(&ws), &Scripted::new(turns), &store)
                .await
                .unwrap()
        }));
    }
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!((r.outcome, r.steps), (RunOutcome::Success, 7));
    }
    let store = Store::open(&db).unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 8);
    assert!(
        runs.iter()
            .all(|r| r.steps == 7 && r.outcome.as_deref() == Some("success"))
    );
}

#[tokio::test]
async fn thinking_blocks_survive_into_the_next_request() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let mut first = write_turn("hello.txt", "hello\n");
    first.content = vec![
        ContentBlock::Thinking {
            thinking: "plan".into(),
            signature: Some("sig-abc".into()),
        },
        ContentBlock::ToolUse {
            id: "t1".into(),
            name: "write_file".into(),
            input: json!({"path": "hello.txt", "content": "hello\n"}),
        },
    ];
    let provider = Scripted::new(vec![first, ScriptTurn::text("done")]);
    let r = run(&contract(dir.path()), &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    let steps = store.steps(r.run_id).unwrap();
    let body = store
        .blob(steps[1].request_hash.as_deref().unwrap())
        .unwrap()
        .unwrap();
    let text = String::from_utf8(body).unwrap();
    assert!(
        text.contains("sig-abc"),
        "thinking signature passed back unchanged"
    );
}

#[tokio::test]
async fn a_looping_agent_is_told_to_replan_then_ends_stalled() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let turns = (0..20)
        .map(|_| ScriptTurn::tool("list_dir", json!({})))
        .collect();
    let c = contract(dir.path()).stall_policy(io_harness::run::StallPolicy {
        window: 2,
        max_replans: 1,
    });
    let r = run(&c, &Scripted::new(turns), &store).await.unwrap();
    assert_eq!((r.outcome.clone(), r.steps), (RunOutcome::Stalled, 5));
    assert_eq!(r.outcome.exit_code(), 3);
    let steps = store.steps(r.run_id).unwrap();
    let replans: Vec<u32> = steps
        .iter()
        .filter(|s| s.messages_json.contains("appear to be stuck"))
        .map(|s| s.step)
        .collect();
    assert_eq!(replans, [3]);
}

/// Fails with `kind` a fixed number of times, then answers from a script.
struct Flaky {
    kind: ProviderErrorKind,
    failures: std::sync::atomic::AtomicU32,
    then: Scripted,
}
impl Provider for Flaky {
    fn identity(&self) -> ProviderIdentity {
        ProviderIdentity {
            kind: "flaky".into(),
            model: "f1".into(),
            base_url: None,
        }
    }
    fn complete<'a>(
        &'a self,
        r: &'a CompletionRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        use std::sync::atomic::Ordering;
        if self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            let mut e = ProviderError::new(self.kind, "flaky", "slow down");
            e.status = Some(429);
            e.retry_after = Some(Duration::from_secs(2));
            return Box::pin(async move { Err(e) });
        }
        self.then.complete(r)
    }
}

#[tokio::test(start_paused = true)]
async fn retries_honour_retry_after_and_every_attempt_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let provider = Flaky {
        kind: ProviderErrorKind::RateLimited,
        failures: 2.into(),
        then: Scripted::new(vec![
            write_turn("hello.txt", "hello\n"),
            ScriptTurn::text("done"),
        ]),
    };
    let started = tokio::time::Instant::now();
    let r = run(&contract(dir.path()), &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(4),
        "two waits of the server's 2 s"
    );
    let attempts = store.provider_attempts(r.run_id).unwrap();
    assert_eq!(attempts.len(), 2);
    assert!(attempts.iter().all(|a| a.kind == "rate-limited"
        && a.delay_ms == 2000
        && a.next == "retry"
        && a.status == Some(429)));
}

#[tokio::test(start_paused = true)]
async fn a_dead_primary_falls_back_and_the_step_records_who_served_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let dead = Failing(ProviderErrorKind::Server);
    let live: Arc<dyn Provider> = Arc::new(Scripted::new(vec![
        write_turn("hello.txt", "hello\n"),
        ScriptTurn::text("done"),
    ]));
    let c = contract(dir.path()).retry_policy(io_harness::provider::RetryPolicy {
        max_attempts: 2,
        ..Default::default()
    });
    let r = run_with(&c, &dead, &store, RunOptions::default().fallback(live))
        .await
        .unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    let steps = store.steps(r.run_id).unwrap();
    assert!(
        steps
            .iter()
            .all(|s| s.provider.as_deref() == Some("scripted/scripted"))
    );
    let nexts: Vec<String> = store
        .provider_attempts(r.run_id)
        .unwrap()
        .into_iter()
        .filter(|a| a.step == 1)
        .map(|a| a.next)
        .collect();
    assert_eq!(nexts, ["retry", "fallback"]);
}

#[tokio::test(start_paused = true)]
async fn retries_exhausted_escalate_as_retryable() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let c = contract(dir.path()).retry_policy(io_harness::provider::RetryPolicy {
        max_attempts: 3,
        ..Default::default()
    });
    let r = run(&c, &Failing(ProviderErrorKind::Overloaded), &store)
        .await
        .unwrap();
    assert_eq!(
        r.outcome,
        RunOutcome::Escalated {
            kind: ProviderErrorKind::Overloaded,
            retryable: true
        }
    );
    let attempts = store.provider_attempts(r.run_id).unwrap();
    let nexts: Vec<&str> = attempts.iter().map(|a| a.next.as_str()).collect();
    assert_eq!(nexts, ["retry", "retry", "escalate"]);
}

#[tokio::test]
async fn the_harness_checks_its_own_provider_connection_against_the_policy() {
    use io_harness::contract::{ProviderKind, ProviderSpec};
    use io_harness::policy::Rule;
    use io_harness::provider::{PriceTable, RetryPolicy, build_provider};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let mut spec = ProviderSpec::new(ProviderKind::Openai);
    spec.model = Some("m".into());
    spec.base_url = Some("http://127.0.0.1:9/v1".into());
    let provider = build_provider(&spec, &PriceTable::builtin(), &|_| None).unwrap();
    let one_try = RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    };

    // An operator rule that denies the endpoint wins: nothing runs.
    let denied = contract(dir.path())
        .retry_policy(one_try)
        .policy_rule(Rule::deny(io_harness::policy::Act::Net, "127.0.0.1:*"));
    let err = run(&denied, provider.as_ref(), &store).await.unwrap_err();
    assert!(
        matches!(err, RunError::Policy(_)) && err.is_usage(),
        "{err}"
    );
    assert!(err.to_string().contains("127.0.0.1:9"), "{err}");
    assert!(store.runs().unwrap().is_empty());

    // Otherwise the provider layer allows the configured endpoint, and says from where.
    let r = run(
        &contract(dir.path()).retry_policy(one_try),
        provider.as_ref(),
        &store,
    )
    .await
    .unwrap();
    assert!(
        matches!(
            r.outcome,
            RunOutcome::Escalated {
                kind: ProviderErrorKind::Transport,
                ..
            }
        ),
        "{:?}",
        r.outcome
    );
    let events = store.policy_events(r.run_id).unwrap();
    let net = events.iter().find(|e| e.act == "net").unwrap();
    assert_eq!(
        (
            net.step,
            net.target.as_str(),
            net.decision.as_str(),
            net.layer.as_str()
        ),
        (0, "127.0.0.1:9", "allow", "provider")
    );
    assert!(net.rule.contains("task file or --base-url"), "{}", net.rule);
}

/// Every documented run event kind is emitted by a real run (truthfulness: no kind is
/// documented that nothing produces).
#[tokio::test(start_paused = true)]
async fn every_run_event_kind_is_emitted() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let provider = Flaky {
        kind: ProviderErrorKind::Overloaded,
        failures: 1.into(),
        then: Scripted::new(vec![
            write_turn("hello.txt", "hello\n"),
            ScriptTurn::text("done"),
        ]),
    };
    let kinds = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
    let k2 = kinds.clone();
    let observer = move |e: &RunEvent| {
        let v = serde_json::to_value(e).unwrap();
        k2.lock()
            .unwrap()
            .insert(v["event"].as_str().unwrap().to_string());
        Flow::Continue
    };
    let r = run_with(
        &contract(dir.path()),
        &provider,
        &store,
        RunOptions::default().observer(Arc::new(observer)),
    )
    .await
    .unwrap();
    assert_eq!(r.outcome, RunOutcome::Success);
    let documented = [
        "run_started",
        "step_started",
        "model_replied",
        "provider_retry",
        "tool_called",
        "policy_decision",
        "tool_finished",
        "verified",
        "step_committed",
        "finished",
    ];
    let seen = kinds.lock().unwrap().clone();
    let expected: std::collections::BTreeSet<String> =
        documented.iter().map(|s| s.to_string()).collect();
    assert_eq!(seen, expected);
}
