//! The interactive approver: on a terminal, an ask is shown to the person at the
//! keyboard (the action and the call's arguments) and answered there. Without a
//! terminal no approver is installed and an ask defers, so a run never hangs.

use std::io::{BufRead, IsTerminal, Write};

use futures_util::future::BoxFuture;
use io_harness::policy::{Approval, ApprovalRequest, Approver, Remember};

use super::output;

/// Asks on stderr, reads the answer from stdin.
pub struct TerminalApprover;

impl TerminalApprover {
    /// The approver when both stdin and stderr are terminals.
    pub fn if_interactive(json: bool) -> Option<Self> {
        (!json && std::io::stdin().is_terminal() && std::io::stderr().is_terminal()).then_some(Self)
    }
}

fn read_line() -> String {
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    line.trim().to_string()
}

fn ask(request: &ApprovalRequest) -> Approval {
    let mut err = std::io::stderr();
    let _ = writeln!(
        err,
        "\n\u{1b}[1mapproval needed\u{1b}[0m: {} {}\n  {}\n[y] allow once  [a] allow exactly this for the rest of this run  [p] allow the program with any arguments for the rest of this run  [d] deny  [l] decide later: ",
        request.action.act.as_str(),
        // Escaped, not stripped: what is approved is shown byte for byte (`x\u{200b}y`
        // is not `xy`), and no character in it can rewrite the terminal.
        output::escape(&request.action.target),
        output::escape(&request.detail)
    );
    loop {
        match read_line().as_str() {
            "y" | "Y" | "yes" => return Approval::approve(),
            "a" | "A" | "always" => {
                return Approval::Approve {
                    modified: None,
                    remember: Remember::Exact,
                };
            }
            "p" | "P" | "program" => {
                return Approval::Approve {
                    modified: None,
                    remember: Remember::Program,
                };
            }
            "d" | "D" | "deny" => {
                let _ = write!(err, "reason (shown to the model): ");
                let _ = err.flush();
                let reason = read_line();
                return Approval::deny(if reason.is_empty() {
                    "denied by the operator".into()
                } else {
                    reason
                });
            }
            "l" | "L" | "later" | "" => return Approval::Defer,
            _ => {
                let _ = write!(err, "y, a, p, d or l: ");
                let _ = err.flush();
            }
        }
    }
}

impl Approver for TerminalApprover {
    fn decide(&self, request: &ApprovalRequest) -> BoxFuture<'_, Approval> {
        let request = request.clone();
        Box::pin(async move {
            // A thread of its own, not the blocking pool: a read of the terminal cannot
            // be interrupted, and the runtime waits for its pool's tasks when it shuts
            // down, so a prompt the run abandoned (Ctrl-C, the deadline) would keep the
            // process alive until someone pressed Enter. A detached thread dies with it.
            let (tx, rx) = tokio::sync::oneshot::channel();
            let asked = std::thread::Builder::new()
                .name("io-harness-approval".into())
                .spawn(move || {
                    let _ = tx.send(ask(&request));
                });
            if asked.is_err() {
                return Approval::Defer;
            }
            rx.await.unwrap_or(Approval::Defer)
        })
    }
}
