//! The on-disk form of a tree snapshot: a length-prefixed sequence of entries, written
//! to a temporary file and renamed into place so a crash leaves the old file or the new
//! one, never half of one.
//!
//! Entry: kind (1 byte: 0 file, 1 symlink, 2 file too large to keep), path length (u32
//! LE), path bytes, payload length (u64 LE), payload (content or link target; for kind 2
//! the length is the file's size and the payload its 32-byte SHA-256).

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::workdir::{Node, Snapshot};

const MAGIC: &[u8; 8] = b"IOHSNAP1";

pub(crate) fn write(path: &Path, snap: &Snapshot) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut w = BufWriter::new(std::fs::File::create(&tmp)?);
        w.write_all(MAGIC)?;
        for (p, node) in snap {
            let (kind, payload, len): (u8, &[u8], u64) = match node {
                Node::File(b) => (0, b, b.len() as u64),
                Node::Link(t) => (1, t.as_os_str().as_bytes(), t.as_os_str().len() as u64),
                Node::Large(n, h) => (2, &h[..], *n),
            };
            w.write_all(&[kind])?;
            w.write_all(
                &u32::try_from(p.len())
                    .map_err(io::Error::other)?
                    .to_le_bytes(),
            )?;
            w.write_all(p.as_bytes())?;
            w.write_all(&len.to_le_bytes())?;
            w.write_all(payload)?;
        }
        w.into_inner().map_err(io::Error::other)?.sync_all()?;
    }
    std::fs::rename(tmp, path)
}

fn bad(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("baseline snapshot: {what}"),
    )
}

pub(crate) fn read(path: &Path) -> io::Result<Snapshot> {
    let mut r = BufReader::new(std::fs::File::open(path)?);
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)?;
    if &magic != MAGIC {
        return Err(bad("not a snapshot file"));
    }
    let mut out = Snapshot::new();
    loop {
        let mut kind = [0u8; 1];
        match r.read_exact(&mut kind) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(out),
            Err(e) => return Err(e),
        }
        let mut n4 = [0u8; 4];
        r.read_exact(&mut n4)?;
        let mut p = vec![0u8; u32::from_le_bytes(n4) as usize];
        r.read_exact(&mut p)?;
        let p = String::from_utf8(p).map_err(|_| bad("path is not UTF-8"))?;
        let mut n8 = [0u8; 8];
        r.read_exact(&mut n8)?;
        let len = u64::from_le_bytes(n8);
        let node = match kind[0] {
            2 => {
                let mut h = [0u8; 32];
                r.read_exact(&mut h)?;
                Node::Large(len, h)
            }
            k @ (0 | 1) => {
                if len > 64 << 20 {
                    return Err(bad("entry too large"));
                }
                let mut b = vec![0u8; len as usize];
                r.read_exact(&mut b)?;
                if k == 0 {
                    Node::File(b)
                } else {
                    Node::Link(PathBuf::from(std::ffi::OsStr::from_bytes(&b)))
                }
            }
            _ => return Err(bad("unknown entry kind")),
        };
        out.insert(p, node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_kind() {
        let mut s = Snapshot::new();
        s.insert("a/b.txt".into(), Node::File(b"hello\n".to_vec()));
        s.insert("bin".into(), Node::File(vec![0, 159, 146, 150]));
        s.insert("link".into(), Node::Link(PathBuf::from("../x")));
        s.insert("huge".into(), Node::Large(1 << 30, [7; 32]));
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("s");
        write(&f, &s).unwrap();
        assert_eq!(read(&f).unwrap(), s);
        std::fs::write(&f, b"garbage!").unwrap();
        assert!(read(&f).is_err());
    }
}
