//! What becomes of a run's result once the run is over: the workspace copy removed or
//! kept (`copies`), the final diff taken back into the original workspace (`apply`).
//!
//! A copy run leaves two things in its scratch directory under the cache: the copy the
//! agent worked on (often large: build outputs come along) and the snapshot of the
//! tree as the agent found it (small: tracked files only). After a success the copy
//! has done its job — the diff is in the store — so the command line removes it, and
//! keeps the snapshot: it is the exact base a three-way apply needs, where the stored
//! diff alone would only let a patch be guessed into place. A failed or resumable
//! run keeps both, for a person to look at or a resume to go on in.

mod apply;
mod copies;
mod merge;
mod patch;

pub use apply::{ApplyPlan, Current, RunChanges, Skipped, TakeError, Write, read_workspace};
pub use copies::{CopyState, PruneFreed, copy_state, discard_copy, remove_scratch};
