//! Layered configuration: where each value a run uses comes from.
//!
//! A run's settings come from six layers, highest first: command-line flags, the
//! environment (`IO_HARNESS_PROVIDER`, `IO_HARNESS_MODEL`, `IO_HARNESS_BASE_URL`), the
//! task file, the project's `.io-harness/config.toml`, the user's
//! `$XDG_CONFIG_HOME/io-harness/config.toml`, and the built-in defaults. Config files
//! set the sections an operator wants the same across tasks — `[provider]`,
//! `[prices]`, `[retry]`, `[sandbox]`, `[budget]` — with the task file's spelling.
//!
//! Why merge documents rather than contracts: whether a key was *set* is a fact of the
//! text, and the loader (`taskfile`) already turns text into a validated contract with
//! errors that name the line. So each layer is cut into leaves with their lines
//! (`doc`), the leaves are merged by one rule (`merge`), the result is written back as
//! one document and loaded, and an error of that load is traced back through the
//! merged leaf to the file and line (or the flag, or the variable) that set the value.
//! Every resolved value is kept with its [`Source`]: `io-harness config` prints them,
//! and a run stores them.
//!
//! A project's file comes with a repository that may be untrusted, so it may only
//! narrow (`file`): see [`resolve`].

mod defaults;
mod doc;
mod file;
mod merge;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use toml::Value;

pub use doc::{KeyPath, dotted, inline};

use crate::contract::{ContractError, TaskContract};
use merge::Merged;

/// A configuration layer, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// The built-in value.
    Default,
    /// `$XDG_CONFIG_HOME/io-harness/config.toml`.
    User,
    /// The project's `.io-harness/config.toml`.
    Project,
    /// The task file.
    Task,
    /// An environment variable.
    Env,
    /// A command-line flag.
    Flag,
}

impl Layer {
    /// Its name, as `config` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::User => "user",
            Self::Project => "project",
            Self::Task => "task",
            Self::Env => "env",
            Self::Flag => "flag",
        }
    }
}

/// Where a resolved value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// Built in.
    Default,
    /// A line of a file.
    File {
        /// The file.
        path: PathBuf,
        /// 1-based line of the key.
        line: usize,
        /// Which layer the file is.
        layer: Layer,
    },
    /// An environment variable.
    Env {
        /// Its name.
        var: String,
    },
    /// A command-line flag.
    Flag {
        /// The flag (`--max-steps`).
        flag: String,
    },
}

impl Source {
    /// The layer this source belongs to.
    pub fn layer(&self) -> Layer {
        match self {
            Self::Default => Layer::Default,
            Self::File { layer, .. } => *layer,
            Self::Env { .. } => Layer::Env,
            Self::Flag { .. } => Layer::Flag,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::File { path, line, .. } => write!(f, "{}:{line}", path.display()),
            Self::Env { var } => write!(f, "env {var}"),
            Self::Flag { flag } => write!(f, "flag {flag}"),
        }
    }
}

/// Why the configuration cannot be resolved. Every variant is a configuration error
/// (the CLI exits 2).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A value is unknown, refused, mistyped or impossible.
    #[error("{at}: {key}: {message}")]
    Invalid {
        /// Where it was set.
        at: Source,
        /// Dotted key.
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// One resolved value with its source, secrets redacted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Setting {
    /// Dotted key (`sandbox.limits.memory`).
    pub key: String,
    /// The value as TOML writes it on one line.
    pub value: String,
    /// Where it came from (`file:line`, `env VAR`, `flag --x`, `default`).
    pub source: String,
    /// The layer of that source.
    pub layer: Layer,
}

/// A value set by a flag or a variable: the key path, the value, and its name.
#[derive(Debug, Clone)]
pub struct Given {
    /// The key it sets.
    pub path: KeyPath,
    /// The value, as a task file would write it.
    pub value: Value,
    /// The flag (`--max-steps`) or variable (`IO_HARNESS_MODEL`).
    pub name: String,
}

impl Given {
    /// A value for `dotted` (`budget.max_steps`).
    pub fn new(dotted: &str, value: Value, name: &str) -> Self {
        Self {
            path: merge::path_of(dotted),
            value,
            name: name.to_string(),
        }
    }
}

/// What to resolve.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The task file, if there is one.
    pub task: Option<PathBuf>,
    /// The project directory when there is no task file (else the task's root).
    pub project: Option<PathBuf>,
    /// The user's config file (see [`user_config_path`]); `None`: none.
    pub user_config: Option<PathBuf>,
    /// The environment layer (see [`env_layer`]).
    pub env: Vec<Given>,
    /// The flag layer.
    pub flags: Vec<Given>,
    /// Built-in values written into the document (`run --goal`'s copy mode, 40 steps,
    /// 15 minutes), below every other layer.
    pub builtins: Vec<(String, Value)>,
}

/// The configuration resolved.
#[derive(Debug)]
pub struct Resolved {
    /// The contract the layers make.
    pub contract: TaskContract,
    /// Every value that was set, and every defaulted key, with its source.
    pub settings: Vec<Setting>,
    /// The project directory whose config was looked for.
    pub project: PathBuf,
    /// The project's config file, when it exists.
    pub project_config: Option<PathBuf>,
    /// Whether the user's config trusts the project.
    pub trusted: bool,
}

/// The environment variables of the env layer, with the key each sets.
pub const ENV_VARS: [(&str, &str); 3] = [
    ("IO_HARNESS_PROVIDER", "provider.kind"),
    ("IO_HARNESS_MODEL", "provider.model"),
    ("IO_HARNESS_BASE_URL", "provider.base_url"),
];

/// `$XDG_CONFIG_HOME/io-harness/config.toml`, else `~/.config/io-harness/config.toml`.
pub fn user_config_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })?;
    Some(base.join("io-harness").join("config.toml"))
}

/// The env layer from `get` (pass `|k| std::env::var(k).ok()`): empty values unset.
pub fn env_layer(get: &dyn Fn(&str) -> Option<String>) -> Result<Vec<Given>, ConfigError> {
    let mut out = Vec::new();
    for (var, key) in ENV_VARS {
        let Some(v) = get(var).filter(|v| !v.trim().is_empty()) else {
            continue;
        };
        if key == "provider.kind" {
            let pairs = provider_value(&v).map_err(|message| ConfigError::Invalid {
                at: Source::Env { var: var.into() },
                key: key.into(),
                message,
            })?;
            out.extend(pairs.into_iter().map(|(k, val)| Given::new(&k, val, var)));
        } else {
            out.push(Given::new(key, Value::String(v), var));
        }
    }
    Ok(out)
}

/// `--provider`'s (and `IO_HARNESS_PROVIDER`'s) text as the keys it sets: a kind, or
/// `scripted:<file>` (the file made absolute).
pub fn provider_value(text: &str) -> Result<Vec<(String, Value)>, String> {
    if let Some(file) = text.strip_prefix("scripted:") {
        let abs = std::path::absolute(file).map_err(|e| format!("scripted:{file}: {e}"))?;
        if !abs.is_file() {
            return Err(format!("scripted:{file}: no such file"));
        }
        return Ok(vec![
            ("provider.kind".into(), Value::String("scripted".into())),
            (
                "provider.script".into(),
                Value::String(abs.display().to_string()),
            ),
        ]);
    }
    match text {
        "openai" | "openai-compatible" | "anthropic" | "openrouter" => {
            Ok(vec![("provider.kind".into(), Value::String(text.into()))])
        }
        "scripted" => Err("scripted needs a file: scripted:<file>".into()),
        other => Err(format!(
            "{other:?}: expected openai, openai-compatible, anthropic, openrouter or scripted:<file>"
        )),
    }
}

/// Resolves the layers into a contract. A project's config is refused a key that
/// would widen or redirect the run (exit 2 naming its file, line and key) unless the
/// user's config lists the project in `trusted_projects`.
pub fn resolve(req: &Request) -> Result<Resolved, ConfigError> {
    let task = req.task.as_deref().map(read_task).transpose()?;
    let project = project_dir(req, task.as_ref().map(|(_, l)| l.as_slice()));
    let user = match &req.user_config {
        Some(p) => file::read(p, None)?,
        None => None,
    };
    let canonical = std::fs::canonicalize(&project).unwrap_or_else(|_| project.clone());
    let trusted = user
        .as_ref()
        .is_some_and(|u| u.trusted_projects.contains(&canonical));
    let project_path = project.join(".io-harness").join("config.toml");
    let project_file = file::read(&project_path, Some(trusted))?;

    let mut merged = Merged::default();
    for (k, v) in &req.builtins {
        let leaf = doc::Leaf {
            path: merge::path_of(k),
            value: v.clone(),
            line: 0,
        };
        merged.apply(leaf, Source::Default);
    }
    if let Some(u) = &user {
        for l in &u.leaves {
            merged.apply(l.clone(), u.source(l, Layer::User));
        }
    }
    if let Some(p) = &project_file {
        for l in &p.leaves {
            let at = p.source(l, Layer::Project);
            if !trusted {
                merged.check_narrows(l, &at)?;
            }
            merged.apply(l.clone(), at);
        }
    }
    if let (Some(path), Some((_, leaves))) = (&req.task, &task) {
        for l in leaves {
            let at = Source::File {
                path: path.clone(),
                line: l.line,
                layer: Layer::Task,
            };
            merged.apply(l.clone(), at);
        }
    }
    for (given, layer) in req
        .env
        .iter()
        .map(|g| (g, Layer::Env))
        .chain(req.flags.iter().map(|g| (g, Layer::Flag)))
    {
        let at = match layer {
            Layer::Env => Source::Env {
                var: given.name.clone(),
            },
            _ => Source::Flag {
                flag: given.name.clone(),
            },
        };
        let leaf = doc::Leaf {
            path: given.path.clone(),
            value: given.value.clone(),
            line: 0,
        };
        merged.apply(leaf, at);
    }
    let file = req
        .task
        .clone()
        .unwrap_or_else(|| project.join("(command line)"));
    let contract = load(&merged, &file)?;
    Ok(Resolved {
        contract,
        settings: settings(&merged),
        project: canonical,
        project_config: project_file.map(|p| p.path),
        trusted,
    })
}

/// The task file's text cut into leaves.
fn read_task(path: &Path) -> Result<(String, Vec<doc::Leaf>), ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let leaves = doc::leaves(&text).map_err(|(line, message)| ConfigError::Invalid {
        at: Source::File {
            path: path.to_path_buf(),
            line,
            layer: Layer::Task,
        },
        key: "(syntax)".into(),
        message,
    })?;
    Ok((text, leaves))
}

/// The project: the task's root (its `root` against its directory, else its
/// directory), else the request's directory, else the current one.
fn project_dir(req: &Request, task: Option<&[doc::Leaf]>) -> PathBuf {
    if let (Some(path), Some(leaves)) = (&req.task, task) {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let root = leaves.iter().find_map(|l| match (&l.path[..], &l.value) {
            ([k], Value::String(r)) if k == "root" => Some(dir.join(r)),
            _ => None,
        });
        return root.unwrap_or(dir);
    }
    req.project.clone().unwrap_or_else(|| PathBuf::from("."))
}

/// Loads the merged document; an error names where the value came from.
fn load(merged: &Merged, file: &Path) -> Result<TaskContract, ConfigError> {
    let leaves: Vec<doc::Leaf> = merged.entries.iter().map(|(l, _)| l.clone()).collect();
    let (text, lines) = doc::render(&leaves);
    TaskContract::from_toml_str(&text, file).map_err(|e| match e {
        ContractError::Invalid {
            line, key, message, ..
        } => match merge::leaf_of_error(merged, &lines, &key, line) {
            Some(i) => {
                let (leaf, at) = &merged.entries[i];
                let key = if key.contains('.') || key == dotted(&leaf.path) {
                    key
                } else {
                    dotted(&leaf.path)
                };
                ConfigError::Invalid {
                    at: at.clone(),
                    key,
                    message,
                }
            }
            None => ConfigError::Invalid {
                at: Source::File {
                    path: file.to_path_buf(),
                    line: 1,
                    layer: Layer::Task,
                },
                key,
                message,
            },
        },
        other => ConfigError::Invalid {
            at: Source::Default,
            key: "(contract)".into(),
            message: other.to_string(),
        },
    })
}

/// Every merged leaf of the sections configuration sets, then each defaulted key
/// nothing set, each with its source; values with credentials redacted.
fn settings(merged: &Merged) -> Vec<Setting> {
    let configurable = |p: &[String]| {
        matches!(
            p.first().map(String::as_str),
            Some("provider" | "prices" | "retry" | "sandbox" | "budget" | "workspace" | "root")
        )
    };
    let mut out: Vec<Setting> = merged
        .entries
        .iter()
        .filter(|(l, _)| configurable(&l.path))
        .map(|(l, s)| Setting {
            key: dotted(&l.path),
            value: redact_value(&l.path, &l.value),
            source: s.to_string(),
            layer: s.layer(),
        })
        .collect();
    for (path, value) in defaults::table() {
        if merged.get(&path).is_none() {
            out.push(Setting {
                key: dotted(&path),
                value: inline(&value),
                source: Source::Default.to_string(),
                layer: Layer::Default,
            });
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// A value as printed and stored: a URL's password is never shown.
fn redact_value(path: &[String], v: &Value) -> String {
    if path.last().is_some_and(|k| k == "base_url")
        && let Value::String(s) = v
        && let Ok(mut url) = reqwest::Url::parse(s)
        && url.password().is_some()
    {
        let _ = url.set_password(Some("[REDACTED]"));
        return inline(&Value::String(url.to_string()));
    }
    inline(v)
}
