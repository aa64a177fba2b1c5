//! Host secrets that lie inside the trees the view shows read-only, and are masked
//! there. The list is documented (README, "Sandbox"): a root harness runs commands
//! as an unprivileged uid, which the file modes already keep out of most of these;
//! the masks hold also where a mode is lax, and for the harness's own identity.

use std::fs;
use std::path::{Path, PathBuf};

/// Files and directories under `/etc` that are never shown.
pub(crate) const ETC_EXCLUDED: [&str; 9] = [
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/krb5.keytab",
    "/etc/security/opasswd",
];

/// Files of a cargo home that hold registry tokens.
pub(crate) const CARGO_CREDENTIALS: [&str; 2] = ["credentials.toml", "credentials"];

/// The excluded paths that exist on the host now: the `/etc` list, the ssh host keys
/// (`/etc/ssh/*_key`) and the credentials of `cargo_home`. Looked up per sandbox, so
/// a file created since the last one is covered too.
pub(crate) fn existing(cargo_home: Option<&Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ETC_EXCLUDED.iter().map(PathBuf::from).collect();
    if let Ok(entries) = fs::read_dir("/etc/ssh") {
        out.extend(
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().ends_with("_key")),
        );
    }
    if let Some(home) = cargo_home {
        out.extend(CARGO_CREDENTIALS.iter().map(|c| home.join(c)));
    }
    // Only entries that are themselves not symlinks: a link's target is judged
    // where it lies.
    out.retain(|p| fs::symlink_metadata(p).is_ok_and(|m| !m.file_type().is_symlink()));
    out
}
