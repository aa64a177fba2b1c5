//! Does a step cost more late in a run than early? (issue 18, goals 1 and 2.) A
//! 1,000-step scripted run that reads a new file every step, with a real store file,
//! run twice: with the default context settings and with `[context] max_tokens =
//! 60000`. Prints the harness overhead of a step (its wall time less the time inside
//! the tool) around steps 10, 100 and 1,000, the ratio of step 1,000 to step 10, and
//! the store bytes each step adds against the new content it brings.
//! Run: `cargo bench --bench step_growth` (`STEPS=300` for a shorter run).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use io_harness::provider::{ScriptTurn, Scripted};
use io_harness::run::{Flow, RunEvent, RunOptions};
use io_harness::{RunOutcome, Store, TaskContract, Verification, run_with};
use serde_json::json;

fn body(i: usize) -> String {
    (0..40)
        .map(|l| format!("pub fn item_{i}_{l}(x: u32) -> u32 {{ x.wrapping_mul({l}) + {i} }}\n"))
        .collect()
}

fn workspace(dir: &std::path::Path, files: usize) {
    for i in 0..files {
        let sub = dir.join(format!("src/mod{:02}", i % 40));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("file{i:04}.rs")), body(i)).unwrap();
    }
}

fn script(steps: usize) -> Vec<ScriptTurn> {
    let mut turns: Vec<ScriptTurn> = (0..steps - 1)
        .map(|i| {
            let path = format!("src/mod{:02}/file{i:04}.rs", i % 40);
            ScriptTurn::tool("read_file", json!({ "path": path }))
        })
        .collect();
    turns.push(ScriptTurn::text("done"));
    turns
}

#[derive(Default)]
struct Timing {
    /// Per step: wall time, time inside tools, store bytes after the commit.
    steps: Vec<(Duration, Duration, u64)>,
    step_start: Option<Instant>,
    tool_start: Option<Instant>,
    in_tools: Duration,
}

/// The store's size as committed (pages in use, the write-ahead log included), read
/// through a connection of its own.
fn store_bytes(db: &std::path::Path) -> u64 {
    let Ok(c) =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return 0;
    };
    let q = |sql: &str| c.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap_or(0);
    ((q("PRAGMA page_count") - q("PRAGMA freelist_count")) * q("PRAGMA page_size")) as u64
}

fn run(steps: usize, budget: Option<u64>) -> Vec<(Duration, Duration, u64)> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    workspace(&ws, steps);
    // SAFETY: no other thread of this process reads the environment yet.
    unsafe { std::env::set_var("XDG_CACHE_HOME", dir.path().join("cache")) };
    let db = dir.path().join("store.db");
    let store = Store::open(&db).unwrap();
    let mut contract = TaskContract::workspace(
        "bench",
        &ws,
        Verification::file_contains("src/mod00/file0000.rs", "item_0"),
    )
    .max_steps(steps as u32 + 1);
    contract.context.max_tokens = budget;
    let timing: Arc<Mutex<Timing>> = Arc::default();
    let t2 = timing.clone();
    let db2 = db.clone();
    let observer = move |e: &RunEvent| {
        let now = Instant::now();
        let mut t = t2.lock().unwrap();
        match e {
            RunEvent::StepStarted { .. } => {
                t.step_start = Some(now);
                t.in_tools = Duration::ZERO;
            }
            RunEvent::ToolCalled { .. } => t.tool_start = Some(now),
            RunEvent::ToolFinished { .. } => {
                if let Some(s) = t.tool_start.take() {
                    t.in_tools += now - s;
                }
            }
            RunEvent::StepCommitted { .. } => {
                if let Some(s) = t.step_start.take() {
                    let tools = t.in_tools;
                    t.steps.push((now - s, tools, store_bytes(&db2)));
                }
            }
            _ => {}
        }
        Flow::Continue
    };
    let provider = Scripted::new(script(steps));
    let r = rt
        .block_on(run_with(
            &contract,
            &provider,
            &store,
            RunOptions::default().observer(Arc::new(observer)),
        ))
        .unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    std::mem::take(&mut timing.lock().unwrap().steps)
}

/// Median overhead (ms) of the steps `at-5..at+5` (1-based), clamped to the run.
fn overhead_at(steps: &[(Duration, Duration, u64)], at: usize) -> f64 {
    let hi = at.min(steps.len());
    let lo = hi.saturating_sub(10);
    let mut v: Vec<f64> = steps[lo..hi]
        .iter()
        .map(|(w, t, _)| (w.saturating_sub(*t)).as_secs_f64() * 1000.0)
        .collect();
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let steps: usize = std::env::var("STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let new_content = body(500).len() as u64;
    for (name, budget) in [("default", None), ("max_tokens = 60000", Some(60_000))] {
        let t0 = Instant::now();
        let s = run(steps, budget);
        let total = t0.elapsed();
        let marks = [10, 100, steps];
        let o: Vec<f64> = marks.iter().map(|&m| overhead_at(&s, m)).collect();
        println!(
            "{name}: {} steps in {:.1} s; harness overhead per step (median of 10): step {} {:.3} ms, step {} {:.3} ms, step {} {:.3} ms; ratio last/10 = {:.2}",
            s.len(),
            total.as_secs_f64(),
            marks[0],
            o[0],
            marks[1],
            o[1],
            marks[2],
            o[2],
            o[2] / o[0]
        );
        let bytes_per_step = |from: usize, to: usize| {
            let (a, b) = (s[from - 1].2, s[to - 1].2);
            b.saturating_sub(a) / (to - from) as u64
        };
        let last = s.len();
        println!(
            "{name}: store bytes per step {} (steps 10-100), {} (steps {}-{}), for {new_content} bytes of new content per step (goal ≤ 2× + 512 = {})",
            bytes_per_step(10, 100.min(last)),
            bytes_per_step(last.saturating_sub(100).max(1), last),
            last.saturating_sub(100).max(1),
            last,
            2 * new_content + 512
        );
    }
}
