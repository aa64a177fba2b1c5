//! Lifecycle: nothing the command started survives teardown (daemons, SIGTERM
//! ignorers, background jobs), killing the harness kills the sandbox, no fd leaks
//! in, no core dumps, the spawn handle works, and many sandboxes start concurrently
//! while other threads allocate.

use std::io::Write;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use io_harness_sandbox::{Cap, Sandbox, SandboxLimits};

use crate::common::*;

/// A python sleeper whose command line carries `marker`.
fn sleeper(marker: &str) -> Vec<String> {
    let mut argv = py("import time; print('up', flush=True); time.sleep(300)");
    argv.push(marker.to_owned());
    argv
}

fn double_forked_daemon_gone(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let marker = unique("daemon");
    let code = "import os,sys,signal\n\
                if os.fork()==0:\n  \
                  os.setsid()\n  \
                  if os.fork()==0:\n    \
                    signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGHUP, signal.SIG_IGN)\n    \
                    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[1]])\n  \
                  os._exit(0)\n\
                os.wait(); print('detached', flush=True)";
    let mut argv = py(code);
    argv.push(marker.clone());
    let out = run(sb, &f.spec(argv));
    assert_eq!(out.stdout.text(), "detached\n");
    assert!(
        processes_with(&marker).is_empty(),
        "the daemon survived teardown"
    );
}
backends!(double_forked_daemon_gone, [native, floor]);

fn background_job_gone(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let marker = unique("nohup");
    let spec = f.spec(sh(&format!(
        "nohup {PY} -c 'import time; time.sleep(300)' {marker} >/dev/null 2>&1 & echo started"
    )));
    let out = run(sb, &spec);
    assert_eq!(out.stdout.text(), "started\n");
    assert!(
        processes_with(&marker).is_empty(),
        "the background job survived teardown"
    );
}
backends!(background_job_gone, [native, floor]);

fn harness_killed_mid_run(backend: &str) {
    let marker = unique("orphan");
    let f = Fixture::new();
    let mut child = helper("hold")
        .env("HELPER_BACKEND", backend)
        .env("HELPER_MARKER", &marker)
        .env("HELPER_WORKDIR", f.workdir())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    loop {
        let line = read_line(&mut stdout);
        assert!(
            !line.is_empty() || child.try_wait().unwrap().is_none(),
            "helper ended early"
        );
        if line == "HELPER:ready=1" {
            break;
        }
    }
    assert!(
        !processes_with(&marker).is_empty(),
        "the sandboxed process is not running"
    );
    child.kill().unwrap(); // SIGKILL: no destructor runs in the harness
    child.wait().unwrap();
    assert!(
        gone_within(&marker, Duration::from_secs(10)),
        "the sandbox outlived its harness"
    );
}

#[test]
fn harness_killed_mid_run_native() {
    harness_killed_mid_run("native");
}

#[test]
fn harness_killed_mid_run_floor() {
    harness_killed_mid_run("floor");
}

fn no_core_dumps(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let (_, out, _) = run_text(
        sb,
        &f.spec(sh("ulimit -c; ulimit -c unlimited && echo RAISED")),
    );
    assert!(out.starts_with("0\n") && !out.contains("RAISED"), "{out}");
    let out = run(sb, &f.spec(sh("kill -SEGV $$")));
    assert_eq!(out.signal, Some(libc::SIGSEGV));
    assert!(
        !std::fs::read_dir(f.workdir())
            .unwrap()
            .any(|e| { e.unwrap().file_name().to_string_lossy().starts_with("core") })
    );
}
backends!(no_core_dumps, [native, floor]);

fn inherited_fds_closed(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let file = std::fs::File::open(f.canary()).unwrap();
    // SAFETY: dup of an fd we own; the duplicate has no close-on-exec flag.
    let leaked = unsafe { libc::dup(std::os::fd::AsRawFd::as_raw_fd(&file)) };
    assert!(leaked > 2);
    let code = "import os; print(sorted(int(x) for x in os.listdir('/proc/self/fd')))";
    let (_, out, _) = run_text(sb, &f.spec(py(code)));
    // SAFETY: closing the duplicate we made.
    unsafe { libc::close(leaked) };
    assert_eq!(out.trim(), "[0, 1, 2, 3]", "fds leaked into the sandbox");
}
backends!(inherited_fds_closed, [native, floor]);

fn spawn_handle_pipes(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let mut child = sb.spawn(&f.spec(vec!["cat".into()])).unwrap();
    assert_eq!(child.backend(), sb.backend());
    child.stdin.as_mut().unwrap().write_all(b"hello\n").unwrap();
    assert_eq!(read_line(child.stdout.as_mut().unwrap()), "hello");
    let out = child.wait().unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.cap_hit, None);
}
backends!(spawn_handle_pipes, [native, floor]);

fn spawn_handle_killed_on_drop(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let marker = unique("dropped");
    let mut child = sb.spawn(&f.spec(sleeper(&marker))).unwrap();
    assert_eq!(read_line(child.stdout.as_mut().unwrap()), "up");
    assert!(!processes_with(&marker).is_empty());
    drop(child);
    assert!(
        processes_with(&marker).is_empty(),
        "dropping the handle left the process"
    );
}
backends!(spawn_handle_killed_on_drop, [native, floor]);

fn spawn_handle_wall_clock_without_waiting(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let marker = unique("watchdog");
    let mut spec = f.spec(sleeper(&marker));
    spec.limits = SandboxLimits {
        wall_secs: Some(1),
        ..test_limits()
    };
    let mut child = sb.spawn(&spec).unwrap();
    assert_eq!(read_line(child.stdout.as_mut().unwrap()), "up");
    // Nobody waits: the watchdog alone must enforce the deadline.
    assert!(
        gone_within(&marker, Duration::from_secs(15)),
        "the deadline was not enforced"
    );
    let out = child.wait().unwrap();
    assert_eq!(out.cap_hit, Some(Cap::Wall));
}
backends!(spawn_handle_wall_clock_without_waiting, [native, floor]);

/// Many sandboxes at once from many threads, while other threads hammer the
/// allocator: a child that allocated between clone and exec could deadlock here.
#[test]
fn concurrent_spawns_while_allocating() {
    let stop = Arc::new(AtomicBool::new(false));
    let churn: Vec<_> = (0..3)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let v: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 512 + i]).collect();
                    n += v.len() as u64;
                }
                n
            })
        })
        .collect();
    let f = Arc::new(Fixture::new());
    let workers: Vec<_> = (0..8)
        .map(|t| {
            let f = Arc::clone(&f);
            std::thread::spawn(move || {
                let sb = native();
                for i in 0..4 {
                    let word = format!("w{t}-{i}");
                    let (code, out, err) =
                        run_text(&sb, &f.spec(vec!["/bin/echo".into(), word.clone()]));
                    assert_eq!(code, Some(0), "{err}");
                    assert_eq!(out.trim(), word);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a sandbox run failed");
    }
    stop.store(true, Ordering::Relaxed);
    for c in churn {
        assert!(c.join().unwrap() > 0);
    }
}
