use io_harness::sandbox::{FloorSandbox, Layer, NativeSandbox, RunSpec, Sandbox, probe};
use std::time::{Duration, Instant};
fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}
fn main() {
    let dir = tempfile::tempdir().unwrap();
    let spec = RunSpec::new(["/bin/true"], dir.path());
    let _ = probe();
    let n = NativeSandbox::new().unwrap();
    let cases: Vec<(&str, Box<dyn Sandbox>)> = vec![
        ("native", Box::new(n.clone())),
        ("native -cgroup", Box::new(n.clone().without(Layer::Cgroup))),
        (
            "native -landlock",
            Box::new(n.clone().without(Layer::Landlock)),
        ),
        (
            "native -seccomp",
            Box::new(n.clone().without(Layer::Seccomp)),
        ),
        (
            "native -mountns",
            Box::new(n.clone().without(Layer::MountNs)),
        ),
        ("native -netns", Box::new(n.clone().without(Layer::NetNs))),
        ("native -pidns", Box::new(n.clone().without(Layer::PidNs))),
        (
            "native -cg-ll-sc",
            Box::new(
                n.clone()
                    .without(Layer::Cgroup)
                    .without(Layer::Landlock)
                    .without(Layer::Seccomp),
            ),
        ),
        ("floor", Box::new(FloorSandbox::new())),
        (
            "floor -cgroup",
            Box::new(FloorSandbox::new().without(Layer::Cgroup)),
        ),
        (
            "floor -cg-ll-sc",
            Box::new(
                FloorSandbox::new()
                    .without(Layer::Cgroup)
                    .without(Layer::Landlock)
                    .without(Layer::Seccomp),
            ),
        ),
    ];
    let mut times = vec![Vec::new(); cases.len()];
    for _ in 0..60 {
        for (i, (_, s)) in cases.iter().enumerate() {
            let t = Instant::now();
            let o = s
                .run(&spec)
                .map_err(|e| format!("{}: {e:?}", cases[i].0))
                .unwrap();
            assert!(o.success());
            times[i].push(t.elapsed());
        }
    }
    for ((name, _), t) in cases.iter().zip(times) {
        println!("{:>8.3} ms {name}", median(t).as_secs_f64() * 1e3);
    }
}
