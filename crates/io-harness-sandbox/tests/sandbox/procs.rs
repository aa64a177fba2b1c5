//! Process containment: host processes cannot be signalled, traced or read; the
//! kernel attack surface (nested namespaces, keyrings, bpf, perf, the i386 ABI...)
//! is refused; capabilities are gone; the host's hostname and IPC are untouched.

use io_harness_sandbox::Sandbox;

use crate::common::*;

/// Python calling `syscall(nr, args...)` and printing `name result errno`.
fn syscalls_code(calls: &[(&str, &str)]) -> String {
    let mut code = String::from("import ctypes\nlibc=ctypes.CDLL(None,use_errno=True)\n");
    for (name, args) in calls {
        code.push_str(&format!(
            "ctypes.set_errno(0); r=libc.syscall({args}); print('{name}', r, ctypes.get_errno())\n"
        ));
    }
    code
}

fn signal_host_process(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let mut victim = Victim::start();
    let (code, _, err) = run_text(
        sb,
        &f.spec(vec!["kill".into(), "-9".into(), victim.pid().to_string()]),
    );
    assert_ne!(code, Some(0));
    assert!(
        err.contains("No such process") || err.contains("not permitted"),
        "{err}"
    );
    victim.assert_untouched();
}
backends!(signal_host_process, [native, floor]);

fn ptrace_host_process(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let mut victim = Victim::start();
    let pid = victim.pid();
    // PTRACE_ATTACH = 16, PTRACE_SEIZE = 0x4206.
    let code = syscalls_code(&[
        ("attach", &format!("101, 16, {pid}, 0, 0")),
        ("seize", &format!("101, 0x4206, {pid}, 0, 0")),
    ]);
    let (_, out, _) = run_text(sb, &f.spec(py(&code)));
    assert!(
        out.contains("attach -1 1\n") && out.contains("seize -1 1\n"),
        "{out}"
    );
    victim.assert_untouched();
}
backends!(ptrace_host_process, [native, floor]);

fn process_vm_read_host(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let victim = Victim::start();
    let pid = victim.pid();
    let code = format!(
        "import ctypes\nlibc=ctypes.CDLL(None,use_errno=True)\n\
         buf=ctypes.create_string_buffer(16)\n\
         class iov(ctypes.Structure): _fields_=[('b',ctypes.c_void_p),('l',ctypes.c_size_t)]\n\
         l=iov(ctypes.addressof(buf),16); r=iov(0x400000,16)\n\
         x=libc.syscall(310,{pid},ctypes.byref(l),1,ctypes.byref(r),1,0)\n\
         print(x, ctypes.get_errno())"
    );
    let (_, out, _) = run_text(sb, &f.spec(py(&code)));
    assert_eq!(out.trim(), "-1 1", "process_vm_readv must be refused");
}
backends!(process_vm_read_host, [native, floor]);

fn nested_user_namespace(sb: &dyn Sandbox) {
    let f = Fixture::new();
    // CLONE_NEWUSER = 0x10000000; clone3 must look unavailable (ENOSYS = 38).
    let code = syscalls_code(&[("unshare", "272, 0x10000000"), ("clone3", "435, 0, 0")]);
    let (_, out, _) = run_text(sb, &f.spec(py(&code)));
    assert!(out.contains("unshare -1 1\n"), "{out}");
    assert!(out.contains("clone3 -1 38\n"), "{out}");
    let (code, _, err) = run_text(
        sb,
        &f.spec(vec!["unshare".into(), "-U".into(), "true".into()]),
    );
    assert_ne!(code, Some(0));
    assert!(err.contains("not permitted"), "{err}");
}
backends!(nested_user_namespace, [native, floor]);

fn kernel_surface_refused(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let code = syscalls_code(&[
        ("add_key", "248, b'user', b'k', b'v', 1, -2"),
        ("request_key", "249, b'user', b'k', 0, -2"),
        ("keyctl", "250, 0, -2, 0"),
        ("bpf", "321, 0, 0, 0"),
        ("perf_event_open", "298, 0, 0, -1, -1, 0"),
        ("userfaultfd", "323, 0"),
        ("kexec_load", "246, 0, 0, 0, 0"),
        ("init_module", "175, 0, 0, b''"),
        ("delete_module", "176, b'loop', 0"),
        ("setns", "308, 0, 0"),
    ]);
    let (_, out, _) = run_text(sb, &f.spec(py(&code)));
    for name in [
        "add_key",
        "request_key",
        "keyctl",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "kexec_load",
        "init_module",
        "delete_module",
        "setns",
    ] {
        assert!(
            out.contains(&format!("{name} -1 1\n")),
            "{name} not refused: {out}"
        );
    }
}
backends!(kernel_surface_refused, [native, floor]);

fn i386_syscall_kills(sb: &dyn Sandbox) {
    let f = Fixture::new();
    // mov eax, 20 (i386 getpid); int 0x80; ret — from a 64-bit process.
    let code = "import ctypes,mmap\n\
                m=mmap.mmap(-1,4096,prot=mmap.PROT_READ|mmap.PROT_WRITE|mmap.PROT_EXEC)\n\
                m.write(b'\\xb8\\x14\\x00\\x00\\x00\\xcd\\x80\\xc3')\n\
                a=ctypes.addressof(ctypes.c_char.from_buffer(m))\n\
                print('GOT', ctypes.CFUNCTYPE(ctypes.c_int)(a)(), flush=True)";
    let out = run(sb, &f.spec(py(code)));
    assert_eq!(
        out.signal,
        Some(libc::SIGSYS),
        "{:?} {}",
        out.exit_code,
        out.stdout.text()
    );
    assert!(!out.stdout.text().contains("GOT"));
}
backends!(i386_syscall_kills, [native, floor]);

fn capabilities_and_privileges_gone(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let (_, out, _) = run_text(
        sb,
        &f.spec(sh(
            "grep -E '^(CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status",
        )),
    );
    for line in [
        "CapEff:\t0000000000000000",
        "CapPrm:\t0000000000000000",
        "CapBnd:\t0000000000000000",
        "CapAmb:\t0000000000000000",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
    ] {
        assert!(out.contains(line), "missing {line:?} in {out}");
    }
    // The setuid-root mount(8) gains nothing (nosuid mounts, no_new_privs, filter).
    let (code, out, _) = run_text(sb, &f.spec(sh("mount -t tmpfs none /mnt 2>&1")));
    assert_ne!(code, Some(0));
    assert!(
        out.contains("denied")
            || out.contains("not permitted")
            || out.contains("must be superuser"),
        "{out}"
    );
}
backends!(capabilities_and_privileges_gone, [native, floor]);

fn hostname_unchanged(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let before = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let code = "import socket\n\
                try:\n  socket.sethostname('pwned'); print('CHANGED')\n\
                except OSError as e: print('ERR', e.errno)";
    let (_, out, _) = run_text(sb, &f.spec(py(code)));
    assert_eq!(out.trim(), "ERR 1");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap(),
        before
    );
}
backends!(hostname_unchanged, [native, floor]);

fn host_processes_invisible(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let victim = Victim::start();
    let (_, out, _) = run_text(
        sb,
        &f.spec(sh(&format!(
            "ls /proc | grep -c '^[0-9]'; ls -d /proc/{}",
            victim.pid()
        ))),
    );
    let count: usize = out.lines().next().unwrap().trim().parse().unwrap();
    assert!(
        count <= 4,
        "{count} processes visible: a fresh /proc was not mounted"
    );
    assert!(!out.contains(&format!("/proc/{}", victim.pid())));
}
backends!(host_processes_invisible, [native]);

fn sysv_ipc_isolated(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let key = 0x10_0000 + (std::process::id() as i32 & 0xffff);
    // SAFETY: msgget with a fixed key and create flags.
    let id = unsafe { libc::msgget(key, libc::IPC_CREAT | 0o600) };
    assert!(id >= 0);
    let spec = f.spec(sh(&format!("ipcs -q; ipcrm -Q {key}")));
    let (code, out, _) = run_text(sb, &spec);
    // SAFETY: an all-zero msqid_ds is valid; IPC_STAT fills it.
    let mut ds: libc::msqid_ds = unsafe { std::mem::zeroed() };
    // SAFETY: ds is valid for writes.
    let still = unsafe { libc::msgctl(id, libc::IPC_STAT, &mut ds) } == 0;
    // SAFETY: remove our own queue.
    unsafe { libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
    assert_ne!(code, Some(0));
    assert!(!out.contains(&format!("{key:#010x}")), "{out}");
    assert!(still, "the host message queue was removed");
}
backends!(sysv_ipc_isolated, [native]);
