//! The workspace tools on a real file system, driven the way a run drives them:
//! through `ToolRegistry::standard().dispatch` with the built-in policy.
#![cfg(unix)]

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use io_harness::policy::{Act, BuiltinProtection, Decision};
use io_harness::tools::{Dispatched, ToolContext, ToolLimits, ToolRegistry, Workspace};
use serde_json::json;
use sha2::{Digest, Sha256};

/// A workspace `ws/` and a directory `outside/` beside it holding a canary.
struct Fx {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    ctx: ToolContext,
}

const CANARY: &str = "SECRET canary";

fn fx() -> Fx {
    fx_with(ToolLimits::default())
}

fn fx_with(limits: ToolLimits) -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    let outside = tmp.path().join("outside");
    fs::create_dir_all(&root).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("canary.txt"), CANARY).unwrap();
    let ctx = ToolContext {
        workspace: Arc::new(Workspace::open(&root).unwrap()),
        limits,
        exec: None,
        read_gate: None,
        memory: None,
    };
    Fx {
        _tmp: tmp,
        root,
        outside,
        ctx,
    }
}

impl Fx {
    async fn call(&self, name: &str, input: serde_json::Value) -> Dispatched {
        ToolRegistry::standard()
            .dispatch(&self.ctx, &BuiltinProtection, name, &input)
            .await
    }

    fn put(&self, rel: &str, body: &str) {
        let p = self.root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, body).unwrap();
    }

    fn get(&self, rel: &str) -> String {
        fs::read_to_string(self.root.join(rel)).unwrap()
    }

    /// The outside directory still holds exactly the untouched canary.
    fn assert_outside_untouched(&self) {
        let names: Vec<_> = fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["canary.txt"], "something was created outside");
        assert_eq!(
            fs::read_to_string(self.outside.join("canary.txt")).unwrap(),
            CANARY
        );
    }
}

fn ok(d: &Dispatched) -> &str {
    assert!(!d.is_error, "unexpected error: {}", d.content);
    &d.content
}

/// A refusal for crossing the boundary: recorded apart, nothing shown from outside.
fn refused(d: &Dispatched) -> &str {
    assert!(d.is_error, "expected a refusal, got: {}", d.content);
    assert!(!d.content.contains("SECRET"), "{}", d.content);
    d.confinement_refusal
        .as_deref()
        .unwrap_or_else(|| panic!("expected a confinement refusal, got: {}", d.content))
}

fn sha(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

// ---- specs and planning ------------------------------------------------------------

#[test]
fn standard_registry_offers_the_nine_tools_with_object_schemas() {
    let specs = ToolRegistry::standard().specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "read_file",
            "write_file",
            "edit_file",
            "list_dir",
            "find",
            "grep",
            "run_command",
            "remember",
            "forget"
        ]
    );
    for s in &specs {
        assert_eq!(s.input_schema["type"], "object", "{}", s.name);
        assert!(s.description.len() > 40, "{} needs a description", s.name);
    }
}

#[test]
fn workspace_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Workspace>();
    check::<ToolContext>();
}

#[tokio::test]
async fn plan_gives_the_policy_the_normalized_path() {
    let f = fx();
    f.put("src/a.rs", "fn a() {}\n");
    let d = f
        .call("read_file", json!({"path": "./src//x/../a.rs"}))
        .await;
    ok(&d);
    assert_eq!(d.decisions.len(), 1);
    assert_eq!(d.decisions[0].action.act, Act::Read);
    assert_eq!(d.decisions[0].action.target, "src/a.rs");

    let d = f.call("list_dir", json!({})).await;
    assert_eq!(d.decisions[0].action.target, ".");
    let d = f.call("grep", json!({"pattern": "x"})).await;
    assert_eq!(d.decisions[0].action.target, ".");
    let d = f
        .call("write_file", json!({"path": "b//c.txt", "content": ""}))
        .await;
    assert_eq!(d.decisions[0].action.act, Act::Write);
    assert_eq!(d.decisions[0].action.target, "b/c.txt");
}

#[tokio::test]
async fn bad_arguments_are_an_error_observation() {
    let f = fx();
    let d = f.call("read_file", json!({"file": "x"})).await;
    assert!(d.is_error && d.content.contains("path"), "{}", d.content);
    assert!(d.confinement_refusal.is_none());
    let d = f.call("grep", json!({"pattern": "("})).await;
    assert!(d.is_error && d.content.contains("regex"), "{}", d.content);
}

// ---- read_file -----------------------------------------------------------------------

#[tokio::test]
async fn read_file_numbers_lines_and_reads_windows() {
    let f = fx();
    f.put("notes.txt", "alpha\nbeta\ngamma\ndelta\n");
    let d = f.call("read_file", json!({"path": "notes.txt"})).await;
    assert_eq!(
        ok(&d),
        "     1\talpha\n     2\tbeta\n     3\tgamma\n     4\tdelta\n"
    );
    let d = f
        .call(
            "read_file",
            json!({"path": "notes.txt", "start_line": 2, "end_line": 3}),
        )
        .await;
    let c = ok(&d);
    assert!(c.starts_with("     2\tbeta\n     3\tgamma\n"), "{c}");
    assert!(c.contains("start_line=4"), "{c}");
    let d = f.call("read_file", json!({"path": "missing.txt"})).await;
    assert!(
        d.is_error && d.content.contains("not found"),
        "{}",
        d.content
    );
    let d = f.call("read_file", json!({"path": "."})).await;
    assert!(
        d.is_error && d.content.contains("directory"),
        "{}",
        d.content
    );
}

#[tokio::test]
async fn read_file_cuts_long_output_and_says_where_to_continue() {
    let f = fx_with(ToolLimits {
        max_output_bytes: 2000,
        ..ToolLimits::default()
    });
    let body: String = (1..=1000).map(|i| format!("line number {i}\n")).collect();
    f.put("long.txt", &body);
    let d = f.call("read_file", json!({"path": "long.txt"})).await;
    let c = ok(&d);
    assert!(c.len() <= 2000, "{}", c.len());
    assert!(
        c.contains("of 1000; call read_file with start_line="),
        "{c}"
    );
}

#[tokio::test]
async fn read_file_refuses_files_over_the_limit() {
    let f = fx_with(ToolLimits {
        max_file_bytes: 100,
        ..ToolLimits::default()
    });
    f.put("big.txt", &"x".repeat(101));
    let d = f.call("read_file", json!({"path": "big.txt"})).await;
    assert!(d.is_error, "{}", d.content);
    assert!(
        d.content
            .contains("101 bytes is more than the 100-byte limit"),
        "{}",
        d.content
    );
}

#[tokio::test]
async fn read_file_says_a_binary_file_is_binary() {
    let f = fx();
    fs::write(f.root.join("blob.bin"), b"\x7fELF\x00\x01\x02").unwrap();
    let d = f.call("read_file", json!({"path": "blob.bin"})).await;
    assert_eq!(ok(&d), "blob.bin: binary file (7 bytes); not shown");
}

// ---- write_file / edit_file ----------------------------------------------------------

#[tokio::test]
async fn write_file_creates_parents_replaces_and_records_hashes() {
    let f = fx();
    let d = f
        .call(
            "write_file",
            json!({"path": "src/deep/new.rs", "content": "one\n"}),
        )
        .await;
    assert_eq!(ok(&d), "created src/deep/new.rs (4 bytes)");
    assert_eq!(f.get("src/deep/new.rs"), "one\n");
    assert_eq!(d.effects.len(), 1);
    assert_eq!(d.effects[0].path, "src/deep/new.rs");
    assert_eq!(d.effects[0].before, None);
    assert_eq!(d.effects[0].after.as_deref(), Some(sha("one\n").as_str()));

    let d = f
        .call(
            "write_file",
            json!({"path": "src/deep/new.rs", "content": "two\n"}),
        )
        .await;
    assert_eq!(ok(&d), "replaced src/deep/new.rs (4 bytes)");
    assert_eq!(d.effects[0].before.as_deref(), Some(sha("one\n").as_str()));
    assert_eq!(d.effects[0].after.as_deref(), Some(sha("two\n").as_str()));
    assert_eq!(f.get("src/deep/new.rs"), "two\n");
    // No temporary file is left behind.
    let names: Vec<_> = fs::read_dir(f.root.join("src/deep")).unwrap().collect();
    assert_eq!(names.len(), 1);
}

#[tokio::test]
async fn write_file_keeps_the_permission_bits_of_a_replaced_file() {
    let f = fx();
    f.put("run.sh", "#!/bin/sh\n");
    fs::set_permissions(f.root.join("run.sh"), fs::Permissions::from_mode(0o751)).unwrap();
    ok(&f
        .call(
            "write_file",
            json!({"path": "run.sh", "content": "#!/bin/sh\necho\n"}),
        )
        .await);
    let mode = fs::metadata(f.root.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o751);
}

#[tokio::test]
async fn edit_file_replaces_the_one_exact_match() {
    let f = fx();
    f.put("lib.rs", "fn a() {}\nfn b() {}\n");
    let d = f
        .call(
            "edit_file",
            json!({"path": "lib.rs", "old": "fn b() {}", "new": "fn b() { a() }"}),
        )
        .await;
    assert_eq!(ok(&d), "edited lib.rs at line 2");
    assert_eq!(f.get("lib.rs"), "fn a() {}\nfn b() { a() }\n");
    assert_eq!(
        d.effects[0].before.as_deref(),
        Some(sha("fn a() {}\nfn b() {}\n").as_str())
    );
    assert_eq!(
        d.effects[0].after.as_deref(),
        Some(sha("fn a() {}\nfn b() { a() }\n").as_str())
    );
}

#[tokio::test]
async fn edit_file_with_zero_or_several_matches_changes_nothing() {
    let f = fx();
    f.put("lib.rs", "x = 1\nx = 1\n");
    let d = f
        .call(
            "edit_file",
            json!({"path": "lib.rs", "old": "y = 2", "new": "z"}),
        )
        .await;
    assert!(d.is_error, "{}", d.content);
    assert!(d.content.contains("occurs 0 times"), "{}", d.content);
    let d = f
        .call(
            "edit_file",
            json!({"path": "lib.rs", "old": "x = 1", "new": "z"}),
        )
        .await;
    assert!(d.content.contains("occurs 2 times"), "{}", d.content);
    assert!(d.effects.is_empty());
    assert_eq!(f.get("lib.rs"), "x = 1\nx = 1\n");
    let d = f
        .call(
            "edit_file",
            json!({"path": "nope.rs", "old": "a", "new": "b"}),
        )
        .await;
    assert!(
        d.is_error && d.content.contains("not found"),
        "{}",
        d.content
    );
}

#[tokio::test]
async fn writes_to_git_internals_are_refused_by_policy_and_recorded() {
    let f = fx();
    f.put(".git/config", "[core]\n");
    for (tool, input) in [
        (
            "write_file",
            json!({"path": ".git/config", "content": "evil"}),
        ),
        (
            "edit_file",
            json!({"path": "src/../.git/config", "old": "[core]", "new": "evil"}),
        ),
        (
            "write_file",
            json!({"path": ".io-harness/state", "content": "x"}),
        ),
    ] {
        let d = f.call(tool, input).await;
        assert!(d.is_error, "{}", d.content);
        assert!(
            d.content.starts_with("refused: policy deny write"),
            "{}",
            d.content
        );
        assert!(d.confinement_refusal.is_none());
        // edit_file is judged as a read (allowed here) and a write (ED1).
        let planned = if tool == "edit_file" { 2 } else { 1 };
        assert_eq!(d.decisions.len(), planned, "{tool}");
        let last = d.decisions.last().unwrap();
        assert_eq!(last.decision, Decision::Deny);
        assert_eq!(last.action.act, Act::Write);
        assert_eq!(last.layer, "builtin");
    }
    assert_eq!(f.get(".git/config"), "[core]\n");
    assert!(!f.root.join(".io-harness").exists());
}

// ---- list_dir ------------------------------------------------------------------------

#[tokio::test]
async fn list_dir_sorts_marks_directories_and_is_bounded() {
    let f = fx_with(ToolLimits {
        max_entries: 3,
        ..ToolLimits::default()
    });
    f.put("b.txt", "");
    f.put("a/x.txt", "");
    f.put("c.txt", "");
    f.put("d.txt", "");
    symlink("b.txt", f.root.join("link")).unwrap();
    let d = f.call("list_dir", json!({})).await;
    assert_eq!(
        ok(&d),
        "a/\nb.txt\nc.txt\n[3 of 5 entries shown; the rest were cut]"
    );
    let d = f.call("list_dir", json!({"path": "a"})).await;
    assert_eq!(ok(&d), "x.txt\n");
    fs::create_dir(f.root.join("empty")).unwrap();
    assert_eq!(
        ok(&f.call("list_dir", json!({"path": "empty"})).await),
        "empty: empty directory"
    );
    let d = f.call("list_dir", json!({"path": "b.txt"})).await;
    assert!(
        d.is_error && d.content.contains("not a directory"),
        "{}",
        d.content
    );
}

// ---- find ----------------------------------------------------------------------------

/// A small repository-shaped tree with ignore rules.
fn project(f: &Fx) {
    f.put(".gitignore", "target/\n*.log\n!keep.log\n");
    f.put("Cargo.toml", "[package]\n");
    f.put("src/lib.rs", "pub fn needle() {}\n");
    f.put("src/sub/mod.rs", "// Needle here\n");
    f.put("src/sub/.gitignore", "generated.rs\n");
    f.put("src/sub/generated.rs", "needle generated\n");
    f.put("target/debug/out.rs", "needle in build output\n");
    f.put("debug.log", "needle in a log\n");
    f.put("keep.log", "needle kept\n");
    f.put(".git/HEAD", "needle in git\n");
    f.put(".git/info/exclude", "excluded.rs\n");
    f.put("excluded.rs", "needle excluded\n");
    f.put(".hidden/h.rs", "needle hidden\n");
}

#[tokio::test]
async fn find_globs_the_tree_respecting_ignore_files() {
    let f = fx();
    project(&f);
    let d = f.call("find", json!({"pattern": "*.rs"})).await;
    assert_eq!(ok(&d), ".hidden/h.rs\nsrc/lib.rs\nsrc/sub/mod.rs\n");
    let d = f.call("find", json!({"pattern": "*.log"})).await;
    assert_eq!(ok(&d), "keep.log\n");
    let d = f.call("find", json!({"pattern": "src/*"})).await;
    assert_eq!(ok(&d), "src/lib.rs\nsrc/sub/\n");
    let d = f
        .call("find", json!({"pattern": "*.rs", "path": "src/sub"}))
        .await;
    assert_eq!(ok(&d), "src/sub/mod.rs\n");
    let d = f.call("find", json!({"pattern": "HEAD"})).await;
    assert!(
        ok(&d).starts_with("no paths under . match"),
        "{}",
        d.content
    );
}

#[tokio::test]
async fn find_is_bounded_and_says_so() {
    let f = fx_with(ToolLimits {
        max_entries: 5,
        ..ToolLimits::default()
    });
    for i in 0..20 {
        f.put(&format!("f{i:02}.txt"), "");
    }
    let d = f.call("find", json!({"pattern": "*.txt"})).await;
    let c = ok(&d);
    assert_eq!(c.lines().filter(|l| l.ends_with(".txt")).count(), 5);
    assert!(
        c.contains("[stopped after 5 results; narrow the pattern or the path]"),
        "{c}"
    );
}

// ---- grep ----------------------------------------------------------------------------

#[tokio::test]
async fn grep_searches_contents_respecting_ignore_files() {
    let f = fx();
    project(&f);
    let d = f.call("grep", json!({"pattern": "needle"})).await;
    assert_eq!(
        ok(&d),
        ".hidden/h.rs:1:needle hidden\nkeep.log:1:needle kept\nsrc/lib.rs:1:pub fn needle() {}\n"
    );
    let d = f
        .call(
            "grep",
            json!({"pattern": "needle", "case_insensitive": true, "glob": "*.rs", "path": "src"}),
        )
        .await;
    assert_eq!(
        ok(&d),
        "src/lib.rs:1:pub fn needle() {}\nsrc/sub/mod.rs:1:// Needle here\n"
    );
    // A file named explicitly is searched even if ignored.
    let d = f
        .call("grep", json!({"pattern": "needle", "path": "debug.log"}))
        .await;
    assert_eq!(ok(&d), "debug.log:1:needle in a log\n");
    let d = f.call("grep", json!({"pattern": "absent"})).await;
    assert!(ok(&d).starts_with("no matches for"), "{}", d.content);
}

#[tokio::test]
async fn grep_skips_binary_files() {
    let f = fx();
    fs::write(f.root.join("blob.bin"), b"needle\x00\x01").unwrap();
    f.put("text.txt", "needle\n");
    let d = f.call("grep", json!({"pattern": "needle"})).await;
    assert_eq!(ok(&d), "text.txt:1:needle\n");
}

#[tokio::test]
async fn grep_is_bounded_by_entries_and_bytes() {
    let f = fx_with(ToolLimits {
        max_entries: 10,
        ..ToolLimits::default()
    });
    let body: String = (0..100).map(|i| format!("match {i}\n")).collect();
    f.put("many.txt", &body);
    let d = f.call("grep", json!({"pattern": "match"})).await;
    let c = ok(&d);
    assert_eq!(c.lines().filter(|l| l.starts_with("many.txt:")).count(), 10);
    assert!(c.contains("[stopped after 10 matches"), "{c}");

    let f = fx_with(ToolLimits {
        max_output_bytes: 1000,
        ..ToolLimits::default()
    });
    let line = "x".repeat(200);
    f.put("wide.txt", &format!("{line}\n").repeat(50));
    let d = f.call("grep", json!({"pattern": "x"})).await;
    let c = ok(&d);
    assert!(c.len() <= 1000, "{}", c.len());
    assert!(c.contains("[stopped after"), "{c}");
}

// ---- confinement ---------------------------------------------------------------------

#[tokio::test]
async fn dotdot_and_absolute_paths_are_refused_before_policy() {
    let f = fx();
    for (tool, input) in [
        ("read_file", json!({"path": "../outside/canary.txt"})),
        ("read_file", json!({"path": "/etc/passwd"})),
        ("write_file", json!({"path": "../x", "content": "x"})),
        ("list_dir", json!({"path": "a/../.."})),
        ("grep", json!({"pattern": "x", "path": "/"})),
        ("find", json!({"pattern": "*", "path": ".."})),
    ] {
        let d = f.call(tool, input).await;
        let why = refused(&d);
        assert!(why.contains("`..`") || why.contains("absolute"), "{why}");
        assert!(
            d.decisions.is_empty(),
            "refused in plan, before any decision"
        );
    }
    f.assert_outside_untouched();
    assert!(!f.root.parent().unwrap().join("x").exists());
}

#[tokio::test]
async fn a_symlink_to_etc_is_refused() {
    let f = fx();
    symlink("/etc", f.root.join("etc")).unwrap();
    let d = f.call("read_file", json!({"path": "etc/passwd"})).await;
    assert!(refused(&d).contains("outside"), "{}", d.content);
    let d = f.call("list_dir", json!({"path": "etc"})).await;
    refused(&d);
    // The walk lists the link but never enters it.
    let d = f.call("find", json!({"pattern": "passwd"})).await;
    assert!(ok(&d).starts_with("no paths"), "{}", d.content);
    let d = f
        .call("grep", json!({"pattern": "root", "path": "."}))
        .await;
    assert!(ok(&d).starts_with("no matches"), "{}", d.content);
}

#[tokio::test]
async fn a_symlinked_directory_pointing_outside_is_refused() {
    let f = fx();
    symlink(&f.outside, f.root.join("out")).unwrap();
    symlink("../outside", f.root.join("rel")).unwrap();
    for dir in ["out", "rel"] {
        let d = f
            .call("read_file", json!({"path": format!("{dir}/canary.txt")}))
            .await;
        refused(&d);
        let d = f
            .call(
                "write_file",
                json!({"path": format!("{dir}/new.txt"), "content": "x"}),
            )
            .await;
        refused(&d);
        let d = f
            .call(
                "edit_file",
                json!({"path": format!("{dir}/canary.txt"), "old": "SECRET", "new": "x"}),
            )
            .await;
        refused(&d);
        let d = f
            .call("grep", json!({"pattern": "SECRET", "path": dir}))
            .await;
        refused(&d);
    }
    let d = f.call("grep", json!({"pattern": "SECRET"})).await;
    assert!(ok(&d).starts_with("no matches"), "{}", d.content);
    let d = f.call("find", json!({"pattern": "canary.txt"})).await;
    assert!(ok(&d).starts_with("no paths"), "{}", d.content);
    f.assert_outside_untouched();
}

#[tokio::test]
async fn a_symlink_inside_pointing_inside_is_followed_for_reads() {
    let f = fx();
    f.put("real/data.txt", "inside data\n");
    symlink("real/data.txt", f.root.join("alias.txt")).unwrap();
    symlink("real", f.root.join("alias_dir")).unwrap();
    let d = f.call("read_file", json!({"path": "alias.txt"})).await;
    assert_eq!(ok(&d), "     1\tinside data\n");
    let d = f
        .call("read_file", json!({"path": "alias_dir/data.txt"}))
        .await;
    assert_eq!(ok(&d), "     1\tinside data\n");
    let d = f.call("list_dir", json!({"path": "alias_dir"})).await;
    assert_eq!(ok(&d), "data.txt\n");
    let d = f
        .call("grep", json!({"pattern": "inside", "path": "alias_dir"}))
        .await;
    assert_eq!(ok(&d), "alias_dir/data.txt:1:inside data\n");
    // Writes never go through a symlink, so the policy always judges the real path.
    let d = f
        .call(
            "write_file",
            json!({"path": "alias_dir/data.txt", "content": "x"}),
        )
        .await;
    assert!(refused(&d).contains("symlink"), "{}", d.content);
    assert_eq!(f.get("real/data.txt"), "inside data\n");
}

#[tokio::test]
async fn a_dangling_symlink_is_not_written_through() {
    let f = fx();
    symlink(f.outside.join("created.txt"), f.root.join("dangling.txt")).unwrap();
    symlink(f.outside.join("newdir"), f.root.join("dangling_dir")).unwrap();
    let d = f
        .call(
            "write_file",
            json!({"path": "dangling.txt", "content": "x"}),
        )
        .await;
    refused(&d);
    let d = f
        .call(
            "write_file",
            json!({"path": "dangling_dir/a/b.txt", "content": "x"}),
        )
        .await;
    refused(&d);
    let d = f.call("read_file", json!({"path": "dangling.txt"})).await;
    refused(&d);
    f.assert_outside_untouched();
    assert!(
        fs::symlink_metadata(f.root.join("dangling.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[tokio::test]
async fn a_planted_symlink_as_the_final_component_is_not_written_through() {
    let f = fx();
    f.put("dir/keep.txt", "");
    symlink(f.outside.join("canary.txt"), f.root.join("dir/planted.txt")).unwrap();
    let d = f
        .call(
            "write_file",
            json!({"path": "dir/planted.txt", "content": "overwritten"}),
        )
        .await;
    assert!(refused(&d).contains("symlink"), "{}", d.content);
    let d = f
        .call(
            "edit_file",
            json!({"path": "dir/planted.txt", "old": "SECRET", "new": "pwned"}),
        )
        .await;
    refused(&d);
    f.assert_outside_untouched();
}

/// Atomically exchanges two paths (`renameat2(RENAME_EXCHANGE)`), so neither name is
/// ever missing: a missing `sw` would let a write legitimately create a fresh one.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let a = std::ffi::CString::new(a.as_os_str().as_bytes()).unwrap();
    let b = std::ffi::CString::new(b.as_os_str().as_bytes()).unwrap();
    // SAFETY: both paths are NUL-terminated and live across the call; AT_FDCWD and
    // the flag are plain integers.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    assert_eq!(r, 0, "renameat2: {}", std::io::Error::last_os_error());
}

/// One thread keeps swapping `ws/sw` between a real directory and a symlink to the
/// outside directory while reads, writes, listings and searches go through the
/// workspace. Whatever the interleaving, nothing outside is read or written.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_mid_flight_never_leads_outside() {
    let f = fx();
    // The outside target holds a file with the same name as the inside one.
    fs::write(f.outside.join("f.txt"), CANARY).unwrap();
    f.put("sw/f.txt", "inside\n");
    let sw = f.root.join("sw");
    let other = f.root.join("other");
    symlink(&f.outside, &other).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, sw, other) = (Arc::clone(&stop), sw.clone(), other.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u32;
            while !stop.load(Ordering::Relaxed) && swaps < 10_000_000 {
                exchange(&sw, &other);
                swaps += 1;
            }
            // Leave the directory at `sw`.
            if swaps % 2 == 1 {
                exchange(&sw, &other);
            }
            swaps
        })
    };

    let ws = &f.ctx.workspace;
    let (mut reads_ok, mut writes_ok) = (0, 0);
    for i in 0..400 {
        if let Ok(bytes) = ws.read("sw/f.txt") {
            assert_eq!(
                bytes, b"inside\n",
                "read something that is not the inside file"
            );
            reads_ok += 1;
        }
        if ws.write(&format!("sw/w{i}.txt"), b"written").is_ok() {
            writes_ok += 1;
        }
        if let Ok(entries) = ws.list_dir("sw") {
            assert!(
                entries.iter().all(|e| e.name != "canary.txt"),
                "listed the outside dir"
            );
        }
        if i % 20 == 0 {
            let d = f.call("read_file", json!({"path": "sw/f.txt"})).await;
            assert!(!d.content.contains("SECRET"), "{}", d.content);
            let d = f
                .call(
                    "write_file",
                    json!({"path": format!("sw/t{i}.txt"), "content": "t"}),
                )
                .await;
            assert!(!d.content.contains("SECRET"), "{}", d.content);
            let d = f.call("grep", json!({"pattern": "SECRET"})).await;
            assert!(ok(&d).starts_with("no matches"), "{}", d.content);
            let d = f.call("find", json!({"pattern": "canary.txt"})).await;
            assert!(ok(&d).starts_with("no paths"), "{}", d.content);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    eprintln!("{swaps} swaps; of 400 direct reads {reads_ok} and writes {writes_ok} went through");

    let mut names: Vec<_> = fs::read_dir(&f.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["canary.txt", "f.txt"],
        "something was written outside"
    );
    assert_eq!(fs::read_to_string(f.outside.join("f.txt")).unwrap(), CANARY);
    assert_eq!(
        fs::read_to_string(f.outside.join("canary.txt")).unwrap(),
        CANARY
    );
    assert!(sw.is_dir() && !fs::symlink_metadata(&sw).unwrap().file_type().is_symlink());
}

/// One reply cannot make the harness run unbounded work: calls past
/// `[tools] max_calls_per_reply` and arguments past `max_argument_bytes` are refused
/// with a tool error each (never dropped), and an oversized argument is not stored
/// (policy round 2, route 8: 10,000 calls in one reply all ran; a 100 MB argument
/// grew the store by 420 MB).
#[tokio::test]
async fn calls_past_the_bounds_of_one_reply_are_refused_and_not_stored() {
    use io_harness::provider::{ScriptTurn, Scripted};
    use io_harness::{Store, TaskContract, Verification, run};
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let mut c = TaskContract::workspace("g", dir.path(), Verification::file_contains("a.txt", "a"));
    c.tools.max_calls_per_reply = 5;
    c.tools.max_argument_bytes = 4096;
    let mut many = ScriptTurn::tool("read_file", json!({"path": "a.txt"}));
    for _ in 0..7 {
        many = many.and_tool("read_file", json!({"path": "a.txt"}));
    }
    let big = "x".repeat(64 * 1024);
    let provider = Scripted::new(vec![
        many,
        ScriptTurn::tool("write_file", json!({"path": "b.txt", "content": big})),
        ScriptTurn::text("done"),
    ]);
    let store = Store::memory().unwrap();
    let r = run(&c, &provider, &store).await.unwrap();
    assert_eq!(r.outcome, io_harness::RunOutcome::Success, "{r:?}");
    let steps = store.steps(r.run_id).unwrap();
    let calls = &steps[0].tool_calls;
    assert_eq!(calls.len(), 8, "every call is answered");
    for (i, call) in calls.iter().enumerate() {
        let refused = i >= 5;
        assert_eq!(call.is_error, refused, "{i}: {}", call.output);
        assert_eq!(
            call.output.contains("max_calls_per_reply"),
            refused,
            "{}",
            call.output
        );
    }
    let write = &steps[1].tool_calls[0];
    assert!(
        write.is_error && write.output.contains("max_argument_bytes"),
        "{}",
        write.output
    );
    assert!(
        write.input_json.len() < 256,
        "not stored: {}",
        write.input_json
    );
    assert!(!dir.path().join("b.txt").exists(), "not run");
}
