//! One configuration file, the user's or a project's: the keys it may set and, for a
//! project's, the keys it may not.
//!
//! A project's `.io-harness/config.toml` comes with the repository, and a cloned
//! repository is untrusted: it may narrow what a run may do (a smaller budget or cap,
//! a stronger sandbox requirement, its preferred model), never widen or redirect it.
//! A key that would — the provider's endpoint or kind, the sandbox's network, host
//! variables, host paths or shell, prices (a lower one loosens the cost budget), policy
//! overrides, MCP servers — is refused there, naming the file, line and key, unless
//! the user's own config lists the project in `trusted_projects`. Whether a number
//! narrows is judged against the value beneath it, in `merge`.

use std::path::{Path, PathBuf};

use toml::Value;

use super::defaults;
use super::doc::{self, KeyPath, Leaf, dotted};
use super::{ConfigError, Layer, Source};

/// The `[provider]` keys a config file may set.
const PROVIDER: &[&str] = &[
    "kind",
    "model",
    "base_url",
    "script",
    "max_output_tokens",
    "thinking_budget",
    "reasoning_effort",
    "stream_idle_timeout",
    "max_reply_bytes",
    "tool_choice",
    "stream",
    "request_timeout",
    "fallback",
];
/// The `[retry]` keys.
const RETRY: &[&str] = &[
    "max_attempts",
    "base",
    "cap",
    "jitter",
    "malformed_attempts",
    "max_wait",
    "probe_steps",
    "probe_interval",
];
/// The `[sandbox]` keys (`limits` is read key by key, below).
const SANDBOX: &[&str] = &[
    "require",
    "network",
    "allow_hosts",
    "resolve",
    "env",
    "read_only_paths",
    "allow_weaker",
    "shell",
    "uid",
    "allow_new_repos",
    "scan_limit",
];
/// The `[sandbox.limits]` keys.
const LIMITS: &[&str] = &[
    "cpu_secs",
    "wall_secs",
    "memory",
    "processes",
    "open_files",
    "output",
    "disk",
];
/// The `[budget]` keys.
const BUDGET: &[&str] = &["max_steps", "max_duration", "max_tokens", "max_cost_usd"];

/// A config file read and checked.
#[derive(Debug)]
pub(super) struct ConfigFile {
    pub(super) path: PathBuf,
    pub(super) leaves: Vec<Leaf>,
    /// `trusted_projects` (the user's file only), canonical where they exist.
    pub(super) trusted_projects: Vec<PathBuf>,
}

impl ConfigFile {
    pub(super) fn source(&self, leaf: &Leaf, layer: Layer) -> Source {
        Source::File {
            path: self.path.clone(),
            line: leaf.line,
            layer,
        }
    }
}

/// Reads `path` if it exists. `trusted` is `None` for the user's file, else whether
/// the user trusts the project the file belongs to.
pub(super) fn read(path: &Path, trusted: Option<bool>) -> Result<Option<ConfigFile>, ConfigError> {
    let text = match read_bounded(path) {
        Ok(t) => t,
        // No file, or a directory on the way that is not one (XDG_CONFIG_HOME naming a
        // file): there is no config there, which is no error.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(None);
        }
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let layer = if trusted.is_some() {
        Layer::Project
    } else {
        Layer::User
    };
    let at = |line| Source::File {
        path: path.to_path_buf(),
        line,
        layer,
    };
    let mut leaves = doc::leaves(&text).map_err(|(line, message)| ConfigError::Invalid {
        at: at(line),
        key: "(syntax)".into(),
        message,
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut trusted_projects = Vec::new();
    for leaf in &mut leaves {
        let invalid = |message: String| ConfigError::Invalid {
            at: at(leaf.line),
            key: dotted(&leaf.path),
            message,
        };
        if leaf.path == ["trusted_projects"] {
            if trusted.is_some() {
                return Err(invalid(
                    "only the user's config can trust a project (a project cannot trust itself)"
                        .into(),
                ));
            }
            trusted_projects = trusted_paths(&leaf.value).map_err(invalid)?;
            continue;
        }
        known(&leaf.path).map_err(invalid)?;
        if trusted == Some(false)
            && let Some(why) = widens(&leaf.path, &leaf.value)
        {
            return Err(invalid(format!(
                "refused in a project's config: it {why}, and the repository is not trusted; \
                 set it in the task file or your user config, or trust the project with \
                 trusted_projects = [\"{}\"] in your user config",
                std::fs::canonicalize(project_of(path))
                    .unwrap_or_else(|_| project_of(path))
                    .display()
            )));
        }
        absolutize(leaf, base);
    }
    leaves.retain(|l| l.path != ["trusted_projects"]);
    Ok(Some(ConfigFile {
        path: path.to_path_buf(),
        leaves,
        trusted_projects,
    }))
}

/// The most a config file may hold.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// `path`'s text, if it is a regular file (through a link, what the link reaches) of at
/// most [`MAX_CONFIG_BYTES`] (adversary P3: a FIFO hung `config`, a link to /dev/zero
/// read until memory ran out, a 300 MiB file aborted the process; a project's file
/// comes with the repository).
fn read_bounded(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} bytes, over the {MAX_CONFIG_BYTES} a config file may hold",
                meta.len()
            ),
        ));
    }
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("over the {MAX_CONFIG_BYTES} bytes a config file may hold"),
        ));
    }
    Ok(text)
}

/// The project directory of `<project>/.io-harness/config.toml`.
fn project_of(config: &Path) -> PathBuf {
    config
        .parent()
        .and_then(Path::parent)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Whether a config file may set `path` at all.
fn known(path: &KeyPath) -> Result<(), String> {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    let ok = match p.as_slice() {
        ["provider", k] => PROVIDER.contains(k),
        ["retry", k] => RETRY.contains(k),
        ["sandbox", k] => SANDBOX.contains(k),
        ["sandbox", "limits", k] => LIMITS.contains(k),
        ["budget", k] => BUDGET.contains(k),
        ["prices", _] => true,
        // An empty section sets nothing.
        ["provider" | "retry" | "sandbox" | "budget" | "prices"] => true,
        _ => false,
    };
    if ok {
        return Ok(());
    }
    Err(match p.first() {
        Some(&("policy" | "mcp")) => format!(
            "[{}] is set in the task file only: a config file sets [provider], [prices], \
             [retry], [sandbox] and [budget]",
            p[0]
        ),
        _ => "unknown key: a config file sets [provider], [prices], [retry], [sandbox] and \
              [budget] (and the user's, trusted_projects)"
            .into(),
    })
}

/// Why an untrusted project's config may not set `path` to `value`, if it may not.
///
/// An allowlist (adversary P3: `sandbox.require = "portable-floor"` was on no list of
/// keys that widen, and moved a run to the floor, where commands run as host root):
/// a project may set only what narrows — the model and how it is asked, limits and
/// budgets no larger than beneath (`defaults::narrows_by_size`, judged in `merge`), a
/// requirement of the native sandbox. Everything else is refused with why.
fn widens(path: &KeyPath, value: &Value) -> Option<&'static str> {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    if defaults::narrows_by_size(path) {
        return None;
    }
    Some(match p.as_slice() {
        [
            "provider",
            "model" | "reasoning_effort" | "tool_choice" | "stream",
        ]
        | [
            "retry",
            "jitter" | "base" | "probe_steps" | "probe_interval",
        ]
        | ["provider" | "retry" | "sandbox" | "budget" | "prices"] => return None,
        ["sandbox", "require"] if value.as_str() == Some("linux-namespaces") => return None,
        ["sandbox", "require"] => "chooses a sandbox other than the strongest",
        ["provider", "kind" | "base_url" | "script" | "fallback"] => {
            "redirects the model calls (and the API key sent with them)"
        }
        ["prices", ..] => "sets a price, and a lower one loosens the cost budget",
        ["sandbox", "network" | "allow_hosts" | "resolve"] => {
            "opens or redirects the sandbox's network"
        }
        ["sandbox", "env"] => "passes host variables into the sandbox",
        ["sandbox", "read_only_paths"] => "shows more host paths inside the sandbox",
        ["sandbox", "shell"] => "lets commands be shell strings",
        ["sandbox", "allow_weaker"] => "lets a run fall back to a weaker sandbox",
        ["sandbox", "allow_new_repos"] => "keeps repositories a command creates",
        ["sandbox", "uid"] => "chooses the identity commands run as",
        _ => {
            "is not one of the keys a project's config may set (the model and how it is \
              asked, smaller limits and budgets, a requirement of the native sandbox)"
        }
    })
}

/// `trusted_projects = ["/abs/path", …]`.
fn trusted_paths(v: &Value) -> Result<Vec<PathBuf>, String> {
    let Value::Array(items) = v else {
        return Err("must be an array of absolute paths".into());
    };
    items
        .iter()
        .map(|i| match i {
            Value::String(s) if Path::new(s).is_absolute() => {
                let p = PathBuf::from(s);
                Ok(std::fs::canonicalize(&p).unwrap_or(p))
            }
            Value::String(s) => Err(format!("{s:?} is not an absolute path")),
            other => Err(format!("{} is not a path string", doc::inline(other))),
        })
        .collect()
}

/// Paths a config file names are relative to the file's directory: written as
/// absolute paths into the merged document, whose relative paths are the task file's.
fn absolutize(leaf: &mut Leaf, base: &Path) {
    let abs = |s: &mut String| {
        if !Path::new(s.as_str()).is_absolute() {
            *s = base.join(&*s).display().to_string();
        }
    };
    let p: Vec<&str> = leaf.path.iter().map(String::as_str).collect();
    match (p.as_slice(), &mut leaf.value) {
        (["provider", "script"], Value::String(s)) => abs(s),
        (["sandbox", "read_only_paths"], Value::Array(items)) => {
            for i in items {
                if let Value::String(s) = i {
                    abs(s);
                }
            }
        }
        (["provider", "fallback"], Value::Array(items)) => {
            for i in items {
                if let Value::Table(t) = i
                    && let Some(Value::String(s)) = t.get_mut("script")
                {
                    abs(s);
                }
            }
        }
        _ => {}
    }
}
