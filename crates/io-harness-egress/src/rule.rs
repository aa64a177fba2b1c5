//! Allow rules and the host names they are matched against.
//!
//! A rule is a host pattern with an optional port: `crates.io` (that name, any port),
//! `*.pypi.org:443` (any name strictly below `pypi.org`, port 443 only), `10.0.0.5:8080`
//! or `[::1]:443` (an IP literal, which is the only way an IP target is ever admitted).
//! Names compare case-insensitively with one trailing dot ignored, because DNS does.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// Why a rule string was rejected when parsing the contract's `allow_hosts`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// The rule was empty (or only a port).
    #[error("empty egress host rule")]
    Empty,
    /// The port after `:` was not a number from 1 to 65535.
    #[error("bad port in egress host rule {rule:?}")]
    BadPort {
        /// The rule as written.
        rule: String,
    },
    /// The host part holds characters no DNS name has, or a `*` anywhere but a leading `*.`.
    #[error("bad host in egress host rule {rule:?}")]
    BadHost {
        /// The rule as written.
        rule: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// Exactly this (normalised) name.
    Exact(String),
    /// Any name ending in this suffix, which starts with a dot (`.pypi.org`).
    Suffix(String),
    /// Exactly this address.
    Ip(IpAddr),
}

/// One allowlist entry: a host pattern and an optional port.
///
/// ```
/// use io_harness_egress::HostRule;
///
/// let pypi = HostRule::parse("*.pypi.org:443").unwrap();
/// assert!(pypi.matches("files.pypi.org", 443));
/// assert!(!pypi.matches("files.pypi.org", 80), "another port");
/// assert!(!pypi.matches("pypi.org.evil.test", 443));
/// let crates = HostRule::parse("crates.io").unwrap();
/// assert!(crates.matches("crates.io", 443) && crates.matches("crates.io", 80));
/// assert!(HostRule::parse("http://crates.io").is_err(), "a URL is not a host rule");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    pattern: Pattern,
    port: Option<u16>,
}

/// A destination as the client named it, after normalisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// A DNS name, lower-case, without a trailing dot.
    Name(String),
    /// An IP literal.
    Ip(IpAddr),
    /// Something a resolver would read as an address (`127.1`, `0x7f.1`) but is not a
    /// canonical IP literal; never admitted, so the name check cannot be bypassed.
    NumericLike(String),
}

impl Target {
    /// Classifies a host string (brackets already removed).
    pub(crate) fn classify(host: &str) -> Target {
        let name = normalize(host);
        if let Ok(ip) = name.parse::<IpAddr>() {
            return Target::Ip(ip);
        }
        let last = name.rsplit('.').next().unwrap_or("");
        let numeric = !last.is_empty()
            && (last.bytes().all(|b| b.is_ascii_digit())
                || last.starts_with("0x")
                || name.contains(':'));
        if numeric {
            Target::NumericLike(name)
        } else {
            Target::Name(name)
        }
    }

    /// The form recorded in refusal lists and compared with SNI / Host.
    pub(crate) fn label(&self) -> String {
        match self {
            Target::Name(n) | Target::NumericLike(n) => n.clone(),
            Target::Ip(ip) => ip.to_string(),
        }
    }
}

/// Lower-cases and drops one trailing dot.
pub(crate) fn normalize(host: &str) -> String {
    let h = host.strip_suffix('.').unwrap_or(host);
    h.to_ascii_lowercase()
}

/// Splits `host`, `host:port`, `[v6]` or `[v6]:port`; a bare IPv6 literal has no port.
/// Returns `None` for a malformed port or unbalanced brackets.
pub(crate) fn split_host_port(s: &str) -> Option<(String, Option<u16>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        if after.is_empty() {
            return Some((host.to_string(), None));
        }
        let port = parse_port(after.strip_prefix(':')?)?;
        return Some((host.to_string(), Some(port)));
    }
    if s.parse::<IpAddr>().is_ok() {
        return Some((s.to_string(), None));
    }
    match s.rsplit_once(':') {
        Some((host, port)) => Some((host.to_string(), Some(parse_port(port)?))),
        None => Some((s.to_string(), None)),
    }
}

fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    p.parse::<u16>().ok().filter(|&n| n != 0)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

impl HostRule {
    /// Parses `crates.io`, `*.pypi.org:443`, `10.0.0.5`, `[::1]:8080`.
    pub fn parse(rule: &str) -> Result<HostRule, RuleError> {
        let trimmed = rule.trim();
        if trimmed.is_empty() {
            return Err(RuleError::Empty);
        }
        let bad_port = || RuleError::BadPort {
            rule: rule.to_string(),
        };
        let bad_host = || RuleError::BadHost {
            rule: rule.to_string(),
        };
        let (host, port) = split_host_port(trimmed).ok_or_else(bad_port)?;
        if host.is_empty() {
            return Err(RuleError::Empty);
        }
        let pattern = if let Some(base) = host.strip_prefix("*.") {
            let base = normalize(base);
            if !valid_name(&base) {
                return Err(bad_host());
            }
            Pattern::Suffix(format!(".{base}"))
        } else {
            match Target::classify(&host) {
                Target::Ip(ip) => Pattern::Ip(ip),
                Target::Name(n) if valid_name(&n) => Pattern::Exact(n),
                _ => return Err(bad_host()),
            }
        };
        Ok(HostRule { pattern, port })
    }

    /// An exact host name without a port (what a `resolve` pin may name).
    pub fn is_plain_name(&self) -> bool {
        matches!(self.pattern, Pattern::Exact(_)) && self.port.is_none()
    }

    /// Whether this rule admits `target` on `port`.
    pub(crate) fn admits(&self, target: &Target, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match (&self.pattern, target) {
            (Pattern::Exact(e), Target::Name(n)) => e == n,
            (Pattern::Suffix(s), Target::Name(n)) => n.len() > s.len() && n.ends_with(s.as_str()),
            (Pattern::Ip(a), Target::Ip(b)) => a == b,
            _ => false,
        }
    }

    /// Whether this rule admits `host` (a name or IP literal as a client would write it) on `port`.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        self.admits(
            &Target::classify(host.trim_start_matches('[').trim_end_matches(']')),
            port,
        )
    }
}

impl FromStr for HostRule {
    type Err = RuleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HostRule::parse(s)
    }
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pattern {
            Pattern::Exact(n) => write!(f, "{n}")?,
            Pattern::Suffix(s) => write!(f, "*{s}")?,
            Pattern::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]")?,
            Pattern::Ip(ip) => write!(f, "{ip}")?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> HostRule {
        HostRule::parse(s).expect("rule parses")
    }

    #[test]
    fn exact_and_wildcard_rules_match_as_documented() {
        assert!(r("crates.io").matches("CRATES.IO.", 443));
        assert!(r("crates.io").matches("crates.io", 80));
        assert!(!r("crates.io").matches("static.crates.io", 443));
        assert!(r("*.pypi.org:443").matches("files.pypi.org", 443));
        assert!(!r("*.pypi.org:443").matches("files.pypi.org", 80));
        assert!(!r("*.pypi.org:443").matches("pypi.org", 443));
        assert!(!r("*.pypi.org").matches("evilpypi.org", 443));
    }

    #[test]
    fn ip_literals_only_match_ip_rules() {
        assert!(r("127.0.0.1:8080").matches("127.0.0.1", 8080));
        assert!(!r("localhost").matches("127.0.0.1", 80));
        assert!(r("[::1]").matches("[::1]", 443));
        assert_eq!(
            Target::classify("127.1"),
            Target::NumericLike("127.1".into())
        );
        assert_eq!(
            Target::classify("0x7f.0x1"),
            Target::NumericLike("0x7f.0x1".into())
        );
        assert!(!r("*.1").matches("127.1", 80));
    }

    #[test]
    fn bad_rules_are_typed_errors() {
        assert_eq!(HostRule::parse(""), Err(RuleError::Empty));
        assert!(matches!(
            HostRule::parse("a.b:99999"),
            Err(RuleError::BadPort { .. })
        ));
        assert!(matches!(
            HostRule::parse("a*b.c"),
            Err(RuleError::BadHost { .. })
        ));
        assert_eq!(r("*.Pypi.org.:443").to_string(), "*.pypi.org:443");
    }
}
