//! Issue 19.5: what an operator reads is what the code does — the environment
//! variables the README documents against the registry and the sources, and the tool
//! schemas `io-harness tools` prints against a real run's request and docs/tools.md.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use io_harness::env_vars::ENV_VARS;

use super::cli::{Fixture, text};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The names in the first column of the README's "Environment variables" table.
fn documented() -> BTreeSet<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("\n## Environment variables\n")
        .nth(1)
        .expect("the README has an Environment variables section");
    let section = section.split("\n## ").next().unwrap();
    let mut names = BTreeSet::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let first = row.split('|').nth(1).unwrap();
        for name in first.split('`').skip(1).step_by(2) {
            names.insert(name.to_string());
        }
    }
    names
}

#[test]
fn every_documented_variable_is_registered_and_every_registered_one_documented() {
    let registered: BTreeSet<String> = ENV_VARS.iter().map(|v| v.name.to_string()).collect();
    let documented = documented();
    let undocumented: Vec<_> = registered.difference(&documented).collect();
    let unregistered: Vec<_> = documented.difference(&registered).collect();
    assert!(
        undocumented.is_empty(),
        "registered, not in the README: {undocumented:?}"
    );
    assert!(
        unregistered.is_empty(),
        "in the README, not registered: {unregistered:?}"
    );
    assert!(ENV_VARS.iter().all(|v| !v.meaning.trim().is_empty()));
}

/// Reads whose name is not a literal: where the names come from.
enum Names {
    /// Names the operator gives in a task file: passed through, not ours.
    Operator,
    /// One of these fixed names, each a literal in the same file.
    Fixed(&'static [&'static str]),
}

const PROVIDER: &[&str] = &[
    "OPENAI_API_KEY",
    "OPENAI_MODEL",
    "OPENAI_BASE_URL",
    "OPENAI_COMPATIBLE_API_KEY",
    "OPENAI_COMPATIBLE_MODEL",
    "OPENAI_COMPATIBLE_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_BASE_URL",
    "OPENROUTER_API_KEY",
    "OPENROUTER_MODEL",
    "OPENROUTER_BASE_URL",
];
const KEYS: &[&str] = &[
    "OPENAI_API_KEY",
    "OPENAI_COMPATIBLE_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
];

/// Every read in the sources whose argument is not a string literal, by file and
/// argument text. A new one fails the test until it is listed here, with its names.
fn dynamic(file: &str, arg: &str) -> Option<(Names, &'static str)> {
    Some(match (file, arg) {
        ("src/cli/provider_args.rs", "k") => (Names::Fixed(PROVIDER), "src/provider/factory.rs"),
        (
            "src/cli/sandbox_cmd.rs" | "src/cli/mcp.rs" | "src/cli/audit.rs" | "src/cli/report.rs",
            "k",
        )
        | ("src/cli/config_cmd.rs", "var") => (Names::Fixed(KEYS), "src/provider/factory.rs"),
        ("src/otel/send.rs", "ENDPOINT_ENV") => (
            Names::Fixed(&["OTEL_EXPORTER_OTLP_ENDPOINT"]),
            "src/otel/send.rs",
        ),
        ("src/otel/build.rs", "CONTENT_ENV") => (
            Names::Fixed(&["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"]),
            "src/otel/build.rs",
        ),
        ("src/cli/otel_live.rs", "send::HEADERS_ENV")
        | ("src/cli/export_otlp.rs", "otel::send::HEADERS_ENV") => (
            Names::Fixed(&["OTEL_EXPORTER_OTLP_HEADERS"]),
            "src/otel/send.rs",
        ),
        ("src/cli/layered.rs", "k") => (
            Names::Fixed(&[
                "IO_HARNESS_PROVIDER",
                "IO_HARNESS_MODEL",
                "IO_HARNESS_BASE_URL",
            ]),
            "src/config/mod.rs",
        ),
        ("src/verify/command.rs", "name") => (
            Names::Fixed(&[
                "PATH",
                "HOME",
                "LANG",
                "LC_ALL",
                "TERM",
                "USER",
                "TMPDIR",
                "CARGO_HOME",
                "RUSTUP_HOME",
                "RUSTUP_TOOLCHAIN",
            ]),
            "src/verify/command.rs",
        ),
        ("src/mcp/client/stdio.rs", "k") => (
            Names::Fixed(&["PATH", "HOME", "LANG", "TERM"]),
            "src/mcp/client/stdio.rs",
        ),
        ("src/taskfile/verify_program.rs", "var") => (
            Names::Fixed(&["CARGO_HOME", "RUSTUP_HOME"]),
            "src/taskfile/verify_program.rs",
        ),
        ("crates/io-harness-sandbox/src/linux/host.rs", "var") => (
            Names::Fixed(&["CARGO_HOME", "RUSTUP_HOME"]),
            "crates/io-harness-sandbox/src/linux/host.rs",
        ),
        ("src/exec/standalone.rs", "name")
        | ("src/mcp/client/stdio.rs", "n")
        | ("src/mcp/client/http.rs", "var")
        | ("src/run/mod.rs", "&n") => (Names::Operator, ""),
        _ => return None,
    })
}

fn sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root().join("src")];
    for c in std::fs::read_dir(root().join("crates")).unwrap().flatten() {
        stack.push(c.path().join("src"));
    }
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The text between the parenthesis at `open` and its match.
fn argument(text: &str, open: usize) -> &str {
    let mut depth = 0;
    for (i, c) in text[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return text[open + 1..open + i].trim();
                }
            }
            _ => {}
        }
    }
    ""
}

/// The line `at` falls in.
fn line_of(text: &str, at: usize) -> &str {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    &text[start..end]
}

/// Whether `at` is in a `//` comment (doc comments included).
fn in_comment(text: &str, at: usize) -> bool {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[start..at].contains("//")
}

#[test]
fn every_environment_read_in_the_sources_names_a_registered_variable() {
    let registered = |n: &str| io_harness::env_vars::lookup(n).is_some();
    let mut problems = Vec::new();
    let mut reads = 0;
    for path in sources() {
        let rel = path
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let calls = ["env::var(", "env::var_os("];
        for call in calls {
            for (at, _) in text.match_indices(call) {
                if in_comment(&text, at) {
                    continue;
                }
                reads += 1;
                let arg = argument(&text, at + call.len() - 1);
                if let Some(name) = arg.strip_prefix('"').and_then(|a| a.strip_suffix('"')) {
                    if !registered(name) {
                        problems.push(format!("{rel}: reads {name}, not in env_vars"));
                    }
                    continue;
                }
                match dynamic(&rel, arg) {
                    None => problems.push(format!(
                        "{rel}: reads `{arg}`: register the names it takes (tests/it/docs_env.rs)"
                    )),
                    Some((Names::Operator, _)) => {}
                    Some((Names::Fixed(names), defined)) => {
                        let def = std::fs::read_to_string(root().join(defined)).unwrap();
                        for n in names {
                            if !registered(n) {
                                problems.push(format!("{rel}: reads {n}, not in env_vars"));
                            }
                            if !def.contains(&format!("\"{n}\"")) {
                                problems.push(format!("{defined} no longer names {n}"));
                            }
                        }
                    }
                }
            }
        }
        // clap's `env = "…"` reads too.
        for (at, _) in text.match_indices("env = \"") {
            if !line_of(&text, at).trim_start().starts_with("#[arg(") {
                continue;
            }
            let rest = &text[at + 7..];
            let name = &rest[..rest.find('"').unwrap()];
            if name.chars().all(|c| c.is_ascii_uppercase() || c == '_') && !registered(name) {
                problems.push(format!("{rel}: clap reads {name}, not in env_vars"));
            }
        }
    }
    assert!(reads > 20, "the scan found only {reads} reads");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn tools_prints_what_a_run_offers_and_docs_tools_md_agrees() {
    let f = Fixture::new();
    let out = f.cmd(&["tools", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["schema_version"], 1);
    let printed = printed["tools"].as_array().unwrap().clone();
    // What a real run sent: its first request's tools.
    f.write("t/ws/a.txt", "a\n");
    f.write("t/script.jsonl", "{\"text\": \"done\"}\n");
    let task = f.write(
        "t/task.toml",
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = { file = \"a.txt\", needle = \"a\" }\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
    );
    assert_eq!(
        f.cmd(&["run", task.to_str().unwrap()]).status.code(),
        Some(0)
    );
    let body: serde_json::Value =
        serde_json::from_slice(&f.cmd(&["show", "1", "--prompt", "1"]).stdout).unwrap();
    assert_eq!(
        body["tools"].as_array().unwrap(),
        &printed,
        "tools drifted from the request"
    );
    // The docs page: a section per tool with its schema.
    let doc = std::fs::read_to_string(root().join("docs/tools.md")).unwrap();
    let sections: Vec<&str> = doc.split("\n## `").skip(1).collect();
    assert_eq!(
        sections.len(),
        printed.len(),
        "docs/tools.md has a section per tool"
    );
    for (section, tool) in sections.iter().zip(&printed) {
        let name = tool["name"].as_str().unwrap();
        assert!(
            section.starts_with(&format!("{name}`")),
            "{name}: {section:.40}"
        );
        let json = section
            .split("```json\n")
            .nth(1)
            .and_then(|s| s.split("\n```").next())
            .unwrap_or_else(|| panic!("{name}: no schema block"));
        let schema: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(
            schema, tool["input_schema"],
            "docs/tools.md's {name} schema drifted"
        );
        assert!(
            section.contains(tool["description"].as_str().unwrap()),
            "{name}'s description"
        );
    }
    let out = f.cmd(&["tools"]);
    assert!(
        text(&out.stdout).contains("edit_file\n"),
        "{}",
        text(&out.stdout)
    );
}
