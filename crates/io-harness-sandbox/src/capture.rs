//! What is kept of one output stream: its head, its true tail, and how much it wrote.
//!
//! A failing build or test run says what went wrong at its end, so keeping only the
//! first bytes (as the cap once did) hides exactly the part worth reading. The stream
//! is drained to its end: the first `cap` bytes are kept, and the last `cap` bytes
//! after them in a ring buffer, so memory stays at twice the cap however much is
//! written. A command that writes without end (`yes`) is not left to run to its wall
//! clock: past [`OutputOverflow::kill_at`] the caller kills it.

use std::collections::VecDeque;

use crate::Captured;
use crate::spec::OutputOverflow;

/// One stream's kept output while the command runs.
#[derive(Debug)]
pub(crate) struct Keeper {
    cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    kill_at: u64,
}

impl Keeper {
    /// Keeps at most `cap` bytes of head and `cap` of tail under `overflow`.
    pub(crate) fn new(cap: usize, overflow: OutputOverflow) -> Keeper {
        Keeper {
            cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            kill_at: overflow.kill_at(cap as u64),
        }
    }

    /// Takes `bytes` just read from the stream; returns how many of them went into
    /// the head (the part an echo passes on).
    pub(crate) fn push(&mut self, bytes: &[u8]) -> usize {
        self.total = self.total.saturating_add(bytes.len() as u64);
        let room = self.cap.saturating_sub(self.head.len());
        let take = bytes.len().min(room);
        self.head.extend_from_slice(&bytes[..take]);
        let rest = &bytes[take..];
        if rest.is_empty() || self.cap == 0 {
            return take;
        }
        // Only the last `cap` bytes of `rest` can survive.
        let rest = &rest[rest.len().saturating_sub(self.cap)..];
        let over = (self.tail.len() + rest.len()).saturating_sub(self.cap);
        self.tail.drain(..over);
        self.tail.extend(rest);
        take
    }

    /// Whether the stream has written past the point where the command is killed.
    pub(crate) fn over_kill_limit(&self) -> bool {
        self.total > self.kill_at
    }

    /// What was kept.
    pub(crate) fn finish(self) -> Captured {
        let truncated = self.total > self.head.len() as u64;
        Captured {
            bytes: self.head,
            truncated,
            tail: self.tail.into(),
            total_bytes: self.total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_and_the_true_tail_are_kept_and_the_middle_is_counted() {
        let mut k = Keeper::new(4, OutputOverflow::Tail);
        for chunk in [&b"abc"[..], b"defgh", b"ijklmnopq", b"rs"] {
            k.push(chunk);
        }
        assert!(!k.over_kill_limit());
        let c = k.finish();
        assert_eq!(c.bytes, b"abcd");
        assert_eq!(c.tail, b"pqrs");
        assert_eq!(c.total_bytes, 19);
        assert!(c.truncated);
    }

    #[test]
    fn output_within_the_cap_has_no_tail() {
        let mut k = Keeper::new(8, OutputOverflow::Tail);
        k.push(b"12345678");
        let c = k.finish();
        assert_eq!(
            (c.bytes.as_slice(), c.tail.len(), c.truncated),
            (&b"12345678"[..], 0, false)
        );
    }

    #[test]
    fn the_kill_limit_is_sixty_four_caps_for_tail_and_the_cap_for_kill() {
        let mut tail = Keeper::new(10, OutputOverflow::Tail);
        tail.push(&[b'y'; 640]);
        assert!(!tail.over_kill_limit());
        tail.push(b"y");
        assert!(tail.over_kill_limit());
        let mut kill = Keeper::new(10, OutputOverflow::Kill);
        kill.push(&[b'y'; 10]);
        assert!(!kill.over_kill_limit());
        kill.push(b"y");
        assert!(kill.over_kill_limit());
        assert!(!Keeper::new(usize::MAX, OutputOverflow::Kill).over_kill_limit());
    }
}
