//! Registry settings files judged by their content: `.npmrc`, `.pypirc`,
//! `.yarnrc.yml`, `pip.conf` and `pip.ini` are read by toolchains for a registry's address and denied to the
//! agent only when they hold a credential (an `_authToken`, `_auth`, a password or
//! token line).
//!
//! [`CredentialContent`] wraps a gate: a read or write of such a file that the inner
//! gate allows is denied when the file, as it is now, holds a credential. Every
//! consumer of the run's gate (the tools, `grep`'s walk, the sandbox's masks, memory
//! notes) gets the same answer, so a file is masked exactly when `read_file` would
//! refuse it. The file is read without following links, only when it is a regular
//! file, and only up to [`MAX_JUDGED`]; a larger one is denied rather than judged
//! from a part.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;

use super::{Act, Action, Decision, PolicyDecision, PolicyGate};

/// Registry settings files a toolchain reads, denied only when they hold a credential.
pub const CREDENTIAL_CONFIGS: &[&str] =
    &[".npmrc", ".pypirc", ".yarnrc.yml", "pip.conf", "pip.ini"];

/// The largest settings file judged by its content.
pub const MAX_JUDGED: u64 = 256 * 1024;

/// Keys whose presence in a settings file means a credential (compared without case,
/// after any `//registry/:` scope npm puts before them).
const CREDENTIAL_KEYS: &[&str] = &[
    "_authtoken",
    "_auth",
    "_password",
    "password",
    "token",
    "npmauthtoken",
    "npmauthident",
    "npmpassword",
    "certfile",
    "keyfile",
];

/// Whether settings text holds a credential: a line `key = value`, `key: value` or
/// `key=value` (any scope prefix) whose key is one of the credential keys and whose
/// value is not empty, or a URL with a password in it (`https://user:pw@host`).
pub fn holds_credential(text: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') {
            return false;
        }
        if url_with_password(line) {
            return true;
        }
        let Some(at) = line.find(['=', ':']) else {
            return false;
        };
        // npm scopes keys as `//registry.example/:_authToken`: the key is what follows
        // the last `:` before the `=`.
        let (key, value) = match line.find('=') {
            Some(eq) => (&line[..eq], &line[eq + 1..]),
            None => (&line[..at], &line[at + 1..]),
        };
        let key = key.rsplit(':').next().unwrap_or(key).trim();
        let key = key
            .trim_matches(|c| c == '"' || c == '\'')
            .to_ascii_lowercase();
        let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
        CREDENTIAL_KEYS.contains(&key.as_str()) && !value.is_empty()
    })
}

/// Whether `line` holds `scheme://user:password@`.
fn url_with_password(line: &str) -> bool {
    line.match_indices("://").any(|(at, _)| {
        let rest = &line[at + 3..];
        let authority = rest.split(['/', ' ', '\t', '"', '\'']).next().unwrap_or("");
        authority
            .rsplit_once('@')
            .is_some_and(|(user, _)| user.split_once(':').is_some_and(|(_, pw)| !pw.is_empty()))
    })
}

/// Whether `target` (a workspace-relative path) names a settings file judged by its
/// content; the pattern it matches.
pub fn credential_config(target: &str) -> Option<&'static str> {
    let name = target.rsplit('/').next().unwrap_or(target);
    CREDENTIAL_CONFIGS
        .iter()
        .copied()
        .find(|c| c.eq_ignore_ascii_case(name))
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
/// For any tree a command sees, not only the workspace (`[sandbox] read_only_paths`).
pub(crate) fn content_denied(root: &std::path::Path, target: &str) -> Option<&'static str> {
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
    let mut text = String::new();
    let read = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .and_then(|f| f.take(MAX_JUDGED).read_to_string(&mut text));
    match read {
        Ok(_) if holds_credential(&text) => Some("holds a credential"),
        Ok(_) => None,
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
    fn credential_lines_are_found_and_plain_settings_are_not() {
        for (text, held) in [
            ("//registry.npmjs.org/:_authToken=npm_abcdef\n", true),
            ("_auth = dXNlcjpwYXNz\n", true),
            ("//r.example/:_password=\"cGFzcw==\"\n", true),
            ("[pypi]\nusername = __token__\npassword = pypi-AgEI\n", true),
            ("npmAuthToken: \"npm_x\"\n", true),
            (
                "registry=https://registry.npmjs.org/\nsave-exact=true\n",
                false,
            ),
            (
                "[distutils]\nindex-servers = pypi\n[pypi]\nusername = me\n",
                false,
            ),
            ("# _authToken=commented\nregistry=x\n", false),
            ("password =\n", false),
            ("nodeLinker: node-modules\n", false),
            (
                "[global]\nindex-url = https://me:s3cret@pypi.example/simple\n",
                true,
            ),
            ("[global]\nindex-url = https://pypi.example/simple\n", false),
            ("registry=https://user@r.example/\n", false),
        ] {
            assert_eq!(holds_credential(text), held, "{text:?}");
        }
    }

    #[test]
    fn names_match_at_any_depth_and_nothing_else() {
        assert_eq!(credential_config(".npmrc"), Some(".npmrc"));
        assert_eq!(credential_config("pkg/a/.pypirc"), Some(".pypirc"));
        assert_eq!(credential_config("web/.yarnrc.yml"), Some(".yarnrc.yml"));
        assert_eq!(credential_config("npmrc"), None);
        assert_eq!(credential_config(".npmrc.bak"), None);
    }
}
