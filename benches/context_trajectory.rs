//! Context assembly against full-history sending, on the fixed trajectory of
//! `tests/support/context_trajectory.rs` (60 steps over 10 files: a read each step, an
//! edit every third, the test command every fifth, a passing verification at the end).
//!
//! Prints, per budget, the estimated input tokens summed over the run's requests —
//! raw, and billed as Anthropic (cache reads 0.1×, writes 1.25×) and OpenAI (cached
//! prefix 0.1×) would bill them given the requests' common prefixes — beside the same
//! figures for the full history, as ratios; plus batches and stale reads sent.
//! Then what counting costs per request with the real `o200k` encoder (the exact
//! family of OpenAI models) against the estimate, on the full-history requests:
//! the encoder's one-time load, a first pass (each observation encoded once, then
//! served from the content-hash cache), a warm pass, and encoding everything uncached.
//! Run: `cargo bench --bench context_trajectory`.

#[path = "../tests/support/context_trajectory.rs"]
mod trajectory;

use std::time::Instant;

use io_harness::context::ContextSettings;
use io_harness::context::tokens::{self, Family};
use io_harness::provider::{CompletionRequest, ContentBlock, Scripted};
use io_harness::{RunOutcome, Store, TaskContract, Verification, run};

struct Outcome {
    outcome: RunOutcome,
    requests: Vec<CompletionRequest>,
    batches: usize,
    max_sent: u64,
}

fn run_once(rt: &tokio::runtime::Runtime, settings: ContextSettings) -> Outcome {
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
    let r = rt
        .block_on(run(&contract, &Scripted::new(turns), &store))
        .unwrap();
    let requests = store
        .steps(r.run_id)
        .unwrap()
        .iter()
        .map(|s| {
            let body = store
                .blob(s.request_hash.as_deref().unwrap())
                .unwrap()
                .unwrap();
            serde_json::from_slice(&body).unwrap()
        })
        .collect();
    let events = store.context_events(r.run_id).unwrap();
    let assembled = events.iter().filter(|e| e.kind == "assembled");
    Outcome {
        outcome: r.outcome,
        requests,
        batches: assembled
            .clone()
            .filter(|e| {
                e.detail
                    .as_deref()
                    .unwrap_or("")
                    .contains("\"batched\":true")
            })
            .count(),
        max_sent: assembled.filter_map(|e| e.tokens_after).max().unwrap_or(0),
    }
}

/// Read observations that show a version other than the file's at that request.
fn stale(requests: &[CompletionRequest]) -> usize {
    let (_, versions) = trajectory::script();
    let mut n = 0;
    for (i, r) in requests.iter().enumerate() {
        let mut paths = std::collections::BTreeMap::new();
        for b in r.messages.iter().flat_map(|m| m.content.iter()) {
            match b {
                ContentBlock::ToolUse { id, name, input } if name == "read_file" => {
                    paths.insert(id.clone(), input["path"].as_str().unwrap_or("").to_string());
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } => {
                    if let (Some(p), Some(v)) =
                        (paths.get(tool_use_id), trajectory::version_shown(content))
                        && v != versions[i][p]
                    {
                        n += 1;
                    }
                }
                _ => {}
            }
        }
    }
    n
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let full = run_once(
        &rt,
        ContextSettings {
            max_tokens: None,
            assemble: false,
            ..ContextSettings::default()
        },
    );
    let f = trajectory::figures(&full.requests);
    println!(
        "full history: {:?}, {} requests, raw {} tokens, Anthropic-billed {:.0}, OpenAI-billed {:.0}, largest request {}, stale reads sent {}",
        full.outcome,
        f.requests,
        f.raw,
        f.anthropic_billed,
        f.openai_billed,
        full.max_sent,
        stale(&full.requests)
    );
    counting_cost(&full.requests);
    let budgets: Vec<Option<u64>> = match std::env::var("CONTEXT_BUDGETS") {
        Ok(v) => v.split(',').map(|b| b.trim().parse().ok()).collect(),
        Err(_) => vec![None, Some(24_000), Some(16_000), Some(12_000), Some(9_000)],
    };
    for budget in budgets {
        let ours = run_once(
            &rt,
            ContextSettings {
                max_tokens: budget,
                assemble: true,
                ..ContextSettings::default()
            },
        );
        let o = trajectory::figures(&ours.requests);
        println!(
            "assembled, budget {:>6}: {:?}, raw {:>7} ({:.2}× fewer), Anthropic-billed {:>8.0} ({:.2}×), OpenAI-billed {:>8.0} ({:.2}×), largest request {}, batches {}, stale reads sent {}",
            budget.map_or("none".to_string(), |b| b.to_string()),
            ours.outcome,
            o.raw,
            f.raw as f64 / o.raw as f64,
            o.anthropic_billed,
            f.anthropic_billed / o.anthropic_billed,
            o.openai_billed,
            f.openai_billed / o.openai_billed,
            ours.max_sent,
            ours.batches,
            stale(&ours.requests)
        );
    }
}

/// Texts of a request as the counter sees them.
fn texts(r: &CompletionRequest) -> Vec<String> {
    let mut out: Vec<String> = r.system.iter().cloned().collect();
    for b in r.messages.iter().flat_map(|m| m.content.iter()) {
        match b {
            ContentBlock::Text { text } => out.push(text.clone()),
            ContentBlock::ToolUse { name, input, .. } => {
                out.push(name.clone());
                out.push(input.to_string());
            }
            ContentBlock::ToolResult { content, .. } => out.push(content.clone()),
            _ => {}
        }
    }
    out
}

fn counting_cost(requests: &[CompletionRequest]) {
    let per_request = |t: std::time::Duration| t.as_secs_f64() * 1e3 / requests.len() as f64;
    let t = Instant::now();
    tokens::exact_tokens("load", Family::O200k);
    let load = t.elapsed();
    let pass = |family: Family| {
        let t = Instant::now();
        let n: u64 = requests
            .iter()
            .map(|r| tokens::estimate_request(r, family))
            .sum();
        (t.elapsed(), n)
    };
    let (cold, exact) = pass(Family::O200k);
    let (warm, _) = pass(Family::O200k);
    let (heuristic, est) = pass(Family::Other);
    let t = Instant::now();
    let uncached: u64 = requests
        .iter()
        .flat_map(texts)
        .map(|x| tokens::exact_tokens(&x, Family::O200k).unwrap_or(0))
        .sum();
    let uncached_t = t.elapsed();
    println!(
        "counting, {} full-history requests: o200k load {:.1} ms once; per request: o200k first pass {:.3} ms, cached {:.3} ms, uncached {:.3} ms; estimate {:.3} ms; totals o200k {exact} (texts only {uncached}), estimate {est} ({:+.1}%)",
        requests.len(),
        load.as_secs_f64() * 1e3,
        per_request(cold),
        per_request(warm),
        per_request(uncached_t),
        per_request(heuristic),
        (est as f64 - exact as f64) / exact as f64 * 100.0
    );
}
