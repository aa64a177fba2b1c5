//! Content hashes as the record writes them: SHA-256 in lowercase hex. One definition,
//! because the journal compares hashes the tools computed with hashes the engine
//! computes, and the store keys blobs by the same form.

use std::fmt::Write as _;
use std::io::{self, Read};

use sha2::{Digest, Sha256};

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// SHA-256 of `bytes` as lowercase hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// SHA-256 of everything `r` yields, streamed (a 64 KiB buffer at a time).
pub(crate) fn sha256_stream(mut r: impl Read) -> io::Result<[u8; 32]> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(h.finalize().into())
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_the_known_digest() {
        assert_eq!(
            super::sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let streamed = super::sha256_stream(&[b'a'; 200_000][..]).unwrap();
        assert_eq!(
            super::hex(&streamed),
            super::sha256_hex(&[b'a'; 200_000]),
            "streaming across buffer refills hashes the same bytes"
        );
    }
}
