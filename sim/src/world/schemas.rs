//! Simulated tools with output schemas. Under the fault mix's `schema_pct`, a tool is listed
//! with an `outputSchema` (chosen by a hash of its name, so every listing and attempt agrees):
//! most are strict (an object whose `ok` is a string, through a local `$ref`), some point at a
//! remote schema, which the checker must refuse to fetch, so it cannot be compiled. Results of
//! strict tools conform, except that a call fault now and then sends a mismatching or missing
//! `structuredContent`; such a result is marked (`schema-bad:` in its text) and counted per
//! (server, tool), so the embedder can check both ways: a marked result never completes a
//! call `Ok`, and every output-schema error answers a marked result.

use super::World;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;
use switchboard_core::schema::{CompiledSchema, OutputValidator, SchemaMismatch, SharedValidator};
use switchboard_core::RawJson;

/// The text that marks a result breaking its tool's schema.
pub(crate) const BAD_MARK: &str = "schema-bad:";

/// What output schema a simulated tool declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SchemaKind {
    /// `{"ok": <string>}`, checked.
    Strict,
    /// A remote `$ref`: cannot be compiled offline, so results go unchecked.
    Remote,
}

/// The schema `tool` declares under `schema_pct` (a hash of its name, salted apart from the
/// task hash).
pub(super) fn schema_kind(tool: &str, schema_pct: u8) -> Option<SchemaKind> {
    let mut h: u64 = 0x84222325_cbf29ce4;
    for b in tool.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    if schema_pct == 0 || h % 100 >= u64::from(schema_pct) {
        return None;
    }
    Some(if (h / 100) % 5 == 0 {
        SchemaKind::Remote
    } else {
        SchemaKind::Strict
    })
}

/// The `outputSchema` JSON of a kind.
pub(super) fn schema_json(kind: SchemaKind) -> Value {
    match kind {
        SchemaKind::Strict => json!({
            "type": "object",
            "properties": {"ok": {"$ref": "#/$defs/word"}},
            "required": ["ok"],
            "$defs": {"word": {"type": "string"}},
        }),
        SchemaKind::Remote => json!({"$ref": "https://schemas.sim.invalid/result.json"}),
    }
}

/// The simulated embedder's checker: JSON Schema 2020-12, offline.
pub(super) fn validator() -> SharedValidator {
    SharedValidator::new(SimValidator)
}

struct SimValidator;
struct SimSchema(jsonschema::Validator);

/// A schema's compilation, by its text.
type Compiled = BTreeMap<String, Result<Arc<dyn CompiledSchema>, String>>;

thread_local! {
    static COMPILED: RefCell<Compiled> = const { RefCell::new(BTreeMap::new()) };
}

impl OutputValidator for SimValidator {
    fn compile(&self, schema: &RawJson) -> Result<Arc<dyn CompiledSchema>, String> {
        // Simulated tools declare one of two schemas: each is compiled once per thread and
        // shared (a compiled schema holds no state between checks), by its exact text.
        COMPILED.with(|compiled| {
            let mut compiled = compiled.borrow_mut();
            if compiled.len() >= 16 {
                compiled.clear(); // not the simulator's own schemas: keep the memo small
            }
            compiled
                .entry(schema.get().to_string())
                .or_insert_with(|| {
                    jsonschema::options()
                        .with_draft(jsonschema::Draft::Draft202012)
                        .offline()
                        .build(&schema.to_value())
                        .map(|v| Arc::new(SimSchema(v)) as Arc<dyn CompiledSchema>)
                        .map_err(|e| e.to_string())
                })
                .clone()
        })
    }
}

impl CompiledSchema for SimSchema {
    fn check(&self, instance: &Value) -> Result<(), SchemaMismatch> {
        match self.0.validate(instance) {
            Ok(()) => Ok(()),
            Err(e) => Err(SchemaMismatch {
                path: e.instance_path().to_string(),
                message: e.to_string(),
                more: 0,
            }),
        }
    }
}

impl World<'_> {
    /// The result of a call of `tool` on server `i` that went well, with `text`: strict tools
    /// add a conforming `structuredContent`, or, when `may_break`, now and then a marked one
    /// that breaks the schema.
    pub(super) fn tool_result(
        &mut self,
        i: usize,
        tool: &str,
        text: String,
        may_break: bool,
    ) -> Value {
        let kind = schema_kind(tool, self.sc.mix.schema_pct);
        if kind != Some(SchemaKind::Strict) {
            return json!({"content": [{"type": "text", "text": text}]});
        }
        let cf = self.sc.mix.call_fault_pct;
        if !(may_break && self.pct(cf)) {
            self.cov.schema_results_conforming += 1;
            return json!({"content": [{"type": "text", "text": text}], "structuredContent": {"ok": text}});
        }
        let server = self.sc.servers[i].name.clone();
        *self
            .obs
            .bad_outputs
            .entry((server, tool.to_string()))
            .or_default() += 1;
        self.cov.schema_results_broken += 1;
        if self.rng.below(2) == 0 {
            json!({"content": [{"type": "text", "text": format!("{BAD_MARK}mismatch")}],
                   "structuredContent": {"ok": 7}})
        } else {
            json!({"content": [{"type": "text", "text": format!("{BAD_MARK}missing")}]})
        }
    }
}
