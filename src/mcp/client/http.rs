//! Connecting to a streamable-HTTP server: the `net` decision on its host and port,
//! the bearer token (redacted), our own reqwest client without redirects, and the
//! handshake.

use rmcp::service::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::McpEnv;
use super::connect::{Started, client_config, gate_start};
use super::process::Stderr;
use super::server::Shared;
use crate::mcp::McpServerSpec;
use crate::policy::{Act, Action};

/// The transport to `url`, once the policy allows dialing it.
fn transport(
    spec: &McpServerSpec,
    url: &str,
    bearer_token_env: Option<&String>,
    env: &McpEnv,
    shared: &Shared,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    let host = parsed.host_str().unwrap_or_default();
    let port = parsed.port_or_known_default().unwrap_or(0);
    gate_start(
        shared,
        env.gate.as_ref(),
        Action::new(Act::Net, format!("{host}:{port}")),
        &spec.name,
    )?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(var) = bearer_token_env {
        let token = std::env::var(var).map_err(|_| format!("bearer_token_env {var} is not set"))?;
        if let Some(s) = &env.store {
            s.redact_secrets(std::slice::from_ref(&token));
        }
        config = config.auth_header(token);
    }
    // No redirects: the policy decided this host and port, not wherever a
    // server would send us.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        // Never HTTP_PROXY/HTTPS_PROXY/ALL_PROXY: the `net` decision judged this host,
        // and a proxy from the environment would be dialed instead (adversary B2 of
        // issue 20: a trace and its bearer header went to the proxy).
        .no_proxy()
        .user_agent(concat!("io-harness/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(spec.startup_timeout)
        .build()
        .map_err(|e| format!("HTTP client: {e}"))?;
    Ok(StreamableHttpClientTransport::with_client(http, config))
}

/// Dials `url` and shakes hands within the startup timeout.
pub(super) async fn start(
    spec: &McpServerSpec,
    url: &str,
    bearer_token_env: Option<&String>,
    env: &McpEnv,
    shared: &Shared,
) -> Result<Started, String> {
    let transport = transport(spec, url, bearer_token_env, env, shared)?;
    let service =
        match tokio::time::timeout(spec.startup_timeout, client_config().serve(transport)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(format!("handshake with {url} failed: {e}")),
            Err(_) => {
                return Err(format!(
                    "no handshake with {url} within the startup timeout of {}",
                    humantime::format_duration(spec.startup_timeout)
                ));
            }
        };
    Ok(Started {
        service,
        proc: None,
        launched: None,
        proxy: None,
        // No process of ours, so no stderr to wait for when it dies.
        stderr: std::sync::Arc::new(Stderr::closed()),
        sandbox: "none".into(),
        faults: None,
    })
}
