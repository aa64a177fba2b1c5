//! Helper processes: this test binary re-executed in a mode (see
//! `common::helper`). Each mode plays the harness in a situation a test cannot set
//! up inside its own process (a controlling terminal, a secret in the environment,
//! an unprivileged uid, being SIGKILLed mid-run).

#[test]
fn entry() {
    let Ok(mode) = std::env::var("IO_HARNESS_SANDBOX_HELPER") else {
        return;
    };
    match mode.as_str() {
        other => panic!("unknown helper mode {other}"),
    }
}
