//! Codex's TOML config: the text becomes the same JSON object model the other dialects use,
//! so one entry reader serves every client. Codex keeps its servers in `[mcp_servers.<name>]`
//! tables of `~/.codex/config.toml`, among much else the reader ignores.

use super::ConfigError;
use serde_json::{Map, Value};

/// Parse a TOML document into its top-level table, as JSON values. A syntax error carries the
/// 1-based line and column of where the TOML parser stopped.
pub(super) fn parse_toml_root(path: &str, text: &str) -> Result<Map<String, Value>, ConfigError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        let (line, column) = line_column(text, e.span().map_or(0, |s| s.start));
        ConfigError::Syntax {
            path: path.to_string(),
            line,
            column,
            message: e.message().trim().to_string(),
        }
    })?;
    Ok(table
        .into_iter()
        .map(|(k, v)| (k, toml_to_json(v)))
        .collect())
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// A TOML value as JSON. A float JSON cannot hold (NaN, infinity) and a datetime become their
/// text, so no value is lost to the conversion.
fn toml_to_json(value: toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(f.to_string())),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => {
            Value::Object(t.into_iter().map(|(k, v)| (k, toml_to_json(v))).collect())
        }
    }
}
