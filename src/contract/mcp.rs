//! `[[mcp]]` of the task contract: one MCP server a run connects to.

mod path_args;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use path_args::{
    BuiltinArg, FILESYSTEM_PATH_ARGS, PathArg, PathArgError, is_filesystem_server,
};

/// How the harness reaches a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum McpTransport {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio {
        /// Program and arguments (`command` followed by `args` in the task file).
        argv: Vec<String>,
        /// Host variables passed to the server by name (values read at connect time,
        /// never stored).
        #[serde(default)]
        env: Vec<String>,
        /// Start it in the run's sandbox (the default). `false` runs it as a plain
        /// child of the harness, which the record says: neither the sandbox's view
        /// nor its masks nor its caps apply, only the `path_args` checks
        /// ([`McpServerSpec::unsandboxed_warning`]).
        #[serde(default = "yes")]
        sandbox: bool,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint (`http://127.0.0.1:3001/mcp`).
        url: String,
        /// A host variable holding a bearer token; the value is read at connect time
        /// and redacted from the store, never written to it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bearer_token_env: Option<String>,
    },
}

fn yes() -> bool {
    true
}

/// One MCP server of a contract.
///
/// In a task file, one `[[mcp]]` table per server:
///
/// ```toml
/// [[mcp]]
/// name = "fs"                      # tools become mcp__fs__<tool>
/// command = "npx"                  # or an argv array: ["node", "server.js"]
/// args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
/// env = ["NODE_OPTIONS"]           # host variables passed by name
/// sandbox = true                   # default; false runs it outside (recorded)
/// required = true                  # its failure ends the run McpRequiredServerFailed
/// startup_timeout = "30s"          # default 30s
/// call_timeout = "60s"             # default 60s
/// deny_tools = ["write_*"]         # globs over the server's tool names
/// path_args = { export = ["target"] }   # arguments that name files (see below)
///
/// [[mcp]]
/// name = "docs"
/// url = "https://mcp.example.com/mcp"   # streamable HTTP
/// bearer_token_env = "DOCS_MCP_TOKEN"   # the token's variable, never the token
/// allow_tools = ["search", "fetch"]
/// ```
///
/// `path_args` names, per tool, the arguments that are paths; each path a call gives
/// is judged by the policy's file rules before the call is sent (see
/// [`McpServerSpec::path_args_for`]). The reference filesystem server's tools are
/// known without it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServerSpec {
    /// The name its tools are qualified with (`mcp__<name>__<tool>`): letters,
    /// digits, `-` and single `_`.
    pub name: String,
    /// How it is reached.
    #[serde(flatten)]
    pub transport: McpTransport,
    /// If it fails to start or dies, the run ends `McpRequiredServerFailed` instead of
    /// going on without it.
    #[serde(default)]
    pub required: bool,
    /// Longest wait for the start, handshake and tool listing.
    #[serde(with = "super::serde_duration")]
    pub startup_timeout: Duration,
    /// Longest wait for one tool call.
    #[serde(with = "super::serde_duration")]
    pub call_timeout: Duration,
    /// Only these tools (server names; `*` and `?` globs) are offered; empty offers all.
    #[serde(default)]
    pub allow_tools: Vec<String>,
    /// These tools are never offered (beats `allow_tools`).
    #[serde(default)]
    pub deny_tools: Vec<String>,
    /// Tool name (the server's) → the arguments of that tool that name files, as
    /// pointers (`path`, `files/*/path`; see [`PathArg`]). Each path is judged for
    /// both `read` and `write`, conservative on purpose: the contract does not say
    /// which the tool does. An entry replaces the built-in table's for that tool
    /// ([`FILESYSTEM_PATH_ARGS`], used when the server is the reference filesystem
    /// server); an empty list turns the check off for that tool. A tool the server
    /// does not list is warned about when it connects.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub path_args: BTreeMap<String, Vec<String>>,
}

/// Default startup timeout.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default call timeout.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

impl McpServerSpec {
    /// A sandboxed stdio server started with `argv`.
    pub fn stdio<I, S>(name: impl Into<String>, argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::with_transport(
            name,
            McpTransport::Stdio {
                argv: argv.into_iter().map(Into::into).collect(),
                env: Vec::new(),
                sandbox: true,
            },
        )
    }

    /// A streamable-HTTP server at `url`.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self::with_transport(
            name,
            McpTransport::Http {
                url: url.into(),
                bearer_token_env: None,
            },
        )
    }

    fn with_transport(name: impl Into<String>, transport: McpTransport) -> Self {
        Self {
            name: name.into(),
            transport,
            required: false,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            allow_tools: Vec::new(),
            deny_tools: Vec::new(),
            path_args: BTreeMap::new(),
        }
    }

    /// Marks it required.
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// Runs a stdio server outside the sandbox (recorded as such).
    pub fn unsandboxed(mut self) -> Self {
        if let McpTransport::Stdio { sandbox, .. } = &mut self.transport {
            *sandbox = false;
        }
        self
    }

    /// Sets the call timeout.
    pub fn call_timeout(mut self, d: Duration) -> Self {
        self.call_timeout = d;
        self
    }

    /// Sets the startup timeout.
    pub fn startup_timeout(mut self, d: Duration) -> Self {
        self.startup_timeout = d;
        self
    }

    /// Withholds tools matching `pattern`.
    pub fn deny_tool(mut self, pattern: impl Into<String>) -> Self {
        self.deny_tools.push(pattern.into());
        self
    }

    /// Offers only tools matching the `allow_tools` patterns (call once per pattern).
    pub fn allow_tool(mut self, pattern: impl Into<String>) -> Self {
        self.allow_tools.push(pattern.into());
        self
    }

    /// Declares `arg` (a pointer, see [`PathArg`]) a path argument of `tool`, judged
    /// as both read and write.
    pub fn path_arg(mut self, tool: impl Into<String>, arg: impl Into<String>) -> Self {
        self.path_args
            .entry(tool.into())
            .or_default()
            .push(arg.into());
        self
    }

    /// Whether the server is the reference filesystem server, whose tools'
    /// path arguments are known ([`FILESYSTEM_PATH_ARGS`]).
    pub fn is_filesystem_server(&self) -> bool {
        match &self.transport {
            McpTransport::Stdio { argv, .. } => is_filesystem_server(argv),
            McpTransport::Http { .. } => false,
        }
    }

    /// The path arguments of `tool`: the contract's declaration (each judged as read
    /// and write), else the built-in table's entry when this is the reference
    /// filesystem server, else none.
    pub fn path_args_for(&self, tool: &str) -> Vec<PathArg> {
        if let Some(declared) = self.path_args.get(tool) {
            return declared.iter().map(PathArg::declared).collect();
        }
        if self.is_filesystem_server() {
            return path_args::filesystem_entry(tool).unwrap_or_default();
        }
        Vec::new()
    }

    /// Whether the server's process runs outside the sandbox (`sandbox = false`).
    pub fn runs_unsandboxed(&self) -> bool {
        matches!(self.transport, McpTransport::Stdio { sandbox: false, .. })
    }

    /// The warning `doctor` and `mcp list` print for a server that runs outside the
    /// sandbox, or `None` for one that does not.
    pub fn unsandboxed_warning(&self) -> Option<String> {
        if !self.runs_unsandboxed() {
            return None;
        }
        let checks =
            if self.path_args.values().any(|a| !a.is_empty()) || self.is_filesystem_server() {
                "only the path_args checks of its tools' arguments apply"
            } else {
                "only its tools' path_args would be checked, and it declares none"
            };
        Some(format!(
            "MCP server {} has sandbox = false: its process runs outside the sandbox, so neither the sandbox's view nor its masks nor its caps apply; {checks}",
            self.name
        ))
    }

    /// Whether the allow/deny lists let `tool` be offered.
    pub fn offers(&self, tool: &str) -> bool {
        let m = |pats: &[String]| pats.iter().any(|p| glob_match(p, tool));
        !m(&self.deny_tools) && (self.allow_tools.is_empty() || m(&self.allow_tools))
    }

    /// Checks the values a task file or a caller could get wrong: `Err((key, message))`
    /// with the key relative to the `[[mcp]]` entry.
    pub(crate) fn check(&self) -> Result<(), (String, String)> {
        self.check_transport()
            .map_err(|(k, m)| (k.to_string(), m))?;
        for (tool, args) in &self.path_args {
            let key = || format!("path_args.{tool}");
            if tool.is_empty() {
                return Err(("path_args".into(), "a tool name must not be empty".into()));
            }
            for a in args {
                path_args::check_name(a).map_err(|m| (key(), m))?;
            }
        }
        Ok(())
    }

    fn check_transport(&self) -> Result<(), (&'static str, String)> {
        if !valid_name(&self.name) {
            return Err((
                "name",
                format!(
                    "{:?}: use letters, digits, '-' and single '_' (tools are named mcp__<name>__<tool>)",
                    self.name
                ),
            ));
        }
        match &self.transport {
            McpTransport::Stdio { argv, env, .. } => {
                if argv.first().is_none_or(|a| a.is_empty()) {
                    return Err(("command", "must name a program".into()));
                }
                if let Some(bad) = env.iter().find(|n| n.is_empty() || n.contains('=')) {
                    return Err(("env", format!("{bad:?} is not a variable name")));
                }
            }
            McpTransport::Http {
                url,
                bearer_token_env,
            } => {
                let parsed =
                    reqwest::Url::parse(url).map_err(|e| ("url", format!("{url:?}: {e}")))?;
                if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
                    return Err((
                        "url",
                        format!("{url:?}: expected an http(s) URL with a host"),
                    ));
                }
                if !parsed.username().is_empty() || parsed.password().is_some() {
                    return Err((
                        "url",
                        "credentials in the URL would be stored; use bearer_token_env".into(),
                    ));
                }
                if let Some(e) = bearer_token_env
                    && (e.is_empty() || e.contains('='))
                {
                    return Err(("bearer_token_env", format!("{e:?} is not a variable name")));
                }
            }
        }
        if self.startup_timeout.is_zero() {
            return Err(("startup_timeout", "must be more than zero".into()));
        }
        if self.call_timeout.is_zero() {
            return Err(("call_timeout", "must be more than zero".into()));
        }
        Ok(())
    }
}

/// A server name: non-empty, `[A-Za-z0-9_-]`, no `__` (the separator of qualified
/// tool names), at most 32 bytes so qualified names stay within providers' limits.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !name.contains("__")
}

/// `*` (any run) and `?` (one char) over the whole name.
pub(crate) fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            pi += 1;
            mark = ni;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_and_deny_lists() {
        let s = McpServerSpec::stdio("fs", ["x"])
            .allow_tool("read_*")
            .deny_tool("read_media_file");
        assert!(s.offers("read_text_file"));
        assert!(!s.offers("read_media_file"));
        assert!(!s.offers("write_file"));
        assert!(McpServerSpec::stdio("fs", ["x"]).offers("anything"));
    }

    #[test]
    fn names_and_urls_checked() {
        assert!(McpServerSpec::stdio("a__b", ["x"]).check().is_err());
        assert!(McpServerSpec::stdio("a.b", ["x"]).check().is_err());
        assert!(McpServerSpec::stdio("ok-name_1", ["x"]).check().is_ok());
        assert!(
            McpServerSpec::stdio("s", Vec::<String>::new())
                .check()
                .is_err()
        );
        assert_eq!(
            McpServerSpec::http("h", "ftp://x/").check().unwrap_err().0,
            "url"
        );
        assert_eq!(
            McpServerSpec::http("h", "http://u:p@x/mcp")
                .check()
                .unwrap_err()
                .0,
            "url"
        );
        assert!(
            McpServerSpec::http("h", "http://127.0.0.1:1/mcp")
                .check()
                .is_ok()
        );
    }

    #[test]
    fn globs() {
        assert!(glob_match("*", ""));
        assert!(glob_match("get-*", "get-sum"));
        assert!(glob_match("g?t-sum", "get-sum"));
        assert!(!glob_match("get", "get-sum"));
        assert!(glob_match("*sum", "get-sum"));
    }
}
