//! The harness's verdict channel: a test passes only on a verdict the harness's own
//! code wrote after the test function returned.
//!
//! The harness rewrites its copy of the criterion: the body of every `#[test]`
//! function (found in the source with comments and strings blanked, including inside
//! `macro_rules!` bodies, so macro-written tests are wrapped too; any attribute whose
//! path ends in `test`) becomes a closure that a harness guard runs:
//! `{ let g = Guard::new(…); g.finish(move || -> Ret { body }) }`. The guard appends
//! `<nonce> <test name>` to the file [`VERDICT_FILE`] in the run directory the harness
//! made for that one test (taken before the body runs, so a test that changes its
//! working directory is still found) only when the closure *returned*, and returned
//! success (`()`, or `Ok` for a test returning `Result`). The nonce is fresh per gate
//! and exists only in the criterion copy, compiled after the subject, so the subject's
//! source cannot contain it.
//!
//! What this closes: a process that ends before the body returned — `exit(0)` in the
//! function under test, in a panic hook, in a `Drop` during unwinding, in a
//! life-before-main constructor, after printing libtest's transcript word for word —
//! and an unwind that is no Rust panic (a foreign exception, `pthread_exit`'s forced
//! unwind, which run destructors while `thread::panicking()` says false) leave no
//! verdict, nor does a `Result` test returning `Err` whose error's `Debug` prints
//! libtest's `ok` and exits.
//!
//! `#[should_panic]` tests pass by panicking: their body runs under `catch_unwind`,
//! the verdict is written once it panicked, the payload is never dropped (its `Drop`
//! would be the subject's code), and the panic goes on as its message, which libtest
//! checks against `expected`. An `async` test body or a `$body` fragment of a macro
//! cannot be wrapped that way: it keeps a guard whose `Drop` writes the verdict when
//! the function returned (or, for `should_panic`, unwound) — weaker, since such an
//! unwind runs destructors too.
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
        // A synchronous block body is wrapped whole, so the verdict is written by
        // harness code that runs only once the body returned (and returned success);
        // an async body or a macro fragment keeps a guard whose `Drop` writes it.
        let wrapped = matches!(site.body, scan::Body::Block { .. }) && !site.is_async;
        let mode = match (wrapped, site.should_panic) {
            (true, _) => "Wrap",
            (false, false) => "OnReturn",
            (false, true) => "OnUnwind",
        };
        let guard = format!(
            "#[allow(unused_qualifications, unused_variables)] \
             let __io_harness_verdict = crate::{module}::Guard::new(::std::module_path!(), \
             ::std::stringify!({}), crate::{module}::Mode::{mode});",
            site.name
        );
        match site.body {
            scan::Body::Block { open, close, ret } if wrapped => {
                let ret = ret.unwrap_or_else(|| "()".to_string());
                let call = if site.should_panic {
                    "finish_panicking"
                } else {
                    "finish"
                };
                inserts.push((
                    open,
                    format!(" {guard} __io_harness_verdict.{call}(move || -> {ret} {{ "),
                ));
                inserts.push((close, " }) ".to_string()));
            }
            scan::Body::Block { open, .. } => inserts.push((open, format!(" {guard} "))),
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
#[allow(dead_code, unused_imports, unused_qualifications, unreachable_pub, non_snake_case,
        missing_docs, clippy::all)]
mod {module} {{
    pub enum Mode {{ Wrap, OnReturn, OnUnwind }}
    pub struct Guard {{
        module: &'static str,
        name: &'static str,
        mode: Mode,
        dir: ::std::option::Option<::std::path::PathBuf>,
    }}
    /// What a test function's return value says: `()` passed, `Ok` passed.
    pub trait Passed {{ fn passed(&self) -> bool; }}
    impl Passed for () {{ fn passed(&self) -> bool {{ true }} }}
    impl<T, E> Passed for ::std::result::Result<T, E> {{
        fn passed(&self) -> bool {{ ::std::result::Result::is_ok(self) }}
    }}
    impl Guard {{
        pub fn new(module: &'static str, name: &'static str, mode: Mode) -> Self {{
            // The run directory, taken before the body runs: a test that changes its
            // working directory still has its verdict found.
            let dir = ::std::env::var_os("IO_HARNESS_VERDICT_DIR")
                .map(::std::path::PathBuf::from)
                .filter(|d| d.is_absolute())
                .or_else(|| ::std::env::current_dir().ok());
            Self {{ module, name, mode, dir }}
        }}
        /// Runs the body; the verdict is written only once it returned success.
        pub fn finish<T: Passed>(&self, body: impl ::std::ops::FnOnce() -> T) -> T {{
            let out = body();
            if Passed::passed(&out) {{
                self.write();
            }}
            out
        }}
        /// Runs a `#[should_panic]` body: the verdict is written only once it
        /// panicked; its payload is never dropped (its `Drop` is the subject's) and the
        /// panic goes on as its message, which libtest checks against `expected`.
        pub fn finish_panicking<T>(&self, body: impl ::std::ops::FnOnce() -> T) -> T {{
            match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(body)) {{
                ::std::result::Result::Ok(out) => out,
                ::std::result::Result::Err(payload) => {{
                    let message = match (payload.downcast_ref::<&'static str>(),
                                         payload.downcast_ref::<::std::string::String>()) {{
                        (::std::option::Option::Some(s), _) => ::std::string::String::from(*s),
                        (_, ::std::option::Option::Some(s)) => ::std::clone::Clone::clone(s),
                        _ => ::std::string::String::from("Box<dyn Any>"),
                    }};
                    ::std::mem::forget(payload);
                    self.write();
                    ::std::panic::resume_unwind(::std::boxed::Box::new(message))
                }}
            }}
        }}
        fn write(&self) {{
            let path = match ::std::option::Option::Some(self.module)
                .and_then(|m| m.split_once("::"))
            {{
                ::std::option::Option::Some((_, rest)) => ::std::format!("{{rest}}::{{}}", self.name),
                ::std::option::Option::None => ::std::string::String::from(self.name),
            }};
            let line = ::std::format!("{nonce} {{path}}\n");
            let file = match &self.dir {{
                ::std::option::Option::Some(d) => d.join("{VERDICT_FILE}"),
                ::std::option::Option::None => ::std::path::PathBuf::from("{VERDICT_FILE}"),
            }};
            if let ::std::result::Result::Ok(mut f) = ::std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(file)
            {{
                let _ = ::std::io::Write::write_all(&mut f, line.as_bytes());
            }}
        }}
    }}
    impl ::std::ops::Drop for Guard {{
        fn drop(&mut self) {{
            let wanted = match self.mode {{
                Mode::Wrap => return,
                Mode::OnReturn => false,
                Mode::OnUnwind => true,
            }};
            if ::std::thread::panicking() == wanted {{
                self.write();
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
