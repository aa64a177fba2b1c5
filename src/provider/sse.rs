//! A small Server-Sent Events parser that works on raw bytes.
//!
//! Both wire protocols stream their replies as SSE. We parse it ourselves rather than
//! with `eventsource-stream` because that crate cannot tell us two things the
//! providers need:
//!
//! * **that a stream was cut short.** At the end of its input it silently drops a
//!   half-received line or an event that never got its closing blank line; here
//!   [`SseParser::finish`] says what was left over, so the error can say so.
//! * **that the bytes are not text.** It holds back bytes that are not valid UTF-8
//!   while waiting for the rest of a character, so one bad byte in the middle
//!   stalls every later event until the connection ends; here a complete line that
//!   is not UTF-8 fails at once, as [`SseError::Utf8`].
//!
//! Decoding is per complete line, so a multi-byte character split across network
//! chunks is never a problem; line ends may be LF, CRLF or CR, a CRLF split between
//! two chunks included. Comment lines (`: keepalive`) are skipped, as are `id` and
//! `retry` fields (a POST is never re-sent by reconnecting).

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field; empty when the server sent none.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Bytes that are not a valid event stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SseError {
    /// A line is not UTF-8.
    #[error("SSE line {line} is not valid UTF-8")]
    Utf8 {
        /// 1-based line number.
        line: u64,
    },
    /// A line grew past [`MAX_LINE`] without ending.
    #[error("SSE line {line} is longer than {MAX_LINE} bytes")]
    LineTooLong {
        /// 1-based line number.
        line: u64,
    },
}

/// The longest line accepted. A tool call's arguments travel in many small events,
/// so real lines are short; this only stops a broken server from filling memory.
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;

/// Incremental parser: feed it chunks as they arrive, collect the events.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    line: Vec<u8>,
    /// The previous chunk ended in CR: an LF starting the next one belongs to it.
    after_cr: bool,
    started: bool,
    lines: u64,
    event: String,
    data: String,
    /// Bytes of completed lines that were not comments (`: ping` keep-alives).
    content: u64,
    /// A field has been seen since the last blank line.
    in_event: bool,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Parses `chunk`, appending completed events to `out`.
    pub(crate) fn push(
        &mut self,
        mut chunk: &[u8],
        out: &mut Vec<SseEvent>,
    ) -> Result<(), SseError> {
        if chunk.is_empty() {
            return Ok(());
        }
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&chunk[..end]);
            let ended_by_cr = chunk[end] == b'\r';
            chunk = &chunk[end + 1..];
            if ended_by_cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, out)?;
        }
        self.line.extend_from_slice(chunk);
        if self.line.len() > MAX_LINE {
            return Err(SseError::LineTooLong {
                line: self.lines + 1,
            });
        }
        Ok(())
    }

    /// Bytes of real content seen so far (comment lines left out), counting a line
    /// still arriving unless it is a comment: the idle timeout of a stream is about
    /// this number, so a server that only sends keep-alive comments is idle.
    pub(crate) fn content_seen(&self) -> u64 {
        let partial = if self.line.first() == Some(&b':') {
            0
        } else {
            self.line.len() as u64
        };
        self.content + partial
    }

    /// Ends the stream. Returns what was left unfinished, if anything: a line
    /// without its line end, or an event without its closing blank line. Such an
    /// event is not dispatched (as the SSE standard says), but the caller can now
    /// tell a cut stream from a complete one.
    pub(crate) fn finish(&self) -> Option<&'static str> {
        if !self.line.is_empty() {
            Some("a line without its line end")
        } else if self.in_event {
            Some("an event without its closing blank line")
        } else {
            None
        }
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        self.lines += 1;
        let mut line =
            std::str::from_utf8(line).map_err(|_| SseError::Utf8 { line: self.lines })?;
        if !self.started {
            self.started = true;
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(());
        }
        self.content += line.len() as u64 + 1;
        let (name, value) = match line.split_once(':') {
            Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        self.in_event = true;
        match name {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        self.in_event = false;
        let event = std::mem::take(&mut self.event);
        let mut data = std::mem::take(&mut self.data);
        if data.is_empty() {
            return;
        }
        data.pop();
        out.push(SseEvent { event, data });
    }
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in(chunks: &[&[u8]]) -> (Vec<SseEvent>, Option<&'static str>) {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in chunks {
            p.push(c, &mut out).unwrap();
        }
        let tail = p.finish();
        (out, tail)
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    const STREAM: &str = "\u{feff}: keepalive\r\nevent: a\r\ndata: {\"t\":\"caf\u{e9} \u{1f600}\"}\r\n\r\n\
        :comment\n\ndata:x\ndata: y\rid: 7\rretry: 10\r\r\nevent: b\ndata\n\n";

    #[test]
    fn every_split_point_gives_the_same_events() {
        let whole = parse_in(&[STREAM.as_bytes()]);
        assert_eq!(
            whole.0,
            vec![
                ev("a", "{\"t\":\"caf\u{e9} \u{1f600}\"}"),
                ev("", "x\ny"),
                ev("b", "")
            ]
        );
        assert_eq!(whole.1, None);
        let bytes = STREAM.as_bytes();
        for i in 0..=bytes.len() {
            for j in i..=bytes.len() {
                let split = parse_in(&[&bytes[..i], &bytes[i..j], &bytes[j..]]);
                assert_eq!(split, whole, "split at {i},{j}");
            }
        }
    }

    #[test]
    fn byte_at_a_time_and_cr_lf_split() {
        let chunks: Vec<&[u8]> = STREAM.as_bytes().chunks(1).collect();
        assert_eq!(parse_in(&chunks).0.len(), 3);
        // A CR ending one chunk and the LF starting the next are one line end.
        let (events, _) = parse_in(&[b"data: 1\r", b"\n\r", b"\ndata: 2\r\n\r\n"]);
        assert_eq!(events, vec![ev("", "1"), ev("", "2")]);
    }

    #[test]
    fn unfinished_tails_are_reported() {
        assert_eq!(
            parse_in(&[b"data: 1\n\ndata: {\"a\""]).1,
            Some("a line without its line end")
        );
        assert_eq!(
            parse_in(&[b"data: 1\n\ndata: 2\n"]).1,
            Some("an event without its closing blank line")
        );
        assert_eq!(parse_in(&[b"data: 1\n\n: bye\n"]).1, None);
    }

    #[test]
    fn invalid_utf8_fails_at_its_line() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        p.push(b"data: ok\n\n", &mut out).unwrap();
        assert_eq!(
            p.push(b"data: \xff\xfe\n", &mut out),
            Err(SseError::Utf8 { line: 3 })
        );
    }
}
