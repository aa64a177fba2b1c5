//! The allowlisted view and the sandbox uid (issue #15, classes 1 and 2): a root
//! harness's command never runs as host uid 0, leaves no setuid bit behind, sees the
//! workspace nosuid and nodev, and sees only the allowlist — system directories,
//! toolchains, `read_only_paths` and the workspace; `/etc` without its secrets.
//!
//! Each case is written as an observation (`..._observed`) so that its companion in
//! `disabled` can run the same adversary with the responsible layer off and assert
//! the escape.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use io_harness_sandbox::{RunSpec, Sandbox};

use crate::common::*;

/// The documented `/etc` exclusions (README, "Sandbox"), and ssh host keys.
pub const ETC_EXCLUDED: [&str; 10] = [
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/krb5.keytab",
    "/etc/security/opasswd",
    "/etc/ssh/ssh_host_iohxtest_key",
];

/// The host directories that are absent from every view.
pub const ABSENT: [&str; 9] = [
    "/var", "/srv", "/mnt", "/home", "/opt", "/run", "/media", "/boot", "/sys",
];

/// A shell script printing `{say}{d}` for each absent directory class `d` the view
/// shows. Where the workspace itself lies under `d` (a checkout in `/tmp` puts the
/// tests' fixtures under `/var/lib`), `d` is there as the way to it and must hold
/// nothing but that way.
pub fn absent_script(work: &Path, say: &str) -> String {
    ABSENT
        .iter()
        .map(|d| {
            match work
                .strip_prefix(d)
                .ok()
                .and_then(|r| r.components().next())
            {
                Some(next) => {
                    let next = next.as_os_str().to_string_lossy();
                    format!("test \"$(ls -A {d} 2>/dev/null)\" = '{next}' || echo {say}{d}; ")
                }
                None => format!("ls -A {d} >/dev/null 2>&1 && echo {say}{d}; "),
            }
        })
        .collect()
}

/// A host directory any uid may traverse, so that only the layer under test (not
/// the directory's mode) stands between the sandbox uid and what lies in it.
pub fn open_dir(p: &Path) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `(uid inside, uid_map, the host's owner of a file the command made)`.
pub fn uid_observed(sb: &dyn Sandbox) -> (String, String, u32) {
    let f = Fixture::new();
    let spec = f.spec(sh("id -u; cat /proc/self/uid_map; echo x > made"));
    let (code, out, err) = run_text(sb, &spec);
    assert_eq!(code, Some(0), "{err}");
    let mut lines = out.lines();
    let uid = lines.next().unwrap_or_default().trim().to_owned();
    let map = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let owner = std::fs::metadata(f.workdir().join("made")).unwrap().uid();
    (uid, map, owner)
}

fn uid_never_host_root(sb: &dyn Sandbox) {
    let (uid, map, owner) = uid_observed(sb);
    if is_root() {
        assert_eq!(uid, "65534", "the command ran as {uid}");
        assert_eq!(map, "65534 65534 1", "uid 0 must not be mapped at all");
    } else {
        // SAFETY: geteuid has no preconditions.
        let own = unsafe { libc::geteuid() }.to_string();
        assert_eq!(uid, own);
        assert_eq!(map, format!("{own} {own} 1"));
    }
    // Through the idmapped workspace the file lands as the workspace's owner.
    // SAFETY: geteuid has no preconditions.
    assert_eq!(owner, unsafe { libc::geteuid() });
    let out = run(sb, &Fixture::new().spec(vec!["/bin/true".into()]));
    assert_ne!(out.layers.host_uid, Some(0));
    assert!(out.layers.host_uid.is_some());
}
backends!(uid_never_host_root, [native]);

/// A root-owned 0600 file in a tree the view shows (a TLS key beside the project):
/// readable by host uid 0 even without capabilities, never by the sandbox uid.
pub fn root_file_observed(sb: &dyn Sandbox) -> Option<String> {
    let f = Fixture::new();
    open_dir(f.host.path());
    let key = f.host_path("server.key");
    std::fs::write(&key, "PRIVATE KEY").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut spec = f.spec(sh(&format!("cat {}", key.display())));
    spec.read_only_paths.push(f.host.path().to_path_buf());
    let (_, out, _) = run_text(sb, &spec);
    out.contains("PRIVATE KEY").then_some(out)
}

fn root_owned_0600_file_unreadable(sb: &dyn Sandbox) {
    if !is_root() {
        return; // only root's own files are at stake
    }
    assert_eq!(root_file_observed(sb), None, "the key was read");
}
backends!(root_owned_0600_file_unreadable, [native]);

/// `(inside: euid of the setuid shell, mode it saw on the copy it made; host: the
/// modes after the session of the harness's setuid copy and of the command's)`.
pub fn setuid_observed(sb: &dyn Sandbox) -> (String, u32, u32, Vec<PathBuf>) {
    let f = Fixture::new();
    let planted = f.workdir().join("suid-sh");
    std::fs::copy("/bin/sh", &planted).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let spec = f.spec(sh(
        "./suid-sh -p -c 'id -u'; cp /bin/sh made-sh; chmod 6755 made-sh || true",
    ));
    let out = run(sb, &spec);
    assert_eq!(out.exit_code, Some(0), "{}", out.stderr.text());
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let planted_mode = mode(&planted);
    let made_mode = mode(&f.workdir().join("made-sh"));
    // Never leave a setuid binary behind, whatever the result.
    for p in [planted, f.workdir().join("made-sh")] {
        let _ = std::fs::remove_file(p);
    }
    let euid = out.stdout.text().trim().to_owned();
    (euid, planted_mode, made_mode, out.setuid_cleared)
}

fn setuid_bits_cleared_and_gain_nothing(sb: &dyn Sandbox) {
    let (euid, planted, made, cleared) = setuid_observed(sb);
    assert_ne!(euid, "0", "the setuid shell gained root");
    assert_eq!(
        planted, 0o755,
        "the planted setuid bit survived the session"
    );
    assert_eq!(
        made, 0o755,
        "the command's setuid bits survived the session"
    );
    // The command's own chmod was refused (below); the sweep cleared the planted one.
    assert_eq!(cleared.len(), 1, "{cleared:?}");
}
backends!(setuid_bits_cleared_and_gain_nothing, [native]);

/// What a command saw when it tried to set setuid/setgid bits in the workspace, each
/// way the kernel offers: `(way, exit status, mode it saw afterwards)`.
pub fn set_id_attempts_observed(sb: &dyn Sandbox) -> Vec<(String, String)> {
    let f = Fixture::new();
    let code = "import os, stat\n\
                open('f', 'w').close(); os.mkdir('d')\n\
                def t(name, fn, path):\n    \
                  try: fn(); r = 'ok'\n    \
                  except OSError as e: r = 'errno%d' % e.errno\n    \
                  m = oct(os.stat(path).st_mode & 0o7777) if os.path.exists(path) else '-'\n    \
                  print(name, r, m)\n\
                t('chmod', lambda: os.chmod('f', 0o4755), 'f')\n\
                t('chmod_g', lambda: os.chmod('f', 0o2755), 'f')\n\
                t('fchmod', lambda: os.fchmod(os.open('f', os.O_RDONLY), 0o6755), 'f')\n\
                t('dir_g', lambda: os.chmod('d', 0o2777), 'd')\n\
                t('creat', lambda: os.close(os.open('c', os.O_CREAT | os.O_WRONLY, 0o4755)), 'c')\n\
                t('mknod', lambda: os.mknod('n', 0o4755 | stat.S_IFREG), 'n')";
    let spec = f.spec(vec!["python3".into(), "-c".into(), code.into()]);
    let out = run(sb, &spec);
    assert_eq!(out.exit_code, Some(0), "{}", out.stderr.text());
    out.stdout
        .text()
        .lines()
        .filter_map(|l| {
            let mut w = l.split(' ');
            Some((w.next()?.to_owned(), format!("{} {}", w.next()?, w.next()?)))
        })
        .collect()
}

/// Issue 16's adversary (SU1): a root harness's workspace is idmapped, so a file a
/// command creates is host root's on disk, and a setuid bit on it was a setuid-root
/// binary on the host while the session ran. No way of setting the bit works from
/// inside.
fn a_command_cannot_set_setuid_or_setgid_bits(sb: &dyn Sandbox) {
    let seen = set_id_attempts_observed(sb);
    assert_eq!(seen.len(), 6, "{seen:?}");
    for (way, result) in &seen {
        let mode = result
            .rsplit(' ')
            .next()
            .and_then(|m| u32::from_str_radix(m.trim_start_matches("0o"), 8).ok())
            .unwrap_or(0);
        assert!(
            result.starts_with("errno1 ") && mode & 0o6000 == 0,
            "{way}: {result}"
        );
    }
}
backends!(a_command_cannot_set_setuid_or_setgid_bits, [native]);

/// The mount options of the workspace as the command sees them in mountinfo.
pub fn workspace_options_observed(sb: &dyn Sandbox) -> String {
    let f = Fixture::new();
    let wd = std::fs::canonicalize(f.workdir()).unwrap();
    let code = format!(
        "import os\n\
         best=''\nopts=''\n\
         for l in open('/proc/self/mountinfo'):\n  \
           p=l.split(); mp=p[4]\n  \
           if ('{0}'+'/').startswith(mp.rstrip('/')+'/') and len(mp)>=len(best): best=mp; opts=p[5]\n\
         print(opts)",
        wd.display()
    );
    let (_, out, err) = run_text(sb, &f.spec(py(&code)));
    assert!(!out.is_empty(), "{err}");
    out.trim().to_owned()
}

fn workspace_mounted_nosuid_nodev(sb: &dyn Sandbox) {
    let opts = workspace_options_observed(sb);
    let set: Vec<&str> = opts.split(',').collect();
    assert!(set.contains(&"nosuid") && set.contains(&"nodev"), "{opts}");
    assert!(set.contains(&"rw"), "{opts}");
}
backends!(workspace_mounted_nosuid_nodev, [native]);

/// Removes the canaries it planted.
pub struct Planted(pub Vec<PathBuf>);

impl Drop for Planted {
    fn drop(&mut self) {
        for p in self.0.iter().rev() {
            let _ = std::fs::remove_file(p).or_else(|_| std::fs::remove_dir(p));
        }
    }
}

/// The absent directories a command could list; as root, a canary is planted in
/// each so that an empty directory does not pass for an absent one.
pub fn absent_observed(sb: &dyn Sandbox) -> Vec<String> {
    let name = unique("absent");
    let mut planted = Planted(Vec::new());
    if is_root() {
        for d in ABSENT.iter().filter(|d| !["/sys"].contains(d)) {
            let p = Path::new(d).join(&name);
            if Path::new(d).is_dir() && std::fs::write(&p, "canary").is_ok() {
                planted.0.push(p);
            }
        }
    }
    let f = Fixture::new();
    let script = absent_script(f.workdir(), "seen ");
    let (_, out, _) = run_text(sb, &f.spec(sh(&script)));
    drop(planted);
    out.lines().map(str::to_owned).collect()
}

fn absent_directory_classes(sb: &dyn Sandbox) {
    let seen = absent_observed(sb);
    assert!(seen.is_empty(), "present in the view: {seen:?}");
}
backends!(absent_directory_classes, [native]);

/// `/tmp` and `HOME` exist, private and empty.
fn tmp_and_home_private_and_empty(sb: &dyn Sandbox) {
    let name = unique("tmp-canary");
    let canary = Path::new("/tmp").join(&name);
    std::fs::write(&canary, "host").unwrap();
    let f = Fixture::new();
    let (code, out, err) = run_text(sb, &f.spec(sh("ls -A /tmp; echo done; ls -A $HOME")));
    let _ = std::fs::remove_file(&canary);
    assert_eq!(code, Some(0), "{err}");
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("done"), "{out}");
    // HOME holds only the mount points of the toolchain parts shown in it.
    for l in lines {
        assert!([".cargo", ".rustup"].contains(&l), "{out}");
    }
}
backends!(tmp_and_home_private_and_empty, [native]);

/// Plants `entry` when it is missing and the tests run as root: readable (0644), so
/// that only the mask can keep it out. Returns what to remove afterwards.
fn plant_etc(entry: &str) -> Planted {
    let mut planted = Planted(Vec::new());
    let p = Path::new(entry);
    if !is_root() || p.symlink_metadata().is_ok() {
        return planted;
    }
    if let Some(parent) = p.parent().filter(|d| !d.exists())
        && std::fs::create_dir(parent).is_ok()
    {
        planted.0.push(parent.to_path_buf());
    }
    if entry.ends_with(".d") || entry.ends_with("private") {
        if std::fs::create_dir(p).is_ok() {
            planted.0.push(p.to_path_buf());
            let inner = p.join("iohx-secret");
            std::fs::write(&inner, "etc-secret-canary").unwrap();
            planted.0.push(inner);
        }
    } else if std::fs::write(p, "etc-secret-canary").is_ok() {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
        planted.0.push(p.to_path_buf());
    }
    planted
}

/// What the command sees of `/etc` exclusion `entry`: `stat` size and mode (a mask is
/// an empty mode-000 file or directory) and whatever it could read. `None` when the
/// entry is missing and cannot be planted (an unprivileged run).
pub fn etc_observed(sb: &dyn Sandbox, entry: &str) -> Option<String> {
    let planted = plant_etc(entry);
    if Path::new(entry).symlink_metadata().is_err() {
        return None;
    }
    let f = Fixture::new();
    let script = format!("stat -c '%s %a' {entry}; cat {entry} {entry}/* 2>/dev/null");
    let (_, text, _) = run_text(sb, &f.spec(sh(&script)));
    drop(planted);
    Some(text)
}

/// The first line of [`etc_observed`] says the entry is masked.
pub fn looks_masked(seen: &str) -> bool {
    let first = seen.lines().next().unwrap_or_default();
    first == "0 0" || first.ends_with(" 0")
}

fn etc_exclusion_masked(sb: &dyn Sandbox, entry: &str) {
    let Some(seen) = etc_observed(sb, entry) else {
        return;
    };
    assert!(looks_masked(&seen), "{entry} is not masked: {seen}");
    assert!(
        !seen.contains("etc-secret-canary") && !seen.contains("root:"),
        "{entry}: {seen}"
    );
}

/// One test per documented `/etc` exclusion.
macro_rules! etc_exclusion {
    ($($name:ident => $entry:expr),+ $(,)?) => {
        mod etc_exclusion {
            $(
                #[test]
                fn $name() {
                    super::etc_exclusion_masked(&crate::common::native(), $entry);
                }
            )+
        }
    };
}

etc_exclusion!(
    shadow => "/etc/shadow",
    shadow_backup => "/etc/shadow-",
    gshadow => "/etc/gshadow",
    gshadow_backup => "/etc/gshadow-",
    sudoers => "/etc/sudoers",
    sudoers_d => "/etc/sudoers.d",
    ssl_private => "/etc/ssl/private",
    krb5_keytab => "/etc/krb5.keytab",
    security_opasswd => "/etc/security/opasswd",
    ssh_host_key => "/etc/ssh/ssh_host_iohxtest_key",
);

/// A unix socket bound on the host after the sandbox started, in a host directory the
/// view does not list (world-connectable, so only the view can stop it).
pub fn late_socket_observed(sb: &dyn Sandbox) -> (String, usize) {
    let f = Fixture::new();
    open_dir(f.host.path());
    let path = f.host_path("late.sock");
    let code = format!(
        "import socket,sys\n\
         print('up', flush=True); sys.stdin.readline()\n\
         try:\n  socket.socket(socket.AF_UNIX).connect('{}'); print('CONNECTED')\n\
         except OSError as e: print('ERR', e.errno)",
        path.display()
    );
    let mut child = sb.spawn(&f.spec(py(&code))).unwrap();
    assert_eq!(read_line(child.stdout.as_mut().unwrap()), "up");
    let l = UnixCounter::path(&path);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    write_all(child.stdin.as_mut().unwrap(), b"go\n");
    let line = read_line(child.stdout.as_mut().unwrap());
    let _ = child.wait();
    (line, l.hits())
}

fn unix_socket_bound_after_spawn_unreachable(sb: &dyn Sandbox) {
    let (line, hits) = late_socket_observed(sb);
    assert!(line.starts_with("ERR 2"), "{line}");
    assert_eq!(hits, 0);
}
backends!(unix_socket_bound_after_spawn_unreachable, [native]);

/// A cargo home outside `$HOME` (the official Rust images' `/usr/local/cargo`
/// layout, here in a host directory outside every other tree): its `bin` and
/// `registry` are shown, its `credentials.toml` and `config.toml` are not. Played by
/// a helper, since the cargo home is read from the harness's environment once.
pub fn cargo_home_observed(disable: &str, under_read_only: bool) -> Vec<(String, String)> {
    let f = Fixture::new();
    open_dir(f.host.path());
    let cargo = f.host_path("cargo");
    for d in ["bin", "registry"] {
        std::fs::create_dir_all(cargo.join(d)).unwrap();
    }
    std::fs::write(cargo.join("bin/tool"), "tool-ok").unwrap();
    std::fs::write(cargo.join("credentials.toml"), "token = \"cargo-secret\"").unwrap();
    std::fs::write(cargo.join("config.toml"), "[x]").unwrap();
    let mut cmd = helper("cargo-home");
    cmd.env("CARGO_HOME", &cargo)
        .env("HELPER_DISABLE", disable)
        .env("HELPER_WORKDIR", f.workdir());
    if under_read_only {
        cmd.env("HELPER_READ_ONLY", f.host.path());
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    helper_lines(&stdout)
}

pub fn assert_cargo_home_contained(lines: &[(String, String)], under_read_only: bool) {
    let get = |k: &str| {
        lines
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert_eq!(get("tool"), "tool-ok", "{lines:?}");
    assert!(!get("credentials").contains("cargo-secret"), "{lines:?}");
    if !under_read_only {
        assert_eq!(get("listed"), "bin registry", "{lines:?}");
    }
}

#[test]
fn cargo_home_outside_home_minus_credentials() {
    assert_cargo_home_contained(&cargo_home_observed("", false), false);
}

#[test]
fn cargo_home_inside_a_shown_tree_has_its_credentials_masked() {
    assert_cargo_home_contained(&cargo_home_observed("", true), true);
}

/// The workspace's own spec, for helpers.
pub fn plain_spec(argv: Vec<String>, workdir: &Path) -> RunSpec {
    let mut spec = RunSpec::new(argv, workdir);
    spec.limits = test_limits();
    spec
}

/// The sizes (bytes) of `/tmp`, `/dev/shm` and `$HOME` as the command sees them, with
/// a 192 MiB memory cap.
pub fn private_sizes_observed(sb: &dyn Sandbox) -> Vec<u64> {
    let f = Fixture::new();
    let code = "import os\n\
                for p in ('/tmp', '/dev/shm', os.environ['HOME']):\n  \
                  s=os.statvfs(p); print(s.f_blocks*s.f_frsize)";
    let mut spec = f.spec(py(code));
    spec.limits.memory_bytes = Some(192 << 20);
    let (_, out, err) = run_text(sb, &spec);
    assert!(!out.is_empty(), "{err}");
    out.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// Every writable private tmpfs is sized to the memory cap (it was half the host's
/// memory each), and the fresh root itself takes no writes.
fn private_tmpfs_sized_to_the_memory_cap(sb: &dyn Sandbox) {
    assert_eq!(private_sizes_observed(sb), vec![192 << 20; 3]);
    let f = Fixture::new();
    let (code, _, err) = run_text(sb, &f.spec(sh("mkdir /new-top-level-dir")));
    assert_ne!(code, Some(0));
    assert!(err.contains("Read-only file system"), "{err}");
}
backends!(private_tmpfs_sized_to_the_memory_cap, [native]);

/// The record names every documented exclusion the host has, and no masked path
/// outside the view.
#[test]
fn the_record_lists_the_exclusions_applied() {
    let out = run(&native(), &Fixture::new().spec(vec!["/bin/true".into()]));
    let excluded = &out.layers.mounts.as_ref().unwrap().excluded;
    for e in ETC_EXCLUDED {
        let p = Path::new(e);
        // Planted entries of concurrent tests come and go; judge the stable ones.
        if p.exists() && !p.is_symlink() && ["shadow", "gshadow"].iter().any(|s| e.ends_with(s)) {
            assert!(excluded.iter().any(|x| x == p), "{e} not in {excluded:?}");
        }
    }
    let view = &out.layers.mounts.as_ref().unwrap().view;
    for x in excluded {
        assert!(
            view.iter().any(|e| x.starts_with(&e.path)),
            "{x:?} is outside the view"
        );
    }
}
