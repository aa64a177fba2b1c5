//! From the command line to a resolved configuration: the flags and the environment
//! become the top two layers of `io_harness::config`, over the task file (or, for
//! `run --goal`, over the built-in copy mode, 40 steps and 15 minutes), the project's
//! and the user's config files.

use std::path::{Path, PathBuf};

use io_harness::config::{self, ConfigError, Given, Request, Resolved, Setting};
use io_harness::contract::ProviderKind;
use io_harness::sandbox::Backend;
use io_harness::store::RunSetting;
use toml::Value;

use super::{BudgetArgs, CliError, ProviderArgs};

/// A run without a task file: `--goal`, `--verify`, `--root`.
pub struct GoalRun<'a> {
    pub goal: &'a str,
    pub verify: &'a str,
    pub root: Option<&'a Path>,
}

/// What the command line gives.
pub struct Inputs<'a> {
    pub task: Option<&'a Path>,
    /// The project without a task file (default: the current directory).
    pub project: Option<&'a Path>,
    pub provider: &'a ProviderArgs,
    pub budget: &'a BudgetArgs,
    pub require_sandbox: Option<Backend>,
    pub goal_run: Option<GoalRun<'a>>,
}

/// Resolves every layer; a bad flag names the flag, a bad file value its line.
pub fn resolve(inputs: &Inputs<'_>) -> Result<Resolved, CliError> {
    let req = request(inputs)?;
    Ok(config::resolve(&req)?)
}

fn flag_error(flag: &str, key: &str, message: String) -> CliError {
    CliError::from(ConfigError::Invalid {
        at: config::Source::Flag { flag: flag.into() },
        key: key.into(),
        message,
    })
}

fn request(inputs: &Inputs<'_>) -> Result<Request, CliError> {
    let mut flags = Vec::new();
    let mut builtins = Vec::new();
    let mut project = inputs.project.map(Path::to_path_buf);
    if let Some(g) = &inputs.goal_run {
        project = Some(goal_run(g, &mut flags, &mut builtins)?);
    } else if inputs.task.is_none() {
        // `config` without a task file: a stand-in goal and criterion, so the files
        // are loaded and checked as a run would; neither is printed.
        builtins.push(("goal".into(), Value::String("(none)".into())));
        builtins.push((
            "verify.command".into(),
            Value::Array(vec![Value::String("true".into())]),
        ));
    }
    provider_flags(inputs.provider, &mut flags)?;
    if let Some(b) = inputs.require_sandbox {
        flags.push(Given::new(
            "sandbox.require",
            Value::String(b.label().into()),
            "--require-sandbox",
        ));
    }
    budget_flags(inputs.budget, &mut flags);
    Ok(Request {
        task: inputs.task.map(Path::to_path_buf),
        project,
        user_config: config::user_config_path(),
        env: config::env_layer(&|k| std::env::var(k).ok())?,
        flags,
        builtins,
    })
}

/// `--goal`, `--verify` (split into words as a POSIX shell would), `--root`, and the
/// built-in copy mode, 40 steps and 15 minutes. Returns the workspace, the project.
fn goal_run(
    g: &GoalRun<'_>,
    flags: &mut Vec<Given>,
    builtins: &mut Vec<(String, Value)>,
) -> Result<PathBuf, CliError> {
    let argv = shlex::split(g.verify)
        .ok_or_else(|| {
            flag_error(
                "--verify",
                "verify.command",
                format!(
                    "{:?} has an unclosed quote or a trailing backslash",
                    g.verify
                ),
            )
        })?
        .into_iter()
        .map(Value::String)
        .collect::<Vec<_>>();
    if argv.is_empty() {
        return Err(flag_error(
            "--verify",
            "verify.command",
            "names no command".into(),
        ));
    }
    let root = absolute(g.root.unwrap_or(Path::new(".")))?;
    flags.push(Given::new("goal", Value::String(g.goal.into()), "--goal"));
    flags.push(Given::new("verify.command", Value::Array(argv), "--verify"));
    let root_value = Value::String(root.display().to_string());
    if g.root.is_some() {
        flags.push(Given::new("root", root_value, "--root"));
    } else {
        // The current directory is the built-in root of a run without a task file.
        builtins.push(("root".into(), root_value));
    }
    builtins.push(("workspace".into(), Value::String("copy".into())));
    builtins.push(("budget.max_steps".into(), Value::Integer(40)));
    builtins.push(("budget.max_duration".into(), Value::String("15m".into())));
    Ok(root)
}

fn provider_flags(p: &ProviderArgs, flags: &mut Vec<Given>) -> Result<(), CliError> {
    if let Some(kind) = &p.provider {
        let pairs = config::provider_value(kind)
            .map_err(|m| flag_error("--provider", "provider.kind", m))?;
        flags.extend(
            pairs
                .into_iter()
                .map(|(k, v)| Given::new(&k, v, "--provider")),
        );
    }
    if let Some(m) = &p.model {
        flags.push(Given::new(
            "provider.model",
            Value::String(m.clone()),
            "--model",
        ));
    }
    if let Some(u) = &p.base_url {
        flags.push(Given::new(
            "provider.base_url",
            Value::String(u.clone()),
            "--base-url",
        ));
    }
    Ok(())
}

fn budget_flags(b: &BudgetArgs, flags: &mut Vec<Given>) {
    if let Some(n) = b.max_steps {
        flags.push(Given::new(
            "budget.max_steps",
            Value::Integer(n.into()),
            "--max-steps",
        ));
    }
    if let Some(usd) = b.max_cost {
        flags.push(Given::new(
            "budget.max_cost_usd",
            Value::Float(usd),
            "--max-cost",
        ));
    }
    if let Some(d) = &b.max_duration {
        flags.push(Given::new(
            "budget.max_duration",
            Value::String(d.clone()),
            "--max-duration",
        ));
    }
}

fn absolute(p: &Path) -> Result<PathBuf, CliError> {
    let abs = std::path::absolute(p)
        .map_err(|e| CliError::Usage(format!("--root {}: {e}", p.display())))?;
    if !abs.is_dir() {
        return Err(CliError::Usage(format!(
            "--root {}: not a directory",
            p.display()
        )));
    }
    Ok(abs)
}

/// A run without a task file spends money only within a budget: a priced provider
/// (OpenAI, Anthropic, OpenRouter) needs `--max-cost` unless a config sets
/// `[budget] max_cost_usd`. The scripted provider and an OpenAI-compatible server
/// (a local model, unpriced) need none.
pub fn require_cost_budget(c: &io_harness::TaskContract) -> Result<(), CliError> {
    let Some(p) = c.providers.first() else {
        return Ok(());
    };
    let priced = matches!(
        p.kind,
        ProviderKind::Openai | ProviderKind::Anthropic | ProviderKind::Openrouter
    );
    if priced && c.budget.max_cost_usd.is_none() {
        return Err(CliError::Usage(format!(
            "run --goal with the priced provider {} needs a cost budget: pass --max-cost USD, \
             or set [budget] max_cost_usd in {}",
            p.kind.as_str(),
            config::user_config_path()
                .map_or_else(|| "the user config".into(), |p| p.display().to_string())
        )));
    }
    Ok(())
}

/// The settings as the store keeps them.
pub fn to_store(settings: &[Setting]) -> Vec<RunSetting> {
    settings
        .iter()
        .map(|s| RunSetting {
            key: s.key.clone(),
            value: s.value.clone(),
            source: s.source.clone(),
            layer: s.layer.as_str().into(),
        })
        .collect()
}
