//! Helpers shared by the golden checks: hex, and turning a [`FieldValue`] tree into the JSON
//! shape the golden files use.

use serde_json::{Map, Value};
use stellflow_proto::FieldValue;

/// Decodes lowercase hex (the `hex` field of a case).
pub fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd-length hex");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// Encodes bytes as lowercase hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `snake_case` → `lowerCamelCase`.
pub fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Rust field names that are not the camelCase of the server's record component.
const RENAMES: &[(&str, &str)] = &[("is_internal", "internal")];

/// A field tree as golden JSON: camelCase names (plus [`RENAMES`]), int64 as decimal strings,
/// bytes as lowercase hex, null as null.
pub fn to_json(v: &FieldValue) -> Value {
    match v {
        FieldValue::Int { value, bits: 64 } => Value::String(value.to_string()),
        FieldValue::Int { value, .. } => Value::from(*value),
        FieldValue::Bool(b) => Value::Bool(*b),
        FieldValue::Str(s) => s.clone().map_or(Value::Null, Value::String),
        FieldValue::Bytes(b) => b.as_ref().map_or(Value::Null, |b| Value::String(hex(b))),
        FieldValue::List(items) => Value::Array(items.iter().map(to_json).collect()),
        FieldValue::Struct(fields) => {
            let mut map = Map::new();
            for (name, value) in fields {
                let key = RENAMES
                    .iter()
                    .find(|(rust, _)| rust == name)
                    .map_or_else(|| camel(name), |(_, golden)| (*golden).to_owned());
                map.insert(key, to_json(value));
            }
            Value::Object(map)
        }
        other => Value::String(format!("unsupported field value {other:?}")),
    }
}

/// `Ok` when `ours` equals the golden `fields`, else a message showing both.
pub fn same_json(what: &str, ours: &Value, golden: &Value) -> Result<(), String> {
    if ours == golden {
        Ok(())
    } else {
        Err(format!(
            "{what}: decoded fields differ\n  ours:   {ours}\n  golden: {golden}"
        ))
    }
}

/// `Ok` when the bytes are equal, else a message with both in hex.
pub fn same_bytes(what: &str, ours: &[u8], golden: &[u8]) -> Result<(), String> {
    if ours == golden {
        Ok(())
    } else {
        Err(format!(
            "{what}: re-encoding differs\n  ours:   {}\n  golden: {}",
            hex(ours),
            hex(golden)
        ))
    }
}
