use std::os::unix::fs::PermissionsExt;

use super::*;

fn rec(i: usize) -> SessionRecord {
    let mut r = SessionRecord::new(
        vec!["echo".into(), format!("{i}")],
        "/nonexistent-ws",
        "portable-floor",
    );
    r.env_names = vec!["PATH".into(), "OPENAI_API_KEY".into()];
    r.exit_code = Some(0);
    r
}

#[test]
fn files_are_private_and_lines_parse() {
    let d = tempfile::tempdir().unwrap();
    let log = AuditLog::new(d.path().join("audit"));
    log.append(&rec(1)).unwrap();
    let dir_mode = std::fs::metadata(log.dir()).unwrap().permissions().mode() & 0o777;
    let file_mode = std::fs::metadata(log.path()).unwrap().permissions().mode() & 0o777;
    assert_eq!((dir_mode, file_mode), (0o700, 0o600));
    let text = std::fs::read_to_string(log.path()).unwrap();
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    for key in [
        "time",
        "argv",
        "workspace",
        "backend",
        "layers",
        "network",
        "env_names",
        "exit_code",
        "duration_ms",
    ] {
        assert!(v.get(key).is_some(), "{key} missing: {v}");
    }
    assert!(
        v.get("egress_denied_reported").is_none(),
        "not watched is absent, not 0"
    );
}

#[test]
fn rotation_keeps_five_generations_newest_first() {
    let d = tempfile::tempdir().unwrap();
    let log = AuditLog::new(d.path()).with_max_bytes(600);
    for i in 0..200 {
        log.append(&rec(i)).unwrap();
    }
    let gens = generations(d.path()).unwrap();
    assert_eq!(gens.len(), MAX_GENERATIONS + 1);
    assert!(gens[0].ends_with("sessions.jsonl"));
    assert!(gens[1].ends_with("sessions.jsonl.1"));
    let all = log.read_all().unwrap();
    // Oldest first, contiguous, ending with the last append.
    let nums: Vec<usize> = all.iter().map(|r| r.argv[1].parse().unwrap()).collect();
    assert_eq!(*nums.last().unwrap(), 199);
    assert!(nums.windows(2).all(|w| w[1] == w[0] + 1), "{nums:?}");
    for g in gens {
        assert!(std::fs::metadata(&g).unwrap().len() <= 600 + 400);
    }
}

#[test]
fn concurrent_writers_never_interleave_or_lose_lines() {
    let d = tempfile::tempdir().unwrap();
    let log = AuditLog::new(d.path()).with_max_bytes(1 << 20);
    std::thread::scope(|s| {
        for t in 0..8 {
            let log = log.clone();
            s.spawn(move || {
                for i in 0..100 {
                    log.append(&rec(t * 1000 + i)).unwrap();
                }
            });
        }
    });
    let text = std::fs::read_to_string(log.path()).unwrap();
    assert_eq!(text.lines().count(), 800);
    assert!(
        text.lines()
            .all(|l| serde_json::from_str::<SessionRecord>(l).is_ok())
    );
}

#[test]
fn concurrent_rotation_loses_nothing_it_keeps() {
    let d = tempfile::tempdir().unwrap();
    let log = AuditLog::new(d.path()).with_max_bytes(20_000);
    std::thread::scope(|s| {
        for t in 0..4 {
            let log = log.clone();
            s.spawn(move || {
                for i in 0..100 {
                    log.append(&rec(t * 1000 + i)).unwrap();
                }
            });
        }
    });
    // 400 lines of ~250 bytes over 6 files of at most 20 kB: nothing dropped yet.
    let all = log.read_all().unwrap();
    assert_eq!(all.len(), 400);
}

#[test]
fn unwritable_directory_is_an_error_not_a_panic() {
    let d = tempfile::tempdir().unwrap();
    let blocker = d.path().join("file");
    std::fs::write(&blocker, "x").unwrap();
    let log = AuditLog::new(blocker.join("audit"));
    assert!(log.append(&rec(0)).is_err());
}

#[test]
fn branch_is_read_from_head_without_git() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(git_branch(d.path()), None);
    std::fs::create_dir(d.path().join(".git")).unwrap();
    std::fs::write(d.path().join(".git/HEAD"), "ref: refs/heads/feature/x\n").unwrap();
    assert_eq!(git_branch(d.path()).as_deref(), Some("feature/x"));
    std::fs::write(
        d.path().join(".git/HEAD"),
        "0123456789abcdef0123456789abcdef01234567\n",
    )
    .unwrap();
    assert_eq!(
        git_branch(d.path()).as_deref(),
        Some("0123456789abcdef0123456789abcdef01234567")
    );
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(
        wt.path().join(".git"),
        format!("gitdir: {}\n", d.path().join(".git").display()),
    )
    .unwrap();
    assert!(git_branch(wt.path()).is_some());
}
