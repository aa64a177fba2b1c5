use io_harness::sandbox::{self, FloorSandbox, NativeSandbox, RunSpec, Sandbox};

#[test]
fn smoke() {
    let p = sandbox::probe();
    eprintln!("{p:#?}");
    let dir = tempfile::tempdir().unwrap();
    let spec = RunSpec::new(
        [
            "/bin/sh",
            "-c",
            "echo hi; id; hostname; ls /tmp /proc | head; cat /proc/self/status | grep -i cap; ls -la /dev | head -30; ls -la /tmp ~ ; mount | head -40",
        ],
        dir.path(),
    );
    let out = NativeSandbox::new().unwrap().run(&spec).unwrap();
    eprintln!("{out:#?}\n{}\n{}", out.stdout.text(), out.stderr.text());
    let out = FloorSandbox::new().run(&spec).unwrap();
    eprintln!("{out:#?}\n{}\n{}", out.stdout.text(), out.stderr.text());
}
