//! `io-harness config [--task FILE] [--json]`: every resolved setting and where it
//! came from — `file:line`, `env VAR`, `flag --x` or `default` — as a run with the same
//! arguments would resolve it, credentials redacted. An error in any layer is the
//! error the run would give (exit 2, naming the file, line and key).

use io_harness::config::{Layer, Setting};
use io_harness::contract::ProviderKind;

use super::layered::{self, Inputs};
use super::{CliError, ConfigArgs, output};

pub fn execute(args: ConfigArgs) -> Result<i32, CliError> {
    let resolved = layered::resolve(&Inputs {
        task: args.task.as_deref(),
        project: args.root.as_deref(),
        provider: &args.provider,
        budget: &args.budget,
        require_sandbox: None,
        goal_run: None,
    })?;
    let mut settings = resolved.settings.clone();
    if let Some(p) = resolved.contract.providers.first() {
        settings.extend(api_key(p.kind));
    }
    let user = io_harness::config::user_config_path();
    let user_state = user
        .as_ref()
        .map(|p| (p.display().to_string(), p.is_file()));
    if args.json {
        let obj = serde_json::json!({
            "project": resolved.project,
            "project_config": resolved.project_config,
            "trusted": resolved.trusted,
            "user_config": user_state.as_ref().filter(|(_, exists)| *exists).map(|(p, _)| p),
            "settings": settings,
        });
        super::json_out::print("config", obj, &Default::default());
        return Ok(0);
    }
    let c = output::sanitize;
    let project_config = match &resolved.project_config {
        Some(p) if resolved.trusted => format!("{} (trusted)", p.display()),
        Some(p) => format!("{} (untrusted: it may only narrow)", p.display()),
        None => "none".into(),
    };
    outln!("project: {}", c(&resolved.project.display().to_string()));
    outln!("project config: {}", c(&project_config));
    match &user_state {
        Some((p, true)) => outln!("user config: {}", c(p)),
        Some((p, false)) => outln!("user config: none ({} does not exist)", c(p)),
        None => outln!("user config: none (neither XDG_CONFIG_HOME nor HOME is set)"),
    }
    let width = settings
        .iter()
        .map(|s| s.key.len() + s.value.len() + 3)
        .max()
        .unwrap_or(0)
        .min(60);
    for s in &settings {
        let left = format!("{} = {}", s.key, s.value);
        outln!("{}  # {}", c(&format!("{left:width$}")), c(&s.source));
    }
    Ok(0)
}

/// The API key of the primary provider: whether its variable is set, never its value.
fn api_key(kind: ProviderKind) -> Option<Setting> {
    let var = match kind {
        ProviderKind::Openai => "OPENAI_API_KEY",
        ProviderKind::OpenaiCompatible => "OPENAI_COMPATIBLE_API_KEY",
        ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        ProviderKind::Openrouter => "OPENROUTER_API_KEY",
        _ => return None,
    };
    let set = std::env::var_os(var).is_some_and(|v| !v.is_empty());
    Some(Setting {
        key: "provider.api_key".into(),
        value: if set { "[REDACTED]" } else { "(not set)" }.into(),
        source: format!("env {var}"),
        layer: if set { Layer::Env } else { Layer::Default },
    })
}
