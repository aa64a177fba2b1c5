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

/// The files of `diff` that fit in `max` bytes, and how many did not. A first file
/// larger than `max` alone is shown up to the last line that fits (the page would
/// otherwise show no file at all; adversary B5 of issue 20), and counted as cut.
pub(crate) fn bounded(diff: &str, max: usize) -> (Vec<&str>, usize) {
    let all = files(diff);
    let mut used = 0;
    let mut shown = Vec::new();
    for (i, f) in all.iter().enumerate() {
        if used + f.len() > max {
            if i == 0 {
                let end = f[..max.min(f.len())].rfind('\n').map_or(0, |e| e + 1);
                if end > 0 {
                    shown.push(&f[..end]);
                }
            }
            return (shown, all.len() - i);
        }
        used += f.len();
        shown.push(*f);
    }
    (shown, 0)
}

/// The diff without the record's own cut line, and the number of changed files that
/// line says were never stored.
fn stored_cut(diff: &str) -> (&str, usize) {
    let trimmed = diff.trim_end_matches('\n');
    let Some(at) = trimmed.rfind("[diff truncated: ") else {
        return (diff, 0);
    };
    let line = &trimmed[at..];
    if line.contains('\n') || !(at == 0 || trimmed[..at].ends_with('\n')) {
        return (diff, 0);
    }
    let n = line["[diff truncated: ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    (&diff[..at], n)
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
    let (diff, never_stored) = stored_cut(diff);
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
            "<p class=\"cut\" id=\"diff-cut\">The diff is over 200 KB: {omitted} more file(s) not shown here, a file cut at its last line that fits counted among them (io-harness show has the recorded diff).</p>"
        ));
    }
    if never_stored > 0 {
        h.fmt(format_args!(
            "<p class=\"cut\" id=\"diff-never-stored\">The recorded diff is itself cut: {never_stored} more changed file(s) were never stored (the workspace has them: io-harness diff).</p>"
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

    /// Adversary B5 of issue 20: one file over the bound left the page with no file
    /// and a count that missed the files the record itself had cut.
    #[test]
    fn a_first_file_over_the_bound_is_shown_cut_and_the_records_own_cut_is_counted() {
        let big = format!("diff --harness a/big b/big\n{}", "+line\n".repeat(100));
        let diff = format!(
            "{big}diff --harness a/s b/s\n+x\n[diff truncated: 32 more changed files not shown]\n"
        );
        let (body, never) = stored_cut(&diff);
        assert_eq!(never, 32);
        assert!(!body.contains("[diff truncated"));
        let (shown, omitted) = bounded(body, 100);
        assert_eq!(shown.len(), 1);
        assert!(shown[0].starts_with("diff --harness a/big") && shown[0].len() <= 100);
        assert!(shown[0].ends_with('\n'));
        assert_eq!(omitted, 2, "the cut file and the one after it");
        assert_eq!(
            stored_cut("+[diff truncated: x"),
            ("+[diff truncated: x", 0)
        );
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
