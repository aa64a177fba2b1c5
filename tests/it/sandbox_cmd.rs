//! `io-harness sandbox` and `doctor` as an operator runs them (issue #15 classes 6 and
//! 7): the one-off command isolated as a run's would be, its messages true to its
//! record, doctor honest inside a sandbox, and the probe cache's rules end to end.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Fx {
    dir: tempfile::TempDir,
}

impl Fx {
    fn new() -> Self {
        let fx = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(fx.ws()).unwrap();
        fx
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn ws(&self) -> PathBuf {
        self.path().join("ws")
    }
    fn cache(&self) -> PathBuf {
        self.path().join("cache")
    }
    fn run_bin(&self, bin: &Path, args: &[&str]) -> Output {
        Command::new(bin)
            .args(args)
            .current_dir(self.ws())
            .env_remove("IO_HARNESS_STORE")
            .env_remove("IO_HARNESS_PROBE_CACHE")
            .env("XDG_CACHE_HOME", self.cache())
            .env("XDG_CONFIG_HOME", self.ws().join("config"))
            .env("XDG_DATA_HOME", self.path().join("data"))
            .env("IO_HARNESS_LOG", "io_harness_sandbox=debug")
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    }
    fn run(&self, args: &[&str]) -> Output {
        self.run_bin(Path::new(env!("CARGO_BIN_EXE_io-harness")), args)
    }
    fn audit(&self) -> Vec<serde_json::Value> {
        let out = self.run(&["audit", "--json"]);
        crate::json_schema::documents(&out.stdout)
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn say(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// Issue 15.6: `io-harness sandbox` applied no masks ("exactly as a run would" was
/// not true): `.env` was readable inside, and the store was visible.
#[test]
fn the_sandbox_command_masks_what_read_file_denies_and_hides_the_store_and_the_log() {
    let fx = Fx::new();
    let ws = fx.ws();
    std::fs::write(ws.join(".env"), "TOKEN=hunter2\n").unwrap();
    std::fs::write(ws.join("plain.txt"), "plain\n").unwrap();
    std::fs::create_dir_all(ws.join("records")).unwrap();
    std::fs::write(ws.join("records/store.db"), "db").unwrap();
    // A first session creates the audit directory inside the workspace.
    let out = fx.run(&["sandbox", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    let store = ws.join("records/store.db");
    let out = fx.run(&[
        "sandbox",
        "--store",
        store.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "cat plain.txt; cat .env; cat records/store.db; ls config/io-harness/audit; echo end",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    assert!(
        stdout.starts_with("plain\n") && stdout.ends_with("end\n"),
        "{}",
        say(&out)
    );
    assert!(
        !stdout.contains("hunter2"),
        "a masked file was read: {}",
        say(&out)
    );
    assert!(
        !stdout.contains("db"),
        "the store was readable: {}",
        say(&out)
    );
    assert!(
        !stdout.contains("sessions.jsonl"),
        "the audit log was visible: {}",
        say(&out)
    );
    let lines = fx.audit();
    // What the view shows of the records (they lie under the working directory) is
    // masked, and the record says so.
    assert_eq!(
        lines[1]["masked_paths"],
        serde_json::json!([".env", "records/store.db", "config/io-harness/audit"]),
        "{lines:?}"
    );
}

/// With `--task` the command gets the task's `[sandbox]` settings and its policy: its
/// read denies masked, its exec denies refused (exit 126, nothing run).
#[test]
fn the_sandbox_command_takes_a_tasks_settings_and_policy() {
    let fx = Fx::new();
    let ws = fx.ws();
    std::fs::write(ws.join("notes.txt"), "private\n").unwrap();
    let task = fx.path().join("task.toml");
    std::fs::write(
        &task,
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"x\", needle = \"y\" }\n\
         [sandbox]\nlimits = { wall_secs = 1 }\n\
         [policy]\nrules = [{ act = \"read\", target = \"notes.txt\", decision = \"deny\" }, \
         { act = \"exec\", target = \"curl\", decision = \"deny\" }]\n",
    )
    .unwrap();
    let t = task.to_str().unwrap();
    let out = fx.run(&[
        "sandbox",
        "--task",
        t,
        "--",
        "sh",
        "-c",
        "cat notes.txt; sleep 5",
    ]);
    assert_eq!(out.status.code(), Some(137), "{}", say(&out));
    assert!(!text(&out.stdout).contains("private"), "{}", say(&out));
    assert!(
        text(&out.stderr).contains("stopped by the wall cap"),
        "{}",
        say(&out)
    );
    let out = fx.run(&["sandbox", "--task", t, "--", "curl", "http://example.test"]);
    assert_eq!(out.status.code(), Some(126), "{}", say(&out));
    assert!(
        text(&out.stderr).contains("refused by the policy"),
        "{}",
        say(&out)
    );
    // The flag overrides the task's cap.
    let out = fx.run(&[
        "sandbox", "--task", t, "--limit", "wall=20", "--", "sleep", "1.5",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    let lines = fx.audit();
    assert_eq!(
        lines.len(),
        2,
        "a refused command is not a session: {lines:?}"
    );
    assert_eq!(lines[0]["cap_hit"], "wall");
    // The read deny's file, and the denied program, taken out of the view.
    let mut masked = vec![serde_json::json!("notes.txt")];
    if let Ok(curl) = std::fs::canonicalize("/usr/bin/curl") {
        masked.push(serde_json::json!(curl.display().to_string()));
    }
    assert_eq!(lines[0]["masked_paths"], serde_json::Value::Array(masked));
}

/// Issue 15.6: "stopped by the processes cap" was printed for a command that exited 0.
/// A cap is mentioned only with a cap hit its audit line records, in words that stay
/// true of how the command ended.
#[test]
fn a_cap_message_needs_a_recorded_cap_hit_and_says_how_the_command_ended() {
    let fx = Fx::new();
    let out = fx.run(&[
        "sandbox",
        "--limit",
        "procs=4",
        "--",
        "sh",
        "-c",
        // The inner shell dies of its refused forks; the outer one exits 0.
        "sh -c 'for i in 1 2 3 4 5 6 7 8; do sleep 0.3 & done; wait' 2>/dev/null; exit 0",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    let out2 = fx.run(&["sandbox", "--", "true"]);
    assert_eq!(out2.status.code(), Some(0), "{}", say(&out2));
    let lines = fx.audit();
    for (o, line) in [(&out, &lines[0]), (&out2, &lines[1])] {
        let stderr = text(&o.stderr);
        assert!(!stderr.contains("stopped by"), "{}", say(o));
        match line["cap_hit"].as_str() {
            Some(cap) => {
                assert_eq!(cap, "processes");
                assert!(
                    stderr.contains("a fork was refused at the processes cap; it exited 0"),
                    "{}",
                    say(o)
                );
            }
            None => assert!(!stderr.contains(" cap"), "no recorded hit: {}", say(o)),
        }
    }
}

/// Issue 15.6: `doctor` run inside a sandbox said the floor was available though every
/// run failed there. It tries a real session per backend, so what it says is what a
/// command gets: inside the native sandbox (as uid 65534, no namespaces left to make)
/// the native backend is unavailable, and the floor is named usable only because a
/// command really runs on it there — a nested command shows it.
#[test]
fn doctor_inside_a_sandbox_names_only_a_backend_a_command_really_gets() {
    let fx = Fx::new();
    // The binary inside the workspace: the sandbox's view need not show the build tree.
    let inner = fx.ws().join("io-harness");
    std::fs::copy(env!("CARGO_BIN_EXE_io-harness"), &inner).unwrap();
    let out = fx.run(&["sandbox", "--", "./io-harness", "doctor", "--json"]);
    let v: serde_json::Value = crate::json_schema::last(&out.stdout);
    assert_eq!(v["native"]["available"], false, "{v}");
    let nested = fx.run(&[
        "sandbox",
        "--",
        "./io-harness",
        "sandbox",
        "--",
        "/bin/echo",
        "nested",
    ]);
    let ran = nested.status.code() == Some(0) && text(&nested.stdout) == "nested\n";
    assert_eq!(v["usable"].as_bool(), Some(ran), "{v}\n{}", say(&nested));
    assert_eq!(
        out.status.code(),
        Some(if ran { 0 } else { 1 }),
        "{}",
        say(&out)
    );
    if ran {
        assert_eq!(v["selected"], "portable-floor", "{v}");
    } else {
        assert!(v["selected"].is_null(), "{v}");
    }
    // On the host it still finds the native backend.
    let out = fx.run(&["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    let v: serde_json::Value = crate::json_schema::last(&out.stdout);
    assert_eq!(
        (v["usable"].as_bool(), v["selected"].as_str()),
        (Some(true), Some("linux-namespaces"))
    );
}

fn probe_file(fx: &Fx) -> PathBuf {
    let dir = fx.cache().join("io-harness/probe");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.remove(0)
}

fn probed(out: &Output) -> bool {
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{}", say(out));
    match (
        stderr.contains("probe cache hit"),
        stderr.contains("probe cache miss"),
    ) {
        (true, false) => false,
        (false, true) => true,
        _ => panic!("neither or both: {}", say(out)),
    }
}

/// Issue 15.7: the probe result is cached (0600 in a 0700 directory), used by the next
/// process, and ignored — a fresh probe, never an error — when its mode is wrong, it is
/// corrupt or the binary changed; the session's record still lists its own layers.
#[test]
fn the_probe_cache_is_used_only_while_it_can_be_trusted() {
    let fx = Fx::new();
    let sb = ["sandbox", "--", "true"];
    assert!(probed(&fx.run(&sb)), "the first process probes");
    let file = probe_file(&fx);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
    assert!(!probed(&fx.run(&sb)), "the second process uses the cache");

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(probed(&fx.run(&sb)), "a widened file is ignored");
    assert_eq!(mode(&file), 0o600, "and rewritten");
    std::fs::write(&file, b"\xff garbage").unwrap();
    assert!(probed(&fx.run(&sb)), "a corrupt file is ignored");
    assert!(!probed(&fx.run(&sb)), "and replaced");

    // Another binary (a copy, then the copy changed) has its own entry and re-probes.
    let copy = fx.path().join("io-harness-copy");
    std::fs::copy(env!("CARGO_BIN_EXE_io-harness"), &copy).unwrap();
    assert!(probed(&fx.run_bin(&copy, &sb)));
    assert!(!probed(&fx.run_bin(&copy, &sb)));
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(&copy)
        .unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(60))
        .unwrap();
    drop(f);
    assert!(
        probed(&fx.run_bin(&copy, &sb)),
        "a changed binary re-probes"
    );

    // Every session, cached choice or not, records the layers it applied itself.
    let lines = fx.audit();
    assert!(lines.len() >= 8, "{lines:?}");
    for l in &lines {
        assert_eq!(l["backend"], "linux-namespaces");
        assert_eq!(
            l["layers"]["namespaces"].as_array().map(Vec::len),
            Some(6),
            "{l}"
        );
        assert_eq!(l["layers"]["seccomp"], true, "{l}");
    }
    // The same from the second on (the first ran before the audit directory existed,
    // so it had one path fewer to hide).
    for l in &lines[1..] {
        assert_eq!(l["layers"], lines[1]["layers"]);
    }
}

/// Found while testing issue 16 route 4: with the working directory at `$HOME`, the
/// private `$HOME` tmpfs lies under the workspace's bind, and when the harness read its
/// usage through a sandbox process's root it got the covering filesystem's (the host
/// disk's): every command was "stopped by the memory cap" at once. The monitor now
/// counts a tmpfs only through a handle on that tmpfs itself.
#[test]
fn a_workspace_at_home_is_not_taken_for_the_private_home_tmpfs() {
    use std::os::unix::process::CommandExt;
    let fx = Fx::new();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_io-harness"));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // It showed for an unprivileged harness, whose private mounts it reads
        // through a sandbox process's root.
        for p in [fx.path().to_path_buf(), fx.ws()] {
            std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
        }
        cmd.uid(65534).gid(65534);
    }
    let out = cmd
        .args(["sandbox", "--", "sh", "-c", "echo fine > made; cat made"])
        .current_dir(fx.ws())
        .env("HOME", fx.ws())
        .env_remove("XDG_CACHE_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("IO_HARNESS_STORE")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", say(&out));
    assert_eq!(text(&out.stdout).trim(), "fine", "{}", say(&out));
}
