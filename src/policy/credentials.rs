//! Settings files judged by their content: `.npmrc`, `.pypirc`, `.yarnrc`,
//! `.yarnrc.yml`, `pip.conf`, `pip.ini`, Maven's `.m2/settings.xml` and
//! `gradle.properties` are read by toolchains for a registry's address or a build's
//! settings and denied to the agent only when they hold a credential (judged by
//! [`super::credential_text`], which errs toward denying).
//!
//! [`CredentialContent`] wraps a gate: a read or write of such a file that the inner
//! gate allows is denied when the file, as it is now, holds a credential. Every
//! consumer of the run's gate (the tools, `grep`'s walk, the sandbox's masks, memory
//! notes) gets the same answer, so a file is masked exactly when `read_file` would
//! refuse it. The file is read without following links, only when it is a regular
//! file, and only up to [`MAX_JUDGED`]; a larger one is denied rather than judged
//! from a part. [`content_holds_credential`] is the same judge for bytes that are not
//! (or no longer) at their path, such as a side of the final diff.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;

use super::credential_text::{SettingsKind, judge};
use super::{Act, Action, Decision, PolicyDecision, PolicyGate};

/// Settings files a toolchain reads, denied only when they hold a credential: file
/// names matched at any depth, and `**/` paths matched by their last components.
pub const CREDENTIAL_CONFIGS: &[&str] = &[
    ".npmrc",
    ".pypirc",
    ".yarnrc",
    ".yarnrc.yml",
    "pip.conf",
    "pip.ini",
    "gradle.properties",
    "**/.m2/settings.xml",
];

/// The largest settings file judged by its content.
pub const MAX_JUDGED: u64 = 256 * 1024;

/// How the file named by a [`CREDENTIAL_CONFIGS`] entry is judged.
fn kind_of(pattern: &str) -> SettingsKind {
    match pattern {
        "gradle.properties" => SettingsKind::GradleProperties,
        "**/.m2/settings.xml" => SettingsKind::MavenSettings,
        _ => SettingsKind::Registry,
    }
}

/// Whether `target` (a workspace-relative path) names a settings file judged by its
/// content; the pattern it matches.
pub fn credential_config(target: &str) -> Option<&'static str> {
    let target = target.trim_end_matches('/').to_ascii_lowercase();
    let name = target.rsplit('/').next().unwrap_or(&target);
    CREDENTIAL_CONFIGS
        .iter()
        .copied()
        .find(|c| match c.strip_prefix("**/") {
            Some(tail) => {
                let tail = tail.to_ascii_lowercase();
                target == tail || target.ends_with(&format!("/{tail}"))
            }
            None => c.eq_ignore_ascii_case(name),
        })
}

/// Whether `bytes`, the content of a file at `target`, would make the content judge
/// deny it: the pattern and why. `None` when `target` is not judged by content or
/// the bytes hold no credential. Bytes larger than [`MAX_JUDGED`] or not UTF-8 are
/// denied, as the gate denies such a file.
pub fn content_holds_credential(
    target: &str,
    bytes: &[u8],
) -> Option<(&'static str, &'static str)> {
    let pattern = credential_config(target)?;
    judge_bytes(kind_of(pattern), bytes).map(|why| (pattern, why))
}

/// Why `bytes` of a settings file of `kind` are denied, when they are.
fn judge_bytes(kind: SettingsKind, bytes: &[u8]) -> Option<&'static str> {
    if bytes.len() as u64 > MAX_JUDGED {
        return Some("is too large to judge");
    }
    match std::str::from_utf8(bytes) {
        Ok(text) if judge(kind, text) => Some("holds a credential"),
        Ok(_) => None,
        Err(_) => Some("could not be judged"),
    }
}

/// A gate that also denies settings files holding a credential (see the module docs).
///
/// ```
/// use std::sync::Arc;
/// use io_harness::policy::{Act, Action, CredentialContent, Decision, Policy, PolicyGate};
/// let ws = tempfile::tempdir().unwrap();
/// std::fs::write(ws.path().join(".npmrc"), "//registry.npmjs.org/:_authToken=npm_abc\n").unwrap();
/// let gate = CredentialContent::new(Arc::new(Policy::builtin()), ws.path());
/// assert_eq!(gate.decide(&Action::new(Act::Read, ".npmrc")).decision, Decision::Deny);
/// std::fs::write(ws.path().join(".npmrc"), "registry=https://registry.npmjs.org/\n").unwrap();
/// assert_eq!(gate.decide(&Action::new(Act::Read, ".npmrc")).decision, Decision::Allow);
/// ```
pub struct CredentialContent {
    inner: Arc<dyn PolicyGate>,
    root: PathBuf,
}

impl CredentialContent {
    /// `inner`, with settings files under `root` judged by their content.
    pub fn new(inner: Arc<dyn PolicyGate>, root: impl Into<PathBuf>) -> Self {
        Self {
            inner,
            root: root.into(),
        }
    }

    /// Why the file at `target` is denied, when it is (see [`content_denied`]).
    fn judged_denied(&self, target: &str) -> Option<&'static str> {
        content_denied(&self.root, target)
    }
}

/// Why the settings file at `target` under `root` is denied, when it is: it holds a
/// credential, or it cannot be judged (too large, not a regular file, unreadable).
/// `None` too when `target` is not a settings file judged by content. For any tree a
/// command sees, not only the workspace (`[sandbox] read_only_paths`).
pub(crate) fn content_denied(root: &std::path::Path, target: &str) -> Option<&'static str> {
    let kind = kind_of(credential_config(target)?);
    let path = root.join(target.trim_start_matches('/'));
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        // Absent: nothing to protect (a write creates it, and then it is judged).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(_) => return Some("could not be judged"),
    };
    if !meta.file_type().is_file() {
        return (!meta.file_type().is_dir()).then_some("is not a regular file");
    }
    if meta.len() > MAX_JUDGED {
        return Some("is too large to judge");
    }
    let mut bytes = Vec::new();
    let read = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .and_then(|f| f.take(MAX_JUDGED + 1).read_to_end(&mut bytes));
    match read {
        Ok(_) => judge_bytes(kind, &bytes),
        Err(_) => Some("could not be judged"),
    }
}

impl PolicyGate for CredentialContent {
    fn decide(&self, action: &Action) -> PolicyDecision {
        let d = self.inner.decide(action);
        if d.decision != Decision::Allow
            || !matches!(action.act, Act::Read | Act::Write)
            || d.layer == "override"
        {
            return d;
        }
        let Some(pattern) = credential_config(&action.target) else {
            return d;
        };
        match self.judged_denied(&action.target) {
            Some(why) => PolicyDecision {
                action: action.clone(),
                decision: Decision::Deny,
                rule: format!("{pattern} ({why})"),
                layer: "builtin".into(),
            },
            None => d,
        }
    }

    fn remember(&self, action: &Action) -> bool {
        self.inner.remember(action)
    }

    fn limits_programs(&self) -> bool {
        self.inner.limits_programs()
    }

    fn remember_program(&self, action: &Action) -> bool {
        self.inner.remember_program(action)
    }

    fn denied_files(&self) -> Option<&super::DeniedFiles> {
        self.inner.denied_files()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_at_any_depth_and_nothing_else() {
        assert_eq!(credential_config(".npmrc"), Some(".npmrc"));
        assert_eq!(credential_config("pkg/a/.pypirc"), Some(".pypirc"));
        assert_eq!(credential_config("web/.yarnrc.yml"), Some(".yarnrc.yml"));
        assert_eq!(credential_config("npmrc"), None);
        assert_eq!(credential_config(".npmrc.bak"), None);
        assert_eq!(credential_config("home/.yarnrc"), Some(".yarnrc"));
        assert_eq!(
            credential_config(".gradle/gradle.properties"),
            Some("gradle.properties")
        );
        assert_eq!(
            credential_config("home/.M2/Settings.xml"),
            Some("**/.m2/settings.xml")
        );
        assert_eq!(
            credential_config(".m2/settings.xml"),
            Some("**/.m2/settings.xml")
        );
        assert_eq!(credential_config("app/settings.xml"), None);
        assert_eq!(credential_config("x.m2/settings.xml"), None);
    }
}

/// Issue 16, SEC1: the credential files of common tools the built-in list missed are
/// denied (by name, or by content when a toolchain reads them for settings), and
/// their settings-only forms stay readable.
#[cfg(test)]
mod sec1 {
    use super::*;
    use crate::policy::Policy;

    #[test]
    fn sec1_credential_list_gaps() {
        let ws = tempfile::tempdir().unwrap();
        let gate = CredentialContent::new(Arc::new(Policy::builtin()), ws.path());
        let decide = |path: &str, text: &str| {
            let p = ws.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
            gate.decide(&Action::new(Act::Read, path)).decision
        };
        for (path, secret, plain) in [
            (
                ".yarnrc",
                "//registry.npmjs.org/:_authToken \"T\"\n",
                Some("registry \"https://r.example\"\n"),
            ),
            (
                ".config/git/credentials",
                "https://user:T@github.com\n",
                None,
            ),
            (
                ".terraform.d/credentials.tfrc.json",
                "{\"credentials\":{\"h\":{\"token\":\"T\"}}}\n",
                None,
            ),
            (
                ".m2/settings.xml",
                "<settings><servers><server><password>T</password></server></servers></settings>\n",
                Some("<settings><offline>true</offline></settings>\n"),
            ),
            (
                ".gradle/gradle.properties",
                "mavenPassword=T\n",
                Some("org.gradle.jvmargs=-Xmx2g\n"),
            ),
            (
                "gradle.properties",
                "signing.secretKeyRingFile=/k\n",
                Some("org.gradle.caching=true\n"),
            ),
            (".config/hub", "github.com:\n- oauth_token: T\n", None),
            (".config/rclone/rclone.conf", "[r]\npass = T\n", None),
        ] {
            assert_eq!(decide(path, secret), Decision::Deny, "{path}");
            if let Some(plain) = plain {
                assert_eq!(decide(path, plain), Decision::Allow, "{path}: {plain}");
            }
        }
    }
}
