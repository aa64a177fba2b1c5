//! Which ecosystem and test runner a gate command belongs to, read from its argv after
//! unwrapping the launchers people put in front (`python -m pytest`, `npx jest`,
//! `npm test`, `uv run`, `env`, `timeout`, …). The criterion set and the test counts
//! of a command gate are chosen from this; an unknown program gets neither.

use std::path::Path;

/// The ecosystem of a gate command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ecosystem {
    /// `cargo …`.
    Cargo,
    /// `python`, `pytest`, `tox`, `uv run …`.
    Python,
    /// `node`, `npm`, `npx`, `yarn`, `pnpm`, `jest`, `vitest`.
    Node,
    /// `go …`.
    Go,
    /// `make`.
    Make,
    /// Anything else: only the operator's `criterion_paths` apply.
    Unknown,
}

/// The test runner of a gate command, when the harness recognises one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Runner {
    /// `cargo test` (libtest's summary lines).
    CargoTest,
    /// `pytest` / `python -m pytest`.
    Pytest,
    /// `jest` (also through `npx`).
    Jest,
    /// `node --test`.
    NodeTest,
    /// `go test` (`-json` gives per-test events).
    GoTest,
}

/// What a gate command is, as far as the harness can tell from its argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Its ecosystem.
    pub ecosystem: Ecosystem,
    /// Its runner, when recognised.
    pub runner: Option<Runner>,
    /// The argv from the program on (launchers removed).
    pub unwrapped: Vec<String>,
}

/// The file name of a program argument (`/usr/bin/python3.12` → `python3.12`).
fn base(arg: &str) -> &str {
    Path::new(arg)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(arg)
}

fn is_python(name: &str) -> bool {
    name == "python"
        || name
            .strip_prefix("python")
            .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// Drops launchers that only run the rest: `env [VAR=…] prog`, `timeout N prog`,
/// `nice`, `uv run`, `poetry run`, `pipenv run`, `pdm run`, `hatch run`, `npx`,
/// `pnpm exec`, `yarn exec`, `bunx`.
fn unwrap(argv: &[String]) -> &[String] {
    let mut rest = argv;
    for _ in 0..8 {
        let Some(first) = rest.first() else {
            return rest;
        };
        let skip = match base(first) {
            "env" => {
                1 + rest[1..]
                    .iter()
                    .take_while(|a| a.contains('=') || a.starts_with('-'))
                    .count()
            }
            "timeout" => {
                // Options (`-s SIG` and `-k DUR` take a value), then the duration.
                let mut i = 1;
                while let Some(a) = rest.get(i).filter(|a| a.starts_with('-')) {
                    i += if matches!(a.as_str(), "-s" | "-k" | "--signal" | "--kill-after") {
                        2
                    } else {
                        1
                    };
                }
                i + 1
            }
            "nice" | "nohup" | "npx" | "bunx" | "xvfb-run" => {
                1 + rest[1..].iter().take_while(|a| a.starts_with('-')).count()
            }
            "uv" | "poetry" | "pipenv" | "pdm" | "hatch"
                if rest.get(1).map(String::as_str) == Some("run") =>
            {
                2 + rest[2..].iter().take_while(|a| a.starts_with('-')).count()
            }
            "pnpm" | "yarn" if rest.get(1).map(String::as_str) == Some("exec") => {
                2 + rest[2..].iter().take_while(|a| a.starts_with('-')).count()
            }
            _ => 0,
        };
        if skip == 0 || skip >= rest.len() {
            return rest;
        }
        rest = &rest[skip..];
    }
    rest
}

/// Classifies a gate command.
///
/// ```
/// use io_harness::verify::ecosystem::{classify, Ecosystem, Runner};
/// let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
/// let c = classify(&argv("uv run python -m pytest -q"));
/// assert_eq!((c.ecosystem, c.runner), (Ecosystem::Python, Some(Runner::Pytest)));
/// assert_eq!(classify(&argv("npm test")).ecosystem, Ecosystem::Node);
/// assert_eq!(classify(&argv("./check.sh")).ecosystem, Ecosystem::Unknown);
/// ```
pub fn classify(argv: &[String]) -> Command {
    let rest = unwrap(argv);
    let unwrapped = rest.to_vec();
    let arg = |i: usize| rest.get(i).map(String::as_str);
    let Some(first) = rest.first() else {
        return Command {
            ecosystem: Ecosystem::Unknown,
            runner: None,
            unwrapped,
        };
    };
    let name = base(first);
    let (ecosystem, runner) = match name {
        "cargo" => (
            Ecosystem::Cargo,
            // `cargo test`, `cargo +toolchain test`, `cargo nextest run` (libtest lines too).
            rest[1..]
                .iter()
                .find(|a| !a.starts_with('+') && !a.starts_with('-'))
                .filter(|a| *a == "test")
                .map(|_| Runner::CargoTest),
        ),
        "pytest" | "py.test" => (Ecosystem::Python, Some(Runner::Pytest)),
        "tox" | "nox" => (Ecosystem::Python, None),
        n if is_python(n) => {
            // `-m pytest`, also written `-mpytest` (or after other flags: `-I -m`).
            let module = rest[1..].iter().enumerate().find_map(|(i, a)| {
                if a == "-m" {
                    rest.get(i + 2).map(String::as_str)
                } else {
                    a.strip_prefix("-m").filter(|m| !m.is_empty())
                }
            });
            (
                Ecosystem::Python,
                module.filter(|m| *m == "pytest").map(|_| Runner::Pytest),
            )
        }
        "jest" => (Ecosystem::Node, Some(Runner::Jest)),
        "node" | "bun" | "deno" => (
            Ecosystem::Node,
            rest.iter()
                .any(|a| a == "--test")
                .then_some(Runner::NodeTest),
        ),
        "npm" | "yarn" | "pnpm" | "vitest" | "mocha" => (Ecosystem::Node, None),
        "go" => (
            Ecosystem::Go,
            (arg(1) == Some("test")).then_some(Runner::GoTest),
        ),
        "make" | "gmake" => (Ecosystem::Make, None),
        _ => (Ecosystem::Unknown, None),
    };
    Command {
        ecosystem,
        runner,
        unwrapped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> (Ecosystem, Option<Runner>) {
        let argv: Vec<String> = s.split(' ').map(String::from).collect();
        let c = classify(&argv);
        (c.ecosystem, c.runner)
    }

    #[test]
    fn launchers_are_unwrapped_to_the_program_they_run() {
        assert_eq!(
            c("python3 -m pytest -q"),
            (Ecosystem::Python, Some(Runner::Pytest))
        );
        // Adversary break: `-mpytest` was trusted on its exit code alone.
        for argv in ["python3 -mpytest -q", "python3 -I -m pytest"] {
            assert_eq!(c(argv), (Ecosystem::Python, Some(Runner::Pytest)), "{argv}");
        }
        assert_eq!(
            c("/usr/bin/python3.12 -m pytest"),
            (Ecosystem::Python, Some(Runner::Pytest))
        );
        assert_eq!(
            c("env FOO=1 pytest"),
            (Ecosystem::Python, Some(Runner::Pytest))
        );
        assert_eq!(
            c("timeout -s KILL 30 go test ./..."),
            (Ecosystem::Go, Some(Runner::GoTest))
        );
        assert_eq!(c("npx jest --ci"), (Ecosystem::Node, Some(Runner::Jest)));
        assert_eq!(c("node --test"), (Ecosystem::Node, Some(Runner::NodeTest)));
        assert_eq!(
            c("poetry run pytest"),
            (Ecosystem::Python, Some(Runner::Pytest))
        );
        assert_eq!(c("pnpm exec jest"), (Ecosystem::Node, Some(Runner::Jest)));
        assert_eq!(c("npm test"), (Ecosystem::Node, None));
        assert_eq!(
            c("cargo +stable test --offline"),
            (Ecosystem::Cargo, Some(Runner::CargoTest))
        );
        assert_eq!(c("cargo build"), (Ecosystem::Cargo, None));
        assert_eq!(c("make check"), (Ecosystem::Make, None));
        assert_eq!(c("python check.py"), (Ecosystem::Python, None));
        assert_eq!(c("./run-tests"), (Ecosystem::Unknown, None));
        assert_eq!(c("pythonista x"), (Ecosystem::Unknown, None));
    }
}
