//! The merge rule, stated once: layers are applied from the lowest (built-in) to the
//! highest (flags), and a leaf of a higher layer replaces the same leaf of a lower
//! one. One exception keeps a provider coherent: a layer that names another
//! `provider.kind` than the one beneath drops the lower layers' keys that belong to
//! a kind (model, endpoint, script, wire settings), so `--provider openai` over a
//! task file's Anthropic model does not send that model to OpenAI.

use toml::Value;

use super::doc::{KeyPath, Leaf, dotted};
use super::{ConfigError, Source, defaults};
use crate::contract::units::{parse_duration, parse_size};

/// `[provider]` keys that mean something only for the kind they were written for.
const KIND_KEYS: &[&str] = &[
    "model",
    "base_url",
    "script",
    "tool_choice",
    "stream",
    "request_timeout",
    "thinking_budget",
];

/// The leaves resolved so far, each with where it came from.
#[derive(Default)]
pub(super) struct Merged {
    pub(super) entries: Vec<(Leaf, Source)>,
}

impl Merged {
    /// Applies one leaf of a higher layer.
    pub(super) fn apply(&mut self, leaf: Leaf, source: Source) {
        if leaf.path == ["provider", "kind"] {
            let before = self.get(&leaf.path).map(|(l, _)| l.value.clone());
            if before.is_some_and(|b| b != leaf.value) {
                self.entries.retain(|(l, _)| {
                    !(l.path.len() == 2
                        && l.path[0] == "provider"
                        && KIND_KEYS.contains(&l.path[1].as_str()))
                });
            }
        }
        match self.entries.iter_mut().find(|(l, _)| l.path == leaf.path) {
            Some(slot) => *slot = (leaf, source),
            None => self.entries.push((leaf, source)),
        }
    }

    pub(super) fn get(&self, path: &[String]) -> Option<&(Leaf, Source)> {
        self.entries.iter().find(|(l, _)| l.path == path)
    }

    /// Checks that a project's `leaf` only narrows what is beneath it (the user's
    /// value, else the built-in one).
    pub(super) fn check_narrows(&self, leaf: &Leaf, at: &Source) -> Result<(), ConfigError> {
        if !defaults::narrows_by_size(&leaf.path) {
            return Ok(());
        }
        let builtin = defaults::table().into_iter().find(|(p, _)| *p == leaf.path);
        let below = match self.get(&leaf.path) {
            Some((l, s)) => Some((l.value.clone(), s.to_string())),
            None => builtin
                .map(|(_, v)| v)
                .or_else(|| defaults::unset_size(&leaf.path))
                .map(|v| (v, "the built-in default".to_string())),
        };
        let Some((below, from)) = below else {
            return Ok(());
        };
        // A value that does not parse is left to the loader, which names it.
        let (Some(new), Some(old)) = (magnitude(&leaf.value), magnitude(&below)) else {
            return Ok(());
        };
        if new > old {
            return Err(ConfigError::Invalid {
                at: at.clone(),
                key: dotted(&leaf.path),
                message: format!(
                    "refused in a project's config: {} is larger than {} ({from}), and a \
                     project's config may only narrow; trust the project with \
                     trusted_projects in your user config to raise it",
                    super::doc::inline(&leaf.value),
                    super::doc::inline(&below)
                ),
            });
        }
        Ok(())
    }
}

/// A number, a duration or a size as one comparable quantity.
fn magnitude(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        Value::String(s) => parse_duration(s)
            .map(|d| d.as_secs_f64())
            .ok()
            .or_else(|| parse_size(s).ok().map(|n| n as f64)),
        _ => None,
    }
}

/// Which merged leaf an error of the loader is about: by its key when the loader
/// named one, else by the line of the merged document it points at.
pub(super) fn leaf_of_error(
    merged: &Merged,
    lines: &[Option<usize>],
    key: &str,
    line: usize,
) -> Option<usize> {
    let names: Vec<String> = merged
        .entries
        .iter()
        .map(|(l, _)| dotted(&l.path))
        .collect();
    if let Some(i) = names.iter().position(|n| n == key) {
        return Some(i);
    }
    let below = format!("{key}.");
    if let Some(i) = names.iter().position(|n| n.starts_with(&below)) {
        return Some(i);
    }
    if let Some(i) = names
        .iter()
        .enumerate()
        .filter(|(_, n)| key.starts_with(&format!("{n}.")))
        .max_by_key(|(_, n)| n.len())
        .map(|(i, _)| i)
    {
        return Some(i);
    }
    // By line: a header points at the first leaf under it.
    let idx = line.checked_sub(1)?;
    lines.get(idx..)?.iter().flatten().next().copied()
}

/// A key path from its dotted name, as `config` and the tables spell it.
pub(super) fn path_of(dotted: &str) -> KeyPath {
    dotted.split('.').map(str::to_string).collect()
}
