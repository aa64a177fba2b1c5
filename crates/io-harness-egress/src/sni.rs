//! A bounded reader of the server name (SNI) in a TLS ClientHello.
//!
//! After a CONNECT tunnel opens, the first bytes the client sends are, for TLS, a
//! ClientHello whose `server_name` extension says which host it means to talk to. The
//! proxy compares that with the CONNECT host so that a tunnel opened to an allowed name
//! cannot carry a TLS session meant for another (domain fronting through a shared IP).
//! The input is attacker-chosen: every read is checked, nothing indexes unchecked, and the
//! amount buffered is capped.

/// The most the proxy buffers while waiting for a complete ClientHello.
pub(crate) const MAX_HELLO: usize = 16 * 1024;

/// What the first client bytes of a tunnel turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hello {
    /// Not a TLS handshake record at all.
    NotTls,
    /// A TLS handshake so far, but more bytes are needed.
    Incomplete,
    /// A complete ClientHello naming this host (lower-case, no trailing dot).
    Sni(String),
    /// A complete ClientHello without a host_name.
    NoSni,
    /// Looked like TLS but is not a well-formed ClientHello (or exceeds the bound).
    Malformed,
}

/// A cursor that never reads past its slice.
struct Cur<'a> {
    buf: &'a [u8],
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| usize::from(b[0]))
    }
    fn u16(&mut self) -> Option<usize> {
        self.take(2)
            .map(|b| usize::from(b[0]) << 8 | usize::from(b[1]))
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(n)
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
}

/// Classifies the bytes a client sent first. Reassembles a ClientHello split over
/// several TLS records.
pub(crate) fn parse_client_hello(buf: &[u8]) -> Hello {
    if buf.is_empty() {
        return Hello::Incomplete;
    }
    if buf[0] != 0x16 || buf.get(1).is_some_and(|&v| v != 0x03) {
        return Hello::NotTls;
    }
    let mut records = Cur { buf };
    let mut handshake: Vec<u8> = Vec::new();
    loop {
        if records.buf.len() < 5 {
            return incomplete_or_too_big(buf);
        }
        let Some(header) = records.take(5) else {
            return Hello::Malformed;
        };
        if header[0] != 0x16 || header[1] != 0x03 {
            return Hello::Malformed;
        }
        let len = usize::from(header[3]) << 8 | usize::from(header[4]);
        if len == 0 || len > MAX_HELLO {
            return Hello::Malformed;
        }
        let Some(fragment) = records.take(len) else {
            return incomplete_or_too_big(buf);
        };
        handshake.extend_from_slice(fragment);
        if handshake.len() < 4 {
            continue;
        }
        if handshake[0] != 0x01 {
            return Hello::Malformed;
        }
        let msg_len = usize::from(handshake[1]) << 16
            | usize::from(handshake[2]) << 8
            | usize::from(handshake[3]);
        if msg_len > MAX_HELLO {
            return Hello::Malformed;
        }
        if let Some(body) = handshake.get(4..4 + msg_len) {
            return client_hello_body(body).unwrap_or(Hello::Malformed);
        }
    }
}

fn incomplete_or_too_big(buf: &[u8]) -> Hello {
    if buf.len() >= MAX_HELLO + 5 {
        Hello::Malformed
    } else {
        Hello::Incomplete
    }
}

fn client_hello_body(body: &[u8]) -> Option<Hello> {
    let mut c = Cur { buf: body };
    c.take(2)?; // legacy_version
    c.take(32)?; // random
    c.vec8()?; // legacy_session_id
    c.vec16()?; // cipher_suites
    c.vec8()?; // legacy_compression_methods
    if c.buf.is_empty() {
        return Some(Hello::NoSni);
    }
    let mut exts = Cur { buf: c.vec16()? };
    while !exts.buf.is_empty() {
        let kind = exts.u16()?;
        let data = exts.vec16()?;
        if kind == 0 {
            return server_name(data);
        }
    }
    Some(Hello::NoSni)
}

fn server_name(data: &[u8]) -> Option<Hello> {
    let mut c = Cur { buf: data };
    let mut list = Cur { buf: c.vec16()? };
    while !list.buf.is_empty() {
        let kind = list.u8()?;
        let name = list.vec16()?;
        if kind == 0 {
            let ok = !name.is_empty()
                && name
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_');
            if !ok {
                return Some(Hello::Malformed);
            }
            let s = std::str::from_utf8(name).ok()?;
            return Some(Hello::Sni(super::rule::normalize(s)));
        }
    }
    Some(Hello::NoSni)
}

/// Builds a minimal, well-formed ClientHello (one record) naming `sni`, or none.
/// Test helper, also used by the integration tests as the "real wire format" stand-in.
#[doc(hidden)]
pub fn fake_client_hello(sni: Option<&str>) -> Vec<u8> {
    let mut exts = Vec::new();
    if let Some(name) = sni {
        let n = name.as_bytes();
        let mut entry = vec![0u8];
        entry.extend_from_slice(&(n.len() as u16).to_be_bytes());
        entry.extend_from_slice(n);
        let mut data = (entry.len() as u16).to_be_bytes().to_vec();
        data.extend_from_slice(&entry);
        exts.extend_from_slice(&0u16.to_be_bytes());
        exts.extend_from_slice(&(data.len() as u16).to_be_bytes());
        exts.extend_from_slice(&data);
    }
    // supported_versions, so the hello carries a second extension.
    exts.extend_from_slice(&[0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x04]);
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[7u8; 32]);
    body.push(0);
    body.extend_from_slice(&[0x00, 0x02, 0x13, 0x01]);
    body.extend_from_slice(&[0x01, 0x00]);
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut hs = vec![0x01];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 0x03, 0x01];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sni_from_a_hello() {
        let h = fake_client_hello(Some("Allowed.Test."));
        assert_eq!(parse_client_hello(&h), Hello::Sni("allowed.test".into()));
        assert_eq!(parse_client_hello(&fake_client_hello(None)), Hello::NoSni);
        assert_eq!(parse_client_hello(b"GET / HTTP/1.1\r\n"), Hello::NotTls);
    }

    #[test]
    fn every_prefix_is_incomplete_and_split_records_reassemble() {
        let h = fake_client_hello(Some("a.test"));
        for n in 1..h.len() {
            assert_eq!(parse_client_hello(&h[..n]), Hello::Incomplete, "prefix {n}");
        }
        // Split the handshake over two records.
        let hs = &h[5..];
        let (a, b) = hs.split_at(10);
        let mut two = vec![0x16, 0x03, 0x01, 0, a.len() as u8];
        two.extend_from_slice(a);
        two.extend_from_slice(&[0x16, 0x03, 0x01]);
        two.extend_from_slice(&(b.len() as u16).to_be_bytes());
        two.extend_from_slice(b);
        assert_eq!(parse_client_hello(&two), Hello::Sni("a.test".into()));
    }

    #[test]
    fn garbage_never_panics() {
        // xorshift: deterministic pseudo-random bytes, no dependency.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let hello = fake_client_hello(Some("fuzz.test"));
        for round in 0..20_000 {
            let mut buf = if round % 2 == 0 {
                hello.clone()
            } else {
                let len = (next() % 600) as usize;
                let mut v: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                // A plausible record and handshake header, so parsing gets past the first checks.
                let n = v.len() as u16 + 1;
                let [hi, lo] = n.to_be_bytes();
                v.splice(0..0, [0x16, 0x03, 0x01, hi, lo, 0x01]);
                v
            };
            // Mutate a few bytes, then truncate.
            for _ in 0..(next() % 4) {
                if !buf.is_empty() {
                    let i = (next() as usize) % buf.len();
                    buf[i] = next() as u8;
                }
            }
            let cut = (next() as usize) % (buf.len() + 1);
            let _ = parse_client_hello(&buf[..cut]);
        }
    }
}
