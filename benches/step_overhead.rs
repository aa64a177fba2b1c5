//! Harness overhead per step: a 50-step scripted run over a generated 1,000-file
//! workspace, with a real store file. Prints per-step overhead (model time is zero:
//! the script answers at once; no tool here starts a subprocess) and store bytes per
//! step. Run: `cargo bench --bench step_overhead`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use io_harness::provider::{ScriptTurn, Scripted};
use io_harness::run::{Flow, RunEvent, RunOptions};
use io_harness::{RunOutcome, Store, TaskContract, Verification, run_with};
use serde_json::json;

const FILES: usize = 1000;
const STEPS: usize = 50;

fn workspace(dir: &std::path::Path) {
    for i in 0..FILES {
        let sub = dir.join(format!("src/mod{:02}", i % 40));
        std::fs::create_dir_all(&sub).unwrap();
        let body: String = (0..30)
            .map(|l| {
                format!("pub fn item_{i}_{l}(x: u32) -> u32 {{ x.wrapping_mul({l}) + {i} }}\n")
            })
            .collect();
        std::fs::write(sub.join(format!("file{i:04}.rs")), body).unwrap();
    }
    std::fs::write(dir.join(".gitignore"), "target/\n").unwrap();
}

fn script() -> Vec<ScriptTurn> {
    let mut turns = Vec::new();
    for s in 0..STEPS - 1 {
        let i = (s * 37) % FILES;
        let path = format!("src/mod{:02}/file{i:04}.rs", i % 40);
        let t = match s % 5 {
            0 => ScriptTurn::tool(
                "read_file",
                json!({"path": path, "start_line": 1, "end_line": 20}),
            ),
            1 => ScriptTurn::tool(
                "grep",
                json!({"pattern": format!("item_{i}_1[0-9]"), "path": "src"}),
            ),
            2 => ScriptTurn::tool("list_dir", json!({"path": format!("src/mod{:02}", i % 40)})),
            3 => ScriptTurn::tool(
                "edit_file",
                json!({"path": path, "old": format!("pub fn item_{i}_0("), "new": format!("pub fn item_{i}_zero(")}),
            ),
            _ => ScriptTurn::tool(
                "find",
                json!({"pattern": format!("**/file{:03}*.rs", i / 10)}),
            ),
        };
        turns.push(t);
    }
    turns.push(ScriptTurn::text("done"));
    turns
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut per_step = Vec::new();
    let mut bytes_per_step = Vec::new();
    let mut prep = Vec::new();
    let mut overhead = Vec::new();
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        workspace(&ws);
        // SAFETY: single-threaded at this point of the benchmark.
        unsafe { std::env::set_var("XDG_CACHE_HOME", dir.path().join("cache")) };
        let db = dir.path().join("store.db");
        let store = Store::open(&db).unwrap();
        let contract = TaskContract::workspace(
            "bench",
            &ws,
            Verification::file_contains("src/mod00/file0000.rs", "item_0"),
        )
        .max_steps(STEPS as u32 + 1);
        let steps: Arc<Mutex<Vec<Duration>>> = Arc::default();
        let phases: Arc<Mutex<[Duration; 3]>> = Arc::default();
        let mark: Arc<Mutex<Option<Instant>>> = Arc::default();
        let (s2, p2, m2) = (steps.clone(), phases.clone(), mark.clone());
        let step_start: Arc<Mutex<Option<Instant>>> = Arc::default();
        let ss2 = step_start.clone();
        let observer = move |e: &RunEvent| {
            let now = Instant::now();
            let mut m = m2.lock().unwrap();
            let since = m.map(|t| now - t).unwrap_or_default();
            match e {
                RunEvent::StepStarted { .. } => *ss2.lock().unwrap() = Some(now),
                // request assembly + model call (the script answers at once)
                RunEvent::ModelReplied { .. } => p2.lock().unwrap()[0] += since,
                // tools with their journal entries and policy checks
                RunEvent::ToolCalled { .. }
                | RunEvent::PolicyDecision { .. }
                | RunEvent::ToolFinished { .. } => p2.lock().unwrap()[1] += since,
                // verification and the store commit
                RunEvent::Verified { .. } => p2.lock().unwrap()[2] += since,
                RunEvent::StepCommitted { .. } => {
                    p2.lock().unwrap()[2] += since;
                    if let Some(t) = ss2.lock().unwrap().take() {
                        s2.lock().unwrap().push(now - t);
                    }
                }
                _ => {}
            }
            *m = Some(now);
            Flow::Continue
        };
        let provider = Scripted::new(script());
        let t0 = Instant::now();
        let r = rt
            .block_on(run_with(
                &contract,
                &provider,
                &store,
                RunOptions::default().observer(Arc::new(observer)),
            ))
            .unwrap();
        let total = t0.elapsed();
        assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
        assert_eq!(r.steps as usize, STEPS);
        let step_times = steps.lock().unwrap().clone();
        let step_sum: Duration = step_times.iter().sum();
        drop(store);
        let size = std::fs::metadata(&db).map_or(0, |m| m.len())
            + std::fs::metadata(dir.path().join("store.db-wal")).map_or(0, |m| m.len());
        let ms_step = step_sum.as_secs_f64() * 1000.0 / STEPS as f64;
        println!(
            "round {round}: total {:.1} ms, steps {:.3} ms/step (median {:.3}), prep+finish {:.1} ms, store {} bytes/step",
            total.as_secs_f64() * 1000.0,
            ms_step,
            median(&step_times).as_secs_f64() * 1000.0,
            (total - step_sum).as_secs_f64() * 1000.0,
            size / STEPS as u64
        );
        let ph = *phases.lock().unwrap();
        let per = |d: Duration| d.as_secs_f64() * 1000.0 / STEPS as f64;
        println!(
            "         per step: request+model {:.3} ms, tools {:.3} ms, verify+commit {:.3} ms",
            per(ph[0]),
            per(ph[1]),
            per(ph[2])
        );
        let tools_ms = rt.block_on(tool_time(&dir.path().join("ws-tools")));
        println!(
            "         the same tool calls alone: {tools_ms:.3} ms/step → harness overhead {:.3} ms/step",
            ms_step - tools_ms
        );
        overhead.push(ms_step - tools_ms);
        per_step.push(ms_step);
        bytes_per_step.push(size / STEPS as u64);
        prep.push((total - step_sum).as_secs_f64() * 1000.0);
    }
    per_step.sort_by(|a, b| a.total_cmp(b));
    overhead.sort_by(|a, b| a.total_cmp(b));
    bytes_per_step.sort();
    prep.sort_by(|a, b| a.total_cmp(b));
    println!(
        "median over 5 runs: {:.3} ms per step in all, {:.3} ms of it harness overhead (goal < 2 ms), {} store bytes per step, {:.1} ms per-run prep+finish ({FILES}-file workspace)",
        per_step[2], overhead[2], bytes_per_step[2], prep[2]
    );
}

/// The script's tool calls run directly through the registry on a fresh copy of the
/// workspace: what the tools themselves cost, to subtract from the step time.
async fn tool_time(ws: &std::path::Path) -> f64 {
    use io_harness::policy::BuiltinProtection;
    use io_harness::tools::{ToolContext, ToolLimits, ToolRegistry, Workspace};
    workspace(ws);
    let ctx = ToolContext {
        workspace: Arc::new(Workspace::open(ws).unwrap()),
        limits: ToolLimits::default(),
        exec: None,
        read_gate: None,
        memory: None,
    };
    let registry = ToolRegistry::standard();
    let calls: Vec<(String, serde_json::Value)> = script()
        .into_iter()
        .flat_map(|t| t.tool_calls.into_iter().map(|c| (c.name, c.input)))
        .collect();
    let t = Instant::now();
    for (name, input) in &calls {
        let d = registry
            .dispatch(&ctx, &BuiltinProtection, name, input)
            .await;
        assert!(!d.is_error, "{name}: {}", d.content);
    }
    t.elapsed().as_secs_f64() * 1000.0 / STEPS as f64
}

fn median(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get(s.len() / 2).copied().unwrap_or_default()
}
