//! Resource caps: each adversary is bounded (at most ~2,000 forks, twice the memory
//! cap, 256 MiB of output) so a failing cap cannot take the machine down, and each
//! case checks which cap the outcome reports.

use std::time::Duration;

use io_harness_sandbox::{Cap, RunSpec, Sandbox, SandboxError, SandboxLimits};

use crate::common::*;

const MIB: u64 = 1 << 20;

fn with_limits(f: &Fixture, argv: Vec<String>, limits: SandboxLimits) -> RunSpec {
    let mut spec = f.spec(argv);
    spec.limits = limits;
    spec
}

fn fork_bomb_bounded(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let marker = unique("forkbomb");
    let code = "import os,sys,time\n\
                n=0\n\
                for i in range(2000):\n  \
                  try: pid=os.fork()\n  \
                  except OSError: break\n  \
                  if pid==0:\n    time.sleep(60); os._exit(0)\n  \
                  n+=1\n\
                print('FORKED', n, flush=True)";
    let mut argv = py(code);
    argv.push(marker.clone());
    let limits = SandboxLimits {
        processes: Some(64),
        ..test_limits()
    };
    let out = run(sb, &with_limits(&f, argv, limits));
    let forked: usize = out
        .stdout
        .text()
        .trim()
        .trim_start_matches("FORKED ")
        .parse()
        .unwrap();
    assert!(forked < 64, "{forked} forks with a cap of 64");
    assert_eq!(out.cap_hit, Some(Cap::Processes));
    assert!(
        processes_with(&marker).is_empty(),
        "fork bomb children survived teardown"
    );
}
backends!(fork_bomb_bounded, [native, floor]);

fn memory_hog_killed(sb: &dyn Sandbox) {
    let f = Fixture::new();
    // Touch up to twice the cap, 1 MiB at a time.
    let code = "chunks=[]\n\
                for i in range(128):\n  chunks.append(b'\\x01'*(1<<20))\n\
                print('SURVIVED', flush=True)";
    let limits = SandboxLimits {
        memory_bytes: Some(64 * MIB),
        ..test_limits()
    };
    let out = run(sb, &with_limits(&f, py(code), limits));
    assert!(!out.stdout.text().contains("SURVIVED"));
    assert_eq!(out.signal, Some(libc::SIGKILL));
    assert_eq!(out.cap_hit, Some(Cap::Memory));
}
backends!(memory_hog_killed, [native, floor]);

fn cpu_spin_killed(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let limits = SandboxLimits {
        cpu_secs: Some(1),
        ..test_limits()
    };
    let out = run(sb, &with_limits(&f, py("while True: pass"), limits));
    // RLIMIT_CPU (SIGXCPU) and the cap over the tree (SIGKILL) race at 1 s.
    assert!(
        matches!(out.signal, Some(libc::SIGXCPU) | Some(libc::SIGKILL)),
        "{out:?}"
    );
    assert_eq!(out.cap_hit, Some(Cap::Cpu));
}
backends!(cpu_spin_killed, [native, floor]);

fn wall_clock_kills(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let limits = SandboxLimits {
        wall_secs: Some(1),
        ..test_limits()
    };
    let out = run(sb, &with_limits(&f, sh("sleep 30"), limits));
    assert_eq!(out.cap_hit, Some(Cap::Wall));
    assert_eq!(out.exit_code, None);
    assert!(out.duration < Duration::from_secs(15), "{:?}", out.duration);
}
backends!(wall_clock_kills, [native, floor]);

fn fd_exhaustion_bounded(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let code = "import os\n\
                fds=[]\n\
                try:\n  \
                  for i in range(100000): fds.append(os.open('/dev/null', os.O_RDONLY))\n\
                except OSError as e: print(len(fds), e.errno)";
    let limits = SandboxLimits {
        open_files: Some(64),
        ..test_limits()
    };
    let out = run(sb, &with_limits(&f, py(code), limits));
    let text = out.stdout.text();
    let mut parts = text.split_whitespace();
    let opened: usize = parts.next().unwrap().parse().unwrap();
    assert!(opened <= 64, "{opened} fds opened with a cap of 64");
    assert_eq!(parts.next(), Some("24"), "EMFILE expected: {text}");
    assert_eq!(out.exit_code, Some(0));
    // Enforced, but nothing outside can observe it: never reported.
    assert_eq!(out.cap_hit, None);
    assert!(out.layers.enforces(Cap::OpenFiles));
}
backends!(fd_exhaustion_bounded, [native, floor]);

fn output_flood_truncated(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let limits = SandboxLimits {
        output_bytes: Some(MIB),
        ..test_limits()
    };
    // 32 caps: drained to its end (past 64 caps the command is killed, issue 18).
    let spec = with_limits(&f, sh("head -c 33554432 /dev/zero; echo tail >&2"), limits);
    let out = run(sb, &spec);
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.stdout.bytes.len() as u64, MIB);
    assert_eq!(out.stdout.tail.len() as u64, MIB, "the true tail is kept");
    assert_eq!(out.stdout.total_bytes, 32 * MIB);
    assert!(out.stdout.truncated && !out.stderr.truncated);
    assert_eq!(out.stderr.text(), "tail\n");
    assert_eq!(out.cap_hit, Some(Cap::Output));
}
backends!(output_flood_truncated, [native, floor]);

fn huge_argv_refused(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let spec = f.spec(vec!["/bin/echo".into(), "x".repeat(4 << 20)]);
    match sb.run(&spec) {
        Err(SandboxError::Exec { source, .. }) => {
            assert_eq!(source.raw_os_error(), Some(libc::E2BIG))
        }
        other => panic!("expected E2BIG, got {other:?}"),
    }
}
backends!(huge_argv_refused, [native, floor]);
