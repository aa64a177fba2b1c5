//! The workspace form of the Rust gate (`cargo_test`) and the operator's gate files.
//!
//! A small crate with one registry dependency (`itoa`, built offline from the local
//! registry) is judged by `criteria/num_test.rs`. Each cheating case overlays files on
//! that crate and must fail in its exact phase, never `Success`; the honest crate
//! passes; the dependency cache is reused within a run and never trusted after a
//! build script wrote it.

use std::path::{Path, PathBuf};

use io_harness::provider::{ScriptTurn, Scripted};
use io_harness::run::RunOptions;
use io_harness::verify::CriterionResult;
use io_harness::{RunOutcome, Store, TaskContract, Verification, run_with};
use serde_json::json;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gates/workspace")
}

fn criterion() -> PathBuf {
    fixtures().join("criteria/num_test.rs")
}

/// Copies the directory tree `from` to `to` (the fixtures are plain files).
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

/// The honest crate with the files of `case` laid over it, in `dir/ws`.
fn workspace(dir: &Path, case: &str) -> PathBuf {
    let ws = dir.join("ws");
    copy_dir(&fixtures().join("base"), &ws);
    if case != "base" {
        copy_dir(&fixtures().join(case), &ws);
    }
    ws
}

struct RunSeen {
    outcome: RunOutcome,
    phases: Vec<String>,
    execs: Vec<String>,
    outputs: Vec<String>,
    denied_writes: Vec<String>,
    observation: String,
    /// `gate_trust` event details.
    trust: Vec<String>,
}

async fn run_turns(c: &TaskContract, turns: Vec<ScriptTurn>) -> RunSeen {
    let store = Store::memory().unwrap();
    let r = run_with(c, &Scripted::new(turns), &store, RunOptions::default())
        .await
        .unwrap();
    let events = store.sandbox_events(r.run_id).unwrap();
    let of_kind = |k: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e.kind == k)
            .filter_map(|e| e.detail.clone())
            .collect()
    };
    let denied_writes = store
        .policy_events(r.run_id)
        .unwrap()
        .into_iter()
        .filter(|p| p.act == "write" && p.decision == "deny")
        .map(|p| p.target)
        .collect();
    let observation = store
        .steps(r.run_id)
        .unwrap()
        .iter()
        .map(|s| s.messages_json.clone())
        .collect::<Vec<_>>()
        .join("\n");
    RunSeen {
        outcome: r.outcome,
        phases: of_kind("gate_phase_failed"),
        execs: of_kind("exec"),
        outputs: of_kind("gate_output"),
        denied_writes,
        observation,
        trust: of_kind("gate_trust"),
    }
}

fn cargo_contract(ws: &Path, crit: &Path) -> TaskContract {
    TaskContract::workspace(
        "make render correct",
        ws,
        Verification::cargo_test("Cargo.toml", [crit]).unwrap(),
    )
    .max_verify_attempts(1)
}

async fn run_case(case: &str) -> RunSeen {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path(), case);
    let c = cargo_contract(&ws, &criterion());
    run_turns(&c, vec![ScriptTurn::text("done")]).await
}

fn assert_fails_in(seen: &RunSeen, case: &str, phase: &str, reason: &str) {
    assert!(
        matches!(seen.outcome, RunOutcome::VerificationFailed { .. }),
        "{case}: {:?}",
        seen.outcome
    );
    assert_eq!(seen.phases, [phase], "{case}");
    assert!(
        seen.observation.contains(reason),
        "{case}: {reason:?} not in {}",
        seen.observation
    );
    // Compiler and test output quote the agent's files: never recorded.
    assert!(seen.outputs.is_empty(), "{case}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn honest_crate_with_a_dependency_passes_in_the_sandbox() {
    let seen = run_case("base").await;
    assert_eq!(seen.outcome, RunOutcome::Success, "{}", seen.observation);
    assert!(seen.phases.is_empty());
    // Every test passed through the harness's verdict channel.
    assert_eq!(seen.trust, ["cargo_test Cargo.toml: harness-channel"]);
    // The dependency stub (none when the cache shared across runs already had its
    // key: tests/it/gate_cache.rs covers that), the crate with its criterion, then
    // each test by exact name.
    assert!(
        seen.execs
            .iter()
            .filter(|e| e.contains("io_harness_dep_stub") || e.contains("stub/Cargo.toml"))
            .count()
            <= 1,
        "{:?}",
        seen.execs
    );
    assert_eq!(
        seen.execs.iter().filter(|e| e.contains(" --exact")).count(),
        2
    );
}

/// H4 (issue 14, round 2): a criterion reading a fixture relative to the package, or
/// through `CARGO_MANIFEST_DIR` at run time, passes as under `cargo test` (its tests
/// run in the package's copy with the variable set).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn honest_tests_reading_package_fixtures_pass() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path(), "honest_fixture_files");
    let c = cargo_contract(&ws, &fixtures().join("criteria/fixture_test.rs"));
    let seen = run_turns(&c, vec![ScriptTurn::text("done")]).await;
    assert_eq!(seen.outcome, RunOutcome::Success, "{}", seen.observation);
    assert_eq!(
        seen.execs.iter().filter(|e| e.contains(" --exact")).count(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_answer_fails_the_test_run() {
    let seen = run_case("wrong_answer").await;
    assert_fails_in(
        &seen,
        "wrong_answer",
        "test-run",
        "renders_forty_two failed",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_that_drops_or_disarms_test_targets_changes_nothing() {
    let seen = run_case("manifest_drops_tests").await;
    assert_fails_in(
        &seen,
        "manifest_drops_tests",
        "test-run",
        "renders_forty_two failed",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_injected_by_a_build_script_hides_nothing() {
    let seen = run_case("build_script_ignores").await;
    assert_fails_in(
        &seen,
        "build_script_ignores",
        "test-run",
        "renders_forty_two failed",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passing_result_written_by_a_build_script_is_not_read() {
    let seen = run_case("build_script_writes_result").await;
    assert_fails_in(
        &seen,
        "build_script_writes_result",
        "test-run",
        "candidate test binaries",
    );
}

/// Class 6 in the workspace form: output forged from inside the test process (a
/// panic hook printing libtest's `ok` line, then exit 0) and a test binary replaced
/// by a process a build script left behind both lack the harness's verdict. Both
/// passed the gate before it had one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_output_and_a_swapped_binary_have_no_harness_verdict() {
    let seen = run_case("panic_hook_exit").await;
    assert_fails_in(
        &seen,
        "panic_hook_exit",
        "test-run",
        "has no harness verdict",
    );
    // The swapper races cargo: when it wins before cargo is done, the binary cargo
    // reports is not the one it built; when it loses, the copy that runs has no
    // verdict. Either way the gate fails in test-run.
    let seen = run_case("build_script_swaps_binary").await;
    let reason = if seen.observation.contains("test binary was not built") {
        "test binary was not built"
    } else {
        "has no harness verdict"
    };
    assert_fails_in(&seen, "build_script_swaps_binary", "test-run", reason);
}

/// The workspace form checks pinned signatures too, paths from the crate root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_signature_the_crate_lacks_fails_criterion_compile() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path(), "base");
    let mut c = cargo_contract(&ws, &criterion());
    c.verify.criteria[0] = c.verify.criteria[0]
        .clone()
        .with_signatures(["render: fn(u64) -> String"]);
    let seen = run_turns(&c, vec![ScriptTurn::text("done")]).await;
    assert_fails_in(
        &seen,
        "pinned signature",
        "criterion-compile",
        "signature the contract pins: `render: fn(u64) -> String`",
    );
    c.verify.criteria[0] = c.verify.criteria[0]
        .clone()
        .with_signatures(["render: fn(u32) -> String"]);
    let seen = run_turns(&c, vec![ScriptTurn::text("done")]).await;
    assert_eq!(seen.outcome, RunOutcome::Success, "{}", seen.observation);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crate_that_does_not_build_fails_subject_compile_and_a_missing_item_criterion_compile() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path(), "base");
    std::fs::write(ws.join("src/lib.rs"), "pub fn render(n: u32) -> String {\n").unwrap();
    let seen = run_turns(
        &cargo_contract(&ws, &criterion()),
        vec![ScriptTurn::text("done")],
    )
    .await;
    assert_fails_in(
        &seen,
        "syntax",
        "subject-compile",
        "the crate does not build",
    );

    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path(), "base");
    std::fs::write(
        ws.join("src/lib.rs"),
        "pub fn renamed(n: u32) -> String { n.to_string() }\n",
    )
    .unwrap();
    let seen = run_turns(
        &cargo_contract(&ws, &criterion()),
        vec![ScriptTurn::text("done")],
    )
    .await;
    assert_fails_in(
        &seen,
        "renamed",
        "criterion-compile",
        "the criteria do not compile against it",
    );
}

/// The criterion lives in the workspace: the agent's write is denied (and recorded),
/// its edit through a sandboxed command succeeds on disk, and the gate still judges by
/// the operator's copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_criterion_is_refused_and_the_gate_uses_the_operators_copy() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path(), "wrong_answer");
    std::fs::create_dir_all(ws.join("criteria")).unwrap();
    let crit = ws.join("criteria/num_test.rs");
    std::fs::copy(criterion(), &crit).unwrap();
    let c = cargo_contract(&ws, &crit);
    let trivial = "#[test]\nfn renders_forty_two() {}\n#[test]\nfn renders_zero() {}\n";
    let seen = run_turns(
        &c,
        vec![
            ScriptTurn::tool(
                "write_file",
                json!({"path": "criteria/num_test.rs", "content": trivial}),
            ),
            ScriptTurn::tool(
                "run_command",
                json!({"argv": ["cp", "src/lib.rs", "criteria/num_test.rs"]}),
            ),
            ScriptTurn::text("done"),
        ],
    )
    .await;
    assert_eq!(seen.denied_writes, ["criteria/num_test.rs"]);
    // The sandboxed command cannot change it either: the policy denies writing it, so
    // the view holds it read-only (issue 16 route 7)…
    let on_disk = std::fs::read_to_string(&crit).unwrap();
    assert_eq!(on_disk, std::fs::read_to_string(criterion()).unwrap());
    // …and the gate ran the operator's tests against the wrong answer (its own copy
    // would have stood in for an edited file).
    assert_fails_in(
        &seen,
        "criterion_edited",
        "test-run",
        "renders_forty_two failed",
    );
}

/// A build script that poisons the dependency cache: in the sandbox it cannot reach
/// the cache, and the next gate of the run reuses the cache it sealed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poisoning_build_script_cannot_reach_the_cache_in_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path(), "build_script_poisons_cache");
    let honest = std::fs::read_to_string(fixtures().join("base/src/lib.rs")).unwrap();
    let c = cargo_contract(&ws, &criterion()).max_verify_attempts(2);
    let seen = run_turns(
        &c,
        vec![
            ScriptTurn::text("done"),
            ScriptTurn::tool(
                "write_file",
                json!({"path": "src/lib.rs", "content": honest}),
            )
            .and_tool(
                "write_file",
                json!({"path": "build.rs", "content": "fn main() {}\n"}),
            ),
            ScriptTurn::text("done"),
        ],
    )
    .await;
    assert_eq!(seen.outcome, RunOutcome::Success, "{}", seen.observation);
    assert_eq!(seen.phases, ["test-run"]);
    // At most one dependency build for the run (none when the shared cache had the
    // key): the second gate reused the sealed cache.
    assert!(
        seen.execs
            .iter()
            .filter(|e| e.contains("stub/Cargo.toml"))
            .count()
            <= 1,
        "{:?}",
        seen.execs
    );
}

async fn host_gate(ws: &Path) -> CriterionResult {
    let workspace = io_harness::tools::Workspace::open(ws).unwrap();
    let v = Verification::cargo_test("Cargo.toml", [criterion()]).unwrap();
    io_harness::verify::check(&[v], &workspace, None)
        .await
        .results
        .into_iter()
        .next()
        .unwrap()
}

/// Without a sandbox the build script *can* write the cache: the seal catches it, the
/// next gate discards the cache and rebuilds it instead of linking what it found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poisoned_cache_fails_its_seal_and_is_rebuilt() {
    // A dependency list of this test's own, so no other test shares its cache and the
    // summaries below do not depend on test order.
    let own_key = |ws: &Path| {
        std::fs::write(
            ws.join("Cargo.toml"),
            "[package]\nname = \"wsnum\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [target.'cfg(all())'.dependencies]\nitoa = \"1\"\n",
        )
        .unwrap();
    };
    let dir = tempfile::tempdir().unwrap();
    let cheat = workspace(dir.path(), "build_script_poisons_cache");
    own_key(&cheat);
    let first = host_gate(&cheat).await;
    assert_eq!(first.phase, Some("test-run"), "{first:?}");
    assert!(!first.passed);

    let dir2 = tempfile::tempdir().unwrap();
    let honest = workspace(dir2.path(), "base");
    own_key(&honest);
    let second = host_gate(&honest).await;
    assert!(second.passed, "{second:?}");
    assert!(
        second
            .summary
            .contains("cache failed its seal, discarded and rebuilt"),
        "{second:?}"
    );
    let third = host_gate(&honest).await;
    assert!(third.passed, "{third:?}");
    assert!(
        third.summary.contains("reused from the run's cache"),
        "{third:?}"
    );
}

/// A command gate's script is an operator file: the agent's write is denied, and a
/// sandboxed command cannot rewrite it either (the view holds it read-only). Where a
/// backend cannot hold it so (the floor), the gate's pin refuses a changed script: the
/// unit tests of the pin show that half.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_command_gate_script_is_denied_and_detected() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("check.sh"), "grep -q fixed status.txt\n").unwrap();
    std::fs::write(ws.join("status.txt"), "broken\n").unwrap();
    let task = dir.path().join("task.toml");
    std::fs::write(
        &task,
        "goal = \"fix it\"\nroot = \"ws\"\n[verify]\ncommand = [\"sh\", \"check.sh\"]\nmax_attempts = 1\n",
    )
    .unwrap();
    let c = TaskContract::from_file(&task).unwrap();
    let Verification::Command { pinned, .. } = &c.verify.criteria[0] else {
        panic!("{:?}", c.verify.criteria);
    };
    assert_eq!(pinned.len(), 1);
    assert_eq!(pinned[0].path, Path::new("check.sh"));
    let seen = run_turns(
        &c,
        vec![
            ScriptTurn::tool(
                "write_file",
                json!({"path": "check.sh", "content": "exit 0\n"}),
            ),
            ScriptTurn::tool(
                "run_command",
                json!({"argv": ["cp", "status.txt", "check.sh"]}),
            ),
            ScriptTurn::text("done"),
        ],
    )
    .await;
    assert_eq!(seen.denied_writes, ["check.sh"]);
    assert_eq!(
        std::fs::read_to_string(ws.join("check.sh")).unwrap(),
        "grep -q fixed status.txt\n"
    );
    // The operator's script ran as the gate, and failed the unfixed status.
    assert!(matches!(
        seen.outcome,
        RunOutcome::VerificationFailed { .. }
    ));
}

#[test]
fn task_file_cargo_test_is_parsed_and_bad_values_name_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("criteria")).unwrap();
    std::fs::write(ws.join("criteria/t.rs"), "#[test] fn t() {}\n").unwrap();
    let task = ws.join("task.toml");
    std::fs::write(
        &task,
        "goal = \"g\"\n[verify]\ncargo_test = { criteria = [\"criteria/t.rs\"] }\n",
    )
    .unwrap();
    let c = TaskContract::from_file(&task).unwrap();
    let Verification::CargoTest {
        manifest, criteria, ..
    } = &c.verify.criteria[0]
    else {
        panic!("{:?}", c.verify.criteria);
    };
    assert_eq!(manifest, Path::new("Cargo.toml"));
    assert_eq!(criteria[0].source, "#[test] fn t() {}\n");
    assert_eq!(c.verify.criteria[0].label(), "cargo_test Cargo.toml");
    // A criterion inside the workspace is an operator file the policy protects.
    let policy = io_harness::policy::Policy::for_contract(&c).unwrap();
    use io_harness::policy::{Act, Action, Decision, PolicyGate};
    let d = policy.decide(&Action::new(Act::Write, "criteria/t.rs"));
    assert_eq!(d.decision, Decision::Deny, "{d:?}");
    assert_eq!(
        policy
            .decide(&Action::new(Act::Write, "src/lib.rs"))
            .decision,
        Decision::Allow
    );

    for (text, want) in [
        (
            "goal = \"g\"\n[verify]\n\ncargo_test = { criteria = [\"criteria/missing.rs\"] }\n",
            (4, "criteria/missing.rs"),
        ),
        (
            "goal = \"g\"\n[verify]\ncargo_test = { manifest = \"../Cargo.toml\", criteria = [\"criteria/t.rs\"] }\n",
            (3, "inside the workspace"),
        ),
        (
            "goal = \"g\"\n[verify]\ncargo_test = { criteria = [] }\n",
            (3, "at least one criterion"),
        ),
        (
            "goal = \"g\"\n[verify]\ncargo_test = { criteria = [\"criteria/t.rs\"], tests = 1 }\n",
            (3, "tests"),
        ),
    ] {
        std::fs::write(&task, text).unwrap();
        let e = TaskContract::from_file(&task).unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.contains(&format!("task.toml:{}:", want.0)) && shown.contains(want.1),
            "{shown}"
        );
        if want.1 != "tests" {
            assert!(shown.contains("verify.cargo_test"), "{shown}");
        }
    }
}

/// Without a sandbox the compile could write the criterion the harness placed: the
/// gate compares what compiled with the operator's copy and refuses the difference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_criterion_rewritten_during_an_unsandboxed_build_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path(), "build_script_ignores");
    let r = host_gate(&ws).await;
    assert_eq!(r.phase, Some("criterion-compile"), "{r:?}");
    assert!(r.summary.contains("was changed during the build"), "{r:?}");
    assert!(!r.passed);
}

/// A crate that is a member of a cargo workspace, its dependency inherited from the
/// workspace: judged through the member's manifest, its dependency cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_member_with_an_inherited_dependency_passes_and_is_cached() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let member = ws.join("crates/wsnum");
    copy_dir(&fixtures().join("base"), &member);
    std::fs::rename(member.join("Cargo.lock"), ws.join("Cargo.lock")).unwrap();
    std::fs::write(
        member.join("Cargo.toml"),
        "[package]\nname = \"wsnum\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nitoa = { workspace = true }\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("Cargo.toml"),
        "[workspace]\nmembers = [\"crates/wsnum\"]\nresolver = \"2\"\n\n\
         [workspace.dependencies]\nitoa = \"1\"\n",
    )
    .unwrap();
    let workspace = io_harness::tools::Workspace::open(&ws).unwrap();
    let v = Verification::cargo_test("crates/wsnum/Cargo.toml", [criterion()]).unwrap();
    for _ in 0..2 {
        let r = io_harness::verify::check(std::slice::from_ref(&v), &workspace, None)
            .await
            .results
            .remove(0);
        assert!(r.passed, "{r:?}");
        // Built, reused, or (when the poisoning test ran alongside) rebuilt.
        assert!(
            r.summary.contains("cache") && !r.summary.contains("none cached"),
            "{r:?}"
        );
    }
}

/// Issue 14, class 1: a `[dev-dependencies]` line that renames a local crate to a
/// sysroot crate's name would hand the criterion a fake `std`; it is refused before
/// anything builds, with the reason, in the subject's phase.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_that_renames_a_crate_to_std_is_refused_before_the_build() {
    let seen = run_case("fake_std_dep").await;
    assert_fails_in(
        &seen,
        "fake_std_dep",
        "subject-compile",
        "refused before the build: Cargo.toml: a dependency named `std` would replace the sysroot crate",
    );
    assert!(
        !seen.execs.iter().any(|e| e.contains("cargo")),
        "nothing was built: {:?}",
        seen.execs
    );
}

/// Issue 14, class 1, the route one manifest cannot show: the agent swaps the
/// registry crate a criterion uses as its reference (`itoa`) for a local crate of the
/// same name whose answers agree with a wrong subject. A member crate is linked by
/// path too, so only the run's baseline tells the two apart; the gate refuses the
/// manifest before anything builds. (On the main before this, the gate built the
/// fake and passed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_crate_under_the_name_of_a_crate_the_criterion_links_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path(), "base");
    let crit = dir.path().join("itoa_reference_test.rs");
    std::fs::write(
        &crit,
        "#[test]\nfn renders_like_itoa() {\n    \
         assert_eq!(wsnum::render(42), itoa::Buffer::new().format(42u32));\n}\n",
    )
    .unwrap();
    let write = |path: &str, content: &str| {
        ScriptTurn::tool("write_file", json!({ "path": path, "content": content }))
    };
    let turns = vec![
        write(
            "Cargo.toml",
            "[package]\nname = \"wsnum\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\nitoa = { path = \"vendor/itoa\" }\n",
        ),
        write(
            "vendor/itoa/Cargo.toml",
            "[package]\nname = \"itoa\"\nversion = \"1.0.99\"\nedition = \"2021\"\n",
        ),
        write(
            "vendor/itoa/src/lib.rs",
            "pub struct Buffer;\nimpl Buffer {\n    pub fn new() -> Self { Buffer }\n    \
             pub fn format<T>(&mut self, _: T) -> &str { \"wrong\" }\n}\n",
        ),
        write(
            "src/lib.rs",
            "pub fn render(_: u32) -> String { \"wrong\".to_string() }\n",
        ),
        ScriptTurn::text("done"),
    ];
    let c = cargo_contract(&ws, &crit);
    let seen = run_turns(&c, turns).await;
    assert_fails_in(
        &seen,
        "local itoa",
        "subject-compile",
        "the criteria link `itoa`, which the manifest now takes from the path vendor/itoa; \
         when the run started it was the registry's crate",
    );
    assert!(
        !seen.execs.iter().any(|e| e.contains("cargo")),
        "nothing was built: {:?}",
        seen.execs
    );
}
