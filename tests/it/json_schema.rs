//! Issue 19.2: machine output a script can use. Every `--json` line the CLI tests read
//! goes through [`documents`], which validates it against the committed JSON Schema
//! (`docs/schema/output.schema.json`) and checks that no string anywhere holds JSON
//! under a `_json` name (a script would have to decode it twice).

use std::path::Path;
use std::sync::OnceLock;

use serde_json::Value;

fn schema() -> &'static (boon::Schemas, boon::SchemaIndex) {
    static SCHEMA: OnceLock<(boon::Schemas, boon::SchemaIndex)> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema/output.schema.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        let mut schemas = boon::Schemas::new();
        let mut compiler = boon::Compiler::new();
        let url = "https://io-harness.invalid/schema/output/1";
        compiler.add_resource(url, value).unwrap();
        let index = compiler.compile(url, &mut schemas).unwrap();
        (schemas, index)
    })
}

/// Panics naming the line when `doc` breaks the schema or holds JSON in a string.
pub fn check(doc: &Value, line: &str) {
    let (schemas, index) = schema();
    if let Err(e) = schemas.validate(doc, *index) {
        panic!("a --json line breaks docs/schema/output.schema.json: {e:#}\n{line}");
    }
    json_in_text(doc, "$", line);
}

fn json_in_text(v: &Value, at: &str, line: &str) {
    match v {
        Value::Object(m) => {
            for (k, inner) in m {
                if k.ends_with("_json")
                    && let Value::String(s) = inner
                    && serde_json::from_str::<Value>(s).is_ok()
                {
                    panic!("{at}.{k} holds JSON as text: {line}");
                }
                json_in_text(inner, &format!("{at}.{k}"), line);
            }
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .for_each(|(i, x)| json_in_text(x, &format!("{at}[{i}]"), line)),
        _ => {}
    }
}

/// Every line of `stdout`, parsed and checked.
pub fn documents(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("a --json line is not JSON ({e}): {l}"));
            check(&v, l);
            v
        })
        .collect()
}

/// The one document of `stdout` (the last, for run and resume, whose event lines come
/// first).
pub fn last(stdout: &[u8]) -> Value {
    documents(stdout)
        .pop()
        .unwrap_or_else(|| panic!("no --json output"))
}

/// The runs `runs --json` listed.
pub fn runs(stdout: &[u8]) -> Vec<Value> {
    let doc = last(stdout);
    assert_eq!(doc["object"], "runs", "{doc}");
    doc["runs"].as_array().cloned().unwrap_or_default()
}
