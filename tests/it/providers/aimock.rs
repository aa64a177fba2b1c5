//! Issue 17, "done means": twenty runs against aimock (npm `@copilotkit/aimock`, a mock
//! of the providers' APIs nobody here wrote) under mixed chaos, each ending as its faults
//! dictate, with the store matching aimock's own request journal.
//!
//! aimock rolls its chaos rates with `Math.random()`, so a rate between 0 and 1 would
//! give each run an unknown plan. The plan is drawn here instead, from [`SEED`]: every
//! request a run will make is one fixture, matched by the run's model and its place in
//! the sequence (`sequenceIndex`), carrying its fault at rate 1 (`drop`: 500,
//! `rateLimit`: 429 with `Retry-After: 1`, `malformed`: a 200 whose body is not JSON,
//! `disconnect`: the connection destroyed before any byte) or as a fixture setting
//! (`truncateAfterChunks`: the stream cut after its first events; an error reply: 404 "model
//! does not exist"). The plan is drawn by walking the retry policy the runs use, so
//! the expected outcome and the expected journal fall out of the same walk; a request
//! the walk did not expect meets a catch-all fixture answering 418, which no run
//! survives and the journal shows.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_harness::provider::{Anthropic, OpenAi, Provider, ProviderErrorKind as K, RetryPolicy};
use io_harness::{RunOptions, RunOutcome, Store, TaskContract, Verification};
use serde_json::{Value, json};

use super::config;

/// The plan's seed: change it and every run's faults change with it.
const SEED: u64 = 0x17_a1_c0_c4;
const RUNS: usize = 20;

/// aimock as a child process on a loopback port it picks itself (`-p 0`).
struct AiMock {
    child: Child,
    url: String,
}

impl AiMock {
    fn start(fixtures: &Path) -> AiMock {
        let cli = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(".aimock/node_modules/@copilotkit/aimock/dist/cli.js");
        assert!(
            cli.is_file(),
            "{} is missing: run scripts/setup-test-env.sh",
            cli.display()
        );
        let mut child = Command::new("node")
            .arg(&cli)
            .args(["-p", "0", "-h", "127.0.0.1", "--log-level", "info", "-f"])
            .arg(fixtures)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node runs aimock");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(at) = line.find("listening on ") {
                    let _ = tx.send(line[at + "listening on ".len()..].trim().to_string());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("aimock says where it listens");
        AiMock { child, url }
    }

    /// Every request aimock answered, oldest first.
    async fn journal(&self) -> Vec<Value> {
        let body = reqwest::get(format!("{}/__aimock/journal", self.url))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        serde_json::from_str(&body).unwrap()
    }
}

impl Drop for AiMock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A splitmix64 stream: the plan depends on the seed alone.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What one planned request meets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reply {
    Ok,
    Drop,
    RateLimit,
    Malformed,
    Disconnect,
    Truncated,
    NoModel,
}

impl Reply {
    /// A reply that is a fault `faulty` times in a hundred, the faults mixed.
    fn draw(d: &mut Draw, faulty: u64) -> Reply {
        if d.below(100) >= faulty {
            return Reply::Ok;
        }
        match d.below(100) {
            0..28 => Reply::Drop,
            28..40 => Reply::RateLimit,
            40..64 => Reply::Malformed,
            64..82 => Reply::Disconnect,
            82..95 => Reply::Truncated,
            _ => Reply::NoModel,
        }
    }

    /// The error kind the harness must give the fault.
    fn kind(self) -> K {
        match self {
            Reply::Ok => unreachable!("a success has no kind"),
            Reply::Drop => K::Server,
            Reply::RateLimit => K::RateLimited,
            Reply::Malformed => K::Malformed,
            Reply::Disconnect | Reply::Truncated => K::Transport,
            Reply::NoModel => K::Request,
        }
    }

    /// The status aimock's journal gives it (0: no status line was sent).
    fn journal_status(self) -> u16 {
        match self {
            Reply::Ok | Reply::Malformed | Reply::Truncated => 200,
            Reply::Drop => 500,
            Reply::RateLimit => 429,
            Reply::Disconnect => 0,
            Reply::NoModel => 404,
        }
    }

    /// The status the harness must store for the failed attempt (none for a
    /// connection that died before its status line).
    fn stored_status(self) -> Option<u16> {
        match self {
            Reply::Disconnect => None,
            other => Some(other.journal_status()),
        }
    }
}

/// Which wire protocol a run speaks.
#[derive(Clone, Copy, Debug)]
enum Api {
    OpenAi,
    Anthropic,
}

/// One run's plan and what it must come to.
#[derive(Debug)]
struct Plan {
    n: usize,
    api: Api,
    /// The planned replies per model (the primary first, then its fallback, if any).
    replies: Vec<(String, Vec<Reply>)>,
    /// What the run must end as.
    outcome: RunOutcome,
    /// (model, journal status) of each request, in order.
    journal: Vec<(String, u16)>,
}

/// The policy the runs use: the default attempt counts, short backoff.
fn policy() -> RetryPolicy {
    RetryPolicy {
        base: Duration::from_millis(10),
        cap: Duration::from_millis(40),
        ..RetryPolicy::default()
    }
}

/// Draws run `n`'s plan by walking what the harness does: two steps (write the file,
/// then say done), each a call through the chain, each attempt's reply drawn as it is
/// reached; a fallback that serves keeps serving (the circuit breaker), the primary
/// comes second.
fn plan(n: usize, d: &mut Draw) -> Plan {
    let api = if n.is_multiple_of(2) {
        Api::OpenAi
    } else {
        Api::Anthropic
    };
    let primary = format!("chaos-{n:02}");
    let mut chain = vec![primary.clone()];
    if n.is_multiple_of(3) {
        chain.push(format!("chaos-{n:02}-fallback"));
    }
    let mut replies: Vec<(String, Vec<Reply>)> =
        chain.iter().map(|m| (m.clone(), Vec::new())).collect();
    let mut journal = Vec::new();
    let mut serving = 0;
    let p = policy();
    let mut outcome = RunOutcome::Success;
    'steps: for _step in 0..2 {
        let order: Vec<usize> = std::iter::once(serving)
            .chain((0..chain.len()).filter(|&i| i != serving))
            .collect();
        for (pos, &i) in order.iter().enumerate() {
            let mut attempt = 1;
            let mut malformed = 0;
            loop {
                // A primary with a fallback behind it is mostly down: the chain and
                // the breaker get their turn.
                let faulty = if chain.len() > 1 && i == 0 { 85 } else { 40 };
                let r = Reply::draw(d, faulty);
                replies[i].1.push(r);
                journal.push((chain[i].clone(), r.journal_status()));
                if r == Reply::Ok {
                    serving = i;
                    continue 'steps;
                }
                malformed += u32::from(r == Reply::Malformed);
                let retryable = r.kind().is_retryable();
                if !retryable || attempt >= p.max_attempts || malformed >= p.malformed_attempts {
                    if retryable && pos + 1 < order.len() {
                        break; // on to the next provider
                    }
                    outcome = RunOutcome::Escalated {
                        kind: r.kind(),
                        retryable,
                    };
                    break 'steps;
                }
                attempt += 1;
            }
        }
    }
    Plan {
        n,
        api,
        replies,
        outcome,
        journal,
    }
}

fn token(n: usize) -> String {
    format!("planned by chaos run {n:02}")
}

/// The reply a planned success gives at its place in the run: first the tool call,
/// then the final word.
fn success(plan: &Plan, served_before: usize) -> Value {
    if served_before == 0 {
        let args = json!({"path": "out.txt", "content": token(plan.n)}).to_string();
        json!({"toolCalls": [{"name": "write_file", "arguments": args}]})
    } else {
        json!({"content": "done"})
    }
}

/// Every fixture of every plan, then one catch-all per model.
fn fixtures(plans: &[Plan]) -> Value {
    let mut all = Vec::new();
    for plan in plans {
        // Successes are counted across the chain: the fallback's first success may be
        // the run's second step.
        let mut successes = 0;
        let mut next_index: HashMap<String, usize> = HashMap::new();
        for ((model, _), r) in plan.journal.iter().zip(planned_replies(plan)) {
            let seq = next_index.entry(model.clone()).or_default();
            let m = json!({"model": model, "sequenceIndex": *seq});
            *seq += 1;
            let body = success(plan, successes);
            all.push(match r {
                Reply::Ok => {
                    successes += 1;
                    json!({"match": m, "response": body})
                }
                Reply::Drop => json!({"match": m, "response": body, "chaos": {"dropRate": 1}}),
                Reply::RateLimit => {
                    json!({"match": m, "response": body, "chaos": {"rateLimitRate": 1}})
                }
                Reply::Malformed => {
                    json!({"match": m, "response": body, "chaos": {"malformedRate": 1}})
                }
                Reply::Disconnect => {
                    json!({"match": m, "response": body, "chaos": {"disconnectRate": 1}})
                }
                Reply::Truncated => {
                    // Paced, so the first events are on the wire before the cut
                    // (unpaced, aimock's writes are still buffered when it destroys the
                    // socket, and the client sees no reply at all).
                    json!({"match": m, "response": {"content": "a reply cut short after its first event"},
                        "truncateAfterChunks": 2, "latency": 20})
                }
                Reply::NoModel => json!({"match": m, "response": {"error": {
                    "message": format!("The model `{model}` does not exist"),
                    "type": "invalid_request_error", "code": "model_not_found"}, "status": 404}}),
            });
        }
        for (model, _) in &plan.replies {
            all.push(json!({"match": {"model": model}, "response": {"error": {
                "message": "a request the plan did not expect", "type": "unplanned"}, "status": 418}}));
        }
    }
    json!({ "fixtures": all })
}

fn client(api: Api, url: &str, model: &str) -> Arc<dyn Provider> {
    let mut cfg = match api {
        Api::OpenAi => config(&format!("{url}/v1"), model),
        Api::Anthropic => config(url, model),
    };
    cfg.idle_timeout = Duration::from_secs(10);
    match api {
        Api::OpenAi => Arc::new(OpenAi::new(cfg).unwrap()),
        Api::Anthropic => Arc::new(Anthropic::new(cfg).unwrap()),
    }
}

/// Runs one plan: a real run, in its own workspace and store.
async fn run(plan: &Plan, url: &str) -> (RunOutcome, Vec<(String, Option<u16>, String)>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::memory().unwrap();
    let c = TaskContract::workspace(
        "write out.txt, then say done",
        dir.path(),
        Verification::file_contains("out.txt", token(plan.n)),
    )
    .max_agent_depth(0)
    .max_steps(4)
    .retry_policy(policy());
    let mut opts = RunOptions::default();
    for (model, _) in plan.replies.iter().skip(1) {
        opts = opts.fallback(client(plan.api, url, model));
    }
    let primary = client(plan.api, url, &plan.replies[0].0);
    let r = io_harness::run_with(&c, primary.as_ref(), &store, opts)
        .await
        .unwrap();
    // The store's account of every request: each step's failed attempts, then the
    // provider that served it.
    let attempts = store.provider_attempts(r.run_id).unwrap();
    let steps = store.steps(r.run_id).unwrap();
    let mut seen = Vec::new();
    let last = steps
        .iter()
        .map(|s| s.step)
        .max()
        .unwrap_or(0)
        .max(attempts.iter().map(|a| a.step).max().unwrap_or(0));
    for step in 1..=last {
        for a in attempts.iter().filter(|a| a.step == step) {
            seen.push((model_of(&a.provider), a.status, a.kind.clone()));
        }
        if let Some(s) = steps.iter().find(|s| s.step == step)
            && let Some(p) = &s.provider
        {
            seen.push((model_of(p), Some(200), "ok".to_string()));
        }
    }
    (r.outcome, seen)
}

/// `kind/model` → `model`.
fn model_of(provider: &str) -> String {
    provider.rsplit('/').next().unwrap_or(provider).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_runs_under_mixed_chaos_end_as_their_faults_dictate_and_the_store_matches_the_journal()
 {
    let started = Instant::now();
    let mut d = Draw(SEED);
    let plans: Vec<Plan> = (0..RUNS).map(|n| plan(n, &mut d)).collect();
    for p in &plans {
        eprintln!(
            "run {:02} {:?}: {:?} -> {:?}",
            p.n, p.api, p.replies, p.outcome
        );
    }
    // The seed must give a mix worth the name: successes and escalations, a fallback
    // that served, and every fault at least once.
    let all: Vec<Reply> = plans
        .iter()
        .flat_map(|p| p.replies.iter().flat_map(|(_, r)| r.iter().copied()))
        .collect();
    for r in [
        Reply::Drop,
        Reply::RateLimit,
        Reply::Malformed,
        Reply::Disconnect,
        Reply::Truncated,
        Reply::NoModel,
    ] {
        assert!(all.contains(&r), "seed {SEED:#x} never plans {r:?}");
    }
    assert!(plans.iter().any(|p| p.outcome == RunOutcome::Success));
    assert!(
        plans
            .iter()
            .any(|p| matches!(p.outcome, RunOutcome::Escalated { .. }))
    );
    assert!(
        plans.iter().any(|p| p.replies.len() > 1
            && p.journal
                .iter()
                .any(|(m, s)| *s == 200 && *m == p.replies[1].0)),
        "some fallback serves"
    );

    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("fixtures.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&fixtures(&plans)).unwrap()).unwrap();
    let mock = AiMock::start(&path);

    let results = futures_util::future::join_all(plans.iter().map(|p| run(p, &mock.url))).await;
    let journal = mock.journal().await;

    for (plan, (outcome, seen)) in plans.iter().zip(&results) {
        let models: Vec<&str> = plan.replies.iter().map(|(m, _)| m.as_str()).collect();
        let got: Vec<(String, u16)> = journal
            .iter()
            .filter(|e| models.contains(&e["body"]["model"].as_str().unwrap_or("")))
            .map(|e| {
                (
                    e["body"]["model"].as_str().unwrap().to_string(),
                    e["response"]["status"].as_u64().unwrap() as u16,
                )
            })
            .collect();
        let why = format!("run {} ({:?}), plan {:?}", plan.n, plan.api, plan.replies);
        assert_eq!(
            got, plan.journal,
            "aimock's journal, {why}; the store: {seen:?}"
        );
        assert_eq!(*outcome, plan.outcome, "{why}");
        // The store tells the same story, request by request, with each fault's kind.
        let planned: Vec<(String, Option<u16>, String)> = plan
            .journal
            .iter()
            .zip(planned_replies(plan))
            .map(|((m, _), r)| match r {
                Reply::Ok => (m.clone(), Some(200), "ok".to_string()),
                r => (m.clone(), r.stored_status(), r.kind().to_string()),
            })
            .collect();
        assert_eq!(*seen, planned, "the store, {why}");
    }
    eprintln!(
        "{RUNS} chaos runs, seed {SEED:#x}, {} requests, in {:?}",
        journal.len(),
        started.elapsed()
    );
}

/// The plan's replies in the order they are met.
fn planned_replies(plan: &Plan) -> Vec<Reply> {
    let mut next: HashMap<&str, usize> = HashMap::new();
    plan.journal
        .iter()
        .map(|(m, _)| {
            let i = next.entry(m.as_str()).or_default();
            let list = &plan.replies.iter().find(|(x, _)| x == m).unwrap().1;
            *i += 1;
            list[*i - 1]
        })
        .collect()
}
