//! The per-session workspace look (issue #15 class 3): before every sandbox session
//! the masks are recomputed from the workspace as it is then. This times, on a
//! generated 1,000-file workspace (50 directories of 20 files, a `.env` in every
//! fifth) under the built-in policy, the full scan a session would need without the
//! index (a fresh index: every directory read, every entry decided) against the
//! incremental refresh of a kept index — with nothing changed, and after a command
//! renamed one directory — and prints the ratios.
//!
//! `cargo bench --bench mask_refresh` (a few seconds). The directories are aged past
//! the index's racy window first, as a workspace between commands is.

use std::time::{Duration, Instant};

use io_harness::exec::tree::{Access, TreeIndex};
use io_harness::policy::Policy;
use io_harness::{TaskContract, Verification};

const ROUNDS: usize = 200;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ws = dir.path().join("ws");
    for d in 0..50 {
        let sub = ws.join(format!("pkg{d:02}/src"));
        std::fs::create_dir_all(&sub).expect("mkdir");
        for f in 0..20 {
            let name = if f == 0 && d % 5 == 0 {
                ".env".to_string()
            } else {
                format!("m{f}.rs")
            };
            std::fs::write(sub.join(name), "fn f() {}\n").expect("write");
        }
    }
    let contract = TaskContract::workspace("bench", &ws, Verification::command(["true"]));
    let policy = Policy::for_contract(&contract).expect("policy");
    let denies = |t: &str| Access::decided_by(&policy, t);
    // Past the racy window: listings read now are trusted next time.
    std::thread::sleep(Duration::from_millis(2100));

    let mut full = Vec::new();
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let mut ix = TreeIndex::new(&ws, 200_000);
        let stats = ix.refresh(&denies, false).expect("scan");
        let masked = ix.denied();
        full.push(t.elapsed());
        assert_eq!((stats.entries, masked.len()), (1100, 10));
    }
    let mut kept = TreeIndex::new(&ws, 200_000);
    kept.refresh(&denies, false).expect("scan");
    let mut quiet = Vec::new();
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let stats = kept.refresh(&denies, false).expect("refresh");
        let masked = kept.denied();
        quiet.push(t.elapsed());
        assert_eq!((stats.read, masked.len()), (0, 10));
    }
    // A command renamed one package: its directory, its parent and the moved
    // subtree are read again.
    let mut moved = Vec::new();
    for i in 0..ROUNDS {
        let (a, b) = if i % 2 == 0 {
            ("pkg00", "moved00")
        } else {
            ("moved00", "pkg00")
        };
        std::fs::rename(ws.join(a), ws.join(b)).expect("rename");
        let t = Instant::now();
        kept.refresh(&denies, false).expect("refresh");
        let masked = kept.denied();
        moved.push(t.elapsed());
        assert!(masked.iter().any(|m| m.starts_with(b)));
    }
    let (f, q, m) = (median(full), median(quiet), median(moved));
    println!("workspace: 1,000 files in 50 directories (1,100 entries), 10 masked");
    println!(
        "full scan (fresh index)        median {:>9.1} µs",
        f.as_secs_f64() * 1e6
    );
    println!(
        "incremental, nothing changed   median {:>9.1} µs",
        q.as_secs_f64() * 1e6
    );
    println!(
        "incremental, one dir renamed   median {:>9.1} µs",
        m.as_secs_f64() * 1e6
    );
    println!(
        "ratio full / incremental (unchanged): {:.1}x",
        f.as_secs_f64() / q.as_secs_f64()
    );
    println!(
        "ratio full / incremental (one rename): {:.1}x",
        f.as_secs_f64() / m.as_secs_f64()
    );
}
