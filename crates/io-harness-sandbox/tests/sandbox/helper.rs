//! Helper processes: this test binary re-executed in a mode (see
//! `common::helper`). Each mode plays the harness in a situation a test cannot set
//! up inside its own process: a controlling terminal, secrets in its environment, an
//! unprivileged uid, being SIGKILLed mid-run. Results are printed as
//! `HELPER:key=value` lines.

use std::io::Read;
use std::os::fd::FromRawFd;

use io_harness_sandbox::{RunSpec, Sandbox};

use crate::common::*;

fn backend() -> Box<dyn Sandbox> {
    let disabled = std::env::var("HELPER_DISABLE").unwrap_or_default();
    match std::env::var("HELPER_BACKEND").as_deref() {
        Ok("floor") => Box::new(floor()),
        _ => {
            #[allow(unused_mut)]
            let mut sb = native();
            #[cfg(feature = "sandbox-test-disable-layers")]
            for layer in disabled.split(',').filter(|l| !l.is_empty()) {
                use io_harness_sandbox::Layer;
                sb = sb.without(match layer {
                    "setsid" => Layer::Setsid,
                    "seccomp" => Layer::Seccomp,
                    "mountns" => Layer::MountNs,
                    other => panic!("unknown layer {other}"),
                });
            }
            assert!(disabled.is_empty() || cfg!(feature = "sandbox-test-disable-layers"));
            Box::new(sb)
        }
    }
}

fn workdir() -> std::path::PathBuf {
    std::env::var_os("HELPER_WORKDIR")
        .map(Into::into)
        .unwrap_or_else(visible_root)
}

#[test]
fn entry() {
    let Ok(mode) = std::env::var("IO_HARNESS_SANDBOX_HELPER") else {
        return;
    };
    match mode.as_str() {
        "hold" => hold(),
        "tiocsti" => tiocsti(),
        "env" => env(),
        "unprivileged" => unprivileged(),
        "sigpipe" => sigpipe(),
        "caps" => caps(),
        "cargo-home" => cargo_home(),
        other => panic!("unknown helper mode {other}"),
    }
}

/// Start a long sleeper in a sandbox, say so, and wait to be killed.
fn hold() {
    let marker = std::env::var("HELPER_MARKER").unwrap();
    let mut argv = py("import time; print('up', flush=True); time.sleep(300)");
    argv.push(marker);
    let sb = backend();
    let mut child = sb.spawn(&RunSpec::new(argv, workdir())).unwrap();
    assert_eq!(read_line(child.stdout.as_mut().unwrap()), "up");
    println!("HELPER:ready=1");
    std::thread::sleep(std::time::Duration::from_secs(300));
    drop(child);
}

/// Our stdin is a pty that is our controlling terminal. The adversary tries to push
/// keystrokes into it with TIOCSTI (plain, and with a high bit set in the request).
fn tiocsti() {
    let code = "import os,ctypes\n\
                libc=ctypes.CDLL(None,use_errno=True)\n\
                try:\n  fd=os.open('/dev/tty', os.O_RDWR)\n\
                except OSError as e:\n  print('open', e.errno); raise SystemExit\n\
                for name,req in (('low',0x5412),('high',0x100005412)):\n  \
                  c=ctypes.c_char(b'Z')\n  \
                  r=libc.ioctl(fd, ctypes.c_ulong(req), ctypes.byref(c))\n  \
                  print(name, r, ctypes.get_errno())";
    let sb = backend();
    let out = sb.run(&RunSpec::new(py(code), workdir())).unwrap();
    for line in out.stdout.text().lines() {
        println!("HELPER:adv={line}");
    }
    // Whatever was injected now waits in our terminal's input queue.
    // SAFETY: fd 0 is our stdin; we only make it non-blocking and read it.
    let mut stdin = unsafe {
        let flags = libc::fcntl(0, libc::F_GETFL);
        libc::fcntl(0, libc::F_SETFL, flags | libc::O_NONBLOCK);
        std::fs::File::from_raw_fd(0)
    };
    let mut buf = [0u8; 64];
    let n = stdin.read(&mut buf).unwrap_or(0);
    std::mem::forget(stdin);
    println!("HELPER:injected={}", String::from_utf8_lossy(&buf[..n]));
}

/// Our environment holds provider keys; print the sandbox's environment.
fn env() {
    let sb = backend();
    let spec = RunSpec::new(vec!["/usr/bin/env".to_string()], workdir());
    let out = sb.run(&spec).unwrap();
    for line in out.stdout.text().lines() {
        println!("HELPER:env={line}");
    }
}

/// Run as an unprivileged user: both backends must still work, with rlimits and the
/// memory monitor standing in for cgroups.
fn unprivileged() {
    // SAFETY: geteuid has no preconditions.
    println!("HELPER:uid={}", unsafe { libc::geteuid() });
    let sb: Box<dyn Sandbox> = match std::env::var("HELPER_BACKEND").as_deref() {
        Ok("floor") => Box::new(floor()),
        _ => Box::new(io_harness_sandbox::NativeSandbox::new().unwrap()),
    };
    let hog = "chunks=[]\nfor i in range(256): chunks.append(b'\\x01'*(1<<20))\nprint('SURVIVED')";
    let mut spec = RunSpec::new(py(hog), workdir());
    spec.limits.memory_bytes = Some(128 << 20);
    let out = sb.run(&spec).unwrap();
    println!("HELPER:hog={:?}", out.cap_hit);
    let mut spec = RunSpec::new(
        sh("id -u; echo ok > made; cat /proc/self/status | grep CapEff"),
        workdir(),
    );
    spec.limits.memory_bytes = Some(256 << 20);
    let out = sb.run(&spec).unwrap();
    println!("HELPER:exit={:?}", out.exit_code);
    println!("HELPER:out={}", out.stdout.text().replace('\n', " "));
    println!("HELPER:err={}", out.stderr.text().replace('\n', " "));
    println!("HELPER:namespaces={}", out.layers.namespaces.len());
    println!("HELPER:cgroup={}", out.layers.limits.cgroup.len());
    println!("HELPER:monitor={}", out.layers.limits.memory_monitor);
    println!("HELPER:rlimits={}", out.layers.limits.rlimits.join(","));
    println!("HELPER:landlock={}", out.layers.landlock.status.label());
    println!("HELPER:seccomp={}", out.layers.seccomp);
    // The view and the setuid sweep hold for an unprivileged harness too.
    let absent = crate::view::absent_script(&workdir(), "");
    // The harness's own setuid file is swept; the command's chmod is refused.
    let planted = workdir().join("planted-sh");
    std::fs::copy("/bin/sh", &planted).unwrap();
    let mode = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o4755);
    std::fs::set_permissions(&planted, mode).unwrap();
    let mut spec = RunSpec::new(
        sh(&format!(
            "{absent}cp /bin/sh suid-sh && chmod 4755 suid-sh || true"
        )),
        workdir(),
    );
    spec.limits.memory_bytes = Some(256 << 20);
    let out = sb.run(&spec).unwrap();
    println!(
        "HELPER:present={}",
        out.stdout.text().replace('\n', " ").trim()
    );
    println!("HELPER:setuid_cleared={}", out.setuid_cleared.len());
    println!("HELPER:host_uid={:?}", out.layers.host_uid);
}

/// An embedder that does not ignore SIGPIPE feeds stdin to a command that exits
/// without reading it: the harness must survive.
fn sigpipe() {
    // SAFETY: restoring the default disposition, as a C embedder would have it.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let sb = backend();
    let mut spec = RunSpec::new(vec!["/bin/true".to_string()], workdir());
    spec.stdin = vec![b'x'; 4 << 20];
    let out = sb.run(&spec).unwrap();
    println!("HELPER:exit={:?}", out.exit_code);
}

/// Run the cap scenarios (`caps.rs`) as whoever we are (an unprivileged user), each
/// in a fresh directory, and print `HELPER:<scenario>=ok` or the failure.
fn caps() {
    let sb: Box<dyn Sandbox> = match std::env::var("HELPER_BACKEND").as_deref() {
        Ok("floor") => Box::new(floor()),
        _ => Box::new(io_harness_sandbox::NativeSandbox::new().unwrap()),
    };
    let floor = std::env::var("HELPER_BACKEND").as_deref() == Ok("floor");
    let host = std::path::PathBuf::from(std::env::var_os("HELPER_HOSTDIR").unwrap());
    for (name, on_floor) in crate::caps::SCENARIOS {
        let only = std::env::var("HELPER_ONLY").unwrap_or_default();
        if floor && !on_floor || !only.is_empty() && only != *name {
            continue;
        }
        let wd = workdir().join(name);
        std::fs::create_dir(&wd).unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::caps::scenario(name, sb.as_ref(), &wd, &host)
        }));
        match r {
            Ok(()) => println!("HELPER:{name}=ok"),
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                println!("HELPER:{name}=FAIL {}", msg.replace('\n', " "));
            }
        }
        let _ = std::fs::remove_dir_all(&wd);
    }
}

/// `CARGO_HOME` is set (outside `$HOME`): list it and read its tool and credentials.
fn cargo_home() {
    let cargo = std::env::var("CARGO_HOME").unwrap();
    let sb = backend();
    let script = format!(
        "echo listed=$(ls {cargo} | tr '\\n' ' '); echo tool=$(cat {cargo}/bin/tool); \
         echo credentials=$(cat {cargo}/credentials.toml 2>&1)"
    );
    let mut spec = crate::view::plain_spec(sh(&script), &workdir());
    if let Some(ro) = std::env::var_os("HELPER_READ_ONLY") {
        spec.read_only_paths.push(ro.into());
    }
    let out = sb.run(&spec).unwrap();
    for line in out.stdout.text().lines() {
        println!("HELPER:{}", line.trim_end());
    }
    println!("HELPER:err={}", out.stderr.text().replace('\n', " "));
}
