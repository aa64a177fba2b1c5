//! The cache's safety rules, one test each, on real files.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use super::*;

fn setup() -> (tempfile::TempDir, ProbeCache, Key) {
    let tmp = tempfile::tempdir().unwrap();
    let cache = ProbeCache::at(tmp.path().join("io-harness").join("probe"));
    (tmp, cache, Key::current().unwrap())
}

fn is_root() -> bool {
    Key::current().unwrap().euid == 0
}

#[test]
fn a_stored_entry_is_a_hit_and_is_0600_in_a_0700_directory() {
    let (_t, cache, key) = setup();
    assert_eq!(cache.check(&key), Err(Miss::Absent));
    cache.store(&key);
    assert_eq!(cache.check(&key), Ok(()));
    let file = fs::metadata(cache.file(&key)).unwrap();
    assert_eq!(file.mode() & 0o7777, 0o600);
    assert_eq!(file.uid(), key.euid);
    let dir = fs::metadata(cache.dir()).unwrap();
    assert_eq!(dir.mode() & 0o7777, 0o700);
    // No temporary file is left beside it.
    assert_eq!(fs::read_dir(cache.dir()).unwrap().count(), 1);
}

#[test]
fn a_file_owned_by_another_uid_is_ignored() {
    if !is_root() {
        eprintln!("skipped: chown to another uid needs root");
        return;
    }
    let (_t, cache, key) = setup();
    cache.store(&key);
    std::os::unix::fs::chown(cache.file(&key), Some(65534), None).unwrap();
    assert_eq!(cache.check(&key), Err(Miss::Owner));
    // The next success replaces it with one of ours.
    cache.store(&key);
    assert_eq!(cache.check(&key), Ok(()));
}

#[test]
fn a_directory_owned_by_another_uid_or_open_to_others_is_ignored() {
    let (_t, cache, key) = setup();
    cache.store(&key);
    for mode in [0o750, 0o705, 0o777] {
        fs::set_permissions(cache.dir(), fs::Permissions::from_mode(mode)).unwrap();
        assert_eq!(cache.check(&key), Err(Miss::Directory), "{mode:o}");
    }
    // Storing narrows a directory that is ours.
    cache.store(&key);
    assert_eq!(cache.check(&key), Ok(()));
    if is_root() {
        std::os::unix::fs::chown(cache.dir(), Some(65534), None).unwrap();
        assert_eq!(cache.check(&key), Err(Miss::Directory));
        cache.store(&key);
        assert_eq!(
            cache.check(&key),
            Err(Miss::Directory),
            "never written into a foreign directory"
        );
    }
}

#[test]
fn a_file_whose_mode_is_not_0600_is_ignored() {
    let (_t, cache, key) = setup();
    cache.store(&key);
    for mode in [0o644, 0o640, 0o700, 0o400, 0o4600] {
        fs::set_permissions(cache.file(&key), fs::Permissions::from_mode(mode)).unwrap();
        assert_eq!(cache.check(&key), Err(Miss::Mode), "{mode:o}");
    }
}

#[test]
fn a_symlinked_entry_is_not_followed() {
    let (t, cache, key) = setup();
    cache.store(&key);
    let real = t.path().join("elsewhere");
    fs::rename(cache.file(&key), &real).unwrap();
    std::os::unix::fs::symlink(&real, cache.file(&key)).unwrap();
    assert_eq!(cache.check(&key), Err(Miss::Absent));
}

#[test]
fn another_kernel_binary_or_identity_is_a_miss() {
    let (_t, cache, key) = setup();
    cache.store(&key);
    let kernel = Key {
        kernel: format!("{} (rebooted)", key.kernel),
        ..key.clone()
    };
    let binary = Key {
        binary: format!("{}1", key.binary),
        ..key.clone()
    };
    let identity = Key {
        identity: key.identity.replace("Seccomp=0", "Seccomp=2") + "user=user:[1];",
        ..key.clone()
    };
    for (what, k) in [
        ("kernel", &kernel),
        ("binary", &binary),
        ("identity", &identity),
    ] {
        assert_eq!(cache.check(k), Err(Miss::Stale), "{what}");
    }
    // Another uid does not even own the directory.
    let uid = Key {
        euid: key.euid + 1,
        ..key.clone()
    };
    assert_eq!(cache.check(&uid), Err(Miss::Directory));
    // And the original key still hits.
    assert_eq!(cache.check(&key), Ok(()));
}

#[test]
fn a_corrupt_entry_is_a_miss_never_an_error() {
    let (_t, cache, key) = setup();
    cache.store(&key);
    let entry = key.entry();
    let corrupt: Vec<Vec<u8>> = vec![
        Vec::new(),
        entry.as_bytes()[..entry.len() / 2].to_vec(),
        format!("{entry}native=ok\n").into_bytes(),
        entry.replace("native=ok", "native=no").into_bytes(),
        vec![0xff, 0xfe, 0x00, 0x80],
        vec![b'x'; 1 << 20],
    ];
    for bytes in corrupt {
        fs::write(cache.file(&key), &bytes).unwrap();
        fs::set_permissions(cache.file(&key), fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(cache.check(&key), Err(Miss::Stale), "{} bytes", bytes.len());
    }
    // A success writes over it.
    cache.store(&key);
    assert_eq!(cache.check(&key), Ok(()));
    cache.forget(&key);
    assert_eq!(cache.check(&key), Err(Miss::Absent));
}

#[test]
fn the_entry_names_only_that_the_native_probe_succeeded() {
    let key = Key::current().unwrap();
    let entry = key.entry();
    assert!(entry.starts_with(FORMAT));
    assert!(entry.ends_with("native=ok\n"));
    assert!(
        !entry.contains("landlock") && !entry.contains("seccomp="),
        "no layers in the cache: {entry}"
    );
}
