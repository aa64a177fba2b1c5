//! The final diff, coloured by line kind and cut at [`MAX_DIFF_BYTES`].
//!
//! A diff is cut between files, never inside a line: the files that fit are shown
//! whole and the page says how many were left out, so a reader knows the diff is
//! incomplete and where to get the rest (`io-harness show`).

use super::html::Html;

/// The most diff text a page holds (the 200 KB).
pub const MAX_DIFF_BYTES: usize = 200 * 1024;

/// One file's part of a diff (from its `diff ` header line to the next).
fn files(diff: &str) -> Vec<&str> {
    let mut starts: Vec<usize> = Vec::new();
    let mut at = 0;
    for line in diff.split_inclusive('\n') {
        if line.starts_with("diff ") || starts.is_empty() {
            starts.push(at);
        }
        at += line.len();
    }
    let mut out = Vec::with_capacity(starts.len());
    for (i, s) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(diff.len());
        out.push(&diff[*s..end]);
    }
    out
}

/// The files of `diff` that fit in `max` bytes, and how many did not.
pub(crate) fn bounded(diff: &str, max: usize) -> (Vec<&str>, usize) {
    let all = files(diff);
    let mut used = 0;
    let mut shown = Vec::new();
    for (i, f) in all.iter().enumerate() {
        if used + f.len() > max {
            return (shown, all.len() - i);
        }
        used += f.len();
        shown.push(*f);
    }
    (shown, 0)
}

/// The class of a diff line, by its first characters.
fn class(line: &str) -> &'static str {
    if line.starts_with("diff ") || line.starts_with("--- ") || line.starts_with("+++ ") {
        "dh"
    } else if line.starts_with("@@") {
        "dk"
    } else if line.starts_with('+') {
        "da"
    } else if line.starts_with('-') {
        "dd"
    } else {
        "dc"
    }
}

/// Writes the diff section's content.
pub(crate) fn write(h: &mut Html<'_>, diff: Option<&str>) {
    let Some(diff) = diff else {
        h.raw("<p class=\"muted\">No diff recorded (the run did not finish).</p>");
        return;
    };
    if diff.is_empty() {
        h.raw("<p class=\"muted\">No changes.</p>");
        return;
    }
    let (shown, omitted) = bounded(diff, MAX_DIFF_BYTES);
    h.raw("<div class=\"untrusted\"><div class=\"src\">untrusted · the agent's changes</div><pre class=\"diff\">");
    for f in &shown {
        for line in f.lines() {
            h.raw("<span class=\"")
                .raw(class(line))
                .raw("\">")
                .text(line)
                .raw("</span>\n");
        }
    }
    h.raw("</pre></div>");
    if omitted > 0 {
        h.fmt(format_args!(
            "<p class=\"cut\" id=\"diff-cut\">The diff is over 200 KB: {omitted} more file(s) not shown (io-harness show has it whole).</p>"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_diff_is_cut_between_files() {
        let file = |n: usize| format!("diff --harness a/f{n} b/f{n}\n+{}\n", "x".repeat(100));
        let diff: String = (0..10).map(file).collect();
        let (shown, omitted) = bounded(&diff, 350);
        assert_eq!(shown.len(), 2);
        assert_eq!(omitted, 8);
        assert!(shown[1].starts_with("diff --harness a/f1"));
        let (all, none) = bounded(&diff, 1 << 20);
        assert_eq!((all.len(), none), (10, 0));
        assert_eq!(all.concat(), diff);
    }

    #[test]
    fn lines_are_classed_by_kind() {
        assert_eq!(class("+++ b/x"), "dh");
        assert_eq!(class("+added"), "da");
        assert_eq!(class("-gone"), "dd");
        assert_eq!(class("@@ -1 +1 @@"), "dk");
        assert_eq!(class(" same"), "dc");
    }
}
