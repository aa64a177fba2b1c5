//! What ends every wait of a run early: its cancel token and its deadline, as one
//! value ([`Halt`]) that the engine hands to whatever waits on its behalf — the model
//! call and its retry sleeps, a command in the sandbox, a gate, an MCP call, an
//! approval prompt.
//!
//! A wait that observes a [`Halt`] ends as soon as either fires, whatever it was
//! waiting for; the waiter then says which ([`HaltReason`]), so the record can tell a
//! command stopped by the run's time budget from one that hit its own wall cap.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// A cancellation flag shared between the run and whoever may stop it (a Ctrl-C
/// handler, another task). Cancelling ends every wait of the run at once — the model
/// call, a running command (its sandbox is killed), a gate, an MCP call, an approval
/// prompt — and the run ends `Cancelled`, resumable.
///
/// ```
/// use io_harness::CancelToken;
/// let token = CancelToken::new();
/// let handler = token.clone();
/// handler.cancel();
/// assert!(token.is_cancelled());
/// ```
#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    flag: Arc<AtomicBool>,
    notify: Arc<tokio::sync::Notify>,
}

impl CancelToken {
    /// A fresh token.
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests cancellation.
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Whether cancellation was requested.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Resolves once cancellation is requested.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it loses nothing.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the flag is read: a `cancel` between the read and the
            // first poll would otherwise wake nobody.
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// How the result of a call that an interruption cut off begins (the harness tells
/// the model so on resume, instead of running the call again).
pub const INTERRUPTED_PREFIX: &str = "interrupted: ";

/// Why a wait was ended early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaltReason {
    /// The run was cancelled (Ctrl-C, an observer, the embedder).
    Cancelled,
    /// The run's time budget ran out.
    Deadline,
}

impl HaltReason {
    /// The label the record uses: `cancelled` or `time_budget`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Cancelled => "cancelled",
            Self::Deadline => "time_budget",
        }
    }
}

/// The run's cancel token and deadline, observed by every wait.
///
/// ```
/// use std::time::Duration;
/// use io_harness::halt::{Halt, HaltReason};
/// use io_harness::CancelToken;
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let halt = Halt::new(CancelToken::new(), Some(Duration::from_millis(10)));
/// let slow = tokio::time::sleep(Duration::from_secs(60));
/// assert_eq!(halt.guard(slow).await, Err(HaltReason::Deadline));
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct Halt {
    cancel: CancelToken,
    deadline: Option<Instant>,
}

impl Halt {
    /// A halt for `cancel` and, when given, a deadline `remaining` from now.
    pub fn new(cancel: CancelToken, remaining: Option<Duration>) -> Self {
        Self {
            cancel,
            deadline: remaining.map(|d| Instant::now() + d),
        }
    }

    /// The same token with a deadline no later than `remaining` from now (a
    /// sub-agent's share of its parent's time).
    pub fn narrowed(&self, remaining: Option<Duration>) -> Self {
        let mine = remaining.map(|d| Instant::now() + d);
        let deadline = match (self.deadline, mine) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Self {
            cancel: self.cancel.clone(),
            deadline,
        }
    }

    /// The cancel token.
    pub fn cancel_token(&self) -> &CancelToken {
        &self.cancel
    }

    /// The deadline, when the run has a time budget.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Time left before the deadline (`None`: no deadline).
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Whether the wait should end now, and why (cancellation first).
    pub fn reached_now(&self) -> Option<HaltReason> {
        if self.cancel.is_cancelled() {
            return Some(HaltReason::Cancelled);
        }
        self.deadline
            .filter(|d| Instant::now() >= *d)
            .map(|_| HaltReason::Deadline)
    }

    /// Resolves when the run is cancelled or its deadline passes.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn reached(&self) -> HaltReason {
        let deadline = async {
            match self.deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => HaltReason::Cancelled,
            () = deadline => HaltReason::Deadline,
        }
    }

    /// Runs `wait` unless the halt comes first; then `wait` is dropped.
    ///
    /// # Cancel safety
    /// As cancel safe as `wait`.
    pub async fn guard<F: Future>(&self, wait: F) -> Result<F::Output, HaltReason> {
        if let Some(r) = self.reached_now() {
            return Err(r);
        }
        tokio::select! {
            biased;
            r = self.reached() => Err(r),
            out = wait => Ok(out),
        }
    }

    /// Like [`Halt::guard`], but a wait that observes the halt itself (a sandboxed
    /// command, which then records why it stopped) gets `grace` to finish on its own
    /// before it is dropped.
    pub async fn guard_with_grace<F: Future>(
        &self,
        wait: F,
        grace: Duration,
    ) -> Result<F::Output, HaltReason> {
        tokio::pin!(wait);
        let why = tokio::select! {
            out = &mut wait => return Ok(out),
            r = self.reached() => r,
        };
        match tokio::time::timeout(grace, wait).await {
            Ok(out) => Ok(out),
            Err(_) => Err(why),
        }
    }
}
