//! Machine output: what `--json` prints, in one shape a script decodes once.
//!
//! Every document is one JSON object on one line, carrying `object` (what kind of
//! document it is: `result`, `event`, `runs`, `show`…) and `schema_version`; the
//! committed JSON Schema (`docs/schema/output.schema.json`) describes each kind, and
//! the CLI tests validate every line they read against it. The store keeps some
//! fields as JSON text (`contract_json`, `action_json`…); printed, each such field is
//! the value it holds, under its name without `_json` (`contract`, `action`), so no
//! string holds JSON a script would have to decode a second time.

use serde_json::{Map, Value};

use io_harness::redact::Redactor;

/// The version of the documents' shape. Raised when a field changes meaning or
/// goes away; new fields do not raise it.
pub const SCHEMA_VERSION: u64 = 1;

/// `value` (an object, or a list wrapped under `object`'s name) as the document
/// `object`: nested, tagged and versioned.
pub fn document(object: &str, value: Value) -> Value {
    let mut v = match value {
        Value::Object(m) => Value::Object(m),
        other => {
            let mut m = Map::new();
            m.insert(object.to_string(), other);
            Value::Object(m)
        }
    };
    nest(&mut v);
    if let Value::Object(m) = &mut v {
        m.insert("object".into(), object.into());
        m.insert("schema_version".into(), SCHEMA_VERSION.into());
    }
    v
}

/// Prints the document `object` on one line, with every secret in `secrets` redacted.
pub fn print(object: &str, value: Value, secrets: &Redactor) {
    let line = document(object, value).to_string();
    outln!("{}", super::output::redact(&line, secrets));
}

/// Replaces each `<name>_json` string that holds JSON with the value, as `<name>`
/// (at any depth; in place when `<name>` is taken; an empty string is null). A string
/// that is not JSON stays as it is, under its own name.
pub fn nest(v: &mut Value) {
    match v {
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                // `detail` of the event records holds the harness's own JSON object
                // (adversary P2: `context_events[].detail` was JSON in a string).
                if k == "detail"
                    && let Some(Value::String(text)) = m.get(&k)
                    && let Ok(parsed @ Value::Object(_)) = serde_json::from_str::<Value>(text)
                {
                    m.insert(k, parsed);
                    continue;
                }
                let Some(base) = k.strip_suffix("_json") else {
                    if let Some(inner) = m.get_mut(&k) {
                        nest(inner);
                    }
                    continue;
                };
                let parsed = match m.get(&k) {
                    Some(Value::String(s)) if s.is_empty() => Some(Value::Null),
                    Some(Value::String(s)) => serde_json::from_str::<Value>(s).ok(),
                    Some(Value::Null) => Some(Value::Null),
                    _ => None,
                };
                let Some(mut parsed) = parsed else {
                    continue;
                };
                nest(&mut parsed);
                if m.contains_key(base) {
                    // The plain name is taken (`outcome` is the label, `outcome_json`
                    // the detail): the value goes in place of its text.
                    m.insert(k, parsed);
                } else {
                    m.remove(&k);
                    m.insert(base.to_string(), parsed);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(nest),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_held_in_strings_becomes_the_value_at_any_depth() {
        let v = document(
            "show",
            json!({
                "run": {"contract_json": "{\"goal\":\"g\",\"inner_json\":\"[1]\"}", "outcome_json": null},
                "steps": [{"messages_json": "[{\"role\":\"user\"}]", "note_json": "not json"}],
                "already": {"action": 1, "action_json": "{}"},
            }),
        );
        assert_eq!(v["object"], "show");
        assert_eq!(v["schema_version"], SCHEMA_VERSION);
        assert_eq!(v["run"]["contract"]["goal"], "g");
        assert_eq!(v["run"]["contract"]["inner"], json!([1]));
        assert_eq!(v["run"]["outcome"], Value::Null);
        assert_eq!(v["steps"][0]["messages"][0]["role"], "user");
        // Not JSON: kept as text, under its own name. A name already taken: the value
        // in place of its text. Empty: null.
        assert_eq!(v["steps"][0]["note_json"], "not json");
        assert_eq!(v["already"]["action_json"], json!({}));
        assert_eq!(
            document("x", json!({"reply_json": ""}))["reply"],
            Value::Null
        );
    }

    #[test]
    fn a_list_is_wrapped_under_the_documents_name() {
        let v = document("runs", json!([{"id": 1}]));
        assert_eq!(v["runs"][0]["id"], 1);
        assert_eq!(v["object"], "runs");
    }
}
