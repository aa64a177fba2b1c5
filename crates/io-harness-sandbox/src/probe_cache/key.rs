//! What a cached probe result is valid for: this kernel, this binary, this identity.
//!
//! Each part is read from the machine, never taken from the environment, which the
//! caller (or code it runs) could set: the kernel's release, version and boot id and
//! its user-namespace switches; the running executable's inode, size and times (a
//! rebuilt or replaced binary is a different one); and the process's identity as the
//! kernel sees it — real and effective ids, capability sets, `no_new_privs`, its
//! seccomp mode and the namespaces it is in. A process started inside a sandbox
//! differs in the last part (another user namespace, a seccomp filter, no
//! capabilities), so it never meets a result a host process cached.

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The key a cache entry must match, as the text stored with the entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    /// Kernel release, version, boot id and the user-namespace sysctls.
    pub kernel: String,
    /// The running executable: device, inode, size, modification and change times.
    pub binary: String,
    /// Ids, capabilities, `no_new_privs`, seccomp mode and namespaces.
    pub identity: String,
    /// The effective uid (the owner every cache file and directory must have).
    pub euid: u32,
    /// The executable's path, which names the entry's file.
    pub exe: PathBuf,
}

/// Small kernel files, read whole; a missing one reads as `-` (the key still differs
/// when it appears).
fn read(path: &str) -> String {
    std::fs::read_to_string(path).map_or_else(|_| "-".into(), |s| s.trim().to_string())
}

fn link(path: &str) -> String {
    std::fs::read_link(path).map_or_else(|_| "-".into(), |p| p.display().to_string())
}

/// The lines of `/proc/self/status` that make up the identity, and the effective uid.
fn status_identity(status: &str) -> Option<(String, u32)> {
    let mut out = String::new();
    let mut euid = None;
    for line in status.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.split_whitespace().collect::<Vec<_>>().join(",");
        match name {
            "Uid" => {
                euid = value.split(',').nth(1).and_then(|v| v.parse().ok());
            }
            "Gid" | "Groups" | "CapInh" | "CapPrm" | "CapEff" | "CapBnd" | "CapAmb"
            | "NoNewPrivs" | "Seccomp" => {}
            _ => continue,
        }
        let _ = write!(out, "{name}={value};");
    }
    Some((out, euid?))
}

fn binary(exe: &Path) -> Option<String> {
    // `/proc/self/exe` is the running image itself, even after the path was rebuilt.
    let m = std::fs::metadata("/proc/self/exe")
        .or_else(|_| std::fs::metadata(exe))
        .ok()?;
    Some(format!(
        "{}:{}:{}:{}.{}:{}.{}",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    ))
}

impl Key {
    /// The key of this process now, or `None` when a part cannot be read (then
    /// nothing is cached and the probe runs).
    pub fn current() -> Option<Key> {
        let kernel = format!(
            "{} {} boot={} userns={},{},{}",
            read("/proc/sys/kernel/osrelease"),
            read("/proc/sys/kernel/version"),
            read("/proc/sys/kernel/random/boot_id"),
            read("/proc/sys/user/max_user_namespaces"),
            read("/proc/sys/kernel/unprivileged_userns_clone"),
            read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
        );
        let (mut identity, euid) =
            status_identity(&std::fs::read_to_string("/proc/self/status").ok()?)?;
        for ns in ["user", "mnt", "pid", "net", "cgroup"] {
            let _ = write!(identity, "{ns}={};", link(&format!("/proc/self/ns/{ns}")));
        }
        let exe = std::env::current_exe().ok()?;
        Some(Key {
            kernel,
            binary: binary(&exe)?,
            identity,
            euid,
            exe,
        })
    }

    /// The entry's whole text: a stored file matches only when equal to it byte for
    /// byte, so a truncated, edited or older-format file is a miss.
    pub fn entry(&self) -> String {
        format!(
            "{}\ncrate={}\nkernel={}\nbinary={}\nidentity={}\nnative=ok\n",
            super::FORMAT,
            env!("CARGO_PKG_VERSION"),
            self.kernel,
            self.binary,
            self.identity
        )
    }

    /// The entry's file name: one per executable path, so the test binaries, the CLI
    /// and an embedder keep their own entries instead of evicting each other.
    pub fn file_name(&self) -> String {
        // FNV-1a: stable across processes and Rust versions (std's hasher is not).
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.exe.as_os_str().as_encoded_bytes() {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("native-{h:016x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_comes_from_the_kernel_and_names_the_effective_uid() {
        let status = "Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\nCapEff:\t0000003fffffffff\nSeccomp:\t2\nVmRSS:\t1 kB\n";
        let (id, euid) = status_identity(status).unwrap();
        assert_eq!(euid, 0);
        assert!(id.contains("Uid=1000,0,0,0;"), "{id}");
        assert!(id.contains("CapEff=0000003fffffffff;"), "{id}");
        assert!(id.contains("Seccomp=2;"), "{id}");
        assert!(
            !id.contains("VmRSS"),
            "a changing field would never match: {id}"
        );
    }

    #[test]
    fn the_current_key_has_every_part() {
        let k = Key::current().expect("a key on Linux");
        assert!(k.identity.contains("user=user:["), "{}", k.identity);
        assert!(k.binary.split(':').count() >= 5, "{}", k.binary);
        assert_eq!(
            k,
            Key::current().unwrap(),
            "the key is stable within a process"
        );
        assert!(k.file_name().starts_with("native-"));
    }
}
