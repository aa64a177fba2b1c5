//! The minimal HTTP/1.1 the proxy needs: one request head (request line and headers,
//! bounded), the target it names, and the head rewritten for the upstream server.
//!
//! Hand-written rather than a full HTTP stack because the proxy only has to decide
//! *where* a request goes; bodies and responses pass through as bytes.

use tokio::io::{AsyncRead, AsyncReadExt};

use super::rule::split_host_port;

/// The largest request head accepted.
pub(crate) const MAX_HEAD: usize = 16 * 1024;
/// The most header lines accepted.
const MAX_HEADERS: usize = 100;

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) version: String,
    pub(crate) headers: Vec<(String, String)>,
}

/// Why no request head could be read.
#[derive(Debug)]
pub(crate) enum HeadError {
    /// The client closed before sending a whole head.
    Closed,
    /// The head exceeds [`MAX_HEAD`] or [`MAX_HEADERS`].
    TooLarge,
    /// Not HTTP/1.x.
    Malformed,
    /// Reading failed.
    Io(std::io::Error),
}

/// Where a plain-HTTP request goes and how to say it to the upstream server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlainTarget {
    pub(crate) host: String,
    pub(crate) port: u16,
    /// The head to send upstream (origin-form, proxy headers dropped, `Connection: close`).
    pub(crate) upstream_head: Vec<u8>,
}

/// Why a plain-HTTP request cannot be forwarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PlainError {
    /// Unusable target (scheme other than http, userinfo, no host anywhere, duplicate Host).
    Bad,
    /// The Host header names another host than the request target; carries the header's host.
    HostMismatch(String),
}

/// Reads one request head; returns it and any bytes read past it.
pub(crate) async fn read_head<R: AsyncRead + Unpin>(
    r: &mut R,
) -> Result<(Head, Vec<u8>), HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = r.read(&mut chunk).await.map_err(HeadError::Io)?;
        if n == 0 {
            return Err(HeadError::Closed);
        }
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = find(&buf[from..], b"\r\n\r\n") {
            let end = from + i + 4;
            if end > MAX_HEAD {
                return Err(HeadError::TooLarge);
            }
            let head = parse_head(&buf[..end])?;
            return Ok((head, buf[end..].to_vec()));
        }
        if buf.len() > MAX_HEAD {
            return Err(HeadError::TooLarge);
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses a head ending in an empty line.
pub(crate) fn parse_head(bytes: &[u8]) -> Result<Head, HeadError> {
    let text = std::str::from_utf8(bytes).map_err(|_| HeadError::Malformed)?;
    let mut lines = text.split("\r\n");
    let request = lines.next().ok_or(HeadError::Malformed)?;
    let mut parts = request.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::Malformed);
    };
    if !is_token(method) || target.is_empty() || !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(HeadError::Malformed);
    }
    let mut headers = Vec::new();
    for line in lines {
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            return Err(HeadError::Malformed); // obsolete line folding
        }
        let (name, value) = line.split_once(':').ok_or(HeadError::Malformed)?;
        if !is_token(name) || value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            return Err(HeadError::Malformed);
        }
        if headers.len() == MAX_HEADERS {
            return Err(HeadError::TooLarge);
        }
        headers.push((name.to_string(), value.trim().to_string()));
    }
    Ok(Head {
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
    })
}

impl Head {
    fn header_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The target of a plain (non-CONNECT) request: from an absolute-form URI, whose
    /// authority the Host header (if any) must match, or from the Host header alone.
    pub(crate) fn plain_target(&self) -> Result<PlainTarget, PlainError> {
        let hosts: Vec<&str> = self.header_values("host").collect();
        if hosts.len() > 1 {
            return Err(PlainError::Bad);
        }
        let header = match hosts.first() {
            Some(h) => Some(authority(h).ok_or(PlainError::Bad)?),
            None => None,
        };
        let (host, port, path) = if self.target.starts_with('/') {
            let (h, p) = header.clone().ok_or(PlainError::Bad)?;
            (h, p, self.target.clone())
        } else {
            let lower = self.target.to_ascii_lowercase();
            if !lower.starts_with("http://") {
                return Err(PlainError::Bad);
            }
            let rest = &self.target["http://".len()..];
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let (auth, path) = rest.split_at(end);
            let (h, p) = authority(auth).ok_or(PlainError::Bad)?;
            if let Some((hh, hp)) = &header
                && (*hh != h || *hp != p)
            {
                return Err(PlainError::HostMismatch(hh.clone()));
            }
            let path = match path {
                "" => "/".to_string(),
                p if p.starts_with('/') => p.to_string(),
                p => format!("/{p}"),
            };
            (h, p, path)
        };
        let mut out = format!("{} {} {}\r\n", self.method, path, self.version);
        let host_value = if port == 80 {
            bracket(&host)
        } else {
            format!("{}:{port}", bracket(&host))
        };
        out.push_str(&format!("Host: {host_value}\r\n"));
        for (name, value) in &self.headers {
            let drop = [
                "host",
                "connection",
                "keep-alive",
                "proxy-connection",
                "proxy-authorization",
            ]
            .iter()
            .any(|d| name.eq_ignore_ascii_case(d));
            if !drop {
                out.push_str(&format!("{name}: {value}\r\n"));
            }
        }
        out.push_str("Connection: close\r\n\r\n");
        Ok(PlainTarget {
            host,
            port,
            upstream_head: out.into_bytes(),
        })
    }
}

fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// `host[:port]` of an http authority, normalised, port defaulting to 80; no userinfo.
fn authority(s: &str) -> Option<(String, u16)> {
    if s.is_empty() || s.contains('@') {
        return None;
    }
    let (h, p) = split_host_port(s)?;
    if h.is_empty() {
        return None;
    }
    Some((super::rule::normalize(&h), p.unwrap_or(80)))
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    fn head(s: &str) -> Head {
        parse_head(s.as_bytes()).expect("head parses")
    }

    #[test]
    fn absolute_form_is_rewritten_to_origin_form() {
        let h = head(
            "GET http://Allowed.Test:8080/a?b HTTP/1.1\r\nHost: allowed.test:8080\r\nProxy-Connection: keep-alive\r\n\r\n",
        );
        let t = h.plain_target().expect("target");
        assert_eq!((t.host.as_str(), t.port), ("allowed.test", 8080));
        let up = String::from_utf8(t.upstream_head).expect("utf8");
        assert!(
            up.starts_with("GET /a?b HTTP/1.1\r\nHost: allowed.test:8080\r\n"),
            "{up}"
        );
        assert!(!up.to_ascii_lowercase().contains("proxy-connection"));
        assert!(up.ends_with("Connection: close\r\n\r\n"));
    }

    #[test]
    fn host_header_must_match_and_be_single() {
        let h = head("GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n");
        assert_eq!(
            h.plain_target(),
            Err(PlainError::HostMismatch("b.test".into()))
        );
        let h = head("GET http://a.test/ HTTP/1.1\r\nHost: a.test:81\r\n\r\n");
        assert!(matches!(h.plain_target(), Err(PlainError::HostMismatch(_))));
        let h = head("GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n");
        assert_eq!(h.plain_target(), Err(PlainError::Bad));
        let h = head("GET http://u@a.test/ HTTP/1.1\r\n\r\n");
        assert_eq!(h.plain_target(), Err(PlainError::Bad));
        let h = head("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
        assert_eq!(h.plain_target().map(|t| t.host), Ok("a.test".to_string()));
    }

    #[test]
    fn malformed_heads_are_rejected() {
        for bad in [
            "GET /\r\n\r\n",
            "GET  / HTTP/1.1\r\n\r\n",
            "GET / HTTP/2\r\n\r\n",
            "GET / HTTP/1.1\r\nNo colon\r\n\r\n",
            "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
        ] {
            assert!(parse_head(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }
}
