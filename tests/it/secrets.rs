//! Issue 16, route 4 and the raw-bytes scan: the provider key and the denied files'
//! contents reach no record and no terminal, in any disguise, after a hostile run;
//! and the CLI's own process keeps the key from its unsandboxed children.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::json;

use crate::providers::fake_server::{FakeServer, Reply, whole};
use crate::providers::{KEY, anthropic_text, anthropic_tool};

const ENV_CANARY: &str = "canary-env-9f8e7d6c5b4a3210";
const PEM_CANARY: &str = "canary-pem-1a2b3c4d5e6f7788";
const NOBODY: u32 = 65534;

/// `key` with a zero-width space every few characters, as a model would disguise it.
fn zero_width_split(key: &str) -> String {
    key.chars()
        .enumerate()
        .flat_map(|(i, c)| {
            let sep = (i % 5 == 4).then_some('\u{200B}');
            std::iter::once(c).chain(sep)
        })
        .collect()
}

/// The forms of `secret` a reader could recover without effort, searched for in a
/// haystack. Independent of the harness's redactor: the haystack is normalised here by
/// deleting invisible characters (raw and JSON-escaped) before the search.
fn found_in(hay: &[u8], secret: &str) -> Option<&'static str> {
    let mut norm = hay.to_vec();
    for hidden in [
        "\u{200B}", "\u{200C}", "\u{200D}", "\u{2060}", "\u{2063}", "\u{FEFF}", "\\u200b",
        "\\u200B", "\\u2063", "\\ufeff", "\\n", "\n",
    ] {
        norm = replace_all(&norm, hidden.as_bytes(), b"");
    }
    let has = |needle: &[u8]| norm.windows(needle.len()).any(|w| w == needle);
    if has(secret.as_bytes()) {
        return Some("plain");
    }
    for engine in [
        base64::engine::general_purpose::STANDARD,
        base64::engine::general_purpose::URL_SAFE,
    ] {
        for shift in 0..3 {
            let mut input = vec![b'#'; shift];
            input.extend_from_slice(secret.as_bytes());
            let enc = engine.encode(&input);
            let from = if shift > 0 { 4 } else { 0 };
            let to = (input.len() / 3) * 4;
            if has(&enc.as_bytes()[from..to]) {
                return Some("base64");
            }
        }
    }
    None
}

fn replace_all(hay: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("t/ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join(".env"), format!("DB_PASSWORD={ENV_CANARY}\n")).unwrap();
        std::fs::write(
            ws.join("server.pem"),
            format!("-----BEGIN PRIVATE KEY-----\n{PEM_CANARY}\n-----END PRIVATE KEY-----\n"),
        )
        .unwrap();
        std::fs::write(ws.join(".gitignore"), ".env\n*.pem\n").unwrap();
        std::fs::write(ws.join("notes.txt"), "notes\n").unwrap();
        Self { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_io-harness"));
        c.args(args)
            .env("IO_HARNESS_STORE", self.path("store/store.db"))
            .env("XDG_CACHE_HOME", self.path("cache"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("ANTHROPIC_API_KEY", KEY)
            .env_remove("IO_HARNESS_FAILPOINT")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }
}

/// Every file of `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A hostile model that knows the key (it leaked somewhere) and tries every way to put
/// it and the denied files into the record: the argv of commands (the audit log), a
/// zero-width split, base64 at several alignments, a note, a file whose diff is
/// stored, the final message; and it reads the denied files by tool, by command and
/// through a `.gitignore` edit that would put them in the diff.
fn hostile_replies() -> Vec<Reply> {
    let b64 =
        |prefix: &str| base64::engine::general_purpose::STANDARD.encode(format!("{prefix}{KEY}"));
    let split = zero_width_split(KEY);
    let cmd =
        |id: &str, argv: Vec<String>| anthropic_tool(id, "run_command", json!({"argv": argv}));
    let sh = |s: &str| vec!["sh".to_string(), "-c".to_string(), s.to_string()];
    let steps = vec![
        cmd("t1", vec!["echo".into(), KEY.into()]),
        cmd(
            "t2",
            sh(&format!("echo '{split}' >/dev/null; echo {}", b64("x"))),
        ),
        anthropic_tool(
            "t3",
            "write_file",
            json!({"path": "notes.txt", "content": format!("a {} b {split} c {}\n", b64(""), b64("ab"))}),
        ),
        anthropic_tool("t4", "read_file", json!({"path": ".env"})),
        anthropic_tool("t5", "read_file", json!({"path": "server.pem"})),
        cmd(
            "t6",
            sh("cat .env server.pem; base64 .env server.pem; od -c .env | head"),
        ),
        anthropic_tool(
            "t7",
            "write_file",
            json!({"path": ".gitignore", "content": "# nothing ignored\n"}),
        ),
        anthropic_tool("t8", "grep", json!({"pattern": "canary", "path": "."})),
        anthropic_tool(
            "t9",
            "remember",
            json!({"key": "k", "value": format!("the key is {split}")}),
        ),
        cmd(
            "t10",
            sh(&format!("printf '%s' '{KEY}' | base64; echo {KEY} >&2")),
        ),
    ];
    let mut replies: Vec<Reply> = steps.iter().map(|s| Reply::sse(whole(s))).collect();
    replies.push(Reply::sse(whole(&anthropic_text(&format!(
        "done. key: {split} / {} / {}",
        b64("k"),
        KEY.replace('-', "-\u{2063}")
    )))));
    replies
}

/// Done means (issue 16): after an adversarial run, the raw bytes of the store file,
/// its WAL, every audit generation, each blob reassembled from its chunks, and the
/// terminal hold neither the key nor a denied file's content — plain, base64 at any
/// alignment, or split by zero-width characters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_run_leaves_no_key_and_no_denied_content_in_any_record_byte() {
    let server = FakeServer::start(hostile_replies()).await;
    let case = Case::new();
    std::fs::write(
        case.path("t/task.toml"),
        format!(
            "goal = \"g\"\nroot = \"ws\"\n[budget]\nmax_steps = 30\n[verify]\nfile_contains = {{ file = \"notes.txt\", needle = \"a\" }}\n[provider]\nkind = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = \"{}\"\n",
            server.url()
        ),
    )
    .unwrap();
    let task = case.path("t/task.toml").display().to_string();
    let mut run = case.cmd(&["run", &task]);
    let out = tokio::task::spawn_blocking(move || run.output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        server.requests().len() >= 11,
        "the run did not take every hostile step: {stderr}"
    );

    let mut scanned = Vec::new();
    let mut check = |what: String, bytes: &[u8]| {
        for (name, secret) in [("key", KEY), ("env", ENV_CANARY), ("pem", PEM_CANARY)] {
            if let Some(form) = found_in(bytes, secret) {
                panic!("the {name} is in {what} ({form})");
            }
        }
        scanned.push(what);
    };
    check("stdout".into(), &out.stdout);
    check("stderr".into(), &out.stderr);
    // The store, its WAL and shm if the run left them, and every audit generation.
    let mut records = files(&case.path("store"));
    records.extend(files(&case.path("config")));
    assert!(
        records.iter().any(|p| p.ends_with("sessions.jsonl")),
        "no audit log: {records:?}"
    );
    for p in &records {
        check(p.display().to_string(), &std::fs::read(p).unwrap());
    }
    // Each blob reassembled: a value split across two chunks is in no single one.
    let store = io_harness::Store::open(case.path("store/store.db")).unwrap();
    let run_id = store.runs().unwrap()[0].id;
    let mut blobs = 0;
    let mut largest = 0;
    for step in store.steps(run_id).unwrap() {
        if let Some(hash) = step.request_hash.as_deref() {
            let body = store.blob(hash).unwrap().unwrap();
            check(format!("blob of step {}", step.step), &body);
            blobs += 1;
            largest = largest.max(body.len());
        }
    }
    assert!(blobs >= 10, "{blobs} request bodies");
    // Past the store's 8 KiB threshold: the late bodies are stored as chunks (of about
    // 2 KiB), so a value could straddle two.
    assert!(largest > 8 * 1024, "the largest body is {largest} bytes");
    // What the policy denies never reached the model either.
    for (i, r) in server.requests().iter().enumerate() {
        for secret in [ENV_CANARY, PEM_CANARY] {
            assert!(
                found_in(r.body.as_slice(), secret).is_none(),
                "request {i} carried a denied file"
            );
        }
    }
    // The audit log did record the command that echoed the key: redacted, not dropped.
    let audit = records
        .iter()
        .find(|p| p.ends_with("sessions.jsonl"))
        .unwrap();
    let text = std::fs::read_to_string(audit).unwrap();
    assert!(
        text.contains("[\"echo\",\"[REDACTED]\"]"),
        "the echo session is not in the audit log as redacted: {text}"
    );
    // So did `io-harness audit`, in both forms.
    for args in [vec!["audit"], vec!["audit", "--json"]] {
        let out = case.cmd(&args).output().unwrap();
        assert!(out.status.success());
        check(format!("io-harness {}", args.join(" ")), &out.stdout);
    }
    assert!(scanned.len() >= 6, "{scanned:?}");
}

/// Route 4: the CLI blanks its original environment block and goes non-dumpable, so an
/// unsandboxed child of the same user cannot read the key from
/// `/proc/<pid>/environ`; and as an unprivileged user its sandbox still works (the
/// child it clones must write its own uid map, which a non-dumpable parent's
/// inheritance would forbid).
#[test]
fn the_cli_environ_block_holds_no_key_and_its_user_cannot_read_it() {
    let case = Case::new();
    let ws = case.path("nobody");
    std::fs::create_dir_all(&ws).unwrap();
    for p in [case.dir.path().to_path_buf(), ws.clone()] {
        std::os::unix::fs::chown(&p, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let mut c = case.cmd(&[
        "sandbox",
        "--workdir",
        ws.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "sleep 2; id -u; echo ok > made",
    ]);
    c.env("IO_HARNESS_STORE", case.path("nobody-store.db"))
        .env("HOME", &ws)
        .current_dir(&ws);
    let as_nobody = unsafe_free_root();
    if as_nobody {
        use std::os::unix::process::CommandExt;
        c.uid(NOBODY).gid(NOBODY);
    }
    let mut child = c.spawn().unwrap();
    let pid = child.id();
    // The sandbox exists once the harness has a child: its start-up is behind it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let has_child = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|t| {
                !std::fs::read_to_string(t.path().join("children"))
                    .unwrap_or_default()
                    .trim()
                    .is_empty()
            })
    };
    while !has_child() {
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the sandbox never started: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert!(
        found_in(&environ, KEY).is_none(),
        "the key is in the harness's environ block"
    );
    assert!(
        environ.iter().all(|&b| b == 0),
        "the block still shows variables: {:?}",
        String::from_utf8_lossy(&environ)
    );
    if as_nobody {
        // Another process of the harness's user is refused the block outright.
        let peek = {
            use std::os::unix::process::CommandExt;
            Command::new("cat")
                .arg(format!("/proc/{pid}/environ"))
                .uid(NOBODY)
                .gid(NOBODY)
                .output()
                .unwrap()
        };
        assert!(!peek.status.success(), "a same-user process read the block");
        assert!(found_in(&peek.stdout, KEY).is_none());
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("65534"), "{stdout}");
    assert!(ws.join("made").exists());
}

/// Whether the test can play an unprivileged harness (it runs as root).
fn unsafe_free_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Route 4: the library changes no process-wide state — an embedder's environment
/// block and dumpability are its own.
#[tokio::test]
async fn the_library_leaves_the_process_environ_and_dumpability_alone() {
    let before = std::fs::read("/proc/self/environ").unwrap();
    // SAFETY: PR_GET_DUMPABLE takes no pointers.
    let dumpable = || unsafe { libc::prctl(libc::PR_GET_DUMPABLE) };
    assert_eq!(dumpable(), 1);
    let dir = tempfile::tempdir().unwrap();
    let contract = io_harness::TaskContract::workspace(
        "g",
        dir.path(),
        io_harness::Verification::file_contains("x", "x"),
    );
    let script = io_harness::provider::Scripted::new(vec![
        io_harness::provider::ScriptTurn::tool("run_command", json!({"argv": ["true"]})),
        io_harness::provider::ScriptTurn::text("done"),
    ]);
    let store = io_harness::Store::memory().unwrap();
    let audit = tempfile::tempdir().unwrap();
    let opts = io_harness::run::RunOptions {
        audit: Some(io_harness::audit::AuditLog::new(audit.path())),
        ..Default::default()
    };
    let result = io_harness::run_with(&contract, &script, &store, opts)
        .await
        .unwrap();
    assert!(result.run_id > 0);
    assert_eq!(dumpable(), 1, "the library made the process non-dumpable");
    assert_eq!(
        std::fs::read("/proc/self/environ").unwrap(),
        before,
        "the library rewrote the environ block"
    );
}

/// Route 4: a credential the contract passes to commands by name (`[sandbox] env`) is
/// redacted from the records like the provider's key, wherever a command prints it; a
/// variable whose name says nothing of a credential is recorded as printed.
#[test]
fn a_passed_credential_printed_by_a_command_is_redacted_from_the_record() {
    const TOKEN: &str = "ghp_passedTokenValue0123456789";
    let case = Case::new();
    std::fs::write(
        case.path("t/script.jsonl"),
        format!(
            "{}\n{{\"text\": \"done\"}}\n",
            json!({"tool_calls": [{"name": "run_command", "input": {"argv": ["sh", "-c", "echo token=$SERVICE_TOKEN level=$LOG_LEVEL; echo $SERVICE_TOKEN | base64"]}}]})
        ),
    )
    .unwrap();
    std::fs::write(
        case.path("t/task.toml"),
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"notes.txt\", needle = \"notes\" }\n[sandbox]\nenv = [\"SERVICE_TOKEN\", \"LOG_LEVEL\"]\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    )
    .unwrap();
    let task = case.path("t/task.toml").display().to_string();
    let out = case
        .cmd(&["run", &task])
        .env("SERVICE_TOKEN", TOKEN)
        .env("LOG_LEVEL", "verbose-debugging")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut bytes = Vec::new();
    for p in files(&case.path("store")) {
        bytes.extend(std::fs::read(p).unwrap());
    }
    assert!(
        found_in(&bytes, TOKEN).is_none(),
        "the token is in the store"
    );
    let show = case.cmd(&["show", "1"]).output().unwrap();
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(shown.contains("token=[REDACTED]"), "{shown}");
    assert!(shown.contains("level=verbose-debugging"), "{shown}");
}

/// Issue 16's adversary (XC1, S2): the cache directory is a record like the store —
/// a run's baseline snapshot holds the denied files — so a cache inside the workspace
/// is refused; and a record file with a second hard link (one could lie in the
/// workspace, where no path comparison finds it) is refused too. Both before anything
/// runs, exit 2.
#[test]
fn a_cache_inside_the_workspace_or_a_hard_linked_store_is_refused() {
    let case = Case::new();
    std::fs::write(
        case.path("t/script.jsonl"),
        "{\"text\": \"done\"}\n{\"text\": \"done\"}\n{\"text\": \"done\"}\n",
    )
    .unwrap();
    std::fs::write(
        case.path("t/task.toml"),
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"notes.txt\", needle = \"notes\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    )
    .unwrap();
    let task = case.path("t/task.toml").display().to_string();
    let out = case
        .cmd(&["run", &task])
        .env("XDG_CACHE_HOME", case.path("t/ws/.cache"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cache directory"), "{err}");
    assert!(!case.path("t/ws/.cache/io-harness/runs").exists(), "{err}");

    let out = case.cmd(&["run", &task]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::hard_link(case.path("store/store.db"), case.path("t/ws/hl.db")).unwrap();
    let out = case.cmd(&["run", &task]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("hard-linked record file"), "{err}");
}

/// Issue 16's adversary (B1): a call whose arguments are over `[tools]
/// max_argument_bytes` is refused — and its arguments are kept nowhere: not in the
/// reply on record, not in a later request's body in the store, not in what is sent
/// back to the model (a refused 120 MiB call grew the store by 361 MB through them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_call_is_kept_in_no_reply_request_or_record() {
    let big = "x".repeat(64 * 1024);
    let server = FakeServer::start(vec![
        Reply::sse(whole(&anthropic_tool(
            "t1",
            "write_file",
            json!({"path": "b.txt", "content": big}),
        ))),
        Reply::sse(whole(&anthropic_tool(
            "t2",
            "read_file",
            json!({"path": "notes.txt"}),
        ))),
        Reply::sse(whole(&anthropic_text("done"))),
    ])
    .await;
    let case = Case::new();
    std::fs::write(
        case.path("t/task.toml"),
        format!(
            "goal = \"g\"\nroot = \"ws\"\n[tools]\nmax_argument_bytes = \"4KiB\"\n[verify]\nfile_contains = {{ file = \"notes.txt\", needle = \"notes\" }}\n[provider]\nkind = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = \"{}\"\n",
            server.url()
        ),
    )
    .unwrap();
    let task = case.path("t/task.toml").display().to_string();
    let mut run = case.cmd(&["run", &task]);
    let out = tokio::task::spawn_blocking(move || run.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!case.path("t/ws/b.txt").exists());
    let run_of_x = "x".repeat(4096);
    let has = |b: &[u8]| b.windows(run_of_x.len()).any(|w| w == run_of_x.as_bytes());
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for (i, r) in requests.iter().enumerate().skip(1) {
        assert!(!has(&r.body), "request {i} sent the arguments back");
    }
    for p in files(&case.path("store")) {
        assert!(!has(&std::fs::read(&p).unwrap()), "in {}", p.display());
    }
    let store = io_harness::Store::open(case.path("store/store.db")).unwrap();
    let run_id = store.runs().unwrap()[0].id;
    let steps = store.steps(run_id).unwrap();
    assert!(steps[0].tool_calls[0].output.contains("max_argument_bytes"));
    for step in &steps {
        if let Some(h) = step.request_hash.as_deref() {
            assert!(!has(&store.blob(h).unwrap().unwrap()), "step {}", step.step);
        }
    }
}
