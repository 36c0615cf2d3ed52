//! The library's output-schema checker: JSON Schema 2020-12 (or the dialect a schema's
//! `$schema` names, when the checker knows it), with every remote reference refused. Only
//! `$ref`s into the schema itself (`#/$defs/...`, anchors, `$id`s it declares) resolve; a
//! schema that points anywhere else does not compile, and its tool's results go unchecked,
//! with a warning (the core decides that, see `switchboard_core::schema`).

use std::sync::Arc;
use switchboard_core::schema::{CompiledSchema, OutputValidator, SchemaMismatch, SharedValidator};
use switchboard_core::RawJson;

/// The longest message of a violation kept, in bytes: checkers quote the offending value,
/// which can be a whole result.
const MAX_MESSAGE: usize = 512;
/// Violations counted beyond the first (the error says "and N more").
const MAX_COUNTED: usize = 100;

/// Checks structured results with the `jsonschema` crate, offline.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonSchemaValidator;

impl JsonSchemaValidator {
    /// The checker, shared, for [`ManagerOptions::output_validator`](switchboard_core::ManagerOptions::output_validator).
    pub fn shared() -> SharedValidator {
        SharedValidator::new(JsonSchemaValidator)
    }
}

struct Compiled(jsonschema::Validator);

impl OutputValidator for JsonSchemaValidator {
    fn compile(&self, schema: &RawJson) -> Result<Arc<dyn CompiledSchema>, String> {
        let value: serde_json::Value =
            serde_json::from_str(schema.get()).map_err(|e| e.to_string())?;
        if !value.is_object() && !value.is_boolean() {
            return Err("a schema is an object or a boolean".into());
        }
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .offline()
            .build(&value)
            .map_err(|e| clip(e.to_string()))?;
        Ok(Arc::new(Compiled(validator)))
    }
}

impl CompiledSchema for Compiled {
    fn check(&self, instance: &serde_json::Value) -> Result<(), SchemaMismatch> {
        if self.0.is_valid(instance) {
            return Ok(());
        }
        let mut errors = self.0.iter_errors(instance);
        let Some(first) = errors.next() else {
            return Ok(());
        };
        Err(SchemaMismatch {
            path: first.instance_path().to_string(),
            message: clip(first.to_string()),
            more: errors.take(MAX_COUNTED).count(),
        })
    }
}

fn clip(mut s: String) -> String {
    if s.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compile(schema: serde_json::Value) -> Result<Arc<dyn CompiledSchema>, String> {
        JsonSchemaValidator.compile(&RawJson::from_value(&schema))
    }

    #[test]
    fn checks_2020_12_with_local_refs() {
        let s = compile(json!({
            "type": "object",
            "properties": {"n": {"$ref": "#/$defs/count"}},
            "required": ["n"],
            "$defs": {"count": {"type": "integer", "minimum": 0}}
        }))
        .unwrap();
        assert!(s.check(&json!({"n": 3})).is_ok());
        let m = s.check(&json!({"n": "three"})).unwrap_err();
        assert_eq!(m.path, "/n");
        assert!(m.message.contains("integer"), "{m:?}");
        let m = s.check(&json!({})).unwrap_err();
        assert_eq!(m.path, "");
        assert!(m.message.contains("required"), "{m:?}");
        // 2020-12 keywords: prefixItems.
        let t = compile(json!({"prefixItems": [{"type": "string"}], "items": false})).unwrap();
        assert!(t.check(&json!(["a"])).is_ok());
        assert!(t.check(&json!(["a", 1])).is_err());
    }

    #[test]
    fn remote_refs_are_never_fetched() {
        let e = compile(json!({"$ref": "https://example.com/schema.json"}))
            .err()
            .expect("a remote $ref does not compile");
        assert!(!e.is_empty());
        assert!(compile(json!({"type": 42})).is_err());
        assert!(compile(json!("string")).is_err());
    }

    #[test]
    fn counts_more_violations_and_clips_messages() {
        let s = compile(json!({"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"}}}))
        .unwrap();
        let m = s.check(&json!({"a": 1, "b": 2, "c": 3})).unwrap_err();
        assert_eq!(m.more, 2);
        let big = "x".repeat(10_000);
        let m = compile(json!({"type": "integer"}))
            .unwrap()
            .check(&json!(big))
            .unwrap_err();
        assert!(m.message.len() <= MAX_MESSAGE + 4, "{}", m.message.len());
    }
}
