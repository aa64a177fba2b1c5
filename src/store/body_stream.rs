//! Request bodies stored at the cost of what is new in them.
//!
//! A run's requests grow by appending: request `n + 1` is request `n` with a turn
//! more. Chunking, hashing and listing each whole body made a step's store work (and
//! its store growth: a 32-byte digest per chunk of the whole body) grow with the run.
//! Here each stream of bodies (a run's sent requests, its assembled ones) keeps the
//! previous body in memory with its chunk boundaries and the SHA-256 state at each:
//! the common prefix is found with one comparison, the chunks wholly inside it are
//! reused as they are (a content-defined boundary depends only on the bytes since the
//! chunk's start), and only the rest is chunked and hashed. The blob's chunk list is
//! stored as a delta of the previous one — the number of its first digests kept and
//! the new digests — so a step stores its new chunks and a few digests, and reading a
//! body walks a chain of at most [`MAX_DEPTH`] deltas.

use std::collections::HashMap;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

use super::Result;
use super::blobs::{CHUNK_THRESHOLD, chunk_ends};

/// Deltas chained before a full chunk list is written again (bounds a read).
pub(crate) const MAX_DEPTH: u32 = 64;
/// Streams remembered at once (runs alive in one process, two streams each).
const MAX_STREAMS: usize = 32;

/// Which stream of bodies: a run and what kind of body.
pub(crate) type StreamKey = (i64, &'static str);

/// One chunk that ended at a content-defined boundary.
#[derive(Clone)]
struct Cut {
    end: usize,
    digest: [u8; 32],
    /// The whole-body hash state after `..end`.
    state: Sha256,
}

/// The previous body of a stream.
struct Prev {
    bytes: Vec<u8>,
    hash: String,
    cuts: Vec<Cut>,
    /// Deltas between its stored list and a full one; `None` when it is not stored
    /// as a list at all (a small body kept whole).
    depth: Option<u32>,
}

/// The previous body of each stream, and the list depth of the bodies stored lately
/// (a body another stream stored first is built on at its own depth).
#[derive(Default)]
pub(crate) struct BodyStreams(Mutex<Streams>);

#[derive(Default)]
struct Streams {
    prev: HashMap<StreamKey, Prev>,
    depth_of: HashMap<String, Option<u32>>,
}

impl std::fmt::Debug for BodyStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyStreams").finish_non_exhaustive()
    }
}

/// A body cut into chunks: the reused ones first, then the new ones.
struct Chunked {
    hash: String,
    cuts: Vec<Cut>,
    /// Digest and bytes range of the last piece, when it ended at the end of input.
    last: Option<([u8; 32], std::ops::Range<usize>)>,
    /// Chunks (by index into the full list) reused from the previous body.
    reused: usize,
}

/// The length of the common prefix of `a` and `b`, compared a block at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

fn cut(bytes: &[u8], prev: Option<&Prev>) -> Chunked {
    let (reused, start, mut state) = match prev {
        Some(p) => {
            let common = common_prefix(&p.bytes, bytes);
            let k = p.cuts.partition_point(|c| c.end <= common);
            match k.checked_sub(1).map(|i| &p.cuts[i]) {
                Some(c) => (k, c.end, c.state.clone()),
                None => (0, 0, Sha256::new()),
            }
        }
        None => (0, 0, Sha256::new()),
    };
    let mut cuts: Vec<Cut> = prev.map_or(Vec::new(), |p| p.cuts[..reused].to_vec());
    let mut at = start;
    let mut last = None;
    for (end, boundary) in chunk_ends(&bytes[start..]) {
        let piece = &bytes[at..start + end];
        state.update(piece);
        let digest: [u8; 32] = Sha256::digest(piece).into();
        if boundary {
            cuts.push(Cut {
                end: start + end,
                digest,
                state: state.clone(),
            });
        } else {
            last = Some((digest, at..start + end));
        }
        at = start + end;
    }
    Chunked {
        hash: crate::digest::hex(&state.finalize()),
        cuts,
        last,
        reused,
    }
}

impl BodyStreams {
    /// Stores `bytes` (already redacted) as the next body of `stream` unless present;
    /// returns their SHA-256 hex hash. Runs inside the caller's transaction.
    pub(crate) fn put(&self, conn: &Connection, stream: StreamKey, bytes: &[u8]) -> Result<String> {
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let streams = &mut *guard;
        let prev = streams.prev.remove(&stream);
        // A base the database no longer has (pruned) is not built on.
        let prev = prev.filter(|p| {
            conn.query_row("SELECT 1 FROM blobs WHERE hash = ?1", [&p.hash], |_| Ok(()))
                .optional()
                .ok()
                .flatten()
                .is_some()
        });
        let c = cut(bytes, prev.as_ref());
        let exists: bool = conn
            .query_row("SELECT 1 FROM blobs WHERE hash = ?1", [&c.hash], |_| {
                Ok(true)
            })
            .optional()?
            .unwrap_or(false);
        let depth = if exists {
            // Stored before: built on at its depth when known (another stream of this
            // run stored the same body), else never (its form is unknown).
            streams
                .depth_of
                .get(&c.hash)
                .copied()
                .flatten()
                .or(Some(MAX_DEPTH))
                .filter(|_| bytes.len() >= CHUNK_THRESHOLD)
        } else if bytes.len() < CHUNK_THRESHOLD {
            conn.execute(
                "INSERT INTO blobs (hash, bytes, size, chunked) VALUES (?1, ?2, ?3, 0)",
                params![c.hash, bytes, bytes.len() as i64],
            )?;
            None
        } else {
            Some(insert_listed(conn, bytes, &c, prev.as_ref())?)
        };
        if streams.prev.len() >= MAX_STREAMS {
            streams.prev.clear();
        }
        if streams.depth_of.len() >= 2 * MAX_STREAMS {
            streams.depth_of.clear();
        }
        streams.depth_of.insert(c.hash.clone(), depth);
        let hash = c.hash.clone();
        streams.prev.insert(
            stream,
            Prev {
                bytes: bytes.to_vec(),
                hash: c.hash,
                cuts: c.cuts,
                depth,
            },
        );
        Ok(hash)
    }
}

/// Inserts the new chunks and the blob's list (a delta of the previous body's when it
/// shares chunks with it); returns the list's depth.
fn insert_listed(conn: &Connection, bytes: &[u8], c: &Chunked, prev: Option<&Prev>) -> Result<u32> {
    // A delta builds only on a listed body, whose chunks are stored; otherwise every
    // chunk is inserted (the reused ones may never have been, if the previous body
    // was small enough to be kept whole).
    let base = prev
        .and_then(|p| p.depth.map(|d| (p, d)))
        .filter(|(_, d)| *d < MAX_DEPTH)
        .filter(|_| c.reused > 0);
    let first_new = if base.is_some() { c.reused } else { 0 };
    let mut insert =
        conn.prepare_cached("INSERT OR IGNORE INTO chunks (hash, bytes) VALUES (?1, ?2)")?;
    let mut from = c.cuts.get(first_new.wrapping_sub(1)).map_or(0, |x| x.end);
    for x in &c.cuts[first_new..] {
        insert.execute(params![&x.digest[..], &bytes[from..x.end]])?;
        from = x.end;
    }
    if let Some((d, range)) = &c.last {
        insert.execute(params![&d[..], &bytes[range.clone()]])?;
    }
    let digests = |from: usize| {
        let mut v: Vec<u8> = c.cuts[from..].iter().flat_map(|x| x.digest).collect();
        if let Some((d, _)) = &c.last {
            v.extend_from_slice(d);
        }
        v
    };
    match base {
        Some((p, d)) => {
            let mut list = u32::try_from(c.reused)
                .unwrap_or(u32::MAX)
                .to_le_bytes()
                .to_vec();
            list.extend(digests(c.reused));
            conn.execute(
                "INSERT INTO blobs (hash, bytes, size, chunked, base) VALUES (?1, ?2, ?3, 2, ?4)",
                params![c.hash, list, bytes.len() as i64, p.hash],
            )?;
            Ok(d + 1)
        }
        None => {
            conn.execute(
                "INSERT INTO blobs (hash, bytes, size, chunked) VALUES (?1, ?2, ?3, 1)",
                params![c.hash, digests(0), bytes.len() as i64],
            )?;
            Ok(0)
        }
    }
}

/// The chunk digests of listed blob `hash` (full or delta), concatenated.
pub(crate) fn chunk_list(conn: &Connection, hash: &str) -> Result<Option<Vec<u8>>> {
    // The chain from `hash` back to a full list, newest first.
    let mut chain: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut at = hash.to_string();
    loop {
        let row: Option<(Vec<u8>, i64, Option<String>)> = conn
            .query_row(
                "SELECT bytes, chunked, base FROM blobs WHERE hash = ?1",
                [&at],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        let Some((bytes, kind, base)) = row else {
            return Ok(None);
        };
        chain.push((kind, bytes));
        match (kind, base) {
            (2, Some(b)) if chain.len() <= MAX_DEPTH as usize + 1 => at = b,
            _ => break,
        }
    }
    let mut list = Vec::new();
    for (kind, bytes) in chain.into_iter().rev() {
        if kind == 2 && bytes.len() >= 4 {
            let keep = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
            list.truncate(keep * 32);
            list.extend_from_slice(&bytes[4..]);
        } else {
            list = bytes;
        }
    }
    Ok(Some(list))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn body(turns: usize) -> Vec<u8> {
        let mut b = b"{\"model\":\"m\",\"messages\":[".to_vec();
        for i in 0..turns {
            b.extend_from_slice(
                format!("{{\"turn\":{i},\"text\":\"{}\"}},", "word ".repeat(300 + i)).as_bytes(),
            );
        }
        b.extend_from_slice(b"],\"tools\":[\"a static tail that follows the messages\"]}");
        b
    }

    fn count(store: &Store, sql: &str) -> i64 {
        store.conn().query_row(sql, [], |r| r.get(0)).unwrap()
    }

    #[test]
    fn a_growing_stream_stores_deltas_that_read_back_whole() {
        let store = Store::memory().unwrap();
        let streams = BodyStreams::default();
        let mut hashes = Vec::new();
        let mut chunk_rows = Vec::new();
        // From a body kept whole (under the chunking threshold) to listed ones.
        for turns in 2..(5 + MAX_DEPTH as usize + 10) {
            let b = body(turns);
            let h = {
                let mut conn = store.conn();
                let tx = conn.transaction().unwrap();
                let h = streams.put(&tx, (1, "step"), &b).unwrap();
                tx.commit().unwrap();
                h
            };
            assert_eq!(h, crate::digest::sha256_hex(&b));
            hashes.push((h, b));
            chunk_rows.push(count(&store, "SELECT COUNT(*) FROM chunks"));
        }
        for (h, b) in &hashes {
            assert_eq!(store.blob(h).unwrap().as_ref(), Some(b));
        }
        // A turn adds its own chunks and the few around the end, not the whole body.
        let grown: Vec<i64> = chunk_rows.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(grown.iter().all(|&g| g <= 6), "{grown:?}");
        // Deltas, with a full list again after MAX_DEPTH of them.
        assert!(count(&store, "SELECT COUNT(*) FROM blobs WHERE chunked = 2") > 0);
        assert!(count(&store, "SELECT COUNT(*) FROM blobs WHERE chunked = 1") >= 2);
        // The same bodies in another stream are found stored.
        let mut conn = store.conn();
        let tx = conn.transaction().unwrap();
        let again = streams.put(&tx, (1, "context"), &hashes[3].1).unwrap();
        assert_eq!(again, hashes[3].0);
    }
}
