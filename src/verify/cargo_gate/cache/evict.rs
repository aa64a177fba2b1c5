//! Keeps the shared dependency cache under its bound (`[verify] dep_cache_max`,
//! 10 GiB by default): after a fill, the least recently used entries (by their
//! `last_used` stamp, touched on every use) are removed until the total is under the
//! bound. An entry in use (its lock held, shared by a copying gate or exclusive by a
//! filler) is skipped, and so is the entry the calling gate has just used; fill
//! directories whose filler is gone are removed on the way.

use std::path::Path;
use std::time::SystemTime;

use super::shared::{LAST_USED, Store, try_lock};

/// The default bound of the shared cache: 10 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 10 << 30;

/// One entry as eviction sees it.
struct Entry {
    key: String,
    bytes: u64,
    used: SystemTime,
}

/// Evicts least recently used entries of `store` until it holds at most `max` bytes,
/// never `keep` nor an entry whose lock is held. Returns the evicted keys.
pub(crate) fn evict(store: &Store, max: u64, keep: &str) -> Vec<String> {
    let mut entries = Vec::new();
    for e in std::fs::read_dir(&store.root)
        .into_iter()
        .flatten()
        .flatten()
    {
        let key = e.file_name().to_string_lossy().into_owned();
        if !e.file_type().is_ok_and(|t| t.is_dir()) || key.starts_with('.') {
            continue;
        }
        let path = e.path();
        let used = std::fs::metadata(path.join(LAST_USED))
            .or_else(|_| std::fs::metadata(&path))
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        entries.push(Entry {
            bytes: dir_bytes(&path),
            key,
            used,
        });
    }
    let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
    entries.sort_by_key(|e| e.used);
    let mut evicted = Vec::new();
    for e in entries {
        if total <= max {
            break;
        }
        if e.key == keep {
            continue;
        }
        let Some(_held) = try_lock(store, &e.key) else {
            continue;
        };
        if std::fs::remove_dir_all(store.entry(&e.key)).is_ok() {
            total = total.saturating_sub(e.bytes);
            evicted.push(e.key);
        }
    }
    remove_dead_fills(store);
    evicted
}

/// Fill directories (`<key>.<random>`) whose key nobody holds: their filler died.
fn remove_dead_fills(store: &Store) {
    for e in std::fs::read_dir(&store.fill)
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((key, _)) = name.split_once('.') else {
            continue;
        };
        if let Some(_held) = try_lock(store, key) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Bytes of the regular files under `dir`.
pub(crate) fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => total += e.metadata().map_or(0, |m| m.len()),
                _ => {}
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(store: &Store, key: &str, bytes: usize, age_secs: u64) {
        let d = store.entry(key);
        std::fs::create_dir_all(d.join("target")).unwrap();
        std::fs::write(d.join("target/f"), vec![0u8; bytes]).unwrap();
        let stamp = d.join(LAST_USED);
        std::fs::write(&stamp, b"").unwrap();
        let t = SystemTime::now() - std::time::Duration::from_secs(age_secs);
        std::fs::File::options()
            .write(true)
            .open(&stamp)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    #[test]
    fn the_oldest_unlocked_entries_go_first_and_the_kept_one_stays() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::at(d.path().join("deps"));
        std::fs::create_dir_all(&store.fill).unwrap();
        entry(&store, "old", 100, 300);
        entry(&store, "busy", 100, 200);
        entry(&store, "mid", 100, 100);
        entry(&store, "new", 100, 0);
        // A dead filler's directory, and a live one's.
        std::fs::create_dir_all(store.fill.join("gone.abc")).unwrap();
        std::fs::create_dir_all(store.fill.join("busy.def")).unwrap();
        let held = try_lock(&store, "busy").unwrap();
        let evicted = evict(&store, 250, "old");
        // `old` is kept (just used by the caller), `busy` is locked: `mid` goes, and
        // `new` too, since the total is still over the bound.
        assert_eq!(evicted, ["mid", "new"]);
        assert!(store.entry("old").exists() && store.entry("busy").exists());
        assert!(!store.fill.join("gone.abc").exists());
        assert!(store.fill.join("busy.def").exists());
        drop(held);
        assert_eq!(evict(&store, 150, "none"), ["old"]);
        assert_eq!(evict(&store, u64::MAX, "none"), Vec::<String>::new());
    }
}
