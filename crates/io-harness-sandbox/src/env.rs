//! The child's environment is built, not inherited.
//!
//! Only what the caller put in [`RunSpec::env`](super::RunSpec::env) reaches the
//! command, so provider keys and other secrets of the harness never do. The sandbox
//! adds defaults for `PATH`, `LANG` and `TERM`, and always points `HOME` and `TMPDIR`
//! at its private directories. Proxy variables are dropped unless the network is
//! open: with no route out they would only leak the proxy's address and credentials.

use std::path::Path;

use super::{NetworkPosture, SandboxError};

/// The `PATH` used when the caller does not give one.
pub(crate) const DEFAULT_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Variables that configure an HTTP(S)/SOCKS proxy, compared case-insensitively.
const PROXY_VARS: [&str; 6] = [
    "http_proxy",
    "https_proxy",
    "ftp_proxy",
    "all_proxy",
    "no_proxy",
    "socks_proxy",
];

/// Whether `name` is a proxy variable.
pub(crate) fn is_proxy_var(name: &str) -> bool {
    PROXY_VARS.iter().any(|p| p.eq_ignore_ascii_case(name))
}

/// The private locations and defaults a backend gives the child.
pub(crate) struct EnvBase<'a> {
    /// Value of `HOME` inside.
    pub home: &'a Path,
    /// Value of `TMPDIR` inside.
    pub tmpdir: &'a Path,
    /// `PATH` when the caller gives none.
    pub default_path: String,
}

/// Build the child's environment from the caller's list.
///
/// The first occurrence of a name wins; names must be non-empty and free of `=` and
/// NUL, values free of NUL.
pub(crate) fn build_env(
    given: &[(String, String)],
    network: NetworkPosture,
    base: &EnvBase<'_>,
) -> Result<Vec<(String, String)>, SandboxError> {
    let mut out: Vec<(String, String)> = Vec::with_capacity(given.len() + 5);
    for (name, value) in given {
        if name.is_empty() || name.contains('=') || name.contains('\0') || value.contains('\0') {
            return Err(SandboxError::invalid(format!(
                "environment variable name {name:?} or its value is not valid"
            )));
        }
        if name == "HOME" || name == "TMPDIR" {
            continue;
        }
        if network == NetworkPosture::None && is_proxy_var(name) {
            continue;
        }
        if out.iter().any(|(n, _)| n == name) {
            continue;
        }
        out.push((name.clone(), value.clone()));
    }
    let mut default = |name: &str, value: String| {
        if !out.iter().any(|(n, _)| n == name) {
            out.push((name.to_owned(), value));
        }
    };
    default("PATH", base.default_path.clone());
    default("LANG", "C.UTF-8".to_owned());
    default("TERM", "dumb".to_owned());
    out.push(("HOME".to_owned(), base.home.display().to_string()));
    out.push(("TMPDIR".to_owned(), base.tmpdir.display().to_string()));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> EnvBase<'static> {
        EnvBase {
            home: Path::new("/home/me"),
            tmpdir: Path::new("/tmp"),
            default_path: DEFAULT_PATH.to_owned(),
        }
    }

    fn get<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
        env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn defaults_fill_gaps_and_home_is_forced() {
        let given = vec![
            ("HOME".into(), "/root".into()),
            ("PATH".into(), "/opt/bin".into()),
            ("RUST_LOG".into(), "debug".into()),
        ];
        let env = build_env(&given, NetworkPosture::None, &base()).unwrap();
        assert_eq!(get(&env, "HOME"), Some("/home/me"));
        assert_eq!(get(&env, "PATH"), Some("/opt/bin"));
        assert_eq!(get(&env, "RUST_LOG"), Some("debug"));
        assert_eq!(get(&env, "LANG"), Some("C.UTF-8"));
        assert_eq!(get(&env, "TERM"), Some("dumb"));
        assert_eq!(get(&env, "TMPDIR"), Some("/tmp"));
        assert_eq!(env.iter().filter(|(n, _)| n == "HOME").count(), 1);
    }

    #[test]
    fn proxies_dropped_only_without_network() {
        let given = vec![
            ("HTTPS_PROXY".into(), "http://p:3128".into()),
            ("no_proxy".into(), "x".into()),
        ];
        let closed = build_env(&given, NetworkPosture::None, &base()).unwrap();
        assert_eq!(get(&closed, "HTTPS_PROXY"), None);
        assert_eq!(get(&closed, "no_proxy"), None);
        let open = build_env(&given, NetworkPosture::Open, &base()).unwrap();
        assert_eq!(get(&open, "HTTPS_PROXY"), Some("http://p:3128"));
    }

    #[test]
    fn bad_names_refused() {
        for bad in ["", "A=B", "A\0"] {
            let given = vec![(bad.to_owned(), "v".to_owned())];
            assert!(build_env(&given, NetworkPosture::None, &base()).is_err());
        }
    }
}
