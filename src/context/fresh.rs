//! What a file shows now, without reading it again when it cannot have changed.
//!
//! Every turn the assembler compares each read in the history with what its file
//! holds now (a stale read is never sent). Reading every file again each turn makes a
//! turn's work grow with the run: at step 1,000 of a run that read a thousand files,
//! a thousand reads per turn. A file whose identity, size, modification and change
//! times are the same as when it was last read holds the same bytes — `ctime` and the
//! inode cannot be set by any process, sandboxed or not — so its last rendering is
//! reused. A file changed within [`RACY`] of being read is read again next time (the
//! clock that stamps files ticks coarsely: a write in the same tick as the read would
//! leave the stamp unchanged), as git does for its index.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// A file changed this recently before it was read is not trusted by its stamp.
const RACY: Duration = Duration::from_secs(2);

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    #[cfg(unix)]
    fn of(path: &Path) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    /// Without `ctime` and inodes nothing is trusted: every file is read again.
    #[cfg(not(unix))]
    fn of(_path: &Path) -> Option<Stamp> {
        None
    }

    /// Whether the file changed less than [`RACY`] before `read_at`.
    fn racy(&self, read_at: SystemTime) -> bool {
        let secs = u64::try_from(self.ctime.0).unwrap_or(0);
        let nanos = u32::try_from(self.ctime.1).unwrap_or(0);
        let changed = SystemTime::UNIX_EPOCH + Duration::new(secs, nanos);
        read_at
            .duration_since(changed)
            .map_or(true, |age| age < RACY)
    }
}

/// The last rendering of each read (by its arguments), with the stamp of its file.
#[derive(Debug, Default)]
pub(crate) struct FreshReads {
    seen: HashMap<String, (String, Stamp, Result<String, String>)>,
}

impl FreshReads {
    /// What the read `key` of `rel` (beneath `root`) shows now, if its file is known
    /// unchanged since it was last read.
    pub(crate) fn unchanged(
        &self,
        key: &str,
        root: &Path,
        rel: &str,
    ) -> Option<&Result<String, String>> {
        let (path, stamp, shown) = self.seen.get(key)?;
        if path != rel {
            return None;
        }
        (Stamp::of(&root.join(rel)).as_ref() == Some(stamp)).then_some(shown)
    }

    /// The stamp to keep a read by, taken before reading (a change during the read
    /// then shows as a different stamp next time); `None` when it cannot be trusted.
    pub(crate) fn stamp_before(root: &Path, rel: &str) -> Option<StampTaken> {
        let now = SystemTime::now();
        Stamp::of(&root.join(rel))
            .filter(|s| !s.racy(now))
            .map(StampTaken)
    }

    /// Keeps what read `key` of `rel` showed, under the stamp taken before it.
    pub(crate) fn keep(
        &mut self,
        key: String,
        rel: &str,
        stamp: StampTaken,
        shown: Result<String, String>,
    ) {
        self.seen.insert(key, (rel.to_string(), stamp.0, shown));
    }
}

/// A file's stamp taken before reading it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StampTaken(Stamp);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_rewritten_is_not_reused_and_a_fresh_one_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        std::fs::write(&f, "one").unwrap();
        // Just written: racy, so never kept by its stamp.
        assert!(FreshReads::stamp_before(dir.path(), "a.txt").is_none());
        // An old file is trusted while unchanged.
        let old = SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let mut fresh = FreshReads::default();
        let stamp = Stamp::of(&f).unwrap();
        fresh.keep("k".into(), "a.txt", StampTaken(stamp), Ok("one".into()));
        assert_eq!(
            fresh.unchanged("k", dir.path(), "a.txt"),
            Some(&Ok("one".into()))
        );
        assert_eq!(fresh.unchanged("k", dir.path(), "b.txt"), None);
        // Rewritten with the same size and mtime: the ctime (or the inode) differs.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&f, "two").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(fresh.unchanged("k", dir.path(), "a.txt"), None);
    }
}
