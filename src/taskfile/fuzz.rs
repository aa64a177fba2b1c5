//! The task-file loader against arbitrary and mutated-valid TOML (issue 17 item 12):
//! it never panics, stays within the time bound per input, and an error it returns
//! names a line inside the file.

use proptest::prelude::*;

use super::*;
use crate::fuzz::{config, mutate, timed};

const VALID: &str = r#"goal = "make the parser total"
[verify]
command = ["cargo", "test"]
[provider]
kind = "openai"
model = "gpt-5-mini"
[sandbox]
network = "allowlist"
allow_hosts = ["crates.io"]
[[mcp]]
name = "fs"
command = ["npx", "server"]
required = false
"#;

/// Where the fuzzed file "is": a real directory, so that a valid file loads all the
/// way (its workspace root must exist).
fn file() -> PathBuf {
    thread_local! {
        static DIR: tempfile::TempDir = tempfile::tempdir().expect("a temporary directory");
    }
    DIR.with(|d| d.path().join("task.toml"))
}

fn check(text: &str) -> Result<(), TestCaseError> {
    let file = file();
    let out = timed("taskfile", || from_str(text, &file));
    if let Err(ContractError::Invalid { line, .. }) = out {
        prop_assert!(
            line >= 1 && line <= text.lines().count().max(1) + 1,
            "line {line}"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_text_never_panics(text in "(\\PC|\n|=|\\[|\\]|\"){0,200}") {
        check(&text)?;
    }

    #[test]
    fn mutated_valid_files_never_panic(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..6),
    ) {
        let text = String::from_utf8_lossy(&mutate(VALID.as_bytes(), &edits)).into_owned();
        check(&text)?;
    }
}

#[test]
fn the_valid_file_loads() {
    from_str(VALID, &file()).expect("the seed loads");
}
