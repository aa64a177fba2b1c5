//! `[[mcp]]`: one server entry, given as `command` (a string or an argv, with
//! optional `args`) for stdio or as `url` for streamable HTTP, never both.

use std::collections::BTreeMap;

use toml::Spanned;

use super::convert::{ConvertError, Spans};
use super::raw::{RawCommand, RawMcp};
use crate::contract::mcp::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT, McpServerSpec, McpTransport,
};
use crate::contract::units::parse_duration;

/// The entry at `key` (`mcp[0]`).
pub(super) fn server(
    m: Spanned<RawMcp>,
    key: &str,
    spans: &mut Spans,
) -> Result<McpServerSpec, ConvertError> {
    let span = m.span();
    let m = m.into_inner();
    let bad = |field: &str, msg: String| (format!("{key}.{field}"), Some(span.clone()), msg);
    let transport = match (m.command, m.url) {
        (Some(_), Some(_)) => {
            return Err(bad(
                "url",
                "give either command (stdio) or url (HTTP), not both".into(),
            ));
        }
        (None, None) => {
            return Err(bad("command", "needs command (stdio) or url (HTTP)".into()));
        }
        (Some(c), None) => {
            if m.bearer_token_env.is_some() {
                return Err(bad("bearer_token_env", "only for url servers".into()));
            }
            let mut argv = match c {
                RawCommand::Program(p) => vec![p],
                RawCommand::Argv(a) => a,
            };
            argv.extend(m.args);
            McpTransport::Stdio {
                argv,
                env: m.env,
                sandbox: m.sandbox.unwrap_or(true),
            }
        }
        (None, Some(url)) => {
            for (field, set) in [
                ("args", !m.args.is_empty()),
                ("env", !m.env.is_empty()),
                ("sandbox", m.sandbox.is_some()),
            ] {
                if set {
                    return Err(bad(field, "only for command (stdio) servers".into()));
                }
            }
            McpTransport::Http {
                url,
                bearer_token_env: m.bearer_token_env,
            }
        }
    };
    let mut spec = McpServerSpec {
        name: m.name,
        transport,
        required: m.required,
        startup_timeout: DEFAULT_STARTUP_TIMEOUT,
        call_timeout: DEFAULT_CALL_TIMEOUT,
        allow_tools: m.allow_tools,
        deny_tools: m.deny_tools,
        path_args: BTreeMap::new(),
    };
    if let Some(p) = m.path_args {
        let at = p.span();
        spans.note(&format!("{key}.path_args"), at.clone());
        spec.path_args = path_args(p.into_inner())
            .map_err(|(field, msg)| (format!("{key}.{field}"), Some(at), msg))?;
    }
    if let Some(t) = m.startup_timeout {
        spec.startup_timeout = parse_duration(&t).map_err(|e| bad("startup_timeout", e))?;
    }
    if let Some(t) = m.call_timeout {
        spec.call_timeout = parse_duration(&t).map_err(|e| bad("call_timeout", e))?;
    }
    Ok(spec)
}

/// `path_args = { tool = ["arg", …] }`: a table of arrays of strings; `Err((field,
/// message))` with the field relative to the entry (`path_args.read_file`).
fn path_args(v: toml::Value) -> Result<BTreeMap<String, Vec<String>>, (String, String)> {
    let toml::Value::Table(t) = v else {
        return Err((
            "path_args".into(),
            format!(
                "expected a table of tool names to argument lists (path_args = {{ read_file = [\"path\"] }}), found {}",
                v.type_str()
            ),
        ));
    };
    let mut out = BTreeMap::new();
    for (tool, args) in t {
        let field = format!("path_args.{tool}");
        let toml::Value::Array(items) = args else {
            return Err((
                field,
                format!(
                    "expected an array of argument names, found {}",
                    args.type_str()
                ),
            ));
        };
        let mut names = Vec::new();
        for item in items {
            match item {
                toml::Value::String(s) => names.push(s),
                other => {
                    return Err((
                        field,
                        format!(
                            "expected argument names (strings), found {}",
                            other.type_str()
                        ),
                    ));
                }
            }
        }
        out.insert(tool, names);
    }
    Ok(out)
}
