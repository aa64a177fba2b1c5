//! Sending a trace: where (`--endpoint` or `OTEL_EXPORTER_OTLP_ENDPOINT`, plus
//! `/v1/traces`), with which headers (`OTEL_EXPORTER_OTLP_HEADERS`, often a token:
//! never stored, never printed, redacted from every error), after a `net` decision of
//! the run's own policy (C15: the harness dials nothing nobody decided on), over a
//! client that follows no redirect (a redirect would carry the headers elsewhere).

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::OtelError;
use super::span::Trace;
use crate::policy::{Act, Action, Decision, Policy, PolicyDecision, PolicyGate, PolicyLayers};
use crate::redact::Redactor;

/// The environment variable naming the collector's base URL.
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The environment variable holding the export's headers (`k=v,k2=v2`, values
/// percent-encoded).
pub const HEADERS_ENV: &str = "OTEL_EXPORTER_OTLP_HEADERS";

/// How long connecting and the whole request may take: an export is one small POST.
const TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a collector's refusal is read and echoed.
const ERROR_BODY_LIMIT: usize = 1024;

/// Where the trace goes, and who said so.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `{base}/v1/traces`.
    pub url: reqwest::Url,
    /// `host:port`, the `net` action's target.
    pub target: String,
    /// `--endpoint` or the environment variable.
    pub source: &'static str,
}

impl Endpoint {
    /// The endpoint from a flag's value, else from `OTEL_EXPORTER_OTLP_ENDPOINT`;
    /// [`OtelError::NoEndpoint`] when neither is given.
    pub fn resolve(flag: Option<&str>) -> Result<Self, OtelError> {
        let (base, source) = match flag {
            Some(f) => (f.to_string(), "--endpoint"),
            None => match std::env::var(ENDPOINT_ENV) {
                Ok(v) if !v.trim().is_empty() => (v, ENDPOINT_ENV),
                _ => return Err(OtelError::NoEndpoint),
            },
        };
        Self::parse(base.trim(), source)
    }

    /// Parses a base URL (`http://collector:4318`), as the OTLP exporter
    /// specification reads `OTEL_EXPORTER_OTLP_ENDPOINT`: the signal's path
    /// `v1/traces` is appended.
    pub fn parse(base: &str, source: &'static str) -> Result<Self, OtelError> {
        let bad = |why: &str| OtelError::BadEndpoint {
            given_by: source,
            why: why.to_string(),
        };
        let mut url = reqwest::Url::parse(base).map_err(|e| bad(&e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad("the scheme must be http or https"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad(&format!(
                "credentials in the URL are refused: pass them in {HEADERS_ENV}"
            )));
        }
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return Err(bad("the URL names no host"));
        };
        let target = format!("{host}:{port}");
        let path = format!("{}/v1/traces", url.path().trim_end_matches('/'));
        url.set_path(&path);
        url.set_query(None);
        url.set_fragment(None);
        Ok(Self {
            url,
            target,
            source,
        })
    }
}

/// Parses `OTEL_EXPORTER_OTLP_HEADERS`' format: comma-separated `key=value` pairs,
/// values percent-decoded. An error names the pair's position, never its value.
pub fn parse_headers(text: &str) -> Result<Vec<(String, String)>, OtelError> {
    let mut out = Vec::new();
    for (i, pair) in text.split(',').enumerate() {
        if pair.trim().is_empty() {
            continue;
        }
        let bad = |why: &str| OtelError::BadHeaders(format!("pair {}: {why}", i + 1));
        let (k, v) = pair.split_once('=').ok_or_else(|| bad("no `=`"))?;
        let key = k.trim();
        if key.is_empty() {
            return Err(bad("empty key"));
        }
        let value = percent_decode(v.trim()).ok_or_else(|| bad("bad percent-encoding"))?;
        out.push((key.to_string(), value));
    }
    Ok(out)
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The `net` decision on the endpoint under the run's stored policy (`policy_json`;
/// the built-in layer when the run kept none): an operator's rule that denies it
/// refuses the export ([`OtelError::EndpointDenied`]); one that allows it stands;
/// otherwise the endpoint the operator gave is allowed by the `otlp` layer, naming
/// where it came from.
pub fn decide(endpoint: &Endpoint, policy_json: Option<&str>) -> Result<PolicyDecision, OtelError> {
    let policy = match policy_json {
        Some(j) => {
            let layers: PolicyLayers =
                serde_json::from_str(j).map_err(|e| OtelError::StoredPolicy(e.to_string()))?;
            Policy::from_layers(layers).map_err(|e| OtelError::StoredPolicy(e.to_string()))?
        }
        None => Policy::builtin(),
    };
    let action = Action::new(Act::Net, endpoint.target.clone());
    let d = policy.decide(&action);
    let operator_rule = d.rule != "default";
    match d.decision {
        Decision::Deny if operator_rule => Err(OtelError::EndpointDenied {
            target: action.target,
            rule: d.rule,
            layer: d.layer,
        }),
        // An export has nobody to put the question to: an operator's ask is not an
        // allow (adversary B12 of issue 20: it was sent as if allowed).
        Decision::Ask if operator_rule => Err(OtelError::EndpointDenied {
            target: action.target,
            rule: format!("{} (ask; an export has nobody to answer it)", d.rule),
            layer: d.layer,
        }),
        Decision::Allow if operator_rule => Ok(d),
        _ => Ok(PolicyDecision {
            action,
            decision: Decision::Allow,
            rule: format!("otlp endpoint ({})", endpoint.source),
            layer: "otlp".into(),
        }),
    }
}

/// What the collector answered to an accepted export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// Spans in the request.
    pub spans: usize,
    /// The HTTP status (2xx).
    pub status: u16,
}

/// One OTLP/HTTP JSON exporter: a client that follows no redirect, the endpoint and
/// the headers, and a redactor holding the header values.
#[derive(Debug)]
pub struct Exporter {
    client: reqwest::Client,
    endpoint: Endpoint,
    redactor: Redactor,
    /// Whether a collector's error body is withheld (a header value too short to
    /// redact from it).
    withhold_body: bool,
}

/// The values to redact for `headers`: each whole value and each credential inside
/// one (`Bearer <token>`: the token alone is what a text would hold; adversary B13 of
/// issue 20 found it stored in clear).
pub fn secret_values(headers: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (_, v) in headers {
        out.push(v.clone());
        out.extend(
            v.split_whitespace()
                .filter(|t| t.len() != v.len() && t.chars().count() >= crate::provider::MIN_KEY_LEN)
                .map(str::to_string),
        );
    }
    out
}

impl Exporter {
    /// An exporter to `endpoint` sending `headers` with every request.
    pub fn new(endpoint: Endpoint, headers: &[(String, String)]) -> Result<Self, OtelError> {
        let mut map = HeaderMap::new();
        for (i, (k, v)) in headers.iter().enumerate() {
            let bad = |why: &str| OtelError::BadHeaders(format!("pair {}: {why}", i + 1));
            let name = HeaderName::try_from(k.as_str()).map_err(|_| bad("not a header name"))?;
            let mut value =
                HeaderValue::try_from(v.as_str()).map_err(|_| bad("not a header value"))?;
            value.set_sensitive(true);
            map.insert(name, value);
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            // Never HTTP_PROXY/HTTPS_PROXY/ALL_PROXY: the `net` decision judged this host,
            // and a proxy from the environment would be dialed instead (adversary B2 of
            // issue 20: a trace and its bearer header went to the proxy).
            .no_proxy()
            .connect_timeout(TIMEOUT)
            .timeout(TIMEOUT)
            .user_agent(concat!("io-harness/", env!("CARGO_PKG_VERSION")))
            .default_headers(map)
            .build()
            .map_err(|e| OtelError::Send {
                endpoint: endpoint.url.to_string(),
                why: e.to_string(),
            })?;
        let values = secret_values(headers);
        // A value too short to redact safely (`x-tenant=ab1`) could come back in the
        // collector's answer: then its body is not shown at all (adversary B11).
        let short = headers
            .iter()
            .any(|(_, v)| v.chars().count() < crate::provider::MIN_KEY_LEN);
        Ok(Self {
            client,
            endpoint,
            redactor: Redactor::default().with(&values),
            withhold_body: short,
        })
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Posts the trace. A non-2xx answer (a redirect included: never followed) is
    /// [`OtelError::Rejected`] with the start of the collector's body.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the request; the collector may or may not have
    /// received it (span ids are stable, so sending again duplicates nothing).
    pub async fn send(&self, trace: &Trace) -> Result<Sent, OtelError> {
        let body = super::otlp::encode(trace);
        let url = self.endpoint.url.to_string();
        let response = self
            .client
            .post(self.endpoint.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| OtelError::Send {
                endpoint: url.clone(),
                why: self.redactor.text(&error_chain(&e)).into_owned(),
            })?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            let body = if self.withhold_body {
                format!(
                    "({} bytes not shown: a header value is too short to redact from them)",
                    text.len()
                )
            } else {
                let cut: String = text.chars().take(ERROR_BODY_LIMIT).collect();
                self.redactor.text(&cut).into_owned()
            };
            return Err(OtelError::Rejected {
                endpoint: url,
                status: status.as_u16(),
                body,
            });
        }
        Ok(Sent {
            spans: trace.spans.len(),
            status: status.as_u16(),
        })
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signal_path_is_appended_to_the_base() {
        let e = Endpoint::parse("http://127.0.0.1:4318", "--endpoint").unwrap();
        assert_eq!(e.url.as_str(), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(e.target, "127.0.0.1:4318");
        let e = Endpoint::parse("https://otel.example/prefix/", "--endpoint").unwrap();
        assert_eq!(e.url.as_str(), "https://otel.example/prefix/v1/traces");
        assert_eq!(e.target, "otel.example:443");
        assert!(Endpoint::parse("ftp://x", "--endpoint").is_err());
        assert!(Endpoint::parse("http://u:p@x", "--endpoint").is_err());
    }

    #[test]
    fn headers_are_parsed_and_errors_never_show_a_value() {
        let h = parse_headers("authorization=Bearer%20sekrit-token-1, x-b = 2 ,").unwrap();
        assert_eq!(
            h,
            vec![
                ("authorization".into(), "Bearer sekrit-token-1".into()),
                ("x-b".into(), "2".into())
            ]
        );
        let e = parse_headers("a=1,sekrit-token-no-equals")
            .unwrap_err()
            .to_string();
        assert!(e.contains("pair 2") && !e.contains("sekrit"), "{e}");
        assert!(parse_headers("a=%zz").is_err());
    }

    #[test]
    fn an_operator_deny_refuses_the_export_and_the_default_allows_it_by_name() {
        let e = Endpoint::parse("http://127.0.0.1:4318", ENDPOINT_ENV).unwrap();
        let d = decide(&e, None).unwrap();
        assert_eq!(d.decision, Decision::Allow);
        assert_eq!(d.layer, "otlp");
        assert!(d.rule.contains(ENDPOINT_ENV), "{}", d.rule);
        let mut layers = Policy::builtin().layers();
        layers
            .task
            .push(crate::policy::Rule::deny(Act::Net, "127.0.0.1:*"));
        let json = serde_json::to_string(&layers).unwrap();
        let err = decide(&e, Some(&json)).unwrap_err();
        assert!(matches!(err, OtelError::EndpointDenied { .. }), "{err}");
    }
}
