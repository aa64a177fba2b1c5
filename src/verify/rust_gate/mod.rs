//! Rust gates: a subject file judged by a Rust criterion (test source), in ordered
//! phases, each a separate `rustc` process run in the run's sandbox:
//!
//! 1. `subject-compile`: the subject compiles on its own as a library crate.
//! 2. `subject-emptied`: a copy of the subject with a harness marker item
//!    (`pub fn __io_harness_marker_<random>() {}`) appended is compiled, then a second
//!    crate that calls the marker through `--extern`. If that second crate cannot name
//!    it, a crate attribute such as `#![cfg(any())]` stripped the subject's items and
//!    nothing was type-checked.
//! 3. `criterion-compile`: the criterion compiles as a `--test` crate of its own that
//!    links the subject with `--extern subject=…`. Being separate crates, the subject
//!    cannot redefine `assert!`, `#[test]`, `core` or `std` for the criterion, nor
//!    delete what it calls and still compile. The harness's copy of the criterion also
//!    pins the prelude, the primitive types and the std macros it invokes over any
//!    glob import (module `guard`), so `use subject::*` cannot hand it a lying `Some`,
//!    `String` or `assert_eq!`. Signatures the contract pins are checked first by a
//!    harness-written crate (module `signatures`): a return type with a lying
//!    `PartialEq` fails here, the signature named. A glob import of the subject is
//!    made explicit first (module `imports`), so a trait or a lowercase `const` the
//!    criterion does not name cannot change what its code means.
//! 4. `test-run`: the harness lists the criterion's tests from the criterion source
//!    (which the agent cannot edit), adds those the compiled binary lists beyond them
//!    (`--list`: tests a macro writes; the list can only add, never remove a declared
//!    test, and a declared test the binary lacks is the criterion's problem), then runs
//!    each by exact name in its own process with a fresh copy of the test binary. A
//!    test passes only when its process exits 0, libtest reports one test running and
//!    that very test ok, *and* the harness's verdict for it is there: a guard the
//!    harness put at the start of every test body writes `<nonce> <name>` only after
//!    the function returned (module `channel`). A list with no tests, a test that did
//!    not run, a cap kill or a timeout never passes; a pass is recorded with trust
//!    level `harness-channel` and the tests counted by name. In the sandbox a test
//!    process may start no other process or program (`RunSpec::single_process`), so
//!    no child of it can search for the accepted answer or report the verdict.
//!
//! Everything is built in a per-gate directory under the harness's cache
//! (`$XDG_CACHE_HOME/io-harness/gates/<run>-<pid>-<n>/<n>`), outside the agent's writable area,
//! rebuilt every gate and removed afterwards. Each test process gets its own directory
//! as its only writable place, so one test cannot replace the binary a later test runs.
//!
//! **Known limit.** The subject's code runs inside the criterion's test process. An
//! early exit, a forged transcript, a panic hook or a life-before-main constructor no
//! longer passes (none of them leaves the verdict), but code that reverse-engineers
//! its own process — finds the nonce in the binary it runs in and writes the verdict
//! itself — is not told apart. That is what trust level `harness-channel` records:
//! the verdict came from harness code in a process the subject shares. The channel
//! needs libtest (stable Rust's only `#[test]` runner); a test whose attribute or body
//! the harness cannot instrument fails for want of a verdict rather than passing.

pub(crate) mod channel;
pub(crate) mod guard;
pub(crate) mod imports;
pub(crate) mod runner;
pub(crate) mod scan;
pub(crate) mod signatures;

use std::path::{Path, PathBuf};

use crate::exec::Executor;
use crate::tools::{ToolError, Workspace};

/// Wall-clock limit of one compile.
const COMPILE_WALL_SECS: u64 = 300;
/// Wall-clock limit of one test process.
const TEST_WALL_SECS: u64 = 120;

/// A phase of a Rust gate, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The subject does not compile on its own.
    SubjectCompile,
    /// It compiled but its items were stripped.
    SubjectEmptied,
    /// The criterion does not compile against it.
    CriterionCompile,
    /// A criterion test failed or did not run.
    TestRun,
}

impl Phase {
    /// The label recorded in a `gate_phase_failed` event.
    pub fn label(self) -> &'static str {
        match self {
            Self::SubjectCompile => "subject-compile",
            Self::SubjectEmptied => "subject-emptied",
            Self::CriterionCompile => "criterion-compile",
            Self::TestRun => "test-run",
        }
    }
}

/// What a Rust gate concluded.
#[derive(Debug, Clone)]
pub struct GateVerdict {
    /// The phase that failed, or `None` when every phase passed.
    pub failed: Option<Phase>,
    /// One or two sentences for the model and the record.
    pub summary: String,
    /// Bounded compiler or test output of the failing phase.
    pub output: Option<String>,
    /// What a pass rests on (set once tests ran).
    pub trust: Option<crate::verify::Trust>,
    /// The tests that ran, with their names.
    pub tests: Option<crate::verify::TestTally>,
}

impl GateVerdict {
    pub(crate) fn fail(phase: Phase, summary: impl Into<String>, output: Option<String>) -> Self {
        Self {
            failed: Some(phase),
            summary: format!("{}: {}", phase.label(), summary.into()),
            output,
            trust: None,
            tests: None,
        }
    }
}

/// Runs the phases of a Rust gate for `subject` (a workspace path) and `criterion`:
/// its `kept` content when the run keeps one (the file may have moved since), else
/// the file as it is now.
pub async fn check(
    subject: &Path,
    criterion: &Path,
    kept: Option<&str>,
    pinned: &[String],
    ws: &Workspace,
    exec: Option<&Executor>,
) -> GateVerdict {
    let source = match ws.read(&subject.to_string_lossy()) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(ToolError::NotFound(_)) => {
            return GateVerdict::fail(
                Phase::SubjectCompile,
                format!("{} does not exist", subject.display()),
                None,
            );
        }
        Err(e) => {
            return GateVerdict::fail(Phase::SubjectCompile, format!("cannot read: {e}"), None);
        }
    };
    let read = kept.map_or_else(|| std::fs::read_to_string(criterion), |k| Ok(k.to_string()));
    let crit = match read {
        Ok(c) => c,
        Err(e) => {
            return GateVerdict::fail(
                Phase::CriterionCompile,
                format!("cannot read criterion {}: {e}", criterion.display()),
                None,
            );
        }
    };
    let dir = match GateDir::create(exec) {
        Ok(d) => d,
        Err(e) => {
            return GateVerdict::fail(
                Phase::SubjectCompile,
                format!("cannot create the gate directory: {e}"),
                None,
            );
        }
    };
    let verdict = phases(&source, &crit, pinned, &dir.0, exec).await;
    drop(dir);
    verdict
}

/// The run's gate directory: `$XDG_CACHE_HOME/io-harness/gates/<run>-<pid>-<n>`,
/// outside the agent's writable area. The process id and a per-executor number make it
/// unique: run ids are per store, and two stores (two processes, or in-memory stores in
/// one process) number their runs alike. Gates checked outside a run share
/// `host-<pid>`.
pub(crate) fn run_base(exec: Option<&Executor>) -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    let pid = std::process::id();
    let name = match exec {
        // The executor lives as long as the run's session: its address names it.
        Some(e) => format!("{}-{pid}-{:x}", e.run_id(), std::ptr::from_ref(e) as usize),
        None => format!("host-{pid}"),
    };
    cache.join("io-harness").join("gates").join(name)
}

/// The per-gate build directory, removed when dropped.
pub(crate) struct GateDir(pub(crate) PathBuf);

impl GateDir {
    pub(crate) fn create(exec: Option<&Executor>) -> std::io::Result<Self> {
        let base = run_base(exec);
        std::fs::create_dir_all(&base)?;
        let mut recreated = 0;
        let mut n = 0u32;
        while n < 100_000 {
            let d = base.join(n.to_string());
            match std::fs::create_dir(&d) {
                Ok(()) => return Ok(Self(d)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
                // A finishing gate of the same run removed the emptied parent.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && recreated < 8 => {
                    recreated += 1;
                    std::fs::create_dir_all(&base)?;
                }
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other("no free gate directory"))
    }
}

impl Drop for GateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        // The run's directory goes too once its last gate is gone (fails while not empty).
        if let Some(run_dir) = self.0.parent() {
            let _ = std::fs::remove_dir(run_dir);
        }
    }
}

/// The real compiler of the active toolchain (`<sysroot>/bin/rustc`), so the sandbox
/// needs neither the rustup proxy nor its environment.
pub(crate) fn rustc() -> String {
    static RUSTC: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    RUSTC
        .get_or_init(|| {
            crate::verify::command::host_tool("rustc")
                .args(["--print", "sysroot"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .map(|root| Path::new(&root).join("bin").join("rustc"))
                .filter(|p| p.is_file())
                .map_or_else(|| "rustc".to_string(), |p| p.display().to_string())
        })
        .clone()
}

/// A random hex token the subject cannot predict when it is written.
pub(crate) fn random_hex() -> String {
    use std::io::Read;
    let mut buf = [0u8; 12];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf));
    if read.is_err() {
        // Not secret, only unpredictable to a file written before the gate ran.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let seed = format!("{t}-{}", std::process::id());
        use sha2::Digest;
        buf.copy_from_slice(&sha2::Sha256::digest(seed.as_bytes())[..12]);
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The harness's copy of a criterion: the operator's source with the guard's pins
/// (module `guard`) and the verdict channel's wrappers (module `channel`) inserted, and
/// the root pins and the channel's module appended. Insertions never add a line, so
/// the compiler's line numbers are the operator's.
pub(crate) fn criterion_copy(criterion: &str, nonce: &str) -> String {
    let g = guard::guard(criterion);
    let mut inserts = g.inserts;
    inserts.extend(channel::test_wrappers(criterion, nonce));
    inserts.sort_by_key(|(at, _)| *at);
    let mut out = String::with_capacity(criterion.len() + 4096);
    let mut last = 0;
    for (at, text) in inserts {
        out.push_str(&criterion[last..at]);
        out.push_str(&text);
        last = at;
    }
    out.push_str(&criterion[last..]);
    out.push('\n');
    out.push_str(&g.root);
    out.push_str(&channel::harness_module(nonce));
    out
}

/// The files of a file-form gate, written into its `build` directory.
struct Files {
    build: PathBuf,
    /// The subject as the agent wrote it.
    plain: PathBuf,
    /// The subject with the harness's marker item appended.
    marked: PathBuf,
    /// A crate that must name the marker.
    probe: PathBuf,
    /// The criterion with the guard and the verdict channel.
    criterion: PathBuf,
    /// The gate's nonce, in the criterion copy only.
    nonce: String,
}

impl Files {
    fn write(subject: &str, criterion: &str, dir: &Path) -> Result<Self, GateVerdict> {
        let io = |e: std::io::Error| {
            GateVerdict::fail(Phase::SubjectCompile, format!("gate directory: {e}"), None)
        };
        let build = dir.join("build");
        std::fs::create_dir_all(build.join("meta")).map_err(io)?;
        let marker = format!("__io_harness_marker_{}", random_hex());
        let nonce = random_hex();
        let files = Self {
            plain: build.join("subject.rs"),
            marked: build.join("subject_marked.rs"),
            probe: build.join("probe.rs"),
            criterion: build.join("criterion.rs"),
            build,
            nonce,
        };
        let writes = [
            (&files.plain, subject.to_string()),
            (
                &files.marked,
                format!("{subject}\n#[doc(hidden)]\n#[allow(dead_code)]\npub fn {marker}() {{}}\n"),
            ),
            (
                &files.probe,
                format!("pub fn probe() {{ ::subject::{marker}(); }}\n"),
            ),
            (&files.criterion, criterion_copy(criterion, &files.nonce)),
        ];
        for (p, text) in writes {
            std::fs::write(p, text).map_err(io)?;
        }
        Ok(files)
    }

    /// `rustc --edition 2021 --color never --crate-name <name>` and `rest`.
    fn rustc(rustc: &str, crate_name: &str, rest: &[&str]) -> Vec<String> {
        [
            rustc,
            "--edition",
            "2021",
            "--color",
            "never",
            "--crate-name",
            crate_name,
        ]
        .iter()
        .chain(rest)
        .map(|a| a.to_string())
        .collect()
    }

    /// Runs one compile in the build directory; a failure is `phase` failing with
    /// `why(status)` and the compiler's output.
    async fn compile(
        &self,
        exec: Option<&Executor>,
        argv: Vec<String>,
        phase: Phase,
        why: impl FnOnce(&crate::verify::CommandStatus) -> String,
    ) -> Result<(), GateVerdict> {
        let ran = runner::run(exec, &self.build, argv, COMPILE_WALL_SECS).await;
        if ran.ok() {
            return Ok(());
        }
        Err(GateVerdict::fail(
            phase,
            why(&ran.status),
            Some(ran.output.render()),
        ))
    }
}

async fn phases(
    subject: &str,
    criterion: &str,
    pinned: &[String],
    dir: &Path,
    exec: Option<&Executor>,
) -> GateVerdict {
    match run_phases(subject, criterion, pinned, dir, exec).await {
        Ok(v) | Err(v) => v,
    }
}

async fn run_phases(
    subject: &str,
    criterion: &str,
    pinned: &[String],
    dir: &Path,
    exec: Option<&Executor>,
) -> Result<GateVerdict, GateVerdict> {
    let files = Files::write(subject, criterion, dir)?;
    let rustc = rustc();
    let extern_subject = compile_subject(&files, &rustc, exec).await?;
    check_signatures(&files, &rustc, &extern_subject, pinned, exec).await?;
    explicit_globs(&files, &rustc, &extern_subject, criterion, exec).await?;
    // 3. criterion-compile: a separate --test crate linking the subject.
    let bin = files.build.join("criterion-tests");
    let argv = Files::rustc(
        &rustc,
        "criterion",
        &[
            "--test",
            "--extern",
            &extern_subject,
            "-o",
            &s(&bin),
            &s(&files.criterion),
        ],
    );
    files
        .compile(exec, argv, Phase::CriterionCompile, |st| {
            format!("the criterion does not compile against the subject (rustc {st})")
        })
        .await?;
    // 4. test-run: each listed test by exact name, in its own process and directory.
    run_tests(criterion, &bin, dir, exec, &files.nonce).await
}

/// The criterion's globs of the subject made explicit (module `imports`): the probe
/// crate tells which candidate names the subject has, and the criterion copy is
/// rewritten with those. Part of `criterion-compile`.
async fn explicit_globs(
    files: &Files,
    rustc: &str,
    extern_subject: &str,
    criterion: &str,
    exec: Option<&Executor>,
) -> Result<(), GateVerdict> {
    let Some((globs, probe)) = imports::probe(criterion, "subject") else {
        return Ok(());
    };
    let io = |e: std::io::Error| {
        GateVerdict::fail(
            Phase::CriterionCompile,
            format!("gate directory: {e}"),
            None,
        )
    };
    let path = files.build.join("imports.rs");
    std::fs::write(&path, &probe.text).map_err(io)?;
    let meta = s(&files.build.join("meta"));
    let argv = Files::rustc(
        rustc,
        "imports",
        &[
            "--crate-type",
            "rlib",
            "--emit=metadata",
            "--error-format=short",
            "--extern",
            extern_subject,
            "--out-dir",
            &meta,
            &s(&path),
        ],
    );
    let ran = runner::run(exec, &files.build, argv, COMPILE_WALL_SECS).await;
    let names = imports::resolved(&probe, &ran.output.render());
    let text = criterion_copy(&imports::rewrite(criterion, &globs, &names), &files.nonce);
    std::fs::write(&files.criterion, text).map_err(io)
}

/// The pinned signatures (module `signatures`): a harness-written crate that compiles
/// only when the subject's items have exactly those types. Part of
/// `criterion-compile`: what the criterion relies on is missing.
async fn check_signatures(
    files: &Files,
    rustc: &str,
    extern_subject: &str,
    pinned: &[String],
    exec: Option<&Executor>,
) -> Result<(), GateVerdict> {
    if pinned.is_empty() {
        return Ok(());
    }
    let check = signatures::check("subject", pinned, "signatures", 1);
    let path = files.build.join("signatures.rs");
    std::fs::write(&path, &check.text).map_err(|e| {
        GateVerdict::fail(
            Phase::CriterionCompile,
            format!("gate directory: {e}"),
            None,
        )
    })?;
    let meta = s(&files.build.join("meta"));
    let argv = Files::rustc(
        rustc,
        "signatures",
        &[
            "--crate-type",
            "rlib",
            "--emit=metadata",
            "--extern",
            extern_subject,
            "--out-dir",
            &meta,
            &s(&path),
        ],
    );
    let ran = runner::run(exec, &files.build, argv, COMPILE_WALL_SECS).await;
    if ran.ok() {
        return Ok(());
    }
    let out = ran.output.render();
    let mut failing = signatures::failing(&check, &s(&path), &out);
    if failing.is_empty() {
        failing = pinned.iter().map(String::as_str).collect();
    }
    Err(GateVerdict::fail(
        Phase::CriterionCompile,
        signatures::mismatch(&failing),
        Some(out),
    ))
}

/// Phases 1 and 2: the subject compiles alone, and with a harness item appended that
/// a second crate must be able to name (its items were not stripped). Returns the
/// `--extern` of the compiled subject.
async fn compile_subject(
    files: &Files,
    rustc: &str,
    exec: Option<&Executor>,
) -> Result<String, GateVerdict> {
    // 1. subject-compile: the subject alone (type-checked; metadata only).
    let meta = s(&files.build.join("meta"));
    let argv = Files::rustc(
        rustc,
        "subject",
        &[
            "--crate-type",
            "rlib",
            "--emit=metadata",
            "--out-dir",
            &meta,
            &s(&files.plain),
        ],
    );
    files
        .compile(exec, argv, Phase::SubjectCompile, |st| {
            format!("the subject does not compile on its own (rustc {st})")
        })
        .await?;
    // 2. subject-emptied: the marked copy, then a crate that must name the marker.
    let rlib = s(&files.build.join("libsubject.rlib"));
    let argv = Files::rustc(
        rustc,
        "subject",
        &["--crate-type", "rlib", "-o", &rlib, &s(&files.marked)],
    );
    files
        .compile(exec, argv, Phase::SubjectCompile, |st| {
            format!("the subject compiles alone but not with a harness item appended (rustc {st})")
        })
        .await?;
    let extern_subject = format!("subject={rlib}");
    let argv = Files::rustc(
        rustc,
        "probe",
        &[
            "--crate-type",
            "rlib",
            "--emit=metadata",
            "--extern",
            &extern_subject,
            "--out-dir",
            &meta,
            &s(&files.probe),
        ],
    );
    files
        .compile(exec, argv, Phase::SubjectEmptied, |_| {
            "the subject compiled but its items were stripped (a crate-level attribute such as \
             #![cfg(any())]?), so nothing in it was checked"
                .to_string()
        })
        .await?;
    Ok(extern_subject)
}

/// Each test the criterion's source lists, alone, by exact name.
async fn run_tests(
    criterion: &str,
    bin: &Path,
    dir: &Path,
    exec: Option<&Executor>,
    nonce: &str,
) -> Result<GateVerdict, GateVerdict> {
    let expected = (
        &scan::test_names(criterion)[..],
        scan::macro_written_tests(criterion),
    );
    let tests = tests_to_run(exec, dir, bin, expected, &[]).await?;
    if tests.is_empty() {
        return Err(GateVerdict::fail(
            Phase::TestRun,
            "the criterion defines no #[test] functions, so nothing ran",
            None,
        ));
    }
    for (i, name) in tests.iter().enumerate() {
        run_one(exec, dir, bin, i, name, (&[], None), nonce).await?;
    }
    Ok(GateVerdict {
        failed: None,
        summary: format!(
            "all {} criterion test(s) ran and passed: {}",
            tests.len(),
            tests.join(", ")
        ),
        output: None,
        // Every test passed through the channel: one without a verdict failed.
        trust: Some(crate::verify::Trust::HarnessChannel),
        tests: Some(crate::verify::TestTally {
            run: tests.len() as u32,
            passed: tests.len() as u32,
            names: tests.clone(),
        }),
    })
}

/// The tests a gate runs: those the operator's source declares, then any more the
/// compiled criterion lists (`--list`: tests a `macro_rules!` generates, which no scan
/// of the source sees). A declared test the binary lacks — commented out, `cfg`'d away
/// — is the criterion's problem, reported to the operator as such. The list comes from
/// a process that holds the subject's code too, so it only ever adds tests: a forged
/// list cannot remove a declared one, and a forged name fails when run by name.
pub(crate) async fn tests_to_run(
    exec: Option<&Executor>,
    dir: &Path,
    bin: &Path,
    (declared, macro_tests): (&[String], usize),
    read_only: &[PathBuf],
) -> Result<Vec<String>, GateVerdict> {
    let io =
        |e: std::io::Error| GateVerdict::fail(Phase::TestRun, format!("gate directory: {e}"), None);
    let list_dir = dir.join(format!("list-{}", random_hex()));
    std::fs::create_dir_all(&list_dir).map_err(io)?;
    let copy = list_dir.join("criterion-tests");
    std::fs::copy(bin, &copy).map_err(io)?;
    let argv = vec![s(&copy), "--list".into()];
    let ran = runner::run_viewing(exec, &list_dir, read_only, argv, TEST_WALL_SECS).await;
    let text = ran.output.render();
    let listed: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim_end().strip_suffix(": test"))
        .map(str::to_string)
        .collect();
    // libtest ends its list with `N tests, M benchmarks` (singular for one): without it the listing did
    // not complete (the subject's code ended the process first), which is the run's
    // failure, not the criterion's.
    let complete = text.lines().map(str::trim_end).any(|l| {
        (l.ends_with(" benchmarks") || l.ends_with(" benchmark"))
            && (l.contains(" tests, ") || l.contains(" test, "))
    });
    if !ran.ok() || !complete {
        return Err(GateVerdict::fail(
            Phase::TestRun,
            format!(
                "the criterion's tests could not be listed (the process {} without libtest's list)",
                ran.status
            ),
            Some(text),
        ));
    }
    let missing: Vec<&str> = declared
        .iter()
        .filter(|d| !listed.contains(d))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(GateVerdict::fail(
            Phase::CriterionCompile,
            format!(
                "criterion problem (for the operator, not the agent): its source declares {} \
                 that the compiled criterion does not contain (commented out or cfg'd away?)",
                missing.join(", ")
            ),
            None,
        ));
    }
    let mut tests = declared.to_vec();
    tests.extend(listed.into_iter().filter(|l| !declared.contains(l)));
    // The list comes from a process holding the subject's code, which could answer
    // `--list` itself and leave out what the criterion's macros write (an adversary's
    // constructor did): at least one test per invocation of a test-writing macro.
    if tests.len() - declared.len() < macro_tests {
        return Err(GateVerdict::fail(
            Phase::TestRun,
            format!(
                "the criterion's tests could not be listed in full: its macros write at least \
                 {macro_tests} test(s) beyond the {} it declares, and the binary listed {}",
                declared.len(),
                tests.len() - declared.len()
            ),
            None,
        ));
    }
    Ok(tests)
}

/// Runs criterion test `name` of `bin` alone, in a fresh directory `run-<i>` under
/// `dir` holding its own copy of the binary, with `read_only` host paths visible. With
/// a `package` directory (the cargo form) the test runs there, as under `cargo test`,
/// with `CARGO_MANIFEST_DIR` set to it; the run directory, where its verdict goes
/// (`IO_HARNESS_VERDICT_DIR`), stays writable. It passes on three things together:
/// the process exited 0, libtest reported one test running and this one ok, and the
/// harness's verdict for it (module `channel`) carries this gate's `nonce`.
pub(crate) async fn run_one(
    exec: Option<&Executor>,
    dir: &Path,
    bin: &Path,
    i: usize,
    name: &str,
    (read_only, package): (&[PathBuf], Option<&Path>),
    nonce: &str,
) -> Result<(), GateVerdict> {
    let io =
        |e: std::io::Error| GateVerdict::fail(Phase::TestRun, format!("gate directory: {e}"), None);
    let run_dir = dir.join(format!("run-{i}"));
    std::fs::create_dir_all(&run_dir).map_err(io)?;
    let copy = run_dir.join("criterion-tests");
    std::fs::copy(bin, &copy).map_err(io)?;
    let argv = [s(&copy), name.to_string()]
        .into_iter()
        .chain(["--exact", "--include-ignored", "--test-threads=1"].map(String::from))
        .collect();
    let place = runner::TestPlace {
        run_dir: &run_dir,
        read_only,
        package,
    };
    let ran = runner::run_test_process(exec, &place, argv, TEST_WALL_SECS).await;
    let text = ran.output.render();
    // Exactly one test ran, and it was this one (`- should panic` for such a test).
    let one = text.lines().any(|l| l.trim_end() == "running 1 test");
    // A subject that writes to stdout itself can split libtest's line (`test t ...
    // <its output>ok`): then the line's start and libtest's one-passed summary stand
    // for it (the harness's verdict is required either way).
    let whole = |l: &str| {
        l == format!("test {name} ... ok") || l == format!("test {name} - should panic ... ok")
    };
    let split = text.lines().any(|l| {
        l.starts_with(&format!("test {name} ... "))
            || l.starts_with(&format!("test {name} - should panic ... "))
    }) && text
        .lines()
        .any(|l| l.starts_with("test result: ok. 1 passed; 0 failed;"));
    let reported = one && (text.lines().map(str::trim_end).any(whole) || split);
    let verdict = channel::has_verdict(&run_dir, nonce, name);
    if ran.ok() && reported && verdict {
        return Ok(());
    }
    let why = if !ran.ok() {
        format!("criterion test {name} failed (test process {})", ran.status)
    } else if !reported {
        format!(
            "criterion test {name} did not run (the process exited 0 without libtest reporting it ok)"
        )
    } else {
        format!(
            "criterion test {name} has no harness verdict: libtest's report says ok, but the \
             test function never returned through the harness's check (the process was ended \
             or its output forged before it, or the harness could not instrument this test)"
        )
    };
    Err(GateVerdict::fail(Phase::TestRun, why, Some(text)))
}
