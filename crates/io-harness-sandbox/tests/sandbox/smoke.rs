use io_harness_sandbox::{NativeSandbox, RunSpec, Sandbox};

#[test]
fn smoke() {
    let dir = tempfile::tempdir().unwrap();
    let spec = RunSpec::new(["/bin/true"], dir.path());
    let sb = NativeSandbox::new().unwrap();
    for _ in 0..40 {
        let t = std::time::Instant::now();
        let out = sb.run(&spec).unwrap();
        eprintln!("run {:?} {:?}", t.elapsed(), out.exit_code);
    }
}
