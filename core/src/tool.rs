//! Tool definitions as servers announce them, tools as the view exposes them, and call results.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;
use std::sync::{Arc, OnceLock};

/// A JSON value kept as the text a server sent (validated JSON, surrounding whitespace
/// trimmed), shared: schemas and annotations are passed along, never inspected by the core,
/// so they are not parsed into a [`Value`] tree. Clones cost a reference count.
///
/// Equality is textual: two schemas that differ only in key order or whitespace are not
/// equal. Serializing with `serde_json` writes the text verbatim; other serializers see
/// `serde_json`'s private raw-value struct, so go through [`RawJson::to_value`] for those.
#[derive(Clone)]
pub struct RawJson(Arc<RawValue>);

impl RawJson {
    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The raw value (for `serde_json` APIs that take one).
    pub fn as_raw(&self) -> &RawValue {
        &self.0
    }

    /// Parsed into a [`Value`] tree, on demand. The text is valid JSON, so this only falls
    /// back to `Value::Null` for what `serde_json` accepts raw but refuses as a `Value` (a
    /// number out of `f64` range, a lone surrogate escape).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.get()).unwrap_or(Value::Null)
    }

    /// The compact JSON text of `value`.
    pub fn from_value(value: &Value) -> Self {
        // Serializing a `Value` cannot fail.
        RawJson::from(serde_json::value::to_raw_value(value).unwrap_or_default())
    }

    /// `{"type":"object"}`, the schema of a tool that lists none.
    pub fn empty_object_schema() -> Self {
        static SCHEMA: OnceLock<RawJson> = OnceLock::new();
        SCHEMA
            .get_or_init(|| RawJson::from_value(&serde_json::json!({"type": "object"})))
            .clone()
    }
}

impl From<Box<RawValue>> for RawJson {
    fn from(raw: Box<RawValue>) -> Self {
        RawJson(Arc::from(raw))
    }
}

impl From<&RawValue> for RawJson {
    fn from(raw: &RawValue) -> Self {
        RawJson::from(raw.to_owned())
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.get() == other.get()
    }
}

impl Eq for RawJson {}

impl std::fmt::Debug for RawJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

impl std::fmt::Display for RawJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(RawJson::from)
    }
}

/// A tool as a server lists it in `tools/list` (and as the cache stores it).
///
/// The bulky parts (description, schemas, annotations) are shared (`Arc`), so the copies the
/// view, the cache and the startup report hold of a tool cost a few reference counts, not a
/// deep copy of its JSON schema. Schemas and annotations stay raw JSON text ([`RawJson`]):
/// the core never looks inside them, and parsing every listed schema into a `Value` tree was
/// most of a startup round's cost (BENCHMARKS.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// The raw tool name, as the server calls it (unique within its server's list).
    pub name: String,
    /// A human-readable title, if the server gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<Arc<str>>,
    /// The JSON Schema of its arguments (an empty object schema when the server gave none).
    #[serde(rename = "inputSchema", default = "RawJson::empty_object_schema")]
    pub input_schema: RawJson,
    /// The JSON Schema of its structured result, if it declares one.
    #[serde(
        rename = "outputSchema",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub output_schema: Option<RawJson>,
    /// Hints about its behaviour (read-only, destructive, ...), as the server sent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<RawJson>,
    /// Icons for a user interface (an array of `{src, mimeType, sizes, theme}`), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<RawJson>,
    /// The tool's `_meta` object, as sent.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<RawJson>,
    /// How it is executed (`{"taskSupport": "required"}`, ...), as sent;
    /// [`ToolDef::task_support`] reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<RawJson>,
}

/// Whether a tool runs as a task (MCP 2025-11-25 `execution.taskSupport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskSupport {
    /// Called directly only (`forbidden`, or no `execution.taskSupport`: the default).
    Forbidden,
    /// Either way (`optional`); the core calls it directly.
    Optional,
    /// Only as a task (`required`): the core calls it as one and polls it.
    Required,
}

impl ToolDef {
    /// A tool with just a name and an empty object schema (tests, simulator).
    pub fn named(name: impl Into<String>) -> Self {
        ToolDef {
            name: name.into(),
            title: None,
            description: None,
            input_schema: RawJson::empty_object_schema(),
            output_schema: None,
            annotations: None,
            icons: None,
            meta: None,
            execution: None,
        }
    }

    /// Its `execution.taskSupport`; `Forbidden` when absent or not one of the three words.
    pub fn task_support(&self) -> TaskSupport {
        #[derive(Deserialize)]
        struct Execution {
            #[serde(rename = "taskSupport", default)]
            task_support: Option<String>,
        }
        let Some(raw) = &self.execution else {
            return TaskSupport::Forbidden;
        };
        match serde_json::from_str::<Execution>(raw.get()) {
            Ok(Execution {
                task_support: Some(s),
            }) => match s.as_str() {
                "required" => TaskSupport::Required,
                "optional" => TaskSupport::Optional,
                _ => TaskSupport::Forbidden,
            },
            _ => TaskSupport::Forbidden,
        }
    }
}

/// One entry of the exposed tool view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tool {
    /// The unique, sanitised name the agent sees (`mcp_<server>_<tool>` by default).
    pub qualified_name: String,
    /// The server that owns it (identity, not a name prefix).
    pub server: String,
    /// The definition as the server (or the cache) gave it; `def.name` is the raw tool name.
    pub def: ToolDef,
    /// True while the tool comes from the cache and its server is still connecting (a
    /// deferred tool): a call waits for the connection.
    pub deferred: bool,
}

/// One entry of the exposed tool view, borrowed from the manager: [`Tool`] without copying
/// names and definitions (for embedders and checkers that look at the view after every step).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToolRef<'a> {
    /// [`Tool::qualified_name`].
    pub qualified_name: &'a str,
    /// [`Tool::server`].
    pub server: &'a str,
    /// [`Tool::def`].
    pub def: &'a ToolDef,
    /// [`Tool::deferred`].
    pub deferred: bool,
}

impl ToolRef<'_> {
    /// The owned [`Tool`].
    pub fn to_tool(&self) -> Tool {
        Tool {
            qualified_name: self.qualified_name.to_string(),
            server: self.server.to_string(),
            def: self.def.clone(),
            deferred: self.deferred,
        }
    }
}

/// One part of a tool result's `content`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// The image, base64-encoded.
        #[serde(default)]
        data: String,
        /// Its media type (`image/png`, ...).
        #[serde(rename = "mimeType", default)]
        mime_type: String,
    },
    /// Audio.
    Audio {
        /// The audio, base64-encoded.
        #[serde(default)]
        data: String,
        /// Its media type (`audio/wav`, ...).
        #[serde(rename = "mimeType", default)]
        mime_type: String,
    },
    /// An embedded resource, kept as it came.
    Resource {
        /// The resource object (`uri`, and `text` or `blob`).
        resource: Value,
    },
    /// A link to a resource the client may read.
    ResourceLink {
        /// The resource's URI.
        uri: String,
        /// Its name, if given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Its media type, if given.
        #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
    /// A content type this version does not know; kept as it came.
    #[serde(untagged)]
    Other(Value),
}

/// The result of `tools/call`. A result with `is_error` is still a result (the tool ran and
/// reported a failure), not a protocol error. Equality compares the decoded fields, not
/// [`ToolResult::raw`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolResult {
    /// What the tool returned, part by part.
    #[serde(default)]
    pub content: Vec<Content>,
    /// Its structured result, when the tool gives one.
    #[serde(
        rename = "structuredContent",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub structured_content: Option<Value>,
    /// The tool ran and reported a failure.
    #[serde(rename = "isError", default)]
    pub is_error: bool,
    /// The result object exactly as the server sent it — every field, `_meta`, content
    /// annotations and fields this version does not know included — when it came from a
    /// server (`None` for a result built or deserialized by hand).
    #[serde(skip)]
    pub raw: Option<RawJson>,
}

impl PartialEq for ToolResult {
    fn eq(&self, other: &Self) -> bool {
        self.content == other.content
            && self.structured_content == other.structured_content
            && self.is_error == other.is_error
    }
}

impl ToolResult {
    /// The text rendering an agent sees: text as is, `[Image: <mime>]`, `[Audio: <mime>]`,
    /// `[Resource: <uri>]` followed by its text, `[Resource link: <uri>]`; parts joined by a
    /// blank line; `Error: ` in front when the tool reported an error.
    pub fn render_text(&self) -> String {
        let mut parts = Vec::with_capacity(self.content.len());
        for c in &self.content {
            parts.push(match c {
                Content::Text { text } => text.clone(),
                Content::Image { mime_type, .. } => format!("[Image: {mime_type}]"),
                Content::Audio { mime_type, .. } => format!("[Audio: {mime_type}]"),
                Content::Resource { resource } => {
                    let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
                    match resource.get("text").and_then(Value::as_str) {
                        Some(text) => format!("[Resource: {uri}]\n{text}"),
                        None => format!("[Resource: {uri}]"),
                    }
                }
                Content::ResourceLink { uri, .. } => format!("[Resource link: {uri}]"),
                Content::Other(v) => v.to_string(),
            });
        }
        if parts.is_empty() {
            if let Some(s) = &self.structured_content {
                parts.push(s.to_string());
            }
        }
        let body = parts.join("\n\n");
        if self.is_error {
            format!("Error: {body}")
        } else {
            body
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn result_keeps_every_content_kind_and_renders_text() {
        let r: ToolResult = serde_json::from_value(json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "AAA=", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "body"}},
                {"type": "resource_link", "uri": "file:///b"},
                {"type": "audio", "data": "", "mimeType": "audio/wav"},
                {"type": "hologram", "x": 1}
            ],
            "structuredContent": {"n": 1},
            "isError": true
        }))
        .unwrap();
        assert_eq!(r.content.len(), 6);
        assert!(matches!(r.content[5], Content::Other(_)));
        assert_eq!(
            r.render_text(),
            "Error: hello\n\n[Image: image/png]\n\n[Resource: file:///a.txt]\nbody\n\n\
             [Resource link: file:///b]\n\n[Audio: audio/wav]\n\n{\"type\":\"hologram\",\"x\":1}"
        );
    }

    #[test]
    fn tool_def_defaults_schema_and_keeps_fields() {
        let t: ToolDef = serde_json::from_value(json!({"name": "x", "description": "d"})).unwrap();
        assert_eq!(t.input_schema.to_value(), json!({"type": "object"}));
        assert_eq!(t.input_schema.get(), r#"{"type":"object"}"#);
        assert_eq!(t.description.as_deref(), Some("d"));
        assert_eq!(t.task_support(), TaskSupport::Forbidden);
    }

    #[test]
    fn task_support_reads_execution() {
        let with = |e: Value| ToolDef {
            execution: Some(RawJson::from_value(&e)),
            ..ToolDef::named("t")
        };
        assert_eq!(
            with(json!({"taskSupport": "required"})).task_support(),
            TaskSupport::Required
        );
        assert_eq!(
            with(json!({"taskSupport": "optional"})).task_support(),
            TaskSupport::Optional
        );
        assert_eq!(
            with(json!({"taskSupport": "forbidden"})).task_support(),
            TaskSupport::Forbidden
        );
        assert_eq!(
            with(json!({"taskSupport": 3})).task_support(),
            TaskSupport::Forbidden
        );
        assert_eq!(with(json!([])).task_support(), TaskSupport::Forbidden);
    }
}
