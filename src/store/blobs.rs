//! Content-addressed blobs: exact request bodies, stored once per distinct content.
//!
//! Consecutive requests of a run repeat most of the conversation, and resumed or retried
//! steps resend identical bodies; keying by SHA-256 makes the repeats free and lets a
//! step name its body by hash.

use rusqlite::OptionalExtension;

use super::{Result, Store};

/// Bodies smaller than this are stored whole; larger ones are split into chunks.
pub(crate) const CHUNK_THRESHOLD: usize = 8 * 1024;
/// Content-defined chunk bounds: boundaries fall where the content says, so an insertion
/// shifts only the chunks around it and the rest of a long prefix dedupes.
const MIN_CHUNK: usize = 256;
const MAX_CHUNK: usize = 16 * 1024;
/// A boundary where the top bits of the rolling hash are zero: about one every KiB
/// past the minimum. (The top bits depend on the last 64 bytes; the low bits, used
/// before, on the last 11 only, which in repetitive JSON gave 8 KiB chunks.) A step
/// re-stores the part of its body after the previous body's last boundary, so smaller
/// chunks keep a step's growth near its new content.
const BOUNDARY_BITS: u32 = 10;

/// The gear table of the rolling hash: 256 fixed pseudo-random words (splitmix64).
const GEAR: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut i = 0;
    while i < 256 {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        t[i] = z ^ (z >> 31);
        i += 1;
    }
    t
};

/// Splits `bytes` at content-defined boundaries (a gear rolling hash).
#[cfg(test)]
pub(crate) fn chunks(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    for (end, _) in chunk_ends(bytes) {
        out.push(&bytes[start..end]);
        start = end;
    }
    out
}

/// The end offset of each chunk of `bytes`, and whether it ended at a content-defined
/// boundary (`false` for a last piece cut by the end of the input). Chunking from a
/// boundary depends only on the bytes after it, so a longer body with the same prefix
/// has the same chunks up to its last boundary inside the prefix.
pub(crate) fn chunk_ends(bytes: &[u8]) -> Vec<(usize, bool)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut h: u64 = 0;
    for (i, &b) in bytes.iter().enumerate() {
        h = (h << 1).wrapping_add(GEAR[b as usize]);
        let len = i + 1 - start;
        if (len >= MIN_CHUNK && h >> (64 - BOUNDARY_BITS) == 0) || len >= MAX_CHUNK {
            out.push((i + 1, true));
            start = i + 1;
            h = 0;
        }
    }
    if start < bytes.len() {
        out.push((bytes.len(), false));
    }
    out
}

impl Store {
    /// A stored blob (a step's exact request body) by its SHA-256 hex hash.
    pub fn blob(&self, hash: &str) -> Result<Option<Vec<u8>>> {
        let conn = self.conn();
        let row: Option<(Vec<u8>, i64, i64)> = conn
            .query_row(
                "SELECT bytes, chunked, size FROM blobs WHERE hash = ?1",
                [hash],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        let Some((bytes, chunked, size)) = row else {
            return Ok(None);
        };
        let bytes = match chunked {
            0 => return Ok(Some(bytes)),
            1 => bytes,
            _ => match super::body_stream::chunk_list(&conn, hash)? {
                Some(list) => list,
                None => return Ok(None),
            },
        };
        let mut out = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        let mut get = conn.prepare_cached("SELECT bytes FROM chunks WHERE hash = ?1")?;
        for digest in bytes.chunks(32) {
            let part: Vec<u8> = get.query_row([digest], |r| r.get(0))?;
            out.extend_from_slice(&part);
        }
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::{Connection, params};
    use sha2::{Digest, Sha256};

    /// The whole-body form (a full chunk list), as stored before bodies were streamed.
    /// Stores `bytes` (already redacted) unless present; returns their hash. Runs inside the
    /// caller's transaction.
    ///
    /// Consecutive requests of a run repeat the whole conversation so far, so storing each
    /// body whole grows the store with the square of the run's length. A large body is
    /// therefore stored as a list of content-defined chunks, each kept once: a new request
    /// costs its new messages and a chunk or two around them.
    fn put(conn: &Connection, bytes: &[u8]) -> Result<String> {
        let hash = crate::digest::sha256_hex(bytes);
        let exists: bool = conn
            .query_row("SELECT 1 FROM blobs WHERE hash = ?1", [&hash], |_| Ok(true))
            .optional()?
            .unwrap_or(false);
        if exists {
            return Ok(hash);
        }
        if bytes.len() < CHUNK_THRESHOLD {
            conn.execute(
                "INSERT INTO blobs (hash, bytes, size, chunked) VALUES (?1, ?2, ?3, 0)",
                params![hash, bytes, bytes.len() as i64],
            )?;
            return Ok(hash);
        }
        let mut index = Vec::new();
        let mut insert =
            conn.prepare_cached("INSERT OR IGNORE INTO chunks (hash, bytes) VALUES (?1, ?2)")?;
        for c in chunks(bytes) {
            let digest: [u8; 32] = Sha256::digest(c).into();
            insert.execute(params![&digest[..], c])?;
            index.extend_from_slice(&digest);
        }
        conn.execute(
            "INSERT INTO blobs (hash, bytes, size, chunked) VALUES (?1, ?2, ?3, 1)",
            params![hash, index, bytes.len() as i64],
        )?;
        Ok(hash)
    }

    #[test]
    fn chunks_cover_the_input_within_bounds_and_resync_after_an_insertion() {
        let mut body = Vec::new();
        for i in 0..4000u32 {
            body.extend_from_slice(format!("{{\"role\":\"user\",\"n\":{i}}},").as_bytes());
        }
        let parts = chunks(&body);
        assert_eq!(parts.concat(), body);
        assert!(
            parts[..parts.len() - 1]
                .iter()
                .all(|c| c.len() >= MIN_CHUNK && c.len() <= MAX_CHUNK)
        );
        let mut grown = body.clone();
        grown.splice(40_000..40_000, b"{\"inserted\":true},".iter().copied());
        let before: std::collections::HashSet<&[u8]> = parts.iter().copied().collect();
        let after = chunks(&grown);
        let new = after.iter().filter(|c| !before.contains(*c)).count();
        assert!(new <= 3, "{new} new chunks of {}", after.len());
    }

    #[test]
    fn a_chunked_body_reads_back_whole() {
        let store = Store::memory().unwrap();
        let body: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let hash = {
            let mut conn = store.conn();
            let tx = conn.transaction().unwrap();
            let h = put(&tx, &body).unwrap();
            tx.commit().unwrap();
            h
        };
        assert_eq!(store.blob(&hash).unwrap().unwrap(), body);
        assert_eq!(store.blob("00").unwrap(), None);
    }
    #[test]
    fn sha256_hex_matches_the_known_digest() {
        assert_eq!(
            crate::digest::sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
