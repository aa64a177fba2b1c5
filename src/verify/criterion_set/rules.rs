//! Which workspace files belong to a command gate's criterion set: per ecosystem (of
//! the gate's unwrapped argv, [`classify`]) the files that redirect execution, whole
//! or by section, plus the operator's `criterion_paths`, minus `criterion_exclude`.
//! The README's "Criterion set" table lists the same defaults.

use globset::{Glob, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};

use crate::contract::CriterionSet;
use crate::verify::ecosystem::{Ecosystem, classify};

/// How a sectioned file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// TOML: a section is a dotted key path (`tool.pytest`, `lib.harness`).
    Toml,
    /// INI: a section is a `[name]` header (`name*` also matches `name:…`).
    Ini,
    /// JSON: a section is a top-level key.
    Json,
    /// `go.mod`: a section is a directive (`replace`, `toolchain`).
    GoMod,
}

/// Files of which only some sections redirect execution.
struct SectionRule {
    glob: &'static str,
    format: Format,
    sections: &'static [&'static str],
}

/// The modules a Python test runner imports (pytest 9 and its plugins, unittest),
/// which a module of that name on `sys.path` before the real one would replace.
const PY_SHADOWED: &str = "{pytest,_pytest,py,pluggy,iniconfig,packaging,pygments,\
unittest,doctest,abc,argparse,ast,asyncio,atexit,base64,bdb,binascii,bisect,bz2,\
calendar,cmd,code,codecs,codeop,collections,concurrent,contextlib,contextvars,copy,\
copyreg,csv,dataclasses,datetime,decimal,difflib,dis,email,encodings,enum,errno,\
faulthandler,fcntl,fnmatch,functools,gc,genericpath,gettext,glob,hashlib,heapq,html,\
importlib,inspect,io,ipaddress,itertools,json,keyword,linecache,locale,logging,lzma,\
math,ntpath,numbers,opcode,operator,os,pathlib,pdb,platform,posixpath,pprint,queue,\
quopri,random,re,readline,reprlib,select,selectors,shlex,shutil,signal,site,socket,\
ssl,stat,string,struct,subprocess,tempfile,textwrap,threading,time,token,tokenize,\
traceback,types,typing,typing_extensions,unicodedata,urllib,uuid,warnings,weakref,xml,\
zipfile,zipimport,zlib,tomllib,tomli,exceptiongroup,colorama,array,runpy,sysconfig,\
pkgutil,optparse,getopt,zoneinfo,sqlite3,pickle,marshal,builtins,attr,attrs}";

fn python_whole() -> Vec<String> {
    let mut v: Vec<String> = [
        "**/conftest.py",
        "**/pytest.ini",
        "**/.pytest.ini",
        "**/pytest.toml",
        "**/.pytest.toml",
        "**/sitecustomize.py",
        "**/usercustomize.py",
        // Python reads `.pth` files in site directories only (elsewhere `.pth` is
        // PyTorch's weights, the agent's work).
        "**/site-packages/*.pth",
        "**/dist-packages/*.pth",
        // A plugin registered by a distribution's entry points (`[pytest11]`).
        "**/*.dist-info/entry_points.txt",
        "**/*.egg-info/entry_points.txt",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // A runner's module shadowed from the directories put first on `sys.path`: the
    // root (`python -m`) and the usual test directories (pytest's rootdir insertion).
    for dir in ["", "tests/", "test/"] {
        // A module, a regular package (its `__init__`: a directory of data files
        // imports nothing) or an extension module of the runner's name.
        v.push(format!("{dir}{PY_SHADOWED}.py"));
        v.push(format!("{dir}{PY_SHADOWED}/__init__.py"));
        v.push(format!("{dir}{PY_SHADOWED}/__init__.*so"));
        v.push(format!("{dir}{PY_SHADOWED}.so"));
        v.push(format!("{dir}{PY_SHADOWED}.*.so"));
    }
    v
}

const PY_SECTIONS: &[SectionRule] = &[
    SectionRule {
        glob: "**/pyproject.toml",
        format: Format::Toml,
        sections: &["tool.pytest", "tool.tox"],
    },
    SectionRule {
        glob: "**/setup.cfg",
        format: Format::Ini,
        sections: &["tool:pytest"],
    },
    SectionRule {
        glob: "**/tox.ini",
        format: Format::Ini,
        sections: &["pytest", "tox", "testenv*"],
    },
];

/// Bytecode is never kept: it is removed before a Python gate (outside a virtual
/// environment's `site-packages`), so a planted `.pyc` cannot stand in for a source.
const PY_PURGE: &[&str] = &["**/__pycache__/**", "**/*.pyc"];

const CARGO_WHOLE: &[&str] = &[
    "**/.cargo/config.toml",
    "**/.cargo/config",
    "**/rust-toolchain.toml",
    "**/rust-toolchain",
];

const CARGO_SECTIONS: &[SectionRule] = &[SectionRule {
    glob: "**/Cargo.toml",
    format: Format::Toml,
    sections: &[
        "patch",
        "replace",
        "test",
        "lib.harness",
        "lib.test",
        "package.autotests",
        "package.autolib",
        "workspace",
    ],
}];

const NODE_WHOLE: &[&str] = &[
    "**/.npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pnpmfile.cjs",
    "bunfig.toml",
    "jest.config.*",
    "**/babel.config.*",
    "**/.babelrc",
    "**/.babelrc.*",
    "vitest.config.*",
    ".mocharc*",
    "**/node_modules/.bin/**",
];

const NODE_SECTIONS: &[SectionRule] = &[SectionRule {
    glob: "**/package.json",
    format: Format::Json,
    sections: &["scripts", "jest", "mocha", "ava", "config", "babel"],
}];

const GO_WHOLE: &[&str] = &[
    "go.work",
    "go.work.sum",
    "**/go.work",
    "vendor/**",
    "go.env",
    ".config/go/env",
];

const GO_SECTIONS: &[SectionRule] = &[SectionRule {
    glob: "**/go.mod",
    format: Format::GoMod,
    sections: &["replace", "toolchain", "godebug"],
}];

const MAKE_WHOLE: &[&str] = &["**/Makefile", "**/makefile", "**/GNUmakefile", "**/*.mk"];

/// The default whole-file globs, section rules and purged globs of an ecosystem. A
/// Makefile can run anything, so `make` gets every ecosystem's set besides its own.
fn defaults(eco: Ecosystem) -> (Vec<String>, Vec<&'static SectionRule>, Vec<&'static str>) {
    let strs = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match eco {
        Ecosystem::Cargo => (strs(CARGO_WHOLE), CARGO_SECTIONS.iter().collect(), vec![]),
        Ecosystem::Python => (
            python_whole(),
            PY_SECTIONS.iter().collect(),
            PY_PURGE.to_vec(),
        ),
        Ecosystem::Node => (strs(NODE_WHOLE), NODE_SECTIONS.iter().collect(), vec![]),
        Ecosystem::Go => (strs(GO_WHOLE), GO_SECTIONS.iter().collect(), vec![]),
        Ecosystem::Make => {
            let mut whole = strs(MAKE_WHOLE);
            let mut sections = Vec::new();
            let mut purge = Vec::new();
            for e in [
                Ecosystem::Cargo,
                Ecosystem::Python,
                Ecosystem::Node,
                Ecosystem::Go,
            ] {
                let (w, s, p) = defaults(e);
                whole.extend(w);
                sections.extend(s);
                purge.extend(p);
            }
            (whole, sections, purge)
        }
        Ecosystem::Unknown => (vec![], vec![], vec![]),
    }
}

/// The files a `make` command's targets are named by (`make test` → `test`,
/// `make -C sub check` → `sub/check`; no target → `all`): a file of that name that
/// the agent added makes make find the target up to date and run nothing, so it
/// belongs to the set (the exact path only, never a directory's contents).
fn make_targets(argv: &[String]) -> Vec<String> {
    // Options whose value is the next argument.
    const WITH_VALUE: &[&str] = &[
        "-C",
        "-f",
        "-I",
        "-o",
        "-W",
        "--file",
        "--makefile",
        "--directory",
        "--include-dir",
        "--old-file",
        "--new-file",
        "--what-if",
        "--assume-old",
        "--assume-new",
    ];
    let mut dir = String::new();
    let mut targets = Vec::new();
    let mut args = argv.iter().skip(1).peekable();
    while let Some(a) = args.next() {
        // `-j 2`, `-l 4`: an optional numeric value.
        if matches!(a.as_str(), "-j" | "-l" | "--jobs" | "--load-average") {
            if args.peek().is_some_and(|n| n.parse::<f64>().is_ok()) {
                args.next();
            }
        } else if a == "-C" || a == "--directory" {
            if let Some(d) = args.next() {
                dir = format!("{}/", d.trim_start_matches("./").trim_end_matches('/'));
            }
        } else if let Some(d) = a.strip_prefix("-C").filter(|d| !d.is_empty()) {
            dir = format!("{}/", d.trim_start_matches("./").trim_end_matches('/'));
        } else if WITH_VALUE.contains(&a.as_str()) {
            args.next();
        } else if !a.starts_with('-') && !a.contains('=') {
            targets.push(a.clone());
        }
    }
    if targets.is_empty() {
        targets.push("all".to_string());
    }
    targets
        .into_iter()
        .filter(|t| !t.contains("..") && !t.starts_with('/'))
        .map(|t| format!("{dir}{}", t.trim_start_matches("./")))
        .collect()
}

/// A glob as the criterion set matches it: `*` stays inside one path component.
fn glob(pattern: &str) -> Result<Glob, String> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| format!("{pattern:?}: {e}"))
}

/// The operator's entries: each as given and, for a directory, everything beneath.
fn operator_globs(b: &mut GlobSetBuilder, entries: &[String]) -> Result<(), String> {
    for e in entries {
        let e = e.trim_start_matches("./").trim_end_matches('/');
        b.add(glob(e)?);
        b.add(glob(&format!("{e}/**"))?);
    }
    Ok(())
}

/// Which files of a workspace belong to one gate's criterion set.
pub(crate) struct Selection {
    whole: GlobSet,
    purge: GlobSet,
    exclude: GlobSet,
    sections: Vec<(GlobMatcher, Format, &'static [&'static str])>,
}

impl Selection {
    /// The set of the gate `argv` with the operator's `set.paths` and `set.exclude`.
    pub(crate) fn new(argv: &[String], set: &CriterionSet) -> Result<Self, String> {
        let command = classify(argv);
        let (whole_globs, rules, purge_globs) = defaults(command.ecosystem);
        let mut whole = GlobSetBuilder::new();
        for g in &whole_globs {
            whole.add(glob(g)?);
        }
        if command.ecosystem == Ecosystem::Make {
            for t in make_targets(&command.unwrapped) {
                whole.add(glob(&globset::escape(&t))?);
            }
        }
        operator_globs(&mut whole, &set.paths)?;
        let mut purge = GlobSetBuilder::new();
        for g in purge_globs {
            purge.add(glob(g)?);
        }
        let mut exclude = GlobSetBuilder::new();
        operator_globs(&mut exclude, &set.exclude)?;
        let sections = rules
            .into_iter()
            .map(|r| Ok((glob(r.glob)?.compile_matcher(), r.format, r.sections)))
            .collect::<Result<_, String>>()?;
        let built = |b: GlobSetBuilder| b.build().map_err(|e| e.to_string());
        Ok(Self {
            whole: built(whole)?,
            purge: built(purge)?,
            exclude: built(exclude)?,
            sections,
        })
    }

    /// `rel` is kept and restored whole (and removed when the agent added it).
    pub(crate) fn whole(&self, rel: &str) -> bool {
        !self.exclude.is_match(rel) && self.whole.is_match(rel)
    }

    /// `rel` is bytecode removed before every gate (never inside `site-packages`).
    pub(crate) fn purge(&self, rel: &str) -> bool {
        !self.exclude.is_match(rel)
            && !rel.split('/').any(|c| c == "site-packages")
            && self.purge.is_match(rel)
    }

    /// A symlink at `rel` matters to the set: it is a file of the set, or it could
    /// stand for a directory holding one (`.cargo` → a directory with a
    /// `config.toml`, a `node_modules/.bin`, a shadowing package, bytecode).
    pub(crate) fn link_matters(&self, rel: &str) -> bool {
        const PROBES: &[&str] = &[
            "config.toml",
            "config",
            ".bin/node",
            "node",
            "modules.txt",
            "env",
            "go/env",
            "__init__.py",
            "conftest.py",
            "x.pyc",
        ];
        self.whole(rel)
            || self.sections_of(rel).is_some()
            || PROBES.iter().any(|p| {
                let child = format!("{rel}/{p}");
                self.whole(&child) || self.purge(&child)
            })
    }

    /// The format and sections of `rel` that are kept and restored, when it is a
    /// sectioned file of the set (and not already whole).
    pub(crate) fn sections_of(&self, rel: &str) -> Option<(Format, &'static [&'static str])> {
        if self.exclude.is_match(rel) || self.whole(rel) {
            return None;
        }
        self.sections
            .iter()
            .find(|(m, _, _)| m.is_match(rel))
            .map(|(_, f, s)| (*f, *s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(cmd: &str, paths: &[&str], exclude: &[&str]) -> Selection {
        let argv: Vec<String> = cmd.split(' ').map(String::from).collect();
        let set = CriterionSet {
            paths: paths.iter().map(|s| s.to_string()).collect(),
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
            baseline: None,
        };
        Selection::new(&argv, &set).unwrap()
    }

    #[test]
    fn go_covers_replace_work_vendor_and_goflags() {
        let s = sel("go test ./...", &[], &[]);
        for f in [
            "go.work",
            "go.work.sum",
            "vendor/modules.txt",
            "vendor/a/b.go",
            "go.env",
            ".config/go/env",
        ] {
            assert!(s.whole(f), "{f}");
        }
        assert_eq!(
            s.sections_of("go.mod"),
            Some((Format::GoMod, &["replace", "toolchain", "godebug"][..]))
        );
        assert!(s.sections_of("sub/go.mod").is_some());
        assert!(!s.whole("main.go") && !s.whole("pkg/x_test.go"));
        assert!(!s.whole("conftest.py") && !s.whole(".cargo/config.toml"));
        assert!(s.sections_of("package.json").is_none());
    }

    #[test]
    fn each_ecosystem_has_its_own_set_and_unknown_only_the_operators() {
        let cargo = sel("cargo test --offline", &[], &[]);
        assert!(cargo.whole(".cargo/config.toml") && cargo.whole("rust-toolchain.toml"));
        let (_, sections) = cargo.sections_of("Cargo.toml").unwrap();
        // Adversary breaks: `autotests = false` and a `[workspace]` with other
        // (default) members dropped the criterion's tests.
        for key in ["package.autotests", "workspace", "patch"] {
            assert!(sections.contains(&key), "{key}");
        }
        assert!(!cargo.whole("src/lib.rs") && !cargo.whole("Cargo.lock"));

        let py = sel("python -m pytest -q", &[], &[]);
        for f in [
            "conftest.py",
            "tests/deep/conftest.py",
            "pytest.ini",
            "sitecustomize.py",
            "venv/lib/python3.11/site-packages/x.pth",
            "pytest.py",
            "unittest/__init__.py",
            "tests/json.py",
            // Adversary breaks (issue 14): pytest 9's own config files, an entry-point
            // plugin, a runner module shadowed as a bare extension or a `tomllib`.
            "pytest.toml",
            ".pytest.toml",
            "cheat-1.0.dist-info/entry_points.txt",
            "cheat.egg-info/entry_points.txt",
            "json.so",
            "tomllib.py",
        ] {
            assert!(py.whole(f), "{f}");
        }
        // Adversary honest failures: data files in a directory named like a stdlib
        // module, and PyTorch weights, are the agent's work.
        assert!(!py.whole("html/welcome.html") && !py.whole("models/weights.pth"));
        // The agent's own package may have a module named like the stdlib.
        assert!(!py.whole("mypkg/json.py") && !py.whole("src/app.py"));
        assert!(py.purge("tests/__pycache__/test_x.cpython-311.pyc"));
        assert!(!py.purge(".venv/lib/python3.11/site-packages/__pycache__/a.pyc"));
        assert!(py.sections_of("pyproject.toml").is_some());

        let node = sel("npm test", &[], &[]);
        assert!(node.whole(".npmrc") && node.whole("node_modules/.bin/jest"));
        assert!(node.whole("babel.config.js") && node.whole(".babelrc"));
        assert!(!node.whole("node_modules/left-pad/index.js"));
        assert_eq!(
            node.sections_of("package.json").map(|s| s.0),
            Some(Format::Json)
        );

        let make = sel("make check", &[], &[]);
        assert!(make.whole("Makefile") && make.whole("build/rules.mk"));
        assert!(make.whole(".cargo/config.toml") && make.whole("conftest.py"));
        // A file named like a target (B10): the exact path, not a directory's files.
        let named = sel("make -C sub -j 2 test lint V=1", &[], &[]);
        assert!(named.whole("sub/test") && named.whole("sub/lint"));
        assert!(!named.whole("sub/test/x.py") && !named.whole("test") && !named.whole("V=1"));
        assert!(make.whole("check") && sel("make", &[], &[]).whole("all"));

        let unknown = sel("./run-tests", &["scripts/check.sh", "fixtures"], &[]);
        assert!(!unknown.whole(".cargo/config.toml") && !unknown.whole("conftest.py"));
        assert!(unknown.whole("scripts/check.sh") && unknown.whole("fixtures/a/b.txt"));
        assert!(unknown.sections_of("Cargo.toml").is_none());
    }

    #[test]
    fn exclude_narrows_defaults_and_paths() {
        let s = sel(
            "pytest",
            &["data/**"],
            &["tests/conftest.py", "data/big.bin", "pyproject.toml"],
        );
        assert!(s.whole("conftest.py") && !s.whole("tests/conftest.py"));
        assert!(s.whole("data/a.txt") && !s.whole("data/big.bin"));
        assert!(s.sections_of("pyproject.toml").is_none());
    }
}
