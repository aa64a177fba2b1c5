//! Content-addressed blobs: exact request bodies, stored once per distinct content.
//!
//! Consecutive requests of a run repeat most of the conversation, and resumed or retried
//! steps resend identical bodies; keying by SHA-256 makes the repeats free and lets a
//! step name its body by hash.

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

use super::{Result, Store};

/// Lowercase hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Stores `bytes` (already redacted) unless present; returns their hash. Runs inside the
/// caller's transaction.
pub(crate) fn put(conn: &Connection, bytes: &[u8]) -> Result<String> {
    let hash = sha256_hex(bytes);
    conn.execute(
        "INSERT OR IGNORE INTO blobs (hash, bytes, size) VALUES (?1, ?2, ?3)",
        params![hash, bytes, bytes.len() as i64],
    )?;
    Ok(hash)
}

impl Store {
    /// A stored blob (a step's exact request body) by its SHA-256 hex hash.
    pub fn blob(&self, hash: &str) -> Result<Option<Vec<u8>>> {
        let conn = self.conn();
        Ok(conn
            .query_row("SELECT bytes FROM blobs WHERE hash = ?1", [hash], |r| {
                r.get(0)
            })
            .optional()?)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sha256_hex_matches_the_known_digest() {
        assert_eq!(
            super::sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
