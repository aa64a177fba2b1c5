//! What `batch` was given, as a list of task files: a task file as it is, a directory
//! as each `*.toml` directly in it and each `*/task.toml` one level down (in name
//! order), a `*.jsonl` list as one task file a line. A list's lines name files
//! relative to the list; an entry that is not what it should be is a usage error
//! naming the list, its line and what is wrong.

use std::path::{Path, PathBuf};

use super::CliError;

/// One task of the batch: its file and how the batch names it.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub file: PathBuf,
    /// The file as given, or `list.jsonl:3` for a list's line.
    pub source: String,
}

/// Every task the arguments name, in order. An empty result is refused.
pub fn expand(inputs: &[PathBuf]) -> Result<Vec<Listed>, CliError> {
    let mut out = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input)
            .map_err(|e| CliError::Usage(format!("batch: cannot read {}: {e}", input.display())))?;
        if meta.is_dir() {
            out.extend(directory(input)?);
        } else if input.extension().is_some_and(|e| e == "jsonl") {
            out.extend(list(input)?);
        } else {
            out.push(Listed {
                file: input.clone(),
                source: input.display().to_string(),
            });
        }
    }
    if out.is_empty() {
        return Err(CliError::Usage(
            "batch: no task files found in what was given".into(),
        ));
    }
    Ok(out)
}

fn directory(dir: &Path) -> Result<Vec<Listed>, CliError> {
    let read = std::fs::read_dir(dir)
        .map_err(|e| CliError::Usage(format!("batch: cannot list {}: {e}", dir.display())))?;
    let mut names: Vec<PathBuf> = read.filter_map(|e| e.ok().map(|e| e.path())).collect();
    names.sort();
    let mut out = Vec::new();
    for path in names {
        let file = if path.is_dir() {
            path.join("task.toml")
        } else if path.extension().is_some_and(|e| e == "toml") {
            path
        } else {
            continue;
        };
        if file.is_file() {
            out.push(Listed {
                source: file.display().to_string(),
                file,
            });
        }
    }
    Ok(out)
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Line {
    Path(String),
    Entry { task: String },
}

fn list(path: &Path) -> Result<Vec<Listed>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Usage(format!("batch: cannot read {}: {e}", path.display())))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("{}:{}", path.display(), i + 1);
        let entry: Line = serde_json::from_str(line).map_err(|e| {
            CliError::Usage(format!(
                "batch: {at}: not a task entry ({e}); write {{\"task\": \"path/to/task.toml\"}} or \"path/to/task.toml\""
            ))
        })?;
        let (Line::Path(name) | Line::Entry { task: name }) = entry;
        let file = base.join(&name);
        if !file.is_file() {
            return Err(CliError::Usage(format!(
                "batch: {at}: task file {} does not exist",
                file.display()
            )));
        }
        out.push(Listed { file, source: at });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_and_lists_expand_in_order_and_bad_lines_are_named() {
        let d = tempfile::tempdir().unwrap();
        let w = |rel: &str| {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "goal = \"g\"\n").unwrap();
            p
        };
        w("set/b.toml");
        w("set/a.toml");
        w("set/c/task.toml");
        w("set/notes.txt");
        let listed = expand(&[d.path().join("set")]).unwrap();
        let names: Vec<_> = listed
            .iter()
            .map(|l| l.file.strip_prefix(d.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(names, ["set/a.toml", "set/b.toml", "set/c/task.toml"]);
        let jl = d.path().join("l.jsonl");
        std::fs::write(&jl, "\"set/a.toml\"\n\n{\"task\": \"set/b.toml\"}\n").unwrap();
        let listed = expand(std::slice::from_ref(&jl)).unwrap();
        assert_eq!(listed[1].source, format!("{}:3", jl.display()));
        std::fs::write(&jl, "\"set/a.toml\"\n{\"task\": 3}\n").unwrap();
        let err = expand(std::slice::from_ref(&jl)).unwrap_err().to_string();
        assert!(err.contains(&format!("{}:2", jl.display())), "{err}");
        std::fs::write(&jl, "\"set/none.toml\"\n").unwrap();
        let err = expand(&[jl]).unwrap_err().to_string();
        assert!(err.contains("does not exist"), "{err}");
        assert!(expand(&[d.path().join("set/c/..").join("nothing")]).is_err());
    }
}
