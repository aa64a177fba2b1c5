//! Companions that prove the containment cases can fail: with the layer that stops
//! an attack switched off, the same adversary succeeds and the host sees the effect.
//! Where two layers each stop an attack, the companion first shows one alone still
//! holds, then switches both off.
//!
//! Built only with `--features sandbox-test-disable-layers`; the switch does not
//! exist in a normal build.

use std::time::Duration;

use io_harness_sandbox::{Cap, Layer, SandboxLimits};

use crate::common::*;
use crate::harness::tiocsti;

#[test]
fn seccomp_off_io_uring_and_nested_userns_work() {
    let f = Fixture::new();
    let sb = native().without(Layer::Seccomp);
    let code = "import ctypes\n\
                libc=ctypes.CDLL(None,use_errno=True)\n\
                p=ctypes.create_string_buffer(120)\n\
                print(libc.syscall(425,8,p) >= 0)";
    let (_, out, _) = run_text(&sb, &f.spec(py(code)));
    assert_eq!(
        out.trim(),
        "True",
        "io_uring stays refused without seccomp?"
    );
    let (code, _, err) = run_text(
        &sb,
        &f.spec(vec!["unshare".into(), "-U".into(), "true".into()]),
    );
    assert_eq!(
        code,
        Some(0),
        "nested user namespace refused without seccomp: {err}"
    );
}

#[test]
fn landlock_off_floor_writes_outside() {
    let f = Fixture::new();
    let target = f.host_path("escaped");
    let sb = floor().without(Layer::Landlock);
    let (code, _, err) = run_text(
        &sb,
        &f.spec(sh(&format!("echo pwned > {}", target.display()))),
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "pwned\n",
        "the escape is observed"
    );
}

#[test]
fn mount_namespace_off_hidden_socket_and_mask_are_reached() {
    let f = Fixture::new();
    let path = std::path::PathBuf::from("/tmp").join(format!("{}.sock", unique("reach")));
    let l = UnixCounter::path(&path);
    std::fs::write(f.workdir().join(".env"), "SECRET=sk-visible").unwrap();
    let code = format!(
        "import socket\n\
         socket.socket(socket.AF_UNIX).connect('{}'); print('CONNECTED')\n\
         print(open('.env').read())",
        path.display()
    );
    let mut spec = f.spec(py(&code));
    spec.masked_paths = vec![".env".into()];
    if is_root() {
        // The sandbox uid alone still keeps root's socket closed.
        let out = run(&native().without(Layer::MountNs), &spec);
        assert!(!out.stdout.text().contains("CONNECTED"));
        assert_eq!(l.hits(), 0);
    }
    let out = run(
        &native().without(Layer::MountNs).without(Layer::UidMap),
        &spec,
    );
    assert!(
        out.stdout.text().contains("CONNECTED"),
        "{}",
        out.stderr.text()
    );
    assert!(out.stdout.text().contains("sk-visible"));
    assert_eq!(l.hits(), 1, "the host listener saw the connection");
}

#[test]
fn net_namespace_off_tcp_reaches_host() {
    let f = Fixture::new();
    let l = TcpCounter::bind("127.0.0.1:0");
    let code = format!(
        "import socket\n\
         try:\n  socket.create_connection(('127.0.0.1', {}), timeout=5); print('CONNECTED')\n\
         except OSError as e: print('ERR', e.errno)",
        l.port
    );
    // Without the namespace, seccomp (no IPv4 sockets) and Landlock (no TCP) still hold.
    let (_, out, _) = run_text(&native().without(Layer::NetNs), &f.spec(py(&code)));
    assert!(out.starts_with("ERR"), "{out}");
    let (_, out, _) = run_text(
        &native().without(Layer::NetNs).without(Layer::Seccomp),
        &f.spec(py(&code)),
    );
    assert!(
        out.starts_with("ERR"),
        "Landlock alone must still refuse TCP: {out}"
    );
    assert_eq!(l.hits(), 0);
    let sb = native()
        .without(Layer::NetNs)
        .without(Layer::Seccomp)
        .without(Layer::Landlock);
    let (_, out, _) = run_text(&sb, &f.spec(py(&code)));
    assert_eq!(out.trim(), "CONNECTED");
    assert_eq!(l.hits(), 1, "the host listener saw the connection");
}

#[test]
fn pid_namespace_off_host_process_killed() {
    let f = Fixture::new();
    let mut victim = Victim::start();
    let kill = vec!["kill".into(), "-9".into(), victim.pid().to_string()];
    let (code, _, err) = run_text(&native().without(Layer::PidNs), &f.spec(kill.clone()));
    assert_ne!(
        code,
        Some(0),
        "Landlock's signal scope alone must still refuse"
    );
    assert!(err.contains("not permitted"), "{err}");
    victim.assert_untouched();
    let sb = native().without(Layer::PidNs).without(Layer::Landlock);
    if is_root() {
        // The sandbox uid alone still may not signal root's process.
        let (code, _, err) = run_text(&sb, &f.spec(kill.clone()));
        assert_ne!(code, Some(0), "{err}");
        victim.assert_untouched();
    }
    let sb = sb.without(Layer::UidMap);
    let (code, _, err) = run_text(&sb, &f.spec(kill));
    assert_eq!(code, Some(0), "{err}");
    let status = victim.0.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
}

#[test]
fn cgroup_off_fork_bomb_is_not_bounded_for_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return; // unprivileged users are bounded by RLIMIT_NPROC in their namespace
    }
    let f = Fixture::new();
    let marker = unique("bomb-off");
    let code = "import os,time\n\
                n=0\n\
                for i in range(200):\n  \
                  try: pid=os.fork()\n  \
                  except OSError: break\n  \
                  if pid==0:\n    time.sleep(60); os._exit(0)\n  \
                  n+=1\n\
                print(n)";
    let mut argv = py(code);
    argv.push(marker.clone());
    let mut spec = f.spec(argv);
    spec.limits = SandboxLimits {
        processes: Some(64),
        ..test_limits()
    };
    let out = run(&native().without(Layer::Cgroup), &spec);
    assert_eq!(
        out.stdout.text().trim(),
        "200",
        "the escape (unbounded forks) is observed"
    );
    // And the record does not claim a cap it could not enforce.
    assert!(!out.layers.enforces(Cap::Processes));
    assert_eq!(out.cap_hit, None);
    assert!(
        processes_with(&marker).is_empty(),
        "the pid namespace still tears down"
    );
}

#[test]
fn setsid_off_filter_still_blocks_tiocsti_even_with_high_bits() {
    let lines = tiocsti("native", "setsid");
    let adv: Vec<&str> = lines
        .iter()
        .filter(|(k, _)| k == "adv")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(adv, ["low -1 1", "high -1 1"], "{lines:?}");
    assert!(lines.contains(&("injected".into(), String::new())));
}

#[test]
fn setsid_and_seccomp_off_tiocsti_injects() {
    let lines = tiocsti("native", "setsid,seccomp");
    let adv: Vec<&str> = lines
        .iter()
        .filter(|(k, _)| k == "adv")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(adv, ["low 0 0", "high 0 0"], "{lines:?}");
    assert!(
        lines.contains(&("injected".into(), "ZZ".into())),
        "{lines:?}"
    );
}

#[test]
fn capabilities_kept_override_file_modes() {
    let f = Fixture::new();
    let secret = f.workdir().join("mode-000");
    std::fs::write(&secret, "only-with-caps").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    let spec = f.spec(sh("cat mode-000"));
    let (_, out, err) = run_text(&native(), &spec);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        assert!(err.contains("Permission denied"), "{err}");
        // The sandbox uid alone loses every capability at exec.
        let (_, out, _) = run_text(&native().without(Layer::Capabilities), &spec);
        assert_eq!(out, "");
        let sb = native().without(Layer::Capabilities).without(Layer::UidMap);
        let (_, out, _) = run_text(&sb, &spec);
        assert_eq!(out, "only-with-caps", "CAP_DAC_OVERRIDE was usable");
    } else {
        assert!(out.is_empty());
    }
}

/// Two layers hold the CPU cap: `RLIMIT_CPU` per process and the parent's cap over
/// the tree. Either alone stops a spin; with both off it runs to the wall.
#[test]
fn rlimits_and_cpu_tree_off_cpu_spin_runs_to_the_wall() {
    let f = Fixture::new();
    let mut spec = f.spec(py("while True: pass"));
    spec.limits = SandboxLimits {
        cpu_secs: Some(1),
        wall_secs: Some(3),
        ..test_limits()
    };
    // A loaded machine may give the spin well under a core: each layer alone gets a
    // long wall clock to reach its second of CPU.
    let mut long = spec.clone();
    long.limits.wall_secs = Some(30);
    let out = run(&native().without(Layer::Rlimits), &long);
    assert_eq!(
        out.cap_hit,
        Some(Cap::Cpu),
        "the tree cap alone holds: {out:?}"
    );
    assert_eq!(out.signal, Some(libc::SIGKILL));
    let out = run(&native().without(Layer::CpuTree), &long);
    assert_eq!(
        out.cap_hit,
        Some(Cap::Cpu),
        "RLIMIT_CPU alone holds: {out:?}"
    );
    assert_eq!(out.signal, Some(libc::SIGXCPU));
    let out = run(
        &native().without(Layer::Rlimits).without(Layer::CpuTree),
        &spec,
    );
    assert_eq!(
        out.cap_hit,
        Some(Cap::Wall),
        "the cpu cap no longer stops the spin"
    );
    assert!(out.duration >= Duration::from_secs(3));
    assert!(!out.layers.enforces(Cap::Cpu), "{out:?}");
}

#[test]
fn ipc_namespace_off_host_queue_visible() {
    let f = Fixture::new();
    let key = 0x20_0000 + (std::process::id() as i32 & 0xffff);
    // SAFETY: msgget with a fixed key and create flags.
    let id = unsafe { libc::msgget(key, libc::IPC_CREAT | 0o600) };
    assert!(id >= 0);
    let (_, out, _) = run_text(&native().without(Layer::IpcNs), &f.spec(sh("ipcs -q")));
    // SAFETY: remove our own queue.
    unsafe { libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
    assert!(
        out.contains(&format!("{key:#010x}")),
        "the host queue is visible: {out}"
    );
}

/// Without a memory cgroup and without the tmpfs count, a writer fills the
/// sandbox's `/dev/shm` (sized to the 64 MiB cap) and holds it with its own memory on
/// top, past the cap, to its end: the count is what stops it.
#[test]
fn tmpfs_accounting_off_shm_writer_completes() {
    let f = Fixture::new();
    let code = "import time\n\
                f=open('/dev/shm/fill','wb',buffering=0)\n\
                try:\n  \
                  for i in range(128): f.write(b'\\x01'*(1<<20))\n\
                except OSError: pass\n\
                time.sleep(1)\n\
                print('SURVIVED', flush=True)";
    let mut spec = f.spec(py(code));
    spec.limits.memory_bytes = Some(64 << 20);
    let out = run(&native().without(Layer::Cgroup), &spec);
    assert_eq!(
        out.cap_hit,
        Some(Cap::Memory),
        "the monitor alone holds: {out:?}"
    );
    let out = run(
        &native()
            .without(Layer::Cgroup)
            .without(Layer::TmpfsAccounting),
        &spec,
    );
    assert!(out.stdout.text().contains("SURVIVED"), "{out:?}");
    assert_eq!(out.cap_hit, None);
}

/// With seccomp off (and no memory cgroup), a memfd holds 128 MiB under a 64 MiB
/// cap unseen: refusing memfd_create is what closes it.
#[test]
fn seccomp_off_memfd_escapes_the_memory_cap() {
    let f = Fixture::new();
    let code = "import os\n\
                fd=os.memfd_create('x')\n\
                for i in range(128): os.write(fd, b'\\x01'*(1<<20))\n\
                print('SURVIVED', os.fstat(fd).st_size >> 20, flush=True)";
    let mut spec = f.spec(py(code));
    spec.limits.memory_bytes = Some(64 << 20);
    let out = run(&native().without(Layer::Cgroup), &spec);
    assert!(!out.stdout.text().contains("SURVIVED"), "{out:?}");
    let out = run(
        &native().without(Layer::Cgroup).without(Layer::Seccomp),
        &spec,
    );
    assert_eq!(out.stdout.text(), "SURVIVED 128\n", "{out:?}");
    assert_eq!(out.cap_hit, None);
}

/// Without the disk watcher, sixteen 8 MiB files pass a 64 MiB cap; without the
/// rlimits, one 128 MiB file does.
#[test]
fn disk_watch_and_fsize_off_writers_complete() {
    let f = Fixture::new();
    let many = "for i in range(16): open('f%d' % i,'wb').write(b'\\x02'*(8<<20))\n\
                print('SURVIVED', flush=True)";
    let mut spec = f.spec(py(many));
    spec.limits.disk_bytes = Some(64 << 20);
    let out = run(&native().without(Layer::DiskWatch), &spec);
    assert_eq!(out.stdout.text(), "SURVIVED\n", "{out:?}");
    assert!(crate::caps::dir_bytes(f.workdir()) >= 128 << 20);
    for i in 0..16 {
        std::fs::remove_file(f.workdir().join(format!("f{i}"))).unwrap();
    }
    let mut spec = f.spec(sh("head -c 134217728 /dev/zero > big; echo rc=$?"));
    spec.limits.disk_bytes = Some(64 << 20);
    let out = run(
        &native().without(Layer::DiskWatch).without(Layer::Rlimits),
        &spec,
    );
    assert_eq!(out.stdout.text(), "rc=0\n", "{out:?}");
    assert_eq!(
        std::fs::metadata(f.workdir().join("big")).unwrap().len(),
        128 << 20
    );
}

/// Without the cap over the tree, four processes each under a 1 s `RLIMIT_CPU` use
/// 3.6 s of CPU under a 1 s cap.
#[test]
fn cpu_tree_off_four_processes_use_four_times_the_cap() {
    let f = Fixture::new();
    let code = "import os,time\n\
                kids=[]\n\
                for k in range(4):\n  \
                  pid=os.fork()\n  \
                  if pid==0:\n    \
                    while time.process_time() < 0.9: pass\n    \
                    os._exit(0)\n  \
                  kids.append(pid)\n\
                for p in kids: os.waitpid(p,0)\n\
                print('DONE', flush=True)";
    let mut spec = f.spec(py(code));
    spec.limits.cpu_secs = Some(1);
    let out = run(&native().without(Layer::CpuTree), &spec);
    assert_eq!(out.stdout.text(), "DONE\n", "{out:?}");
    assert_eq!(out.cap_hit, None);
}

/// Without the uid map a root harness's command is host uid 0: `id -u` says so, and
/// root's 0600 key beside the workspace is read (no capability needed: root owns it).
#[test]
fn uid_map_off_command_is_host_root_and_reads_roots_key() {
    if !is_root() {
        return;
    }
    let sb = native().without(Layer::UidMap);
    let (uid, map, _) = crate::view::uid_observed(&sb);
    assert_eq!((uid.as_str(), map.as_str()), ("0", "0 0 1"));
    assert!(
        crate::view::root_file_observed(&sb).is_some(),
        "the key stays unread"
    );
}

#[test]
fn setuid_clear_off_leaves_a_setuid_binary() {
    let (_, planted, _, cleared) =
        crate::view::setuid_observed(&native().without(Layer::SetuidClear));
    assert_eq!(
        planted, 0o4755,
        "the harness's setuid copy lost its bit anyway"
    );
    assert!(cleared.is_empty());
}

/// Without seccomp the command's `chmod u+s` and the rest take: the bits are there
/// while the session runs (the sweep after it clears them).
#[test]
fn seccomp_off_a_command_sets_setuid_bits() {
    let seen = crate::view::set_id_attempts_observed(&native().without(Layer::Seccomp));
    let chmod = seen
        .iter()
        .find(|(w, _)| w == "chmod")
        .map(|(_, r)| r.as_str());
    assert_eq!(chmod, Some("ok 0o4755"), "{seen:?}");
    let creat = seen
        .iter()
        .find(|(w, _)| w == "creat")
        .map(|(_, r)| r.as_str());
    assert!(creat.is_some_and(|r| r.starts_with("ok 0o4")), "{seen:?}");
}

#[test]
fn mount_namespace_off_workspace_keeps_the_hosts_mount_options() {
    let opts = crate::view::workspace_options_observed(&native().without(Layer::MountNs));
    // The host's mount of the checkout (ext4 rw,relatime here) is neither.
    assert!(
        !(opts.contains("nosuid") && opts.contains("nodev")),
        "the host mount is already nosuid,nodev ({opts}): this companion cannot fail"
    );
}

#[test]
fn mount_namespace_off_absent_directories_are_there() {
    let seen = crate::view::absent_observed(&native().without(Layer::MountNs));
    assert!(seen.len() >= 5, "{seen:?}");
}

#[test]
fn mount_namespace_off_etc_secrets_are_shown() {
    let sb = native().without(Layer::MountNs);
    let mut checked = 0;
    for entry in crate::view::ETC_EXCLUDED {
        let Some(seen) = crate::view::etc_observed(&sb, entry) else {
            continue;
        };
        assert!(
            !crate::view::looks_masked(&seen),
            "{entry} still looks masked: {seen}"
        );
        checked += 1;
    }
    assert!(checked > 0);
}

#[test]
fn mount_namespace_off_late_host_socket_is_reached() {
    let (line, hits) = crate::view::late_socket_observed(&native().without(Layer::MountNs));
    assert_eq!(line, "CONNECTED");
    assert_eq!(hits, 1);
}

#[test]
fn mount_namespace_off_cargo_credentials_are_read() {
    let lines = crate::view::cargo_home_observed("mountns", false);
    assert!(
        lines
            .iter()
            .any(|(k, v)| k == "credentials" && v.contains("cargo-secret")),
        "{lines:?}"
    );
}

#[test]
fn mount_namespace_off_private_tmpfs_is_the_hosts_size() {
    let sizes = crate::view::private_sizes_observed(&native().without(Layer::MountNs));
    assert!(sizes.iter().any(|s| *s != 192 << 20), "{sizes:?}");
}
