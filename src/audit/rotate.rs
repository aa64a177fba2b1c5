//! Rotation: `sessions.jsonl` → `.1` → … → `.5`, the oldest dropped, all under the
//! writer's lock.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use super::FILE_NAME;

/// Size at which the live file is rotated.
pub const MAX_BYTES: u64 = 8 * 1024 * 1024;
/// Rotated generations kept beside the live file.
pub const MAX_GENERATIONS: usize = 5;

/// An exclusive lock on the file (`flock` on Unix, through std), released on drop.
pub(super) struct Flock<'a> {
    file: &'a File,
}

impl<'a> Flock<'a> {
    pub fn exclusive(file: &'a File) -> io::Result<Self> {
        loop {
            match file.lock() {
                Ok(()) => return Ok(Self { file }),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for Flock<'_> {
    fn drop(&mut self) {
        // Closing the descriptor would release it too; this releases it now.
        let _ = self.file.unlock();
    }
}

fn generation(dir: &Path, n: usize) -> PathBuf {
    if n == 0 {
        dir.join(FILE_NAME)
    } else {
        dir.join(format!("{FILE_NAME}.{n}"))
    }
}

/// Rotates when appending `incoming` bytes would take the live file past `max`.
pub(super) fn rotate_if_needed(dir: &Path, max: u64, incoming: u64) -> io::Result<()> {
    let live = generation(dir, 0);
    let size = match std::fs::symlink_metadata(&live) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if size == 0 || size + incoming <= max {
        return Ok(());
    }
    let _ = std::fs::remove_file(generation(dir, MAX_GENERATIONS));
    for n in (0..MAX_GENERATIONS).rev() {
        match std::fs::rename(generation(dir, n), generation(dir, n + 1)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The log files that exist in `dir`, newest first, starting with the live one.
pub fn generations(dir: &Path) -> io::Result<Vec<PathBuf>> {
    Ok((0..=MAX_GENERATIONS)
        .map(|n| generation(dir, n))
        .filter(|p| p.is_file())
        .collect())
}
