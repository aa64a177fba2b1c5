//! Median spawn latency of `/bin/true`: the native backend (every layer, cgroup setup
//! and teardown included) and the floor, side by side with `unshare -Urnpm --fork`
//! and bubblewrap, measured round-robin in one run so machine noise hits all alike.
//!
//! `cargo bench --bench sandbox_spawn` (set `BENCH_RUNS` to change the 200 runs).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use io_harness_sandbox::{FloorSandbox, NativeSandbox, RunSpec, Sandbox, probe};

type Case = (&'static str, Box<dyn FnMut() -> bool>);

fn command(argv: &'static [&'static str]) -> Box<dyn FnMut() -> bool> {
    Box::new(move || {
        Command::new(argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

fn sandbox(sb: impl Sandbox + 'static, spec: RunSpec) -> Box<dyn FnMut() -> bool> {
    Box::new(move || sb.run(&spec).is_ok_and(|o| o.success()))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = RunSpec::new(["/bin/true"], dir.path());
    let _ = probe(); // the one-time probe is not part of a spawn

    let mut cases: Vec<Case> = vec![("direct exec", command(&["/bin/true"]))];
    match NativeSandbox::new() {
        Ok(n) => cases.push(("io-harness native (all layers)", sandbox(n, spec.clone()))),
        Err(e) => println!("native backend unavailable: {e}"),
    }
    cases.push((
        "io-harness floor",
        sandbox(FloorSandbox::new(), spec.clone()),
    ));
    cases.push((
        "unshare -Urnpm --fork",
        command(&["unshare", "-Urnpm", "--fork", "/bin/true"]),
    ));
    let bwrap = [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--unshare-all",
        "--new-session",
        "/bin/true",
    ];
    if command(&["bwrap", "--version"])() {
        cases.push((
            "bwrap --ro-bind / / --dev --proc --tmpfs /tmp --unshare-all --new-session",
            command(Box::leak(Box::new(bwrap))),
        ));
    } else {
        println!("bwrap not installed: skipping (apt-get install -y bubblewrap)");
    }

    // Warm up, then measure round-robin.
    for (name, f) in cases.iter_mut() {
        for _ in 0..5 {
            assert!(f(), "{name} failed");
        }
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); cases.len()];
    // Rotate the order each round: a namespace torn down by one case delays the
    // next case's creation (the kernel cleans network namespaces up asynchronously),
    // so no case may always follow the same neighbour.
    let n = cases.len();
    for round in 0..runs {
        for k in 0..n {
            let i = (round + k) % n;
            let (name, f) = &mut cases[i];
            let t = Instant::now();
            let ok = f();
            times[i].push(t.elapsed());
            assert!(ok, "{name} failed");
        }
    }
    let medians: Vec<(&str, Duration)> = cases
        .iter()
        .zip(times)
        .map(|((n, _), t)| (*n, median(t)))
        .collect();
    let find = |prefix: &str| {
        medians
            .iter()
            .find(|(n, _)| n.starts_with(prefix))
            .map(|(_, d)| *d)
    };
    println!("median spawn latency of /bin/true over {runs} runs:");
    for (name, d) in &medians {
        println!("  {:>8.3} ms  {name}", d.as_secs_f64() * 1e3);
    }
    let ratio = |a: Option<Duration>, b: Option<Duration>| match (a, b) {
        (Some(a), Some(b)) => format!("{:.2}", a.as_secs_f64() / b.as_secs_f64()),
        _ => "n/a".into(),
    };
    let native = find("io-harness native");
    let floor = find("io-harness floor");
    println!("ratios:");
    println!("  native / unshare = {}", ratio(native, find("unshare")));
    println!("  native / bwrap   = {}", ratio(native, find("bwrap")));
    println!("  floor  / unshare = {}", ratio(floor, find("unshare")));
    println!("  floor  / direct  = {}", ratio(floor, find("direct")));
}
