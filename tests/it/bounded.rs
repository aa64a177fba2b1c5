//! No single tool call or planted file can hang or bloat the harness (policy round 2,
//! route 8): each case is a real `io-harness run` in its own process, which must end
//! within its budget with its peak resident memory (`ru_maxrss`, the process's own
//! VmHWM, read by `wait4`) under 256 MiB.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The peak memory allowed to the harness in every case.
const MAX_RSS_KIB: i64 = 256 * 1024;

/// A run's exit code, its peak resident memory (KiB) and its wall time.
pub(crate) struct Measured {
    pub(crate) code: Option<i32>,
    pub(crate) max_rss_kib: i64,
    pub(crate) took: Duration,
    pub(crate) stdout: String,
}

/// Runs `io-harness run task.toml --json` in `dir` and measures the process alone.
// The child is reaped by `wait4` (for its own rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
pub(crate) fn run_measured(dir: &Path) -> Measured {
    let started = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_io-harness"))
        .args(["run", "task.toml", "--json"])
        .current_dir(dir)
        .env("IO_HARNESS_STORE", dir.join("store.db"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env_remove("IO_HARNESS_FAILPOINT")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    // A regression must fail the test, not hang the suite: past 90 s the run is killed.
    let (done, waited) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if waited.recv_timeout(Duration::from_secs(90)).is_err() {
            // SAFETY: kill has no memory preconditions; pid is our child, not reaped yet.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let mut stdout = child.stdout.unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).unwrap();
        s
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child, status and usage are valid for writes.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    let _ = done.send(());
    let code = std::process::ExitStatus::from_raw(status).code();
    Measured {
        code,
        max_rss_kib: usage.ru_maxrss,
        took: started.elapsed(),
        stdout: reader.join().unwrap(),
    }
}

/// A task in `dir` with workspace `ws/`, the given `[verify]` line, extra top-level
/// lines, and `turns` as the scripted model.
fn task(dir: &Path, verify: &str, extra: &str, turns: &[serde_json::Value]) {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    let script: Vec<String> = turns.iter().map(|t| t.to_string()).collect();
    std::fs::write(dir.join("script.jsonl"), script.join("\n") + "\n").unwrap();
    std::fs::write(
        dir.join("task.toml"),
        format!(
            "goal = \"g\"\nroot = \"ws\"\n{extra}\n[verify]\n{verify}\n\n[budget]\nmax_steps = 6\n\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n"
        ),
    )
    .unwrap();
}

fn sparse(path: &Path, len: u64) {
    let f = std::fs::File::create(path).unwrap();
    f.set_len(len).unwrap();
}

fn fifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: c is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

fn within(m: &Measured, budget: Duration, what: &str) {
    eprintln!("figure {what}: {:?}, peak {} KiB", m.took, m.max_rss_kib);
    assert!(m.took < budget, "{what} took {:?}: {}", m.took, m.stdout);
    assert!(
        m.max_rss_kib < MAX_RSS_KIB,
        "{what} peaked at {} KiB",
        m.max_rss_kib
    );
}

/// Every tool call's output of the run in `dir`, in order.
fn outputs(dir: &Path) -> Vec<String> {
    let store = io_harness::Store::open(dir.join("store.db")).unwrap();
    let run = store.runs().unwrap().remove(0);
    store
        .steps(run.id)
        .unwrap()
        .iter()
        .flat_map(|s| s.tool_calls.iter().map(|c| c.output.clone()))
        .collect()
}

fn tool(name: &str, input: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"tool_calls": [{"name": name, "input": input}]})
}

/// Overwriting a 3 GiB (sparse) file: the journal's before-hash used to read it whole
/// (3.17 GB of memory); a file past the tools' edit size is fingerprinted by its size
/// and first MiB, streamed.
#[test]
fn overwriting_a_huge_file_costs_no_memory() {
    let d = tempfile::tempdir().unwrap();
    task(
        d.path(),
        "file_contains = { file = \"big.bin\", needle = \"small\" }",
        "",
        &[
            tool(
                "write_file",
                serde_json::json!({"path": "big.bin", "content": "small\n"}),
            ),
            serde_json::json!({"text": "done"}),
        ],
    );
    sparse(&d.path().join("ws/big.bin"), 3 << 30);
    let m = run_measured(d.path());
    assert_eq!(m.code, Some(0), "{}", m.stdout);
    within(&m, Duration::from_secs(30), "the overwrite");
}

/// `remember` compares a note with the files the policy denies: a planted 2 GiB
/// `.env` and a FIFO named `.env.local` cost it neither memory nor a hang.
#[test]
fn remember_beside_a_huge_and_a_fifo_secret_is_bounded() {
    let d = tempfile::tempdir().unwrap();
    task(
        d.path(),
        "file_contains = { file = \"a.txt\", needle = \"a\" }",
        "",
        &[
            tool(
                "remember",
                serde_json::json!({"key": "k", "value": "build with make"}),
            ),
            serde_json::json!({"text": "done"}),
        ],
    );
    std::fs::write(d.path().join("ws/a.txt"), "a\n").unwrap();
    sparse(&d.path().join("ws/.env"), 2 << 30);
    fifo(&d.path().join("ws/.env.local"));
    let m = run_measured(d.path());
    assert_eq!(m.code, Some(0), "{}", m.stdout);
    let out = outputs(d.path());
    assert!(out[0].starts_with("remembered"), "{out:?}");
    within(&m, Duration::from_secs(30), "remember");
}

/// A 3 GiB instructions file is shown in part at the start (it cost 6.3 GB); a FIFO
/// in its place is refused when the task loads (exit 2) instead of hanging the start.
#[test]
fn a_huge_or_fifo_instructions_file_starts_at_once() {
    for kind in ["huge", "fifo"] {
        let d = tempfile::tempdir().unwrap();
        task(
            d.path(),
            "file_contains = { file = \"a.txt\", needle = \"a\" }",
            "instructions = \"AGENTS.md\"",
            &[serde_json::json!({"text": "done"})],
        );
        std::fs::write(d.path().join("ws/a.txt"), "a\n").unwrap();
        let agents = d.path().join("ws/AGENTS.md");
        match kind {
            "huge" => sparse(&agents, 3 << 30),
            _ => fifo(&agents),
        }
        let m = run_measured(d.path());
        let want = if kind == "huge" { 0 } else { 2 };
        assert_eq!(m.code, Some(want), "{kind}: {}", m.stdout);
        within(&m, Duration::from_secs(30), kind);
    }
}

/// `grep` with `a{100000}` compiled for minutes under a 30 s budget: the compiled
/// regex is bounded to 1 MiB, so it is refused at once.
#[test]
fn a_regex_too_large_to_compile_is_refused_at_once() {
    let d = tempfile::tempdir().unwrap();
    task(
        d.path(),
        "file_contains = { file = \"a.txt\", needle = \"a\" }",
        "",
        &[
            tool("grep", serde_json::json!({"pattern": "a{100000}"})),
            serde_json::json!({"text": "done"}),
        ],
    );
    std::fs::write(d.path().join("ws/a.txt"), "a\n").unwrap();
    let m = run_measured(d.path());
    assert_eq!(m.code, Some(0), "{}", m.stdout);
    let out = outputs(d.path());
    assert!(out[0].contains("bad regex"), "{out:?}");
    within(&m, Duration::from_secs(20), "the grep");
}

/// A FIFO named `.gitignore` hung the final diff forever, leaving the run "running":
/// the walk reads ignore files only when all are regular files.
#[test]
fn a_fifo_named_gitignore_does_not_hang_the_final_diff() {
    let d = tempfile::tempdir().unwrap();
    task(
        d.path(),
        "file_contains = { file = \"a.txt\", needle = \"a\" }",
        "",
        &[
            tool(
                "run_command",
                serde_json::json!({"argv": ["mkfifo", "sub/.gitignore"]}),
            ),
            tool(
                "write_file",
                serde_json::json!({"path": "a.txt", "content": "a\n"}),
            ),
            serde_json::json!({"text": "done"}),
        ],
    );
    std::fs::create_dir_all(d.path().join("ws/sub")).unwrap();
    let m = run_measured(d.path());
    assert_eq!(m.code, Some(0), "{}", m.stdout);
    within(&m, Duration::from_secs(30), "the run");
    assert!(m.stdout.contains("+a"), "the diff is there: {}", m.stdout);
}
