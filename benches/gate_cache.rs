//! First and second run of a workspace-form gate (`cargo_test`) in the same run: the
//! first builds the run's dependency cache, the second copies the sealed cache and
//! compiles only the agent's crate and the criterion. Both run in the sandbox the
//! machine provides, as a run's gates do.
//!
//! `cargo bench --bench gate_cache` (set `BENCH_RUNS` for more than 3 runs per case,
//! `GATE_BENCH_DEPS` for other dependencies than `itoa,memchr`; each must be in the
//! local registry, since gates build offline).

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

fn main() {
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
        let workspace = Workspace::open(&ws).expect("workspace");
        let (mut first, mut second) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            // A run of its own each time: a fresh executor, so a fresh cache.
            let store = Store::memory().expect("store");
            let run_id = store
                .start_run("bench", &ws.display().to_string())
                .expect("run");
            let exec = Executor::new(
                sandbox.clone(),
                SandboxSettings::default(),
                &ws,
                store,
                run_id,
                None,
                Vec::new(),
            );
            for (i, times) in [&mut first, &mut second].into_iter().enumerate() {
                let started = Instant::now();
                let report = rt.block_on(io_harness::verify::check(
                    std::slice::from_ref(&gate),
                    &workspace,
                    Some(&exec),
                ));
                times.push(started.elapsed());
                let r = &report.results[0];
                assert!(
                    r.passed,
                    "gate {} failed: {} {:?}",
                    i + 1,
                    r.summary,
                    r.output
                );
                if i == 1 {
                    assert!(r.summary.contains("reused"), "{}", r.summary);
                }
            }
            io_harness::verify::remove_gate_dir(&exec);
        }
        let (a, b) = (median(first), median(second));
        println!(
            "dependency {dep}: first gate {:.2}s, second gate {:.2}s, first/second {:.2} \
             (median of {runs})",
            a.as_secs_f64(),
            b.as_secs_f64(),
            a.as_secs_f64() / b.as_secs_f64()
        );
    }
}
