//! The sandbox containment suite: one binary, a module per topic.
//!
//! Every case runs its adversary as a separate process inside the sandbox and
//! asserts both the error it saw inside and the absence of its effect outside
//! (canary files, listener hit counters, victim processes, the host's state).
//! `backends!` runs a case under each backend it applies to. The companion tests in
//! `disabled` (feature `sandbox-test-disable-layers`) switch the responsible layer
//! off and assert the escape is then observed, proving the cases can fail.

/// `backends!(case, [native, floor])` makes `case::native` and `case::floor` tests.
macro_rules! backends {
    ($case:ident, [$($backend:ident),+]) => {
        mod $case {
            $(
                #[test]
                fn $backend() {
                    super::$case(&crate::common::$backend());
                }
            )+
        }
    };
}

pub mod caps;
mod common;
#[cfg(feature = "sandbox-test-disable-layers")]
mod disabled;
mod egress;
mod fs;
mod harness;
mod helper;
mod lifecycle;
mod net;
mod procs;
mod record;
mod resources;
mod view;
