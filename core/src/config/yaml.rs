//! YAML documents (goose's `config.yaml`, Continue's `config.yaml` and block files) as the
//! same JSON object model the other dialects use. Aliases are not expanded (an alias is an
//! error), and nesting is bounded, so a small file cannot grow into a large value.

use super::ConfigError;
use serde_json::{Map, Value};
use yaml_rust2::{Yaml, YamlLoader};

/// The deepest nesting read: configs are a few levels deep.
const MAX_DEPTH: usize = 64;

/// Parse a YAML document into its top-level mapping (`None` for an empty document).
pub(super) fn parse_yaml_root(
    path: &str,
    text: &str,
) -> Result<Option<Map<String, Value>>, ConfigError> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| ConfigError::Syntax {
        path: path.to_string(),
        line: e.marker().line().max(1),
        column: e.marker().col() + 1,
        message: e.info().to_string(),
    })?;
    let document = |message: String| ConfigError::Document {
        path: path.to_string(),
        message,
    };
    match docs.into_iter().next() {
        None | Some(Yaml::Null) => Ok(None),
        Some(doc) => match to_json(doc, 0).map_err(document)? {
            Value::Object(map) => Ok(Some(map)),
            Value::Null => Ok(None),
            other => Err(document(format!(
                "the top level must be a mapping, got {}",
                super::document::kind_of(&other)
            ))),
        },
    }
}

fn to_json(yaml: Yaml, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    Ok(match yaml {
        Yaml::Null | Yaml::BadValue => Value::Null,
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Integer(i) => Value::from(i),
        Yaml::Real(r) => r
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::String(r), Value::Number),
        Yaml::String(s) => Value::String(s),
        Yaml::Alias(_) => return Err("YAML aliases are not supported".into()),
        Yaml::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|v| to_json(v, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Hash(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = match k {
                    Yaml::String(s) | Yaml::Real(s) => s,
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    _ => return Err("a mapping key must be a scalar".into()),
                };
                out.insert(key, to_json(v, depth + 1)?);
            }
            Value::Object(out)
        }
    })
}
