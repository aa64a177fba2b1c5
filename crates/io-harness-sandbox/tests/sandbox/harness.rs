//! Cases that need the harness itself in a particular state, played by a helper
//! process: sharing a controlling terminal, holding provider keys, running as an
//! unprivileged user.

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Stdio;

use crate::common::*;

/// Run the `tiocsti` helper on a fresh pty that becomes its controlling terminal.
pub fn tiocsti(backend: &str, disable: &str) -> Vec<(String, String)> {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty fills two fds; NULL name, termios and winsize are allowed.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0);
    // SAFETY: openpty returned these fds; we own them from here on.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    // Raw mode, so an injected byte is readable at once (no line discipline).
    // SAFETY: termios calls on the pty slave we own.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        libc::tcgetattr(std::os::fd::AsRawFd::as_raw_fd(&slave), &mut t);
        libc::cfmakeraw(&mut t);
        libc::tcsetattr(std::os::fd::AsRawFd::as_raw_fd(&slave), libc::TCSANOW, &t);
    }
    let mut cmd = helper("tiocsti");
    cmd.env("HELPER_BACKEND", backend)
        .env("HELPER_DISABLE", disable)
        .stdin(Stdio::from(slave))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setsid and ioctl are async-signal-safe; the child makes the pty on
    // its stdin its controlling terminal.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    drop(master);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    helper_lines(&stdout)
}

fn value<'a>(lines: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    lines
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

fn tiocsti_blocked(backend: &str) {
    let lines = tiocsti(backend, "");
    // The command is in a new session: it has no controlling terminal at all.
    assert_eq!(value(&lines, "adv"), ["open 6"], "{lines:?}");
    assert_eq!(
        value(&lines, "injected"),
        [""],
        "keystrokes reached the harness terminal"
    );
}

#[test]
fn tiocsti_blocked_native() {
    tiocsti_blocked("native");
}

#[test]
fn tiocsti_blocked_floor() {
    tiocsti_blocked("floor");
}

fn provider_keys_absent(backend: &str) {
    let out = helper("env")
        .env("HELPER_BACKEND", backend)
        .env("OPENAI_API_KEY", "sk-test-openai-secret")
        .env("ANTHROPIC_API_KEY", "sk-ant-test-secret")
        .env("HTTPS_PROXY", "http://user:pw@proxy:3128")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines = helper_lines(&stdout);
    let env = value(&lines, "env");
    assert!(env.iter().any(|l| l.starts_with("PATH=")), "{stdout}");
    for secret in [
        "sk-test-openai-secret",
        "sk-ant-test-secret",
        "OPENAI_API_KEY",
        "proxy:3128",
    ] {
        assert!(
            !env.iter().any(|l| l.contains(secret)),
            "{secret} reached the sandbox: {env:?}"
        );
    }
}

#[test]
fn provider_keys_absent_native() {
    provider_keys_absent("native");
}

#[test]
fn provider_keys_absent_floor() {
    provider_keys_absent("floor");
}

/// Both backends work for a user without any privilege: user namespaces (native),
/// no cgroups (so rlimits and the memory monitor), Landlock and seccomp.
fn unprivileged_user(backend: &str) {
    const NOBODY: u32 = 65534;
    let work = tempfile::Builder::new()
        .prefix("nobody-")
        .tempdir_in(visible_root())
        .unwrap();
    std::os::unix::fs::chown(work.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    let out = helper("unprivileged")
        .uid(NOBODY)
        .gid(NOBODY)
        .env("HOME", "/nonexistent")
        .env("HELPER_BACKEND", backend)
        .env("HELPER_WORKDIR", work.path())
        .current_dir("/")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines = helper_lines(&stdout);
    let get = |k: &str| {
        value(&lines, k)
            .first()
            .copied()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(
        get("uid"),
        "65534",
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(get("exit"), "Some(0)", "{stdout}");
    assert!(
        get("out").starts_with("65534 CapEff:\t0000000000000000"),
        "{stdout}"
    );
    assert_eq!(
        get("cgroup"),
        "0",
        "an unprivileged user cannot create cgroups here"
    );
    assert_eq!(get("monitor"), "true");
    assert_eq!(
        get("hog"),
        "Some(Memory)",
        "the memory monitor did not stop the hog"
    );
    assert_eq!(get("seccomp"), "true");
    assert_ne!(get("landlock"), "not");
    if backend == "native" {
        assert_eq!(get("present"), "", "absent directories are in the view");
        assert_eq!(get("setuid_cleared"), "1", "{stdout}");
        assert_eq!(get("host_uid"), "Some(65534)");
        let sh = work.path().join("suid-sh");
        let mode =
            std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&sh).unwrap().permissions());
        assert_eq!(mode & 0o6000, 0, "the setuid bit survived");
        assert_eq!(get("namespaces"), "6");
        assert_eq!(get("rlimits"), "core,cpu,nofile,fsize,nproc");
    } else {
        assert_eq!(get("namespaces"), "0");
        assert_eq!(get("rlimits"), "core,cpu,nofile,fsize");
    }
    let made = work.path().join("made");
    assert_eq!(std::fs::read_to_string(&made).unwrap(), "ok\n");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&made).unwrap().uid(), NOBODY);
}

#[test]
fn unprivileged_user_native() {
    unprivileged_user("native");
}

#[test]
fn unprivileged_user_floor() {
    unprivileged_user("floor");
}

fn stdin_to_a_command_that_does_not_read(backend: &str) {
    let out = helper("sigpipe")
        .env("HELPER_BACKEND", backend)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the harness died: {:?}\n{stdout}",
        out.status
    );
    assert_eq!(value(&helper_lines(&stdout), "exit"), ["Some(0)"]);
}

#[test]
fn stdin_to_a_command_that_does_not_read_native() {
    stdin_to_a_command_that_does_not_read("native");
}

#[test]
fn stdin_to_a_command_that_does_not_read_floor() {
    stdin_to_a_command_that_does_not_read("floor");
}

/// The cap scenarios of `caps.rs` as an unprivileged user: no cgroup at all, so the
/// parent's watches (memory with tmpfs, CPU over the tree, disk) and the rlimits
/// hold every cap, and each hit is still reported.
fn caps_unprivileged(backend: &str) {
    const NOBODY: u32 = 65534;
    let dir = |prefix: &str| {
        let d = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(visible_root())
            .unwrap();
        std::os::unix::fs::chown(d.path(), Some(NOBODY), Some(NOBODY)).unwrap();
        d
    };
    let (work, host) = (dir("caps-work-"), dir("caps-host-"));
    let out = helper("caps")
        .uid(NOBODY)
        .gid(NOBODY)
        .env("HOME", "/nonexistent")
        .env("HELPER_BACKEND", backend)
        .env("HELPER_WORKDIR", work.path())
        .env("HELPER_HOSTDIR", host.path())
        .current_dir("/")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines = helper_lines(&stdout);
    for (k, v) in lines.iter().filter(|(k, _)| k.starts_with("fig_")) {
        eprintln!("unprivileged {backend} {k}={v}");
    }
    let mut ran = 0;
    for (name, on_floor) in crate::caps::SCENARIOS {
        if backend == "floor" && !on_floor {
            continue;
        }
        ran += 1;
        assert_eq!(
            value(&lines, name),
            ["ok"],
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(ran > 0);
}

#[test]
fn caps_unprivileged_native() {
    caps_unprivileged("native");
}

#[test]
fn caps_unprivileged_floor() {
    caps_unprivileged("floor");
}
