//! What the CLI tests share: the binary with the caller's credentials and store taken
//! out of its environment, and a run watched on its `--json` stdout until a line
//! shows up, then interrupted as Ctrl-C would.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, ExitStatus};

/// The `io-harness` binary under test, without the variables that would point it at
/// the developer's store, a crash point or a real provider.
pub(crate) fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_io-harness"));
    c.env_remove("IO_HARNESS_STORE")
        .env_remove("IO_HARNESS_FAILPOINT")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENROUTER_API_KEY");
    c
}

/// Reads `stdout` line by line until a line contains `needle`; what was read before
/// it is in the panic message when the stream ends first.
pub(crate) fn read_until(stdout: &mut BufReader<ChildStdout>, needle: &str) {
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = stdout.read_line(&mut line).unwrap();
        assert!(
            n > 0,
            "the process ended before printing {needle:?}: {seen}"
        );
        if line.contains(needle) {
            return;
        }
        seen.push_str(&line);
    }
}

/// Spawns `c` with its stdout piped, waits for its first `tool_called` event (the
/// step's tool is running), sends SIGINT and returns how it exited and the rest of its
/// stdout.
pub(crate) fn interrupt_at_first_tool(c: &mut Command) -> (ExitStatus, String) {
    let mut child = c.stdout(std::process::Stdio::piped()).spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    read_until(&mut stdout, "\"tool_called\"");
    interrupt(&mut child, stdout)
}

/// SIGINT to `child`, then the rest of its stdout and its exit status.
pub(crate) fn interrupt(
    child: &mut Child,
    mut stdout: BufReader<ChildStdout>,
) -> (ExitStatus, String) {
    // SAFETY: kill(2) on a child this test spawned and has not waited for yet, so the
    // pid is still its own.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    (child.wait().unwrap(), rest)
}
