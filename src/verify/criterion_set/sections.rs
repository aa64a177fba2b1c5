//! Sections of a file: read one out as canonical text (so a reformatted but equal
//! section is not a change) and put the baseline's back, leaving the rest of the file
//! — the dependencies the agent may change — as the agent left it.
//!
//! A file that does not parse cannot have a section restored: that is an error, and
//! the gate does not run on it.

use super::rules::Format;

/// The section `name` of `text`, canonical; `None` when the file has none.
pub(crate) fn extract(format: Format, text: &str, name: &str) -> Result<Option<String>, String> {
    match format {
        Format::Toml => toml_extract(text, name),
        Format::Json => json_extract(text, name),
        Format::Ini => Ok(ini_extract(text, name)),
        Format::GoMod => Ok(gomod_extract(text, name)),
    }
}

/// `text` with its section `name` replaced by `kept` (removed when `None`).
pub(crate) fn replace(
    format: Format,
    text: &str,
    name: &str,
    kept: Option<&str>,
) -> Result<String, String> {
    match format {
        Format::Toml => toml_replace(text, name, kept),
        Format::Json => json_replace(text, name, kept),
        Format::Ini => Ok(lines_replace(text, kept, |t| ini_spans(t, name))),
        Format::GoMod => Ok(lines_replace(text, kept, |t| gomod_spans(t, name))),
    }
}

fn toml_parse(text: &str) -> Result<toml::Table, String> {
    text.parse::<toml::Table>()
        .map_err(|e| format!("does not parse as TOML: {}", e.message()))
}

fn toml_extract(text: &str, name: &str) -> Result<Option<String>, String> {
    let table = toml_parse(text)?;
    let mut cur: &toml::Value = &toml::Value::Table(table);
    for key in name.split('.') {
        match cur.get(key) {
            Some(v) => cur = v,
            None => return Ok(None),
        }
    }
    let mut wrap = toml::Table::new();
    wrap.insert("v".into(), cur.clone());
    toml::to_string(&wrap).map(Some).map_err(|e| e.to_string())
}

fn toml_replace(text: &str, name: &str, kept: Option<&str>) -> Result<String, String> {
    let mut table = toml_parse(text)?;
    let keys: Vec<&str> = name.split('.').collect();
    let (last, parents) = keys.split_last().ok_or("empty section name")?;
    let mut cur = &mut table;
    for k in parents {
        let entry = cur
            .entry(k.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = match entry {
            toml::Value::Table(t) => t,
            _ => return Err(format!("{k} is not a table")),
        };
    }
    match kept {
        Some(k) => {
            let v = toml_parse(k)?.remove("v").ok_or("kept section is empty")?;
            cur.insert(last.to_string(), v);
        }
        None => {
            cur.remove(*last);
        }
    }
    toml::to_string(&table).map_err(|e| e.to_string())
}

fn json_parse(text: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(_) => Err("is not a JSON object".into()),
        Err(e) => Err(format!("does not parse as JSON: {e}")),
    }
}

fn json_extract(text: &str, name: &str) -> Result<Option<String>, String> {
    Ok(json_parse(text)?.get(name).map(|v| v.to_string()))
}

fn json_replace(text: &str, name: &str, kept: Option<&str>) -> Result<String, String> {
    let mut map = json_parse(text)?;
    match kept {
        Some(k) => {
            let v: serde_json::Value = serde_json::from_str(k).map_err(|e| e.to_string())?;
            map.insert(name.to_string(), v);
        }
        None => {
            map.remove(name);
        }
    }
    let mut out =
        serde_json::to_string_pretty(&serde_json::Value::Object(map)).map_err(|e| e.to_string())?;
    out.push('\n');
    Ok(out)
}

/// Line ranges `[start, end)` of the INI sections called `name` (`name*`: also
/// `name:…`). A section starts at any line that trims to a matching header, however
/// indented, and ends only at an unindented header: INI readers differ on indented
/// headers, so the span is taken the widest way.
fn ini_spans(text: &str, name: &str) -> Vec<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let matches = |line: &str| {
        let t = line.trim();
        let Some(inner) = t.strip_prefix('[').and_then(|r| r.split(']').next()) else {
            return false;
        };
        let inner = inner.trim();
        match name.strip_suffix('*') {
            Some(p) => inner == p || inner.starts_with(&format!("{p}:")),
            None => inner == name,
        }
    };
    let mut spans = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if matches(lines[i]) {
            let start = i;
            i += 1;
            while i < lines.len() && !lines[i].starts_with('[') {
                i += 1;
            }
            spans.push((start, i));
        } else {
            i += 1;
        }
    }
    spans
}

/// Line ranges of a `go.mod` directive: `name …` lines and `name (` … `)` blocks.
fn gomod_spans(text: &str, name: &str) -> Vec<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let code = lines[i].split("//").next().unwrap_or("").trim();
        let mut words = code.split_whitespace();
        if words.next() == Some(name) {
            let start = i;
            if words.next().is_some_and(|w| w.starts_with('(')) && !code.ends_with(')') {
                while i < lines.len() && lines[i].split("//").next().unwrap_or("").trim() != ")" {
                    i += 1;
                }
            }
            i += 1;
            spans.push((start, i.min(lines.len())));
        } else {
            i += 1;
        }
    }
    spans
}

/// The lines of `spans`, trailing space and blank lines dropped: the canonical text.
fn joined(text: &str, spans: &[(usize, usize)]) -> Option<String> {
    if spans.is_empty() {
        return None;
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for (s, e) in spans {
        for l in &lines[*s..*e] {
            let l = l.trim_end();
            if !l.trim().is_empty() {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    Some(out)
}

fn ini_extract(text: &str, name: &str) -> Option<String> {
    joined(text, &ini_spans(text, name))
}

fn gomod_extract(text: &str, name: &str) -> Option<String> {
    joined(text, &gomod_spans(text, name))
}

/// `text` without the lines of `spans`, with `kept` appended.
fn lines_replace(
    text: &str,
    kept: Option<&str>,
    spans: impl Fn(&str) -> Vec<(usize, usize)>,
) -> String {
    let spans = spans(text);
    let mut out = String::new();
    for (i, l) in text.lines().enumerate() {
        if !spans.iter().any(|(s, e)| (*s..*e).contains(&i)) {
            out.push_str(l);
            out.push('\n');
        }
    }
    if let Some(k) = kept {
        if !out.is_empty() && !out.ends_with("\n\n") {
            out.push('\n');
        }
        out.push_str(k);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_section_round_trips_and_leaves_dependencies() {
        let base = "[project]\nname = \"x\"\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n";
        let kept = extract(Format::Toml, base, "tool.pytest").unwrap();
        let live = "[project]\nname = \"x\"\ndependencies = [\"attrs>=23\"]\n[tool.pytest.ini_options]\naddopts = \"-k nothing\"\n";
        assert_ne!(extract(Format::Toml, live, "tool.pytest").unwrap(), kept);
        let fixed = replace(Format::Toml, live, "tool.pytest", kept.as_deref()).unwrap();
        assert_eq!(extract(Format::Toml, &fixed, "tool.pytest").unwrap(), kept);
        assert!(fixed.contains("attrs>=23"), "{fixed}");
        // Dotted keys are the same table.
        let dotted = "project.name = \"x\"\ntool.pytest.ini_options.testpaths = [\"tests\"]\n";
        assert_eq!(extract(Format::Toml, dotted, "tool.pytest").unwrap(), kept);
        let removed = replace(Format::Toml, live, "tool.pytest", None).unwrap();
        assert_eq!(
            extract(Format::Toml, &removed, "tool.pytest").unwrap(),
            None
        );
        assert!(extract(Format::Toml, "[x", "tool.pytest").is_err());
    }

    #[test]
    fn ini_sections_including_indented_headers() {
        let base = "[metadata]\nname = x\n\n[tool:pytest]\ntestpaths = tests\n";
        let kept = extract(Format::Ini, base, "tool:pytest").unwrap();
        let live = "[metadata]\nname = y\n[tool:pytest]\ntestpaths = tests\naddopts = --co\n  -q\n";
        let fixed = replace(Format::Ini, live, "tool:pytest", kept.as_deref()).unwrap();
        assert_eq!(extract(Format::Ini, &fixed, "tool:pytest").unwrap(), kept);
        assert!(
            fixed.contains("name = y") && !fixed.contains("--co"),
            "{fixed}"
        );
        let sneaky = "[metadata]\nname = y\n  [tool:pytest]\naddopts = --co\n";
        assert!(
            extract(Format::Ini, sneaky, "tool:pytest")
                .unwrap()
                .is_some()
        );
        let tox = "[tox]\nenvlist = py\n[testenv:py]\ncommands = true\n[flake8]\nx = 1\n";
        let t = extract(Format::Ini, tox, "testenv*").unwrap().unwrap();
        assert!(t.contains("commands = true") && !t.contains("x = 1"), "{t}");
    }

    #[test]
    fn json_scripts_and_gomod_directives() {
        let base = "{\"name\":\"x\",\"scripts\":{\"test\":\"node --test\"},\"dependencies\":{}}";
        let kept = extract(Format::Json, base, "scripts").unwrap();
        let live =
            "{\"name\":\"x\",\"scripts\":{\"test\":\"true\"},\"dependencies\":{\"a\":\"2\"}}";
        let fixed = replace(Format::Json, live, "scripts", kept.as_deref()).unwrap();
        assert_eq!(extract(Format::Json, &fixed, "scripts").unwrap(), kept);
        assert!(fixed.contains("\"a\": \"2\""), "{fixed}");

        let gomod = "module x\n\ngo 1.22\n\nrequire example.com/a v1.0.0\n";
        assert_eq!(extract(Format::GoMod, gomod, "replace").unwrap(), None);
        let live = "module x\n\ngo 1.22\nreplace example.com/a => ./fake\nreplace (\n  example.com/b => ./b\n)\nrequire example.com/a v1.2.0\n";
        let got = extract(Format::GoMod, live, "replace").unwrap().unwrap();
        assert!(got.contains("./fake") && got.contains("./b"), "{got}");
        let fixed = replace(Format::GoMod, live, "replace", None).unwrap();
        assert_eq!(extract(Format::GoMod, &fixed, "replace").unwrap(), None);
        assert!(fixed.contains("require example.com/a v1.2.0"), "{fixed}");
    }
}
