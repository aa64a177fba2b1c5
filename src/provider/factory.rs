//! Builds a provider from a contract's [`ProviderSpec`] and the environment.
//!
//! Precedence for each setting: the spec (task file or CLI flag, already merged by the
//! caller) over the provider's environment variables over the built-in default.

use super::http::HttpConfig;
use super::price::PriceTable;
use super::scripted::{ScriptError, Scripted};
use super::{
    Anthropic, CompatibleWire, OpenAi, OpenAiCompatible, OpenRouter, Provider, ProviderError,
};
use crate::contract::{ProviderKind, ProviderSpec, ToolChoice};

/// A provider that could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderFactoryError {
    /// A required environment variable is not set.
    #[error("{kind} needs {var} to be set")]
    MissingEnv {
        /// Provider kind.
        kind: &'static str,
        /// The variable.
        var: &'static str,
    },
    /// An API key shorter than [`MIN_KEY_LEN`]: no real key is, and redacting a value
    /// that short would rewrite ordinary text wherever it occurs.
    #[error("{var} holds {len} characters; an API key has at least {MIN_KEY_LEN}")]
    ShortKey {
        /// The variable.
        var: &'static str,
        /// Its length in characters.
        len: usize,
    },
    /// An API key with whitespace at either end (a newline read from a file): no
    /// server takes it, and a padded value would be redacted only with its padding.
    #[error(
        "{var} has whitespace at its start or end (a newline from a file?); set it to the key alone"
    )]
    PaddedKey {
        /// The variable.
        var: &'static str,
    },
    /// `scripted` without a script.
    #[error("a scripted provider needs a script file")]
    NoScript,
    /// The script could not be loaded.
    #[error(transparent)]
    Script(#[from] ScriptError),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Client(#[from] ProviderError),
}

/// The variables the hosted providers read their API keys from: what a program that
/// records or prints anything should redact even when it built no provider itself
/// (`io-harness audit`, `io-harness sandbox`).
pub const KEY_VARIABLES: [&str; 4] = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "OPENAI_COMPATIBLE_API_KEY",
];

/// The shortest API key taken (the store's redactor ignores shorter values too).
pub const MIN_KEY_LEN: usize = 8;

struct EnvNames {
    key: &'static str,
    model: &'static str,
    base_url: &'static str,
    /// `None`: no default endpoint, the operator names one (a local server).
    default_base: Option<&'static str>,
}

fn env_names(kind: ProviderKind) -> Option<EnvNames> {
    match kind {
        ProviderKind::Openai => Some(EnvNames {
            key: "OPENAI_API_KEY",
            model: "OPENAI_MODEL",
            base_url: "OPENAI_BASE_URL",
            default_base: Some("https://api.openai.com/v1"),
        }),
        // Its own variables: OpenAI's key is never sent to a server that is not OpenAI.
        ProviderKind::OpenaiCompatible => Some(EnvNames {
            key: "OPENAI_COMPATIBLE_API_KEY",
            model: "OPENAI_COMPATIBLE_MODEL",
            base_url: "OPENAI_COMPATIBLE_BASE_URL",
            default_base: None,
        }),
        ProviderKind::Anthropic => Some(EnvNames {
            key: "ANTHROPIC_API_KEY",
            model: "ANTHROPIC_MODEL",
            base_url: "ANTHROPIC_BASE_URL",
            default_base: Some("https://api.anthropic.com"),
        }),
        ProviderKind::Openrouter => Some(EnvNames {
            key: "OPENROUTER_API_KEY",
            model: "OPENROUTER_MODEL",
            base_url: "OPENROUTER_BASE_URL",
            default_base: Some("https://openrouter.ai/api/v1"),
        }),
        ProviderKind::Scripted => None,
    }
}

/// Builds the provider `spec` describes. `env` looks variables up (pass
/// `|k| std::env::var(k).ok()` in programs; a map in tests).
///
/// An API key is required for the hosted defaults; a custom base URL (a local
/// compatible server) may run without one.
pub fn build_provider(
    spec: &ProviderSpec,
    prices: &PriceTable,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn Provider>, ProviderFactoryError> {
    let Some(names) = env_names(spec.kind) else {
        // The content a run kept wins: the file may have moved since (a resume from
        // elsewhere, another machine). A spec without it (not yet started, or stored
        // before contents were kept) reads the file.
        let scripted = match (&spec.script_source, &spec.script) {
            (Some(kept), _) => Scripted::from_source(&kept.path, &kept.source)?,
            (None, Some(path)) => Scripted::from_file(path)?,
            (None, None) => return Err(ProviderFactoryError::NoScript),
        };
        return Ok(Box::new(scripted));
    };
    let kind = spec.kind.as_str();
    let nonempty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
    let (base_url, source) = match nonempty(spec.base_url.clone()) {
        Some(u) => (Some(u), "task file or --base-url".to_string()),
        None => match nonempty(env(names.base_url)) {
            Some(u) => (Some(u), format!("env {}", names.base_url)),
            None => (None, "default".to_string()),
        },
    };
    let custom_base = base_url.is_some();
    let base_url = match (base_url, names.default_base) {
        (Some(u), _) => u,
        (None, Some(d)) => d.to_string(),
        (None, None) => {
            return Err(ProviderFactoryError::MissingEnv {
                kind,
                var: names.base_url,
            });
        }
    };
    let model = nonempty(spec.model.clone())
        .or_else(|| nonempty(env(names.model)))
        .ok_or(ProviderFactoryError::MissingEnv {
            kind,
            var: names.model,
        })?;
    let api_key = nonempty(env(names.key));
    if let Some(k) = &api_key
        && k.trim() != k
    {
        return Err(ProviderFactoryError::PaddedKey { var: names.key });
    }
    if let Some(k) = &api_key
        && k.chars().count() < MIN_KEY_LEN
    {
        return Err(ProviderFactoryError::ShortKey {
            var: names.key,
            len: k.chars().count(),
        });
    }
    if api_key.is_none() && !custom_base {
        return Err(ProviderFactoryError::MissingEnv {
            kind,
            var: names.key,
        });
    }
    let mut cfg = HttpConfig::new(base_url, model, api_key);
    if let Some(t) = spec.stream_idle_timeout {
        cfg.idle_timeout = t;
    }
    cfg.max_reply_bytes = spec
        .max_reply_bytes
        .unwrap_or(crate::contract::DEFAULT_MAX_REPLY_BYTES);
    cfg.request_timeout = spec
        .request_timeout
        .unwrap_or(crate::contract::DEFAULT_REQUEST_TIMEOUT);
    cfg.prices = prices.clone();
    cfg.endpoint_source = Some(source);
    Ok(match spec.kind {
        ProviderKind::Openai => Box::new(OpenAi::new(cfg)?),
        ProviderKind::OpenaiCompatible => {
            let wire = CompatibleWire {
                tool_choice: spec.tool_choice.unwrap_or(ToolChoice::Auto),
                stream: spec.stream.unwrap_or(true),
            };
            Box::new(OpenAiCompatible::new(cfg, wire)?)
        }
        ProviderKind::Anthropic => Box::new(Anthropic::new(cfg)?),
        ProviderKind::Openrouter => Box::new(OpenRouter::new(cfg)?),
        ProviderKind::Scripted => unreachable!("handled above"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(map: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = map
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn hosted_default_needs_key_and_model() {
        let spec = ProviderSpec::new(ProviderKind::Anthropic);
        let e = build_provider(&spec, &PriceTable::builtin(), &env(&[]))
            .err()
            .unwrap();
        assert!(e.to_string().contains("ANTHROPIC_MODEL"), "{e}");
        let e = build_provider(
            &spec,
            &PriceTable::builtin(),
            &env(&[("ANTHROPIC_MODEL", "m")]),
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("ANTHROPIC_API_KEY"), "{e}");
        let p = build_provider(
            &spec,
            &PriceTable::builtin(),
            &env(&[
                ("ANTHROPIC_MODEL", "m"),
                ("ANTHROPIC_API_KEY", "sk-ant-k3y"),
            ]),
        )
        .unwrap();
        assert_eq!(
            p.identity().base_url.as_deref(),
            Some("https://api.anthropic.com")
        );
    }

    /// Adversary of issue 17: a key read with its file's newline (or padded with
    /// spaces) passed the length check, then failed at the server or in the header.
    #[test]
    fn a_key_padded_with_whitespace_is_refused_naming_the_variable() {
        let spec = ProviderSpec::new(ProviderKind::Openai);
        for padded in ["sk-0123456789\n", " sk-0123456789", "sk-0123456789\t"] {
            let e = build_provider(
                &spec,
                &PriceTable::builtin(),
                &env(&[("OPENAI_MODEL", "m"), ("OPENAI_API_KEY", padded)]),
            )
            .err()
            .unwrap();
            assert!(
                e.to_string().starts_with("OPENAI_API_KEY has whitespace"),
                "{padded:?}: {e}"
            );
        }
    }

    /// Issue 17.11: a one-character key made the redactor rewrite every message
    /// wherever that character occurred. A key under 8 characters is refused.
    #[test]
    fn a_key_too_short_to_be_one_is_refused_naming_the_variable() {
        let spec = ProviderSpec::new(ProviderKind::Openai);
        let e = build_provider(
            &spec,
            &PriceTable::builtin(),
            &env(&[("OPENAI_MODEL", "m"), ("OPENAI_API_KEY", "e")]),
        )
        .err()
        .unwrap();
        assert_eq!(
            e.to_string(),
            "OPENAI_API_KEY holds 1 characters; an API key has at least 8"
        );
    }

    #[test]
    fn spec_beats_env_and_custom_base_needs_no_key() {
        let mut spec = ProviderSpec::new(ProviderKind::Openai);
        spec.model = Some("from-spec".into());
        spec.base_url = Some("http://127.0.0.1:9/v1".into());
        let p = build_provider(
            &spec,
            &PriceTable::builtin(),
            &env(&[("OPENAI_MODEL", "from-env")]),
        )
        .unwrap();
        let id = p.identity();
        assert_eq!(
            (id.model.as_str(), id.base_url.as_deref()),
            ("from-spec", Some("http://127.0.0.1:9/v1"))
        );
    }
}
