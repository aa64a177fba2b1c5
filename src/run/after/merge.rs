//! A three-way merge of lines, as `git apply --3way` and `git merge-file` do it: where
//! only one side changed a region of the base, that side wins; where both changed it
//! alike, once; where both changed it differently, a conflict. No markers are ever
//! written: a conflict refuses the file.

use similar::{Algorithm, DiffOp, capture_diff_slices};

/// For each line of `base`, the line of `other` it is matched to (longest common
/// subsequence, so the matches increase).
fn matches(base: &[&str], other: &[&str]) -> Vec<Option<usize>> {
    let mut out = vec![None; base.len()];
    for op in capture_diff_slices(Algorithm::Myers, base, other) {
        if let DiffOp::Equal {
            old_index,
            new_index,
            len,
        } = op
        {
            for k in 0..len {
                out[old_index + k] = Some(new_index + k);
            }
        }
    }
    out
}

/// `ours` and `theirs`, both descended from `base`, merged; `None` on a conflict.
pub(crate) fn merge3(base: &str, ours: &str, theirs: &str) -> Option<String> {
    let b: Vec<&str> = base.split_inclusive('\n').collect();
    let o: Vec<&str> = ours.split_inclusive('\n').collect();
    let t: Vec<&str> = theirs.split_inclusive('\n').collect();
    let (mo, mt) = (matches(&b, &o), matches(&b, &t));
    let mut out = String::with_capacity(ours.len().max(theirs.len()));
    let (mut i, mut io, mut it) = (0, 0, 0);
    while i < b.len() || io < o.len() || it < t.len() {
        // A base line both sides kept where they stand: stable.
        if i < b.len() && mo[i] == Some(io) && mt[i] == Some(it) {
            out.push_str(b[i]);
            (i, io, it) = (i + 1, io + 1, it + 1);
            continue;
        }
        // Otherwise the region up to the next base line both sides kept.
        let next = (i..b.len()).find_map(|j| Some((j, mo[j]?, mt[j]?)));
        let (j, jo, jt) = next.unwrap_or((b.len(), o.len(), t.len()));
        let (rb, ro, rt) = (&b[i..j], &o[io..jo], &t[it..jt]);
        let take = if ro == rb || ro == rt {
            rt
        } else if rt == rb {
            ro
        } else {
            return None;
        };
        take.iter().for_each(|l| out.push_str(l));
        (i, io, it) = (j, jo, jt);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::merge3;

    const BASE: &str = "a\nb\nc\nd\ne\nf\ng\n";

    #[test]
    fn changes_to_different_regions_merge() {
        let ours = "A\nb\nc\nd\ne\nf\ng\n";
        let theirs = "a\nb\nc\nd\ne\nf\nG\nh\n";
        assert_eq!(
            merge3(BASE, ours, theirs).as_deref(),
            Some("A\nb\nc\nd\ne\nf\nG\nh\n")
        );
        // One side unchanged: the other wins whole.
        assert_eq!(merge3(BASE, BASE, theirs).as_deref(), Some(theirs));
        assert_eq!(merge3(BASE, ours, BASE).as_deref(), Some(ours));
        // The same change on both sides is taken once.
        assert_eq!(merge3(BASE, theirs, theirs).as_deref(), Some(theirs));
    }

    #[test]
    fn different_changes_to_one_region_conflict() {
        assert_eq!(
            merge3(BASE, "a\nb\nX\nd\ne\nf\ng\n", "a\nb\nY\nd\ne\nf\ng\n"),
            None
        );
        // Both inserting different lines at the same place.
        assert_eq!(merge3("a\nb\n", "a\nx\nb\n", "a\ny\nb\n"), None);
        // One deleting what the other changed.
        assert_eq!(
            merge3(BASE, "a\nb\nd\ne\nf\ng\n", "a\nb\nC\nd\ne\nf\ng\n"),
            None
        );
    }
}
