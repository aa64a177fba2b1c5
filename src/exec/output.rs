//! Output capture that keeps the head and the tail of a stream and counts the rest,
//! so a gate that prints gigabytes costs a bounded amount of memory and the record
//! still shows how it started and how it ended. Commands (the `run_command` tool) and
//! gates (`verify`) both capture through it.

/// Bytes kept by default (half head, half tail).
pub const DEFAULT_LIMIT: usize = 16 * 1024;

/// A bounded capture of a byte stream.
///
/// ```
/// use io_harness::exec::BoundedOutput;
/// let mut out = BoundedOutput::new(8);
/// out.push(b"0123456789abcdef");
/// assert_eq!(out.total(), 16);
/// assert!(out.render().contains("8 of 16 bytes omitted"));
/// ```
#[derive(Debug, Clone)]
pub struct BoundedOutput {
    limit: usize,
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total: u64,
    /// A gap was skipped: the head takes nothing more.
    head_closed: bool,
}

impl BoundedOutput {
    /// A capture keeping at most `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            total: 0,
            head_closed: false,
        }
    }

    /// Appends bytes.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let head_cap = self.limit / 2;
        if self.head.len() < head_cap && !self.head_closed {
            let take = (head_cap - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        let tail_cap = self.limit - head_cap;
        if bytes.len() >= tail_cap {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - tail_cap..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// Counts `n` bytes of the stream that were never seen (the middle a sandbox
    /// dropped between the head and the tail it kept): what follows is the tail.
    pub fn skip(&mut self, n: u64) {
        if n > 0 {
            self.total += n;
            self.tail.clear();
            self.head_closed = true;
        }
    }

    /// Bytes seen in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether anything was dropped.
    pub fn truncated(&self) -> bool {
        self.total > (self.head.len() + self.tail.len()) as u64
    }

    /// The kept text: head, a line stating what was omitted, tail.
    pub fn render(&self) -> String {
        let mut s = String::from_utf8_lossy(&self.head).into_owned();
        let kept = (self.head.len() + self.tail.len()) as u64;
        if self.total > kept {
            s.push_str(&format!(
                "\n[... {} of {} bytes omitted ...]\n",
                self.total - kept,
                self.total
            ));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        s.push_str(&String::from_utf8_lossy(&tail));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_everything_under_the_limit() {
        let mut o = BoundedOutput::new(100);
        o.push(b"hello ");
        o.push(b"world");
        assert_eq!(o.render(), "hello world");
        assert!(!o.truncated());
    }

    #[test]
    fn keeps_head_and_tail_across_many_pushes() {
        let mut o = BoundedOutput::new(10);
        for i in 0..1000u32 {
            o.push(format!("{}", i % 10).as_bytes());
        }
        let r = o.render();
        assert!(r.starts_with("01234"), "{r}");
        assert!(r.ends_with("56789"), "{r}");
        assert!(r.contains("990 of 1000 bytes omitted"), "{r}");
        assert!(o.truncated());
    }
}
