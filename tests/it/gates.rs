//! Rust gates driven through a real run: a scripted model whose only turn is "done",
//! the subject placed in the workspace, the criterion outside it, every compile and
//! test process in the run's sandbox. Each corpus case asserts the exact phase recorded
//! in the store (`gate_phase_failed`), and that a cheating subject never ends `Success`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_harness::contract::LimitSettings;
use io_harness::provider::{ScriptTurn, Scripted};
use io_harness::run::RunOptions;
use io_harness::{RunOutcome, Store, TaskContract, Verification, run_with};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gates")
}

/// The corpus: case directory and the phase that must be recorded (`None`: passes).
const CORPUS: &[(&str, Option<&str>)] = &[
    ("honest_add", None),
    ("honest_glob_criterion", None),
    ("honest_nested_modules", None),
    ("honest_prints", None),
    ("honest_uses_std_panic", None),
    ("honest_commented_test", None),
    ("wrong_answer", Some("test-run")),
    ("panics", Some("test-run")),
    ("aborts", Some("test-run")),
    ("shadow_assert_eq_glob", Some("test-run")),
    ("shadow_assert_eq_path", Some("test-run")),
    ("shadow_std_module", Some("test-run")),
    ("cfg_test_only", Some("criterion-compile")),
    ("cfg_test_swap", Some("test-run")),
    ("cfg_any_crate", Some("subject-emptied")),
    ("cfg_false_crate", Some("subject-emptied")),
    ("cfg_attr_crate", Some("subject-emptied")),
    ("no_implicit_prelude", Some("test-run")),
    ("no_core", Some("subject-compile")),
    ("crate_name_attr", Some("subject-compile")),
    ("macro_instead_of_fn", Some("criterion-compile")),
    ("reexported_macro_as_add", Some("criterion-compile")),
    ("unit_struct_named_add", Some("criterion-compile")),
    ("deleted_fn", Some("criterion-compile")),
    ("renamed_fn", Some("criterion-compile")),
    ("wrong_signature", Some("criterion-compile")),
    ("compile_error_guard", Some("subject-compile")),
    ("compile_error_not_test", Some("subject-compile")),
    ("syntax_error", Some("subject-compile")),
    ("exit_in_fn", Some("test-run")),
    ("exit_from_static_initializer", Some("test-run")),
    ("exit_from_thread", Some("test-run")),
    ("prints_test_result_ok", Some("test-run")),
    ("replaces_test_binary", Some("test-run")),
    ("infinite_loop", Some("test-run")),
    ("fork_bomb", Some("test-run")),
    ("output_flood", Some("test-run")),
    ("const_panic_guard", Some("subject-compile")),
    ("subject_defines_test_named_adds", Some("test-run")),
    ("no_mangle_main", Some("criterion-compile")),
    ("macro_generated_tests", Some("test-run")),
    ("criterion_test_cfgd_away", Some("criterion-compile")),
    ("foreign_exception_unwind", Some("test-run")),
    ("pthread_exit_unwind", Some("test-run")),
    ("result_err_debug_exits", Some("test-run")),
    ("should_panic_payload_drop_exits", Some("test-run")),
    ("honest_criterion_changes_cwd", None),
    ("glob_std_module_shadow", Some("test-run")),
    ("glob_core_module_shadow", Some("test-run")),
    ("glob_size_of_shadow", Some("test-run")),
    ("constructor_shortens_the_list", Some("test-run")),
    ("honest_subject_writes_stdout", None),
    // Class 3: values that lie about themselves.
    ("lying_partialeq_signature", Some("criterion-compile")),
    ("glob_shadows_some", Some("test-run")),
    ("glob_shadows_ok", Some("test-run")),
    ("macro_use_shadows_vec", Some("test-run")),
    ("macro_use_shadows_format", Some("test-run")),
    ("glob_shadows_string", Some("test-run")),
    ("honest_vec_format_glob", None),
    // Class 6: forged test output.
    ("forged_ok_then_exit", Some("test-run")),
    ("panic_hook_prints_ok", Some("test-run")),
    ("init_array_transcript", Some("test-run")),
    ("drop_prints_ok", Some("test-run")),
    ("fake_verdict_file", Some("test-run")),
    ("honest_should_panic", None),
    ("honest_result_test", None),
    // Round 2 (B5, B4): what a glob import of the subject brings in unasked.
    ("glob_trait_eq", Some("test-run")),
    ("glob_trait_to_string", Some("test-run")),
    ("glob_trait_len", Some("test-run")),
    ("glob_const_binding", Some("test-run")),
    ("honest_glob_named_trait", None),
    // Round 2 (B6): a child process of the test learns or reports the verdict.
    ("reexec_child_reports", Some("test-run")),
    ("fork_oracle", Some("test-run")),
    // Round 2 (H1): raw-identifier test names.
    ("honest_raw_ident_tests", None),
];

/// The signatures a case's contract pins.
fn signatures(case: &str) -> &'static [&'static str] {
    match case {
        "lying_partialeq_signature" | "honest_add" => &["add: fn(i32, i32) -> i32"],
        _ => &[],
    }
}

/// The criterion imports the subject by glob: the harness asks the compiler which
/// of the names it uses the subject has (one more rustc run).
fn has_subject_glob(case: &str) -> bool {
    std::fs::read_to_string(fixtures().join(case).join("criterion.rs"))
        .unwrap()
        .contains("use subject::*")
}

/// The tests an honest case runs.
fn honest_tests(case: &str) -> usize {
    match case {
        "honest_nested_modules" | "honest_vec_format_glob" => 3,
        "honest_criterion_changes_cwd" | "honest_subject_writes_stdout" => 1,
        _ => 2,
    }
}

/// Why a case fails, as the model is told (a part of the `[FAIL]` line).
fn expected_reason(case: &str) -> &'static str {
    match case {
        "exit_from_static_initializer" => "tests could not be listed",
        "foreign_exception_unwind" | "pthread_exit_unwind" => "adds has no harness verdict",
        "result_err_debug_exits" => "parses_twelve has no harness verdict",
        "should_panic_payload_drop_exits" => "div_zero failed (test process exited 101)",
        "glob_std_module_shadow" | "glob_core_module_shadow" => {
            "maxes failed (test process exited 101)"
        }
        "glob_size_of_shadow" => "compact failed (test process exited 101)",
        "constructor_shortens_the_list" => "could not be listed in full",
        "exit_in_fn" | "exit_from_thread" | "prints_test_result_ok" => "adds did not run",
        "replaces_test_binary" => "adds_negative failed (test process exited 101)",
        "infinite_loop" | "fork_bomb" => "wall cap",
        "output_flood" => "output cap",
        "aborts" => "signal 6",
        "cfg_any_crate" | "cfg_false_crate" | "cfg_attr_crate" => "items were stripped",
        "macro_generated_tests" => "adds_large failed (test process exited 101)",
        "criterion_test_cfgd_away" => "criterion problem (for the operator, not the agent)",
        "lying_partialeq_signature" => {
            "the subject does not have the signature the contract pins: `add: fn(i32, i32) -> i32`"
        }
        "glob_shadows_some" => "finds failed (test process exited 101)",
        "glob_shadows_ok" => "parses failed (test process exited 101)",
        "macro_use_shadows_vec" => "keeps_evens failed (test process exited 101)",
        "macro_use_shadows_format" => "greets failed (test process exited 101)",
        "glob_shadows_string" => "shouts failed (test process exited 101)",
        "glob_trait_eq" | "fork_oracle" => "adds failed (test process exited 101)",
        "glob_trait_to_string" => "greets failed (test process exited 101)",
        "glob_trait_len" => "keeps_evens failed (test process exited 101)",
        "glob_const_binding" => "validates failed (test process exited 101)",
        "reexec_child_reports" => "adds failed (test process exited 101)",
        "forged_ok_then_exit"
        | "panic_hook_prints_ok"
        | "init_array_transcript"
        | "drop_prints_ok"
        | "fake_verdict_file" => "adds has no harness verdict",
        "wrong_answer"
        | "shadow_assert_eq_glob"
        | "shadow_assert_eq_path"
        | "shadow_std_module"
        | "cfg_test_swap"
        | "no_implicit_prelude"
        | "panics" => "adds failed (test process exited 101)",
        _ => "",
    }
}

/// Cases that need tight caps so they end quickly.
fn limits(case: &str) -> LimitSettings {
    match case {
        "infinite_loop" | "exit_from_thread" | "fork_bomb" => LimitSettings {
            wall_secs: Some(8),
            processes: Some(64),
            ..LimitSettings::default()
        },
        _ => LimitSettings::default(),
    }
}

struct CaseRun {
    outcome: RunOutcome,
    phases: Vec<String>,
    observation_has_phase: bool,
    why: String,
    /// `exec` event details (command lines run in the sandbox).
    execs: Vec<String>,
    /// `gate_trust` and `gate_tests` event details.
    trust: Vec<String>,
    tests: Vec<String>,
    elapsed: Duration,
}

async fn run_case(case: &str) -> CaseRun {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    let src = fixtures().join(case);
    std::fs::copy(src.join("subject.rs"), ws.join("src/lib.rs")).unwrap();
    // A secret the policy masks: the gates run with the run's masks in place.
    std::fs::write(ws.join(".env"), "TOKEN=canary-secret\n").unwrap();
    let store = Store::memory().unwrap();
    let mut c = TaskContract::workspace(
        "make add correct",
        &ws,
        Verification::rust("src/lib.rs", src.join("criterion.rs"))
            .with_signatures(signatures(case).iter().copied()),
    )
    .max_verify_attempts(1);
    c.sandbox.limits = limits(case);
    c.validate().unwrap();
    let provider = Scripted::new(vec![ScriptTurn::text("done")]);
    let started = Instant::now();
    let r = run_with(&c, &provider, &store, RunOptions::default())
        .await
        .unwrap();
    let elapsed = started.elapsed();
    let events = store.sandbox_events(r.run_id).unwrap();
    let of_kind = |k: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e.kind == k)
            .filter_map(|e| e.detail.clone())
            .collect()
    };
    let phases = of_kind("gate_phase_failed");
    let execs = of_kind("exec");
    let trust = of_kind("gate_trust");
    let tests = of_kind("gate_tests");
    // Compiler output quotes the agent's file: it is never recorded as gate output.
    assert!(of_kind("gate_output").is_empty(), "{case}");
    // The observation the model was shown for its next step.
    let why = store
        .steps(r.run_id)
        .unwrap()
        .iter()
        .flat_map(|s| {
            let v: serde_json::Value = serde_json::from_str(&s.messages_json).unwrap();
            let text = v.to_string();
            text.split("\\n")
                .filter(|l| l.contains("[FAIL] rust"))
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .next()
        .unwrap_or_default();
    let observation_has_phase = phases
        .first()
        .is_none_or(|p| why.contains(&format!("[FAIL] rust src/lib.rs: {p}:")));
    CaseRun {
        outcome: r.outcome,
        phases,
        observation_has_phase,
        why,
        execs,
        trust,
        tests,
        elapsed,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cheating_subject_fails_in_its_phase_and_honest_ones_pass() {
    assert!(CORPUS.iter().filter(|(_, p)| p.is_some()).count() >= 25);
    // Bounded parallelism: the machine is small and shared.
    let permits = Arc::new(tokio::sync::Semaphore::new(3));
    let mut tasks = Vec::new();
    for (case, expected) in CORPUS {
        let permits = permits.clone();
        tasks.push(tokio::spawn(async move {
            let _p = permits.acquire().await.unwrap();
            (*case, *expected, run_case(case).await)
        }));
    }
    let mut wrong = Vec::new();
    for t in tasks {
        let (case, expected, got) = t.await.unwrap();
        eprintln!(
            "gate case {case}: {:?} phases {:?} in {:.1}s: {}",
            got.outcome,
            got.phases,
            got.elapsed.as_secs_f64(),
            got.why
        );
        // Every compile and test ran as a recorded sandbox command.
        let rustc_runs = got.execs.iter().filter(|e| e.contains("rustc")).count();
        let ok = match expected {
            None => {
                got.outcome == RunOutcome::Success
                    && got.phases.is_empty()
                    // Subject, marked subject, marker probe, criterion; and the
                    // signature check when the case pins one.
                    && rustc_runs
                        == 4 + usize::from(!signatures(case).is_empty())
                            + usize::from(has_subject_glob(case))
                    && got.execs.iter().filter(|e| e.contains(" --exact")).count()
                        == honest_tests(case)
                    // Every test passed through the harness's verdict channel, counted.
                    && got.trust.len() == 1
                    && got.trust[0].contains("harness-channel")
                    && got.tests.len() == 1
                    && got.tests[0].contains(&format!(
                        "{n} run, {n} passed",
                        n = honest_tests(case)
                    ))
            }
            Some(p) => {
                matches!(got.outcome, RunOutcome::VerificationFailed { .. })
                    && got.phases == [p]
                    && got.observation_has_phase
                    && got.why.contains(expected_reason(case))
                    && rustc_runs >= 1
            }
        };
        if !ok {
            wrong.push(format!(
                "{case}: expected {expected:?}, got {:?} with phases {:?}",
                got.outcome, got.phases
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn task_file_rust_gate_is_parsed_and_an_editable_criterion_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("criteria")).unwrap();
    std::fs::create_dir_all(dir.path().join("criteria")).unwrap();
    std::fs::write(dir.path().join("criteria/t.rs"), "#[test] fn t() {}\n").unwrap();
    std::fs::write(ws.join("criteria/t.rs"), "#[test] fn t() {}\n").unwrap();

    let outside = dir.path().join("task.toml");
    std::fs::write(
        &outside,
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nrust = { subject = \"src/lib.rs\", criterion = \"criteria/t.rs\" }\n",
    )
    .unwrap();
    let c = TaskContract::from_file(&outside).unwrap();
    assert_eq!(
        c.verify.criteria,
        [Verification::rust(
            "src/lib.rs",
            dir.path().join("criteria/t.rs")
        )]
    );
    assert_eq!(c.verify.criteria[0].label(), "rust src/lib.rs");

    let inside = ws.join("task.toml");
    std::fs::write(
        &inside,
        "goal = \"g\"\n[verify]\nrust = { subject = \"src/lib.rs\", criterion = \"criteria/t.rs\" }\n",
    )
    .unwrap();
    let e = TaskContract::from_file(&inside).unwrap_err().to_string();
    assert!(
        e.contains("verify.rust") && e.contains("inside the workspace"),
        "{e}"
    );

    // Pinned signatures: kept, and a method or a generic function refused at load
    // with file, line and key.
    std::fs::write(
        &outside,
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nrust = { subject = \"src/lib.rs\", criterion = \"criteria/t.rs\", signatures = [\"add: fn(i32, i32) -> i32\"] }\n",
    )
    .unwrap();
    let c = TaskContract::from_file(&outside).unwrap();
    let Verification::Rust { signatures, .. } = &c.verify.criteria[0] else {
        panic!("{:?}", c.verify.criteria);
    };
    assert_eq!(signatures, &["add: fn(i32, i32) -> i32"]);
    for bad in [
        "Point::new: fn(i32) -> Point",
        "id<T>: fn(T) -> T",
        "f: fn(impl Copy)",
        "add",
    ] {
        std::fs::write(
            &outside,
            format!(
                "goal = \"g\"\nroot = \"ws\"\n[verify]\nrust = {{ subject = \"src/lib.rs\", criterion = \"criteria/t.rs\", signatures = [\"{bad}\"] }}\n"
            ),
        )
        .unwrap();
        let e = TaskContract::from_file(&outside).unwrap_err().to_string();
        assert!(
            e.contains("verify.rust.signatures") && e.contains("task.toml:4"),
            "{bad}: {e}"
        );
    }

    let hostile = dir.path().join("hostile.toml");
    std::fs::write(
        &hostile,
        "goal = \"g\"\nroot = \"ws\"\n[verify]\nrust = { subject = \"../x.rs\", criterion = \"criteria/t.rs\" }\n",
    )
    .unwrap();
    let e = TaskContract::from_file(&hostile).unwrap_err().to_string();
    assert!(e.contains("verify.rust"), "{e}");
}

/// The gate without a sandbox (a contract checked outside a run): host subprocesses,
/// same phases.
async fn host_check(subject: &str, criterion: &str) -> io_harness::verify::CriterionResult {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    if !subject.is_empty() {
        std::fs::write(ws.join("lib.rs"), subject).unwrap();
    }
    let crit = dir.path().join("criterion.rs");
    std::fs::write(&crit, criterion).unwrap();
    let workspace = io_harness::tools::Workspace::open(&ws).unwrap();
    let report =
        io_harness::verify::check(&[Verification::rust("lib.rs", &crit)], &workspace, None).await;
    report.results.into_iter().next().unwrap()
}

#[tokio::test]
async fn host_gate_passes_honest_and_names_the_phase_of_a_failure() {
    let good = "pub fn add(a: i32, b: i32) -> i32 { a + b }\n";
    let crit = "#[test]\nfn adds() { assert_eq!(subject::add(2, 3), 5); }\n";
    let ok = host_check(good, crit).await;
    assert!(ok.passed && ok.phase.is_none(), "{ok:?}");
    assert!(
        ok.summary.contains("1 criterion test(s) ran and passed"),
        "{ok:?}"
    );

    let emptied = host_check(&format!("#![cfg(any())]\n{good}"), crit).await;
    assert_eq!(emptied.phase, Some("subject-emptied"), "{emptied:?}");
    assert!(!emptied.passed);

    let wrong = host_check("pub fn add(a: i32, b: i32) -> i32 { a * b }\n", crit).await;
    assert_eq!(wrong.phase, Some("test-run"), "{wrong:?}");
    // The model sees the failing assertion's output.
    assert!(
        wrong.output.as_deref().unwrap_or("").contains("left: 6"),
        "{wrong:?}"
    );

    let broken = host_check("pub fn add(", crit).await;
    assert_eq!(broken.phase, Some("subject-compile"), "{broken:?}");
    assert!(
        broken.output.as_deref().unwrap_or("").contains("error"),
        "{broken:?}"
    );
}

#[tokio::test]
async fn a_gate_that_runs_no_test_never_passes() {
    let good = "pub fn add(a: i32, b: i32) -> i32 { a + b }\n";
    let none = host_check(good, "pub fn not_a_test() {}\n").await;
    assert_eq!(none.phase, Some("test-run"), "{none:?}");
    assert!(none.summary.contains("nothing ran"), "{none:?}");

    let missing = host_check("", "#[test]\nfn t() {}\n").await;
    assert_eq!(missing.phase, Some("subject-compile"), "{missing:?}");
    assert!(missing.summary.contains("does not exist"), "{missing:?}");
}

/// A test the harness cannot instrument (its `#[test]` comes from `cfg_attr`) has no
/// verdict channel: it fails, saying so, rather than pass on libtest's word alone.
#[tokio::test]
async fn a_test_the_harness_cannot_instrument_fails_for_want_of_a_verdict() {
    let good = "pub fn add(a: i32, b: i32) -> i32 { a + b }\n";
    let crit = "#[cfg_attr(all(), test)]\nfn adds() { assert_eq!(subject::add(2, 3), 5); }\n";
    let r = host_check(good, crit).await;
    assert_eq!(r.phase, Some("test-run"), "{r:?}");
    assert!(r.summary.contains("adds has no harness verdict"), "{r:?}");
    assert!(!r.passed);
}
