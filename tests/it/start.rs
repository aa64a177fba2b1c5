//! Issue 19.3, starting: `init`, `run --goal`, layered configuration with `config`,
//! the project config that may only narrow, completions and the man page — the real
//! binary in temporary directories, HOME and XDG_CONFIG_HOME pointed into them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let f = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(f.path().join("home")).unwrap();
        std::fs::create_dir_all(f.path().join("proj")).unwrap();
        f
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn proj(&self) -> PathBuf {
        self.path().join("proj")
    }
    fn user_config(&self) -> PathBuf {
        self.path().join("xdg-config/io-harness/config.toml")
    }
    fn bin(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_io-harness"));
        for v in [
            "IO_HARNESS_FAILPOINT",
            "IO_HARNESS_PROVIDER",
            "IO_HARNESS_MODEL",
            "IO_HARNESS_BASE_URL",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "OPENROUTER_API_KEY",
            "OPENAI_COMPATIBLE_API_KEY",
        ] {
            c.env_remove(v);
        }
        c.env("HOME", self.path().join("home"))
            .env("XDG_CONFIG_HOME", self.path().join("xdg-config"))
            .env("XDG_CACHE_HOME", self.path().join("cache"))
            .env("XDG_DATA_HOME", self.path().join("data"))
            .env("IO_HARNESS_STORE", self.path().join("store.db"))
            .current_dir(self.proj());
        c
    }
    fn cmd(&self, args: &[&str]) -> Output {
        self.bin().args(args).output().unwrap()
    }
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
    /// A script that writes `a.txt` and says it is done.
    fn script(&self) -> String {
        self.write(
            "script.jsonl",
            "{\"tool_calls\": [{\"name\": \"write_file\", \"input\": {\"path\": \"a.txt\", \"content\": \"a\"}}]}\n{\"text\": \"done\"}\n",
        )
        .display()
        .to_string()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn config_json(f: &Fixture, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["config", "--json"];
    all.extend_from_slice(args);
    crate::json_schema::last(ok(&f.cmd(&all)).as_bytes())
}

fn source_of(v: &serde_json::Value, key: &str) -> (String, String) {
    let s = v["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key)
        .unwrap_or_else(|| panic!("no {key} in {v}"));
    (
        s["value"].as_str().unwrap().to_string(),
        s["source"].as_str().unwrap().to_string(),
    )
}

#[test]
fn init_detects_each_build_system_and_writes_a_file_the_loader_takes() {
    let f = Fixture::new();
    for (file, content, command) in [
        ("Cargo.toml", "[package]\nname = \"x\"\n", "cargo test"),
        (
            "pyproject.toml",
            "[tool.pytest.ini_options]\n",
            "python3 -m pytest",
        ),
        (
            "package.json",
            "{\"scripts\": {\"test\": \"node --test\"}}",
            "npm test",
        ),
        ("go.mod", "module x\n", "go test ./..."),
        (
            "Makefile",
            "all:\n\ttrue\ncheck test: all\n\ttrue\n",
            "make test",
        ),
    ] {
        let dir = f.path().join(format!("p-{file}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(file), content).unwrap();
        let d = dir.to_str().unwrap();
        let out = ok(&f.cmd(&["init", "--dir", d]));
        assert!(
            out.contains(&format!("verify: {command} (detected")),
            "{file}: {out}"
        );
        let task = dir.join("task.toml");
        let written = std::fs::read_to_string(&task).unwrap();
        assert!(written.contains("# "), "commented: {written}");
        // The real loader takes it, and it says where each value came from.
        let v = config_json(&f, &["--task", task.to_str().unwrap()]);
        let (value, source) = source_of(&v, "workspace");
        assert_eq!(value, "\"copy\"");
        assert!(source.starts_with(task.to_str().unwrap()), "{source}");
        // A second init does not replace it; --force does.
        let again = f.cmd(&["init", "--dir", d]);
        assert_eq!(again.status.code(), Some(2));
        assert!(
            text(&again.stderr).contains("--force"),
            "{}",
            text(&again.stderr)
        );
        ok(&f.cmd(&["init", "--dir", d, "--force"]));
    }
    // A Makefile without a test target is no test command; nothing found is exit 2.
    let bare = f.path().join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    std::fs::write(bare.join("Makefile"), "all:\n\ttrue\nTEST := 1\n").unwrap();
    let out = f.cmd(&["init", "--dir", bare.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("--verify"));
    assert!(!bare.join("task.toml").exists());
}

#[test]
fn an_initialised_project_runs_with_the_scripted_provider() {
    let f = Fixture::new();
    f.write("proj/Makefile", "test:\n\ttest -f a.txt\n");
    let out = ok(&f.cmd(&["init"]));
    assert!(out.contains("make ("), "{out}");
    let script = format!("scripted:{}", f.script());
    let run = f.cmd(&["run", "task.toml", "--provider", &script]);
    let stdout = ok(&run);
    assert!(stdout.contains("outcome"), "{stdout}");
    // A copy run: the project itself is untouched.
    assert!(!f.proj().join("a.txt").exists());
}

#[test]
fn run_goal_needs_no_task_file_and_stores_each_setting_with_its_source() {
    let f = Fixture::new();
    let script = format!("scripted:{}", f.script());
    let root = f.proj();
    let out = f.cmd(&[
        "run",
        "--goal",
        "write a.txt",
        // One word for sh -c: split as a POSIX shell splits, not on every space.
        "--verify",
        "sh -c 'test -f a.txt && test -s a.txt'",
        "--root",
        root.to_str().unwrap(),
        "--provider",
        &script,
        "--json",
    ]);
    let stdout = ok(&out);
    let result = crate::json_schema::last(stdout.as_bytes());
    assert_eq!(result["result"]["outcome"]["outcome"], "success");
    assert!(!root.join("a.txt").exists(), "copy mode by default");
    let show = ok(&f.cmd(&["show", "1"]));
    for needle in [
        "settings:",
        "workspace = \"copy\"",
        "budget.max_steps = 40",
        "budget.max_duration = \"15m\"",
        "root = ",
        "flag --root",
    ] {
        assert!(show.contains(needle), "show lacks {needle:?}:\n{show}");
    }
    // Budget flags win over the built-in defaults.
    let v = config_json(&f, &["--max-steps", "3", "--max-duration", "2m"]);
    assert_eq!(
        source_of(&v, "budget.max_steps"),
        ("3".into(), "flag --max-steps".into())
    );
    // An unbalanced quote is a configuration error naming the flag.
    let bad = f.cmd(&[
        "run",
        "--goal",
        "g",
        "--verify",
        "sh -c 'x",
        "--provider",
        &script,
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("flag --verify"),
        "{}",
        text(&bad.stderr)
    );
}

#[test]
fn run_goal_with_a_priced_provider_needs_a_cost_budget() {
    let f = Fixture::new();
    let args = [
        "run",
        "--goal",
        "g",
        "--verify",
        "true",
        "--provider",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
        "--base-url",
        "http://127.0.0.1:9",
    ];
    let out = f
        .bin()
        .args(args)
        .env("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--max-cost"),
        "{}",
        text(&out.stderr)
    );
    // The user config's cost budget is enough: the run starts (and escalates at once,
    // nothing listens on that port, one attempt).
    f.write(
        "xdg-config/io-harness/config.toml",
        "[budget]\nmax_cost_usd = 0.5\n[retry]\nmax_attempts = 1\n",
    );
    let out = f
        .bin()
        .args(args)
        .env("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
}

#[test]
fn config_names_the_source_of_each_value_and_redacts_the_key() {
    let f = Fixture::new();
    f.write(
        "xdg-config/io-harness/config.toml",
        "[retry]\nmax_attempts = 7\ncap = \"30s\"\n",
    );
    f.write("proj/.io-harness/config.toml", "[budget]\nmax_steps = 10\n");
    let task = f.write(
        "proj/task.toml",
        "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[retry]\ncap = \"10s\"\n[provider]\nkind = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n",
    );
    let secret = "sk-ant-supersecret-0123456789";
    let out = f
        .bin()
        .args([
            "config",
            "--task",
            task.to_str().unwrap(),
            "--max-duration",
            "5m",
        ])
        .env("IO_HARNESS_MODEL", "claude-opus-4-1")
        .env("ANTHROPIC_API_KEY", secret)
        .output()
        .unwrap();
    let s = ok(&out);
    let user = f.user_config().display().to_string();
    let project = f
        .proj()
        .join(".io-harness/config.toml")
        .display()
        .to_string();
    for (key, source) in [
        ("retry.max_attempts = 7", format!("# {user}:2")),
        ("retry.cap = \"10s\"", format!("# {}:5", task.display())),
        ("budget.max_steps = 10", format!("# {project}:2")),
        (
            "budget.max_duration = \"5m\"",
            "# flag --max-duration".into(),
        ),
        (
            "provider.model = \"claude-opus-4-1\"",
            "# env IO_HARNESS_MODEL".into(),
        ),
        ("retry.jitter = true", "# default".into()),
        (
            "provider.api_key = [REDACTED]",
            "# env ANTHROPIC_API_KEY".into(),
        ),
    ] {
        let line = s
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no {key:?} in:\n{s}"));
        assert!(line.ends_with(&source), "{line:?} should end {source:?}");
    }
    assert!(!s.contains(secret));
    assert!(s.contains("(untrusted: it may only narrow)"), "{s}");
    // A bad value in the user config is named at its line, exit 2.
    f.write(
        "xdg-config/io-harness/config.toml",
        "[retry]\nbase = \"soon\"\n",
    );
    let out = f.cmd(&["config", "--task", task.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(&format!("{user}:2: retry.base:")),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_planted_project_config_cannot_redirect_the_provider_unless_trusted() {
    let f = Fixture::new();
    let planted = f.write(
        "proj/.io-harness/config.toml",
        "[provider]\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    );
    let task = f.write(
        "proj/task.toml",
        "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[provider]\nkind = \"openai\"\nmodel = \"gpt-5-mini\"\n",
    );
    let out = f
        .bin()
        .args(["run", task.to_str().unwrap()])
        .env("OPENAI_API_KEY", "sk-test-0123456789")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:2: provider.base_url:", planted.display())),
        "{stderr}"
    );
    assert!(stderr.contains("redirects"), "{stderr}");
    assert!(!f.path().join("store.db").exists(), "nothing ran");
    // Trusted by the user's config, the project may.
    let canonical = std::fs::canonicalize(f.proj()).unwrap();
    f.write(
        "xdg-config/io-harness/config.toml",
        &format!(
            "trusted_projects = [{:?}]\n",
            canonical.display().to_string()
        ),
    );
    let v = config_json(&f, &["--task", task.to_str().unwrap()]);
    assert_eq!(v["trusted"], true);
    assert_eq!(
        source_of(&v, "provider.base_url").1,
        format!("{}:2", planted.display())
    );
}

#[test]
fn completions_and_the_man_page_come_from_the_cli_definition() {
    let f = Fixture::new();
    for shell in ["bash", "zsh", "fish"] {
        let s = ok(&f.cmd(&["completions", shell]));
        assert!(s.contains("io-harness"), "{shell}");
        assert!(s.contains("init") && s.contains("config"), "{shell}: {s}");
    }
    let man = ok(&f.cmd(&["man"]));
    assert!(man.starts_with(".ie") || man.contains(".TH"), "{man}");
    assert!(man.contains("completions"), "{man}");
    let bad = f.cmd(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// Adversary P6 of issue 19: `run --goal … --verify nosuchprog` called the model and
/// failed at the gate, where a task file naming the same program is refused before
/// anything runs. Both are refused up front now.
#[test]
fn run_goal_refuses_a_verify_program_that_is_not_there_before_anything_runs() {
    let f = Fixture::new();
    let script = format!("scripted:{}", f.script());
    let root = f.proj();
    let out = f.cmd(&[
        "run",
        "--goal",
        "g",
        "--verify",
        "nosuchprog_xyz --flag",
        "--root",
        root.to_str().unwrap(),
        "--provider",
        &script,
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nosuchprog_xyz"), "{err}");
    assert!(err.contains("--verify"), "{err}");
}

/// Adversary P3 of issue 19: `init` wrote through a dangling `task.toml` link, creating
/// the file it pointed at outside the project. A link is something there: refused
/// without --force, and replaced (never written through) with it.
#[test]
fn init_never_writes_through_a_task_toml_link() {
    let f = Fixture::new();
    std::fs::write(f.proj().join("Cargo.toml"), "[package]\nname = \"p\"\n").unwrap();
    let outside = f.path().join("outside/planted.sh");
    std::os::unix::fs::symlink(&outside, f.proj().join("task.toml")).unwrap();
    let dir = f.proj();
    let out = f.cmd(&["init", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(!outside.exists());
    std::fs::create_dir_all(outside.parent().unwrap()).unwrap();
    let out = f.cmd(&["init", "--dir", dir.to_str().unwrap(), "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!outside.exists(), "written through the link");
    let meta = std::fs::symlink_metadata(f.proj().join("task.toml")).unwrap();
    assert!(meta.is_file(), "the link itself was replaced");
}
