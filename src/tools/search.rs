//! The search tools: `find` (paths by glob) and `grep` (contents by regex), both over
//! the confined, ignore-aware walk in [`walk`].

mod find;
mod grep;
mod walk;

use globset::{GlobBuilder, GlobMatcher};

use super::ToolError;

pub use find::Find;
pub use grep::Grep;

/// A glob as the search tools read it: a pattern without `/` matches the file name at
/// any depth; one with `/` matches the path relative to the workspace root or to the
/// search's start directory. `*` stays within one component, `**` crosses them.
pub(super) struct PathGlob {
    matcher: GlobMatcher,
    name_only: bool,
}

impl PathGlob {
    pub(super) fn new(pattern: &str) -> Result<Self, ToolError> {
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::BadInput(format!("bad glob {pattern:?}: {e}")))?;
        Ok(Self {
            matcher: glob.compile_matcher(),
            name_only: !pattern.contains('/'),
        })
    }

    /// Whether `rel` (relative to the root) matches, `start` being the normalized
    /// directory the search began in.
    pub(super) fn is_match(&self, rel: &str, start: &str) -> bool {
        if self.name_only {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            return self.matcher.is_match(name);
        }
        self.matcher.is_match(rel) || self.matcher.is_match(below(rel, start))
    }
}

/// `rel` relative to the directory `start` (`rel` itself when `start` is the root).
fn below<'a>(rel: &'a str, start: &str) -> &'a str {
    if start == "." {
        return rel;
    }
    rel.strip_prefix(start)
        .and_then(|s| s.strip_prefix('/'))
        .unwrap_or(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_names_anywhere_and_paths_from_root_or_start() {
        let g = PathGlob::new("*.rs").unwrap();
        assert!(g.is_match("src/deep/lib.rs", "."));
        assert!(!g.is_match("src/lib.rs.bak", "."));
        let g = PathGlob::new("src/*.rs").unwrap();
        assert!(g.is_match("src/lib.rs", "."));
        assert!(!g.is_match("src/a/lib.rs", "."));
        let g = PathGlob::new("a/*.rs").unwrap();
        assert!(g.is_match("src/a/lib.rs", "src"));
        let g = PathGlob::new("**/mod.rs").unwrap();
        assert!(g.is_match("mod.rs", ".") && g.is_match("x/y/mod.rs", "."));
        assert!(matches!(
            PathGlob::new("a[").err(),
            Some(ToolError::BadInput(_))
        ));
    }
}
