//! The first gate of a *second run* against the cold first gate of a first run, for a
//! workspace-form gate (`cargo_test`): the first run builds the dependencies into the
//! dependency cache shared across runs, the second run (a fresh executor and store,
//! as another process would have) copies the sealed entry and compiles only the
//! agent's crate and the criterion. Both run in the sandbox the machine provides, as
//! a run's gates do. The shared store lives in a temp `XDG_CACHE_HOME` of the
//! bench's, emptied before each first run so that gate is cold.
//!
//! `cargo bench --bench gate_cache` (set `BENCH_RUNS` for more than 3 pairs per case,
//! `GATE_BENCH_DEPS` for other dependencies than `itoa,memchr`; each must be in the
//! local registry, since gates build offline). Goal: second/cold <= 0.2.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_harness::contract::SandboxSettings;
use io_harness::exec::Executor;
use io_harness::tools::Workspace;
use io_harness::{Store, Verification};

const CRITERION: &str = "#[test]\nfn renders() { assert_eq!(benchcrate::render(42), \"42\"); }\n";

/// A crate using `dep` for one function, with its lockfile.
fn crate_with(dir: &Path, dep: &str) {
    std::fs::create_dir_all(dir.join("src")).expect("crate dir");
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"benchcrate\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n{dep} = \"*\"\n"
        ),
    )
    .expect("manifest");
    let body = match dep {
        "memchr" => {
            "let s = n.to_string(); assert!(memchr::memchr(b'x', s.as_bytes()).is_none()); s"
        }
        "itoa" => "itoa::Buffer::new().format(n).to_string()",
        _ => "n.to_string()",
    };
    std::fs::write(
        dir.join("src/lib.rs"),
        format!("#[allow(unused_imports)]\nuse {dep} as _;\npub fn render(n: u32) -> String {{ {body} }}\n"),
    )
    .expect("lib.rs");
    let ok = std::process::Command::new("cargo")
        .args(["generate-lockfile", "--offline", "-q"])
        .current_dir(dir)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "cargo generate-lockfile --offline failed for {dep}");
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// One run's first gate: a fresh store and executor (what a new process has), the
/// gate timed, the run's gate directory removed after it. Returns the time and the
/// gate's summary.
fn first_gate_of_a_run(
    rt: &tokio::runtime::Runtime,
    sandbox: &Arc<dyn io_harness::Sandbox>,
    ws: &Path,
    gate: &Verification,
) -> (Duration, String) {
    let workspace = Workspace::open(ws).expect("workspace");
    let store = Store::memory().expect("store");
    let run_id = store
        .start_run("bench", &ws.display().to_string())
        .expect("run");
    let exec = Executor::new(
        sandbox.clone(),
        SandboxSettings::default(),
        ws,
        store,
        run_id,
        None,
        Vec::new(),
    );
    let started = Instant::now();
    let report = rt.block_on(io_harness::verify::check(
        std::slice::from_ref(gate),
        &workspace,
        Some(&exec),
    ));
    let took = started.elapsed();
    io_harness::verify::remove_gate_dir(&exec);
    let r = &report.results[0];
    assert!(r.passed, "gate failed: {} {:?}", r.summary, r.output);
    (took, r.summary.clone())
}

fn main() {
    let cache = tempfile::tempdir().expect("cache dir");
    // SAFETY: set before the runtime or any other thread exists, so nothing reads the
    // environment concurrently.
    unsafe { std::env::set_var("XDG_CACHE_HOME", cache.path()) };
    let store_dir = cache.path().join("io-harness/deps");
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let deps = std::env::var("GATE_BENCH_DEPS").unwrap_or_else(|_| "itoa,memchr".into());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let sandbox: Arc<dyn io_harness::Sandbox> =
        Arc::from(io_harness::sandbox::select().expect("a sandbox"));
    println!("backend: {}", sandbox.backend().label());
    for dep in deps.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let dir = tempfile::tempdir().expect("temp dir");
        let ws = dir.path().join("ws");
        crate_with(&ws, dep);
        let crit = dir.path().join("criterion.rs");
        std::fs::write(&crit, CRITERION).expect("criterion");
        let gate = Verification::cargo_test("Cargo.toml", [&crit]).expect("criterion file");
        let (mut cold, mut second) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            // A cold store for the first run.
            let _ = std::fs::remove_dir_all(&store_dir);
            let (t, summary) = first_gate_of_a_run(&rt, &sandbox, &ws, &gate);
            assert!(summary.contains("built and shared"), "{summary}");
            cold.push(t);
            let (t, summary) = first_gate_of_a_run(&rt, &sandbox, &ws, &gate);
            assert!(summary.contains("shared cache hit"), "{summary}");
            second.push(t);
        }
        let (a, b) = (median(cold), median(second));
        println!(
            "dependency {dep}: cold first gate (run 1) {:.2}s, first gate of run 2 {:.2}s, \
             run 2 / cold {:.2} (goal <= 0.20; median of {runs})",
            a.as_secs_f64(),
            b.as_secs_f64(),
            b.as_secs_f64() / a.as_secs_f64()
        );
    }
}
