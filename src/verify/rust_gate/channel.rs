//! The harness's verdict channel: a test passes only on a verdict the harness's own
//! code wrote after the test function returned.
//!
//! The harness rewrites its copy of the criterion: at the start of the body of every
//! `#[test]` function (found in the source with comments and strings blanked,
//! including inside `macro_rules!` bodies, so macro-written tests are wrapped too; any
//! attribute whose path ends in `test`, so `#[tokio::test]` bodies are wrapped as
//! well) it inserts a guard value of a harness module appended to the copy. The
//! guard's `Drop` runs when the test function ends; only when the function *returned*
//! (the thread is not panicking) does it append `<nonce> <test name>` to the file
//! [`VERDICT_FILE`] in the test process's working directory, the run directory the
//! harness made for that one test. The nonce is fresh per gate and exists only in the
//! criterion copy, compiled after the subject, so the subject's source cannot contain
//! it.
//!
//! What this closes: a process that ends before the test function returned — `exit(0)`
//! in the function under test, in a panic hook, in a `Drop` during unwinding, in a
//! life-before-main constructor, after printing libtest's transcript word for word —
//! leaves no verdict, so the test fails however its output reads.
//!
//! `#[should_panic]` tests pass by panicking, so their guard writes the verdict only
//! when it is dropped *during* unwinding (the test panicked, as it must) — a hook that
//! exits before the unwinding still leaves none; libtest still checks the `expected`
//! message and must report the test ok. A test returning `Result` writes its verdict
//! whatever it returns: the verdict is necessary, not sufficient (libtest's `ok` line
//! and exit 0 are required too).
//!
//! A test the harness could not wrap (an attribute produced by a macro fragment,
//! `#[cfg_attr(…, test)]`, a body passed as something other than a block) has no
//! verdict and fails, saying so; it never passes on libtest's word alone.
//!
//! **Known limit.** The subject's code runs in the criterion's process: it could read
//! the nonce out of its own binary (or out of a verdict an earlier test of the same
//! process wrote) and write a verdict itself. The trust level recorded for a gate that
//! passed this way is `harness-channel`: stronger than a runner's report, not proof
//! against code that reverse-engineers the process it runs in.

use std::path::Path;

use super::scan;

/// The verdict file in a test's run directory.
pub(crate) const VERDICT_FILE: &str = ".io-harness-verdict";

/// The harness module's name in the criterion copy.
fn module(nonce: &str) -> String {
    format!("__io_harness_channel_{nonce}")
}

/// The guard statements inserted into each test body of `criterion`: `(offset, text)`
/// with offsets into `criterion`.
pub(crate) fn test_wrappers(criterion: &str, nonce: &str) -> Vec<(usize, String)> {
    let code = scan::code_only(criterion);
    let module = module(nonce);
    let mut inserts = Vec::new();
    for site in scan::test_sites(&code) {
        let guard = format!(
            "let __io_harness_verdict = crate::{module}::Guard::new(::std::module_path!(), \
             ::std::stringify!({}), {});",
            site.name, site.should_panic
        );
        match site.body {
            scan::Body::Block(at) => inserts.push((at, format!(" {guard} "))),
            scan::Body::Fragment(start, end) => {
                inserts.push((start, format!("{{ {guard} ")));
                inserts.push((end, " }".to_string()));
            }
        }
    }
    inserts
}

/// The harness module appended to the criterion copy: the guard type. Every path in
/// it is absolute, so nothing the criterion or a glob import brings in changes it.
pub(crate) fn harness_module(nonce: &str) -> String {
    let module = module(nonce);
    format!(
        r#"
#[doc(hidden)]
#[allow(dead_code, unused_imports, non_snake_case, clippy::all)]
mod {module} {{
    pub struct Guard {{
        module: &'static str,
        name: &'static str,
        should_panic: bool,
    }}
    impl Guard {{
        pub fn new(module: &'static str, name: &'static str, should_panic: bool) -> Self {{
            Self {{ module, name, should_panic }}
        }}
    }}
    impl ::std::ops::Drop for Guard {{
        fn drop(&mut self) {{
            if ::std::thread::panicking() != self.should_panic {{
                return;
            }}
            let path = match ::std::option::Option::Some(self.module)
                .and_then(|m| m.split_once("::"))
            {{
                ::std::option::Option::Some((_, rest)) => ::std::format!("{{rest}}::{{}}", self.name),
                ::std::option::Option::None => ::std::string::String::from(self.name),
            }};
            let line = ::std::format!("{nonce} {{path}}\n");
            if let ::std::result::Result::Ok(mut f) = ::std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open("{VERDICT_FILE}")
            {{
                let _ = ::std::io::Write::write_all(&mut f, line.as_bytes());
            }}
        }}
    }}
}}
"#
    )
}

/// Whether `run_dir` holds the harness's verdict for test `name` of this gate.
pub(crate) fn has_verdict(run_dir: &Path, nonce: &str, name: &str) -> bool {
    let want = format!("{nonce} {name}");
    std::fs::read_to_string(run_dir.join(VERDICT_FILE))
        .is_ok_and(|text| text.lines().any(|l| l == want))
}
