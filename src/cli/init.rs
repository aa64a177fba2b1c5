//! `io-harness init`: a commented `task.toml` for the project it is run in, with the
//! verification command of the build system it finds (Cargo, pytest, npm, Go, make),
//! so a first run needs no TOML written by hand. It says what it found and never
//! replaces an existing file without `--force`.

use std::path::{Path, PathBuf};

use io_harness::config::inline;
use toml::Value;

use super::{CliError, InitArgs};

/// A build system found in the project.
struct Found {
    /// What it is and the file that showed it (`Cargo (Cargo.toml)`).
    what: String,
    /// Its test command.
    argv: Vec<String>,
}

pub fn execute(args: InitArgs) -> Result<i32, CliError> {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir()
            .map_err(|e| CliError::Usage(format!("cannot read the current directory: {e}")))?,
    };
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "--dir {}: not a directory",
            dir.display()
        )));
    }
    let target = dir.join("task.toml");
    // `symlink_metadata`: a link (dangling too) is something there, never written
    // through (adversary P3: a dangling task.toml link wrote the file outside the
    // project); with --force the link itself is replaced.
    let there = std::fs::symlink_metadata(&target).ok();
    if there.is_some() && !args.force {
        return Err(CliError::Usage(format!(
            "{} already exists; pass --force to replace it",
            target.display()
        )));
    }
    let found = detect(&dir);
    let (argv, why) = match (&args.verify, found.first()) {
        (Some(v), _) => {
            let argv = shlex::split(v).filter(|a| !a.is_empty()).ok_or_else(|| {
                CliError::Usage(format!(
                    "--verify {v:?}: no command, an unclosed quote or a trailing backslash"
                ))
            })?;
            (argv, "given with --verify".to_string())
        }
        (None, Some(f)) => (f.argv.clone(), format!("detected {}", f.what)),
        (None, None) => {
            return Err(CliError::Usage(format!(
                "found no build system in {} (Cargo.toml, pyproject.toml or pytest.ini, \
                 package.json with a test script, go.mod, a Makefile with a test target); \
                 pass --verify \"COMMAND\"",
                dir.display()
            )));
        }
    };
    let instructions = ["AGENTS.md", "CLAUDE.md"]
        .into_iter()
        .find(|f| dir.join(f).is_file());
    let text = render(&argv, &why, &found, instructions);
    if there.is_some_and(|m| m.file_type().is_symlink()) {
        std::fs::remove_file(&target)
            .map_err(|e| CliError::Usage(format!("{}: {e}", target.display())))?;
    }
    std::fs::write(&target, text)
        .map_err(|e| CliError::Usage(format!("cannot write {}: {e}", target.display())))?;
    let shown = shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "));
    outln!("wrote {}", target.display());
    outln!("verify: {shown} ({why})");
    for f in found.iter().skip(usize::from(args.verify.is_none())) {
        outln!("also found: {} (`{}`)", f.what, f.argv.join(" "));
    }
    if let Some(i) = instructions {
        outln!("instructions: {i}");
    }
    outln!(
        "next: write the goal in task.toml, then io-harness run {} --provider anthropic --model claude-sonnet-4-5",
        display_rel(&target)
    );
    Ok(0)
}

fn display_rel(p: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| p.strip_prefix(cwd).ok().map(PathBuf::from))
        .unwrap_or_else(|| p.to_path_buf())
        .display()
        .to_string()
}

/// Every build system found, in the order one is chosen.
fn detect(dir: &Path) -> Vec<Found> {
    let has = |f: &str| dir.join(f).is_file();
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut out = Vec::new();
    if has("Cargo.toml") {
        out.push(Found {
            what: "Cargo (Cargo.toml)".into(),
            argv: argv(&["cargo", "test"]),
        });
    }
    if let Some(f) = [
        "pytest.ini",
        "pyproject.toml",
        "conftest.py",
        "setup.cfg",
        "tox.ini",
    ]
    .into_iter()
    .find(|f| has(f) && (*f != "setup.cfg" || read(f).contains("pytest")))
    {
        out.push(Found {
            what: format!("pytest ({f})"),
            argv: argv(&["python3", "-m", "pytest"]),
        });
    }
    if has("package.json") && npm_has_test(&read("package.json")) {
        out.push(Found {
            what: "npm (package.json scripts.test)".into(),
            argv: argv(&["npm", "test"]),
        });
    }
    if has("go.mod") {
        out.push(Found {
            what: "Go (go.mod)".into(),
            argv: argv(&["go", "test", "./..."]),
        });
    }
    if let Some(f) = ["GNUmakefile", "makefile", "Makefile"]
        .into_iter()
        .find(|f| has(f) && make_has_test(&read(f)))
    {
        out.push(Found {
            what: format!("make ({f} has a test target)"),
            argv: argv(&["make", "test"]),
        });
    }
    out
}

/// `"scripts": { "test": "…" }`, other than npm's placeholder that always fails.
fn npm_has_test(text: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        return false;
    };
    v["scripts"]["test"]
        .as_str()
        .is_some_and(|t| !t.contains("Error: no test specified"))
}

/// A rule whose targets include `test` (`test:`, `check test:`), not a variable.
fn make_has_test(text: &str) -> bool {
    text.lines().any(|l| {
        if l.starts_with(['\t', '#']) {
            return false;
        }
        let Some((targets, rest)) = l.split_once(':') else {
            return false;
        };
        !rest.starts_with('=') && targets.split_whitespace().any(|t| t == "test")
    })
}

fn render(argv: &[String], why: &str, found: &[Found], instructions: Option<&str>) -> String {
    let command = inline(&Value::Array(
        argv.iter().cloned().map(Value::String).collect(),
    ));
    let mut t = String::new();
    t.push_str(
        "# A task for io-harness, written by `io-harness init`. Every key is explained in\n",
    );
    t.push_str("# the README's \"The task file\" section; `io-harness config --task task.toml`\n");
    t.push_str("# shows what a run of it resolves and where each value comes from.\n");
    let also: Vec<String> = found.iter().map(|f| f.what.clone()).collect();
    if !also.is_empty() {
        t.push_str(&format!("# Found here: {}.\n", also.join(", ")));
    }
    t.push('\n');
    t.push_str("# What the agent should achieve, in a sentence or two.\n");
    t.push_str("goal = \"describe the change you want here\"\n");
    t.push_str("root = \".\"                      # the workspace: this directory\n");
    t.push_str("workspace = \"copy\"              # work on a copy and report the diff; \"in-place\" edits here\n");
    t.push_str("# constraints = [\"keep the public API\"]\n");
    match instructions {
        Some(i) => t.push_str(&format!(
            "instructions = {}           # shown to the model as untrusted text\n",
            inline(&Value::String(i.into()))
        )),
        None => t.push_str(
            "# instructions = \"AGENTS.md\"     # shown to the model as untrusted text\n",
        ),
    }
    t.push('\n');
    t.push_str(&format!("[verify]                        # {why}\n"));
    t.push_str(&format!("command = {command}\n"));
    t.push_str("# expect_exit = 0\n");
    t.push_str("# timeout = \"5m\"\n");
    t.push_str("max_attempts = 5                # failed verifications before the run ends\n");
    t.push('\n');
    t.push_str("[budget]\n");
    t.push_str("max_steps = 40\n");
    t.push_str("max_duration = \"15m\"\n");
    t.push_str("# max_tokens = 400_000\n");
    t.push_str("# max_cost_usd = 2.00           # refused when the model's price is unknown\n");
    t.push('\n');
    t.push_str("# The provider: here, on the command line (--provider, --model), in the\n");
    t.push_str("# environment (IO_HARNESS_PROVIDER, IO_HARNESS_MODEL) or in the user config\n");
    t.push_str(
        "# ($XDG_CONFIG_HOME/io-harness/config.toml). API keys come from the environment.\n",
    );
    t.push_str("# [provider]\n");
    t.push_str("# kind = \"anthropic\"             # openai | openai-compatible | anthropic | openrouter | scripted\n");
    t.push_str("# model = \"claude-sonnet-4-5\"\n");
    t
}
