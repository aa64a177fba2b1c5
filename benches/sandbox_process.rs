//! The whole `io-harness sandbox -- /bin/true` process against its peers, as medians
//! over N runs measured round-robin in one run (machine noise hits all alike):
//!
//! - `io-harness sandbox -- /bin/true`: the whole process — exec, argument parsing,
//!   the runtime, the backend choice (the probe cache warm, as every process after
//!   the first finds it), the policy's masks, the session and the audit line;
//! - the same with `IO_HARNESS_PROBE_CACHE=off`: every process probes (what each
//!   process paid before the cache);
//! - `io-harness --version`: exec and argument parsing alone, the floor of any
//!   process of this binary;
//! - the library's native spawn of `/bin/true` (no process start, no probe);
//! - `bwrap --ro-bind / / --unshare-all --dev /dev --proc /proc --tmpfs /tmp
//!   --die-with-parent --new-session /bin/true` and `unshare -Urnpm --fork /bin/true`,
//!   each skipped (and said) when not installed.
//!
//! Run as root it measures every process case twice: as root (cgroups used: a
//! cgroup's creation, limits and removal are timed apart, on the same hierarchy the
//! sandbox uses where one is writable) and as an unprivileged user (uid 65534, no
//! cgroups). `cargo bench --bench sandbox_process` (`BENCH_RUNS`, default 100).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use io_harness::sandbox::{self, RunSpec};

const NOBODY: u32 = 65534;
const BIN: &str = env!("CARGO_BIN_EXE_io-harness");

type Case = (String, Box<dyn FnMut() -> bool>);

/// Who a process case runs as, and the directories it uses.
#[derive(Clone)]
struct As {
    uid: Option<u32>,
    home: PathBuf,
}

impl As {
    fn label(&self) -> &'static str {
        if self.uid.is_some() {
            "unprivileged"
        } else {
            "as invoked"
        }
    }
    fn command(&self, argv: &[&str]) -> Command {
        let mut c = Command::new(argv[0]);
        c.args(&argv[1..])
            .env("XDG_CACHE_HOME", self.home.join("cache"))
            .env("XDG_CONFIG_HOME", self.home.join("config"))
            .env("XDG_DATA_HOME", self.home.join("data"))
            .env("HOME", &self.home)
            .current_dir(self.home.join("ws"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(uid) = self.uid {
            c.uid(uid).gid(uid);
        }
        c
    }
    fn case(
        &self,
        argv: &'static [&'static str],
        env: &'static [(&'static str, &'static str)],
    ) -> Box<dyn FnMut() -> bool> {
        let who = self.clone();
        Box::new(move || {
            let mut c = who.command(argv);
            for (k, v) in env {
                c.env(k, v);
            }
            c.status().is_ok_and(|s| s.success())
        })
    }
}

fn installed(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn home(root: &Path, name: &str, uid: Option<u32>) -> PathBuf {
    let h = root.join(name);
    for d in ["", "cache", "config", "data", "ws"] {
        std::fs::create_dir_all(h.join(d)).expect("bench dirs");
        if let Some(uid) = uid {
            std::os::unix::fs::chown(h.join(d), Some(uid), Some(uid)).expect("chown");
        }
    }
    h
}

const BWRAP: &[&str] = &[
    "bwrap",
    "--ro-bind",
    "/",
    "/",
    "--unshare-all",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
    "--die-with-parent",
    "--new-session",
    "/bin/true",
];

fn process_cases(who: &As, cases: &mut Vec<Case>) {
    let l = who.label();
    let bin: &'static str = BIN;
    let sb: &'static [&'static str] = Box::leak(Box::new([bin, "sandbox", "--", "/bin/true"]));
    let ver: &'static [&'static str] = Box::leak(Box::new([bin, "--version"]));
    cases.push((
        format!("{l}: io-harness sandbox -- /bin/true"),
        who.case(sb, &[]),
    ));
    cases.push((
        format!("{l}: io-harness sandbox, probe cache off"),
        who.case(sb, &[("IO_HARNESS_PROBE_CACHE", "off")]),
    ));
    cases.push((format!("{l}: io-harness --version"), who.case(ver, &[])));
    if installed("bwrap") {
        cases.push((format!("{l}: bwrap (full)"), who.case(BWRAP, &[])));
    }
    if installed("unshare") {
        cases.push((
            format!("{l}: unshare -Urnpm --fork"),
            who.case(&["unshare", "-Urnpm", "--fork", "/bin/true"], &[]),
        ));
    }
}

/// A cgroup made, limited and removed, as a sandbox start does, on the first hierarchy
/// this process can write (v1 `pids`, else v2): the cgroup attach time apart.
fn cgroup_case() -> Option<Case> {
    let dir = [
        "/sys/fs/cgroup/pids",
        "/sys/fs/cgroup/unified",
        "/sys/fs/cgroup",
    ]
    .iter()
    .map(|p| Path::new(p).join(format!("io-harness-bench-{}", std::process::id())))
    .find(|d| {
        std::fs::create_dir(d)
            .and_then(|()| std::fs::remove_dir(d))
            .is_ok()
    })?;
    Some((
        "as invoked: cgroup mkdir + pids.max + rmdir".into(),
        Box::new(move || {
            let ok = std::fs::create_dir(&dir).is_ok();
            let pids = dir.join("pids.max");
            if pids.exists() {
                let _ = std::fs::write(pids, "512");
            }
            ok && std::fs::remove_dir(&dir).is_ok()
        }),
    ))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let root = tempfile::Builder::new()
        .prefix("io-harness-bench-")
        .tempdir_in("/var/tmp")
        .expect("temp dir");
    std::fs::set_permissions(
        root.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    // SAFETY: geteuid has no preconditions.
    let is_root = unsafe { libc::geteuid() } == 0;
    let mut cases: Vec<Case> = vec![(
        "direct exec /bin/true".into(),
        Box::new(|| {
            Command::new("/bin/true")
                .status()
                .is_ok_and(|s| s.success())
        }),
    )];
    let me = As {
        uid: None,
        home: home(root.path(), "me", None),
    };
    process_cases(&me, &mut cases);
    if is_root {
        let nobody = As {
            uid: Some(NOBODY),
            home: home(root.path(), "nobody", Some(NOBODY)),
        };
        process_cases(&nobody, &mut cases);
        match cgroup_case() {
            Some(c) => cases.push(c),
            None => println!("no writable cgroup hierarchy: cgroup time not measured"),
        }
    } else {
        println!("not root: the unprivileged figures are the ones as invoked");
    }
    if !installed("bwrap") {
        println!("bwrap not installed: skipped (apt-get install -y bubblewrap)");
    }
    if !installed("unshare") {
        println!("unshare not installed: skipped");
    }
    match sandbox::select() {
        Ok(sb) if sb.backend() == sandbox::Backend::LinuxNamespaces => {
            let spec = RunSpec::new(["/bin/true"], me.home.join("ws"));
            cases.push((
                "as invoked: library native spawn".into(),
                Box::new(move || sb.run(&spec).is_ok_and(|o| o.success())),
            ));
        }
        _ => println!("native backend unavailable: library spawn skipped"),
    }

    for (name, f) in cases.iter_mut() {
        for _ in 0..3 {
            assert!(f(), "{name} failed");
        }
    }
    let n = cases.len();
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); n];
    for round in 0..runs {
        for k in 0..n {
            let i = (round + k) % n;
            let t = Instant::now();
            let ok = (cases[i].1)();
            times[i].push(t.elapsed());
            assert!(ok, "{} failed", cases[i].0);
        }
    }
    let medians: Vec<(String, Duration)> = cases
        .iter()
        .map(|(n, _)| n.clone())
        .zip(times.into_iter().map(median))
        .collect();
    println!("median wall time over {runs} runs:");
    for (name, d) in &medians {
        println!("  {:>8.3} ms  {name}", d.as_secs_f64() * 1e3);
    }
    let get = |name: &str| medians.iter().find(|(n, _)| n == name).map(|(_, d)| *d);
    let ratio = |a: &str, b: &str| match (get(a), get(b)) {
        (Some(a), Some(b)) => format!("{:.2}", a.as_secs_f64() / b.as_secs_f64()),
        _ => "n/a".into(),
    };
    println!("ratios:");
    let mut modes = vec!["as invoked"];
    if is_root {
        modes.push("unprivileged");
    }
    for m in modes {
        let whole = format!("{m}: io-harness sandbox -- /bin/true");
        for peer in ["bwrap (full)", "unshare -Urnpm --fork"] {
            println!(
                "  {m}: whole process / {peer} = {}",
                ratio(&whole, &format!("{m}: {peer}"))
            );
        }
        println!(
            "  {m}: probe cache off / on = {}",
            ratio(&format!("{m}: io-harness sandbox, probe cache off"), &whole)
        );
    }
    println!(
        "  library native spawn / unshare -Urnpm --fork = {}",
        ratio(
            "as invoked: library native spawn",
            "as invoked: unshare -Urnpm --fork"
        )
    );
}
