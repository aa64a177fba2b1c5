use io_harness::sandbox::{NativeSandbox, RunSpec, Sandbox, probe};
fn main() {
    let dir = tempfile::tempdir().unwrap();
    let spec = RunSpec::new(["/bin/true"], dir.path());
    let _ = probe();
    let n = NativeSandbox::new().unwrap();
    let runs: usize = std::env::var("RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    for _ in 0..runs { assert!(n.run(&spec).unwrap().success()); }
}
