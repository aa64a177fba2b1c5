//! The stored final diff read back into per-file pieces, and a text hunk applied
//! exactly.
//!
//! The diff is the harness's own (`workdir::diff_snapshots`): a `diff --harness a/P b/P`
//! header per changed path, then a unified diff, a binary note or a withheld note. The
//! reader follows that shape line by line and counts each hunk's lines from its header,
//! so a file whose content looks like a header cannot start a piece of its own. A hunk
//! applies only where every context and removed line matches exactly: applied to the
//! run's baseline (the very text the diff was made from) it gives back the agent's file
//! byte for byte; applied elsewhere, any difference is a conflict, never a fuzzy guess.

/// One changed path of the stored diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// A text change: its hunks, and whether each side exists.
    Text {
        path: String,
        old_exists: bool,
        new_exists: bool,
        hunks: Vec<Hunk>,
    },
    /// A header alone: an empty file added or deleted, or a file turned into a link
    /// with the same text. Only the baseline can say which.
    Bare { path: String },
    /// A binary or large file: the diff holds no content.
    Binary { path: String },
    /// The policy kept the content out of the record.
    Withheld { path: String },
}

impl Piece {
    /// The path it changes (relative to the workspace, `/`-separated).
    pub(crate) fn path(&self) -> &str {
        match self {
            Self::Text { path, .. }
            | Self::Bare { path }
            | Self::Binary { path }
            | Self::Withheld { path } => path,
        }
    }
}

/// One hunk: where its old side starts and its lines, each with its line ending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hunk {
    /// The first old line, 1-based; for an empty old side the line it follows.
    old_start: usize,
    old_len: usize,
    lines: Vec<(Tag, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Context,
    Removed,
    Added,
}

/// The whole stored diff.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ParsedDiff {
    pub pieces: Vec<Piece>,
    /// Files the diff left out past its size bound.
    pub truncated: Option<usize>,
}

/// Reads a stored final diff. An error names the line that does not fit the shape.
pub(crate) fn parse(diff: &str) -> Result<ParsedDiff, String> {
    let mut lines: Vec<&str> = diff.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    let mut out = ParsedDiff::default();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(rest) = line.strip_prefix("[diff truncated: ") {
            let n = rest.split(' ').next().and_then(|n| n.parse().ok());
            out.truncated = Some(n.unwrap_or(0));
            i += 1;
            continue;
        }
        let Some(rest) = line.strip_prefix("diff --harness ") else {
            return Err(format!(
                "line {}: expected a `diff --harness` header",
                i + 1
            ));
        };
        let (quoted, path) =
            header_path(rest).ok_or_else(|| format!("line {}: bad header", i + 1))?;
        i += 1;
        let next = lines.get(i).copied();
        let withheld_tail = "; content withheld (the policy denies reading it)";
        let piece = match next {
            Some(l) if l.starts_with("--- ") => {
                let (piece, used) =
                    text_piece(&lines[i..], path).map_err(|e| format!("line {}: {e}", i + 1))?;
                i += used;
                piece
            }
            Some(l) if l.starts_with("Binary or large files ") => {
                i += 1;
                Piece::Binary { path }
            }
            Some(l)
                if l.strip_prefix(quoted.as_str())
                    .and_then(|r| r.strip_suffix(withheld_tail))
                    .is_some_and(|w| matches!(w, " added" | " deleted" | " changed")) =>
            {
                i += 1;
                Piece::Withheld { path }
            }
            _ => Piece::Bare { path },
        };
        out.pieces.push(piece);
    }
    Ok(out)
}

/// `a/P b/P` → (P as written, P unquoted). Both halves are the same text, so the
/// split is by length, whatever P holds.
fn header_path(rest: &str) -> Option<(String, String)> {
    let n = rest.len().checked_sub(5)?;
    if n % 2 != 0 {
        return None;
    }
    let k = n / 2;
    let (a, b) = (rest.get(..2)?, rest.get(2..2 + k)?);
    let (sep, b2) = (rest.get(2 + k..5 + k)?, rest.get(5 + k..)?);
    if a != "a/" || sep != " b/" || b != b2 {
        return None;
    }
    Some((b.to_string(), unquote(b)?))
}

/// The inverse of the diff's path quoting (`"a\nb"`, `\u{200b}`).
fn unquote(p: &str) -> Option<String> {
    let Some(inner) = p.strip_prefix('"').and_then(|s| s.strip_suffix('"')) else {
        return Some(p.to_string());
    };
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            '"' => out.push('"'),
            '\\' => out.push('\\'),
            'u' => {
                if chars.next()? != '{' {
                    return None;
                }
                let hex: String = chars.by_ref().take_while(|&c| c != '}').collect();
                out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
            }
            _ => return None,
        }
    }
    Some(out)
}

/// A unified diff from `---`: its hunks and how many lines it took.
fn text_piece(lines: &[&str], path: String) -> Result<(Piece, usize), String> {
    let old_exists = lines[0] != "--- /dev/null";
    let new = lines.get(1).ok_or("no `+++` line")?;
    if !new.starts_with("+++ ") {
        return Err("expected `+++`".into());
    }
    let new_exists = *new != "+++ /dev/null";
    let mut i = 2;
    let mut hunks = Vec::new();
    while let Some(h) = lines.get(i).and_then(|l| l.strip_prefix("@@ -")) {
        let (hunk, used) = hunk(&lines[i + 1..], h)?;
        hunks.push(hunk);
        i += 1 + used;
    }
    let piece = Piece::Text {
        path,
        old_exists,
        new_exists,
        hunks,
    };
    Ok((piece, i))
}

/// `A[,a] +B[,b] @@` and the lines after it.
fn hunk(lines: &[&str], header: &str) -> Result<(Hunk, usize), String> {
    let range = |r: &str| -> Option<(usize, usize)> {
        match r.split_once(',') {
            Some((s, l)) => Some((s.parse().ok()?, l.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (old, new) = header
        .strip_suffix(" @@")
        .and_then(|h| h.split_once(" +"))
        .ok_or("bad hunk header")?;
    let ((old_start, old_len), (_, new_len)) =
        range(old).zip(range(new)).ok_or("bad hunk range")?;
    let (mut seen_old, mut seen_new, mut i) = (0, 0, 0);
    let mut out: Vec<(Tag, String)> = Vec::new();
    while seen_old < old_len
        || seen_new < new_len
        || lines.get(i).is_some_and(|l| l.starts_with('\\'))
    {
        let line = lines.get(i).ok_or("hunk cut short")?;
        i += 1;
        let tag = match line.chars().next() {
            Some(' ') => Tag::Context,
            Some('-') => Tag::Removed,
            Some('+') => Tag::Added,
            Some('\\') => {
                let last = out.last_mut().ok_or("a no-newline mark before any line")?;
                last.1.pop();
                continue;
            }
            _ => return Err("a hunk line without a marker".into()),
        };
        match tag {
            Tag::Context => (seen_old, seen_new) = (seen_old + 1, seen_new + 1),
            Tag::Removed => seen_old += 1,
            Tag::Added => seen_new += 1,
        }
        if seen_old > old_len || seen_new > new_len {
            return Err("more hunk lines than its header says".into());
        }
        out.push((tag, format!("{}\n", &line[1..])));
    }
    let hunk = Hunk {
        old_start,
        old_len,
        lines: out,
    };
    Ok((hunk, i))
}

/// `text` with `hunks` applied; an error when a context or removed line is not
/// exactly where the hunk says.
pub(crate) fn apply(text: &str, hunks: &[Hunk]) -> Result<String, String> {
    let base: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for h in hunks {
        let start = if h.old_len == 0 {
            h.old_start
        } else {
            h.old_start.saturating_sub(1)
        };
        if start < pos || start > base.len() {
            return Err(format!("a hunk at line {} is out of order", h.old_start));
        }
        out.extend(base[pos..start].iter().copied());
        let mut at = start;
        for (tag, line) in &h.lines {
            if *tag != Tag::Added {
                if base.get(at) != Some(&line.as_str()) {
                    return Err(format!("line {} differs", at + 1));
                }
                at += 1;
            }
            if *tag != Tag::Removed {
                out.push_str(line);
            }
        }
        pos = at;
    }
    out.extend(base[pos..].iter().copied());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use similar::TextDiff;

    fn piece(path: &str, old: Option<&str>, new: Option<&str>) -> String {
        let d = TextDiff::from_lines(old.unwrap_or(""), new.unwrap_or(""));
        let name = |side: &str, s: Option<&str>| {
            s.map_or("/dev/null".to_string(), |_| format!("{side}/{path}"))
        };
        format!(
            "diff --harness a/{path} b/{path}\n{}",
            d.unified_diff()
                .context_radius(3)
                .header(&name("a", old), &name("b", new))
        )
    }

    #[test]
    fn hunks_read_back_give_the_new_text_exactly() {
        let cases = [
            ("one\ntwo\nthree\n", "one\n2\nthree\nfour\n"),
            ("a\nb", "a\nb\nc"),
            ("a\nb\n", "a\nb"),
            ("", "new\nfile"),
            ("x\r\ny\r\n", "x\r\nz\r\n"),
            (
                "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n",
                "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n",
            ),
        ];
        for (old, new) in cases {
            let d = parse(&piece("f.txt", Some(old), Some(new))).unwrap();
            let Piece::Text { hunks, .. } = &d.pieces[0] else {
                panic!("{d:?}")
            };
            assert_eq!(apply(old, hunks).unwrap(), new, "{old:?} -> {new:?}");
        }
    }

    #[test]
    fn a_changed_context_line_is_refused_not_guessed() {
        let d = parse(&piece("f", Some("a\nb\nc\n"), Some("a\nB\nc\n"))).unwrap();
        let Piece::Text { hunks, .. } = &d.pieces[0] else {
            panic!()
        };
        assert!(apply("a\nb\nC\n", hunks).is_err());
        assert!(apply("z\na\nb\nc\n", hunks).is_err());
    }

    #[test]
    fn every_kind_of_piece_and_quoted_paths_are_read() {
        let mut text = piece("added.txt", None, Some("hi\n"));
        text.push_str(&piece("gone.txt", Some("bye\n"), None));
        // Content that looks like a header stays content.
        text.push_str(&piece("x", Some("a\n"), Some("diff --harness a/y b/y\n")));
        text.push_str("diff --harness a/img.png b/img.png\nBinary or large files a/img.png and b/img.png differ\n");
        text.push_str("diff --harness a/.env b/.env\n.env changed; content withheld (the policy denies reading it)\n");
        text.push_str("diff --harness a/\"a\\nb\" b/\"a\\nb\"\n");
        text.push_str("[diff truncated: 3 more changed files not shown]\n");
        let d = parse(&text).unwrap();
        let paths: Vec<&str> = d.pieces.iter().map(Piece::path).collect();
        assert_eq!(
            paths,
            ["added.txt", "gone.txt", "x", "img.png", ".env", "a\nb"]
        );
        assert!(matches!(
            d.pieces[0],
            Piece::Text {
                old_exists: false,
                new_exists: true,
                ..
            }
        ));
        assert!(matches!(
            d.pieces[1],
            Piece::Text {
                old_exists: true,
                new_exists: false,
                ..
            }
        ));
        assert!(matches!(d.pieces[3], Piece::Binary { .. }));
        assert!(matches!(d.pieces[4], Piece::Withheld { .. }));
        assert!(matches!(d.pieces[5], Piece::Bare { .. }));
        assert_eq!(d.truncated, Some(3));
        assert!(parse("not a diff\n").is_err());
    }
}
