//! Resolves the provider: `--provider`/`--model`/`--base-url` over the task file's
//! `[provider]` over the provider's environment variables.

use io_harness::contract::{ProviderKind, ProviderSpec};
use io_harness::provider::{PriceTable, Provider, build_provider};

use super::{CliError, ProviderArgs};

/// Merges the flags into the contract's primary provider spec.
pub fn merge(base: Option<&ProviderSpec>, args: &ProviderArgs) -> Result<ProviderSpec, CliError> {
    let mut spec = match (&args.provider, base) {
        (Some(p), base) => {
            let (kind, script) = parse_kind(p)?;
            let mut s = match base {
                Some(b) if b.kind == kind && script.is_none() => b.clone(),
                Some(b) => ProviderSpec {
                    max_output_tokens: b.max_output_tokens,
                    // Extended thinking is Anthropic's; another kind has no such setting.
                    thinking_budget: b
                        .thinking_budget
                        .filter(|_| kind == ProviderKind::Anthropic),
                    reasoning_effort: b.reasoning_effort,
                    ..ProviderSpec::new(kind)
                },
                None => ProviderSpec::new(kind),
            };
            if let Some(path) = script {
                let abs = std::path::absolute(&path)
                    .map_err(|e| CliError::Usage(format!("--provider scripted:{path}: {e}")))?;
                if !abs.is_file() {
                    return Err(CliError::Usage(format!(
                        "--provider scripted:{path}: no such file"
                    )));
                }
                s.script = Some(abs);
            }
            s
        }
        (None, Some(b)) => b.clone(),
        (None, None) => {
            return Err(CliError::Usage(
                "no provider: add a [provider] section to the task file or pass --provider".into(),
            ));
        }
    };
    if let Some(m) = &args.model {
        spec.model = Some(m.clone());
    }
    if let Some(u) = &args.base_url {
        spec.base_url = Some(u.clone());
    }
    Ok(spec)
}

fn parse_kind(text: &str) -> Result<(ProviderKind, Option<String>), CliError> {
    if let Some(file) = text.strip_prefix("scripted:") {
        return Ok((ProviderKind::Scripted, Some(file.to_string())));
    }
    match text {
        "openai" => Ok((ProviderKind::Openai, None)),
        "openai-compatible" => Ok((ProviderKind::OpenaiCompatible, None)),
        "anthropic" => Ok((ProviderKind::Anthropic, None)),
        "openrouter" => Ok((ProviderKind::Openrouter, None)),
        "scripted" => Err(CliError::Usage(
            "--provider scripted needs a file: scripted:<file>".into(),
        )),
        other => Err(CliError::Usage(format!(
            "--provider {other:?}: expected openai, openai-compatible, anthropic, openrouter or scripted:<file>"
        ))),
    }
}

/// Builds the provider from a resolved spec and the process environment.
pub fn build(spec: &ProviderSpec, prices: &PriceTable) -> Result<Box<dyn Provider>, CliError> {
    build_provider(spec, prices, &|k| std::env::var(k).ok())
        .map_err(|e| CliError::Usage(e.to_string()))
}

/// Builds the fallback providers of a contract (every provider after the first).
pub fn build_fallbacks(
    contract: &io_harness::TaskContract,
) -> Result<Vec<std::sync::Arc<dyn Provider>>, CliError> {
    let prices = contract.price_table();
    contract
        .providers
        .iter()
        .skip(1)
        .map(|s| build(s, &prices).map(std::sync::Arc::from))
        .collect()
}
