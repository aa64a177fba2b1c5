//! What each layer costs: wall-clock medians and CPU time per spawn of `/bin/true`
//! with one layer switched off at a time (test-only switch).
//!
//! `cargo bench --bench sandbox_layers --features sandbox-test-disable-layers`
use std::time::{Duration, Instant};

use io_harness_sandbox::{FloorSandbox, Layer, NativeSandbox, RunSpec, Sandbox, probe};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn cpu_us() -> u64 {
    let mut total = 0;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: getrusage fills the struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut ru) };
        let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
        total += us(ru.ru_utime) + us(ru.ru_stime);
    }
    total
}

/// A named way to start `/bin/true`, run once per sample.
type Case = (&'static str, Box<dyn FnMut() -> bool>);

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let spec = RunSpec::new(["/bin/true"], dir.path());
    let _ = probe();
    let n = NativeSandbox::new().unwrap();
    let mut cases: Vec<Case> = Vec::new();
    let mut sb_case = |name: &'static str, sb: Box<dyn Sandbox>| {
        let spec = spec.clone();
        cases.push((name, Box::new(move || sb.run(&spec).unwrap().success())));
    };
    sb_case("native", Box::new(n.clone()));
    sb_case("native -cgroup", Box::new(n.clone().without(Layer::Cgroup)));
    sb_case(
        "native -landlock",
        Box::new(n.clone().without(Layer::Landlock)),
    );
    sb_case(
        "native -seccomp",
        Box::new(n.clone().without(Layer::Seccomp)),
    );
    sb_case(
        "native -mountns",
        Box::new(n.clone().without(Layer::MountNs)),
    );
    sb_case("native -netns", Box::new(n.clone().without(Layer::NetNs)));
    sb_case("floor", Box::new(FloorSandbox::new()));
    sb_case(
        "floor -cgroup",
        Box::new(FloorSandbox::new().without(Layer::Cgroup)),
    );
    cases.push((
        "unshare",
        Box::new(|| {
            std::process::Command::new("unshare")
                .args(["-Urnpm", "--fork", "/bin/true"])
                .status()
                .unwrap()
                .success()
        }),
    ));
    let runs = 100;
    let mut times = vec![Vec::new(); cases.len()];
    let mut cpu = vec![0u64; cases.len()];
    let n = cases.len();
    for round in 0..runs {
        for k in 0..n {
            let i = (round + k) % n;
            let f = &mut cases[i].1;
            let c = cpu_us();
            let t = Instant::now();
            assert!(f());
            times[i].push(t.elapsed());
            cpu[i] += cpu_us() - c;
        }
    }
    for (((name, _), t), c) in cases.iter().zip(times).zip(cpu) {
        println!(
            "{:>8.3} ms wall {:>8.3} ms cpu  {name}",
            median(t).as_secs_f64() * 1e3,
            c as f64 / runs as f64 / 1e3
        );
    }
}
