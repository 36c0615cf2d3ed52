//! The gateway's side of the wire: downstream JSON-RPC messages decoded into what the
//! gateway acts on, and the frames it writes back (responses, errors, notifications, the
//! lists of the view), serialized straight from the view's types without a `Value` tree.

use crate::catalog::{Completion, Prompt, PromptResult, ReadResult, Resource, ResourceTemplate};
use crate::protocol::IsVersion2;
use crate::tool::{RawJson, Tool, ToolResult};
use bytes::Bytes;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// JSON-RPC: the frame is not valid JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: no such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: bad params (an unknown tool or prompt, a malformed argument).
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: the request could not be carried out.
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP: no resource with that URI.
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// The gateway's own limit on requests in flight for one session was reached.
pub const TOO_MANY_REQUESTS: i64 = -32000;

/// One downstream message, decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request: answered exactly once (unless the client cancels it).
    Request {
        /// Its id, as sent (a string or a number).
        id: Value,
        /// The method.
        method: String,
        /// Its params (`Null` when absent).
        params: Value,
    },
    /// A notification.
    Notification {
        /// The method.
        method: String,
        /// Its params (`Null` when absent).
        params: Value,
    },
    /// A response to a request of ours.
    Response {
        /// Its id.
        id: Value,
        /// Its `result`, or its error's code and message.
        outcome: Result<Value, (i64, String)>,
    },
}

/// Why a frame is not a message, with the id to answer to when one could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Malformed {
    /// The request's id, if the frame had a usable one.
    pub id: Option<Value>,
    /// The JSON-RPC error code.
    pub code: i64,
    /// What is wrong.
    pub message: String,
}

fn malformed(id: Option<Value>, code: i64, message: impl Into<String>) -> Malformed {
    Malformed {
        id,
        code,
        message: message.into(),
    }
}

/// The members of a downstream message the gateway reads, each as the `Value` it is (a
/// repeated member keeps its last value, as an object `Value` would); other members are read
/// as `Value`s too and dropped, so a frame parses or fails exactly as a whole `Value` would.
#[derive(Default)]
struct Envelope {
    /// `jsonrpc`, when present: whether it is the string `"2.0"`.
    jsonrpc: Option<bool>,
    method: Option<Value>,
    id: Option<Value>,
    params: Option<Value>,
    result: Option<Value>,
    error: Option<Value>,
}

/// A frame's top-level value: an object's envelope, or whether it was an array.
enum Top {
    Object(Envelope),
    NotObject { array: bool },
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Member {
    Jsonrpc,
    Method,
    Id,
    Params,
    Result,
    Error,
    #[serde(other)]
    Other,
}

impl<'de> Deserialize<'de> for Top {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Top;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
                let mut e = Envelope::default();
                while let Some(key) = map.next_key::<Member>()? {
                    match key {
                        Member::Jsonrpc => e.jsonrpc = Some(map.next_value::<IsVersion2>()?.0),
                        Member::Method => e.method = Some(map.next_value()?),
                        Member::Id => e.id = Some(map.next_value()?),
                        Member::Params => e.params = Some(map.next_value()?),
                        Member::Result => e.result = Some(map.next_value()?),
                        Member::Error => e.error = Some(map.next_value()?),
                        Member::Other => {
                            map.next_value::<Value>()?;
                        }
                    }
                }
                Ok(Top::Object(e))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Top, A::Error> {
                while seq.next_element::<Value>()?.is_some() {}
                Ok(Top::NotObject { array: true })
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Top, E> {
                Ok(Top::NotObject { array: false })
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Top, E> {
                Ok(Top::NotObject { array: false })
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Top, E> {
                Ok(Top::NotObject { array: false })
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Top, E> {
                Ok(Top::NotObject { array: false })
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Top, E> {
                Ok(Top::NotObject { array: false })
            }
            fn visit_unit<E: de::Error>(self) -> Result<Top, E> {
                Ok(Top::NotObject { array: false })
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// A request id the gateway can answer to: a string or an integer.
fn usable(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// Decode one frame: a single JSON-RPC 2.0 message (batches are not part of the protocol
/// since 2025-06-18). The envelope is read member by member, without an object `Value` for
/// it; what is accepted, and how, is as for the frame read whole as a `Value`.
pub fn decode(frame: &[u8]) -> Result<Message, Malformed> {
    let top: Top = serde_json::from_slice(frame)
        .map_err(|e| malformed(None, PARSE_ERROR, format!("the frame is not JSON: {e}")))?;
    let mut obj = match top {
        Top::Object(obj) => obj,
        Top::NotObject { array } => {
            let what = if array {
                "JSON-RPC batches are not supported"
            } else {
                "a message must be a JSON object"
            };
            return Err(malformed(None, INVALID_REQUEST, what));
        }
    };
    let id = obj.id.take();
    let usable_id = || id.clone().filter(usable);
    if obj.jsonrpc != Some(true) {
        return Err(malformed(
            usable_id(),
            INVALID_REQUEST,
            "jsonrpc must be \"2.0\"",
        ));
    }
    let params = obj.params.take().unwrap_or(Value::Null);
    match (obj.method.take(), id) {
        (Some(Value::String(method)), None) => Ok(Message::Notification { method, params }),
        (Some(Value::String(method)), Some(id)) if usable(&id) => {
            Ok(Message::Request { id, method, params })
        }
        (Some(Value::String(_)), Some(_)) => Err(malformed(
            None,
            INVALID_REQUEST,
            "a request id must be a string or an integer",
        )),
        (Some(_), id) => Err(malformed(
            id.filter(usable),
            INVALID_REQUEST,
            "method must be a string",
        )),
        (None, Some(id)) if obj.result.is_some() || obj.error.is_some() => {
            let outcome = match obj.result.take() {
                Some(result) => Ok(result),
                None => {
                    let error = obj.error.take().unwrap_or(Value::Null);
                    let code = error
                        .get("code")
                        .and_then(Value::as_i64)
                        .unwrap_or(INTERNAL_ERROR);
                    let message = error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("no message")
                        .to_string();
                    Err((code, message))
                }
            };
            Ok(Message::Response { id, outcome })
        }
        (None, id) => Err(malformed(id.filter(usable), INVALID_REQUEST, "no method")),
    }
}

#[derive(Serialize)]
struct Response<'a, R: Serialize> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: R,
}

#[derive(Serialize)]
struct ErrorResponse<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: i64,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a Value>,
}

#[derive(Serialize)]
struct Notification<'a, P: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<P>,
}

fn to_bytes(value: &impl Serialize) -> Bytes {
    // Serializing these types cannot fail: maps have string keys, numbers are finite or
    // already JSON text.
    Bytes::from(serde_json::to_vec(value).unwrap_or_default())
}

/// A response with `result`.
pub fn result(id: &Value, result: impl Serialize) -> Bytes {
    to_bytes(&Response {
        jsonrpc: "2.0",
        id,
        result,
    })
}

/// [`result`] of a result that is JSON text already, written as bytes: the same frame,
/// `{"jsonrpc":"2.0","id":…,"result":…}`, without going through the serializer.
pub fn result_text(id: &Value, text: &serde_json::value::RawValue) -> Bytes {
    let text = text.get().as_bytes();
    let mut out = Vec::with_capacity(text.len() + 48);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    // Writing a `Value` into a `Vec` cannot fail (see `to_bytes`).
    let _ = serde_json::to_writer(&mut out, id);
    out.extend_from_slice(b",\"result\":");
    out.extend_from_slice(text);
    out.push(b'}');
    Bytes::from(out)
}

/// An error response.
pub fn error(id: &Value, code: i64, message: &str, data: Option<&Value>) -> Bytes {
    to_bytes(&ErrorResponse {
        jsonrpc: "2.0",
        id,
        error: ErrorBody {
            code,
            message,
            data,
        },
    })
}

/// A request of the gateway's to a downstream client.
pub fn request(id: &Value, method: &str, params: impl Serialize) -> Bytes {
    #[derive(Serialize)]
    struct Request<'a, P: Serialize> {
        jsonrpc: &'static str,
        id: &'a Value,
        method: &'a str,
        params: P,
    }
    to_bytes(&Request {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
}

/// A notification (no params when `params` is `None`).
pub fn notification(method: &str, params: Option<impl Serialize>) -> Bytes {
    to_bytes(&Notification {
        jsonrpc: "2.0",
        method,
        params,
    })
}

/// A tool as the downstream client sees it: the qualified name instead of the server's, and
/// no `execution`: the gateway runs task-augmented tools itself and answers the call directly.
#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(rename = "inputSchema")]
    input_schema: &'a RawJson,
    #[serde(rename = "outputSchema", skip_serializing_if = "Option::is_none")]
    output_schema: Option<&'a RawJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<&'a RawJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    icons: Option<&'a RawJson>,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    meta: Option<&'a RawJson>,
}

fn wire_tool<'a>(t: &'a Tool, name: &'a str) -> WireTool<'a> {
    WireTool {
        name,
        title: t.def.title.as_deref(),
        description: t.def.description.as_deref(),
        input_schema: &t.def.input_schema,
        output_schema: t.def.output_schema.as_ref(),
        annotations: t.def.annotations.as_ref(),
        icons: t.def.icons.as_ref(),
        meta: t.def.meta.as_ref(),
    }
}

#[derive(Serialize)]
struct Page<'a, T: Serialize> {
    #[serde(flatten)]
    items: T,
    #[serde(rename = "nextCursor", skip_serializing_if = "Option::is_none")]
    next_cursor: Option<&'a str>,
}

#[derive(Serialize)]
struct Tools<'a> {
    tools: Vec<WireTool<'a>>,
}

/// A `tools/list` result of `tools`, served under `names` (one per tool, in order).
pub fn tools_page(
    id: &Value,
    tools: &[Tool],
    names: &[String],
    next_cursor: Option<&str>,
) -> Bytes {
    result(id, tools_result(tools, names, next_cursor))
}

fn tools_result<'a>(
    tools: &'a [Tool],
    names: &'a [String],
    next_cursor: Option<&'a str>,
) -> Page<'a, Tools<'a>> {
    Page {
        items: Tools {
            tools: tools
                .iter()
                .zip(names)
                .map(|(t, name)| wire_tool(t, name))
                .collect(),
        },
        next_cursor,
    }
}

#[derive(Serialize)]
struct Resources<'a> {
    resources: Vec<&'a crate::catalog::ResourceDef>,
}

/// A `resources/list` result of `resources`.
pub fn resources_page(id: &Value, resources: &[Resource], next_cursor: Option<&str>) -> Bytes {
    result(id, resources_result(resources, next_cursor))
}

fn resources_result<'a>(
    resources: &'a [Resource],
    next_cursor: Option<&'a str>,
) -> Page<'a, Resources<'a>> {
    Page {
        items: Resources {
            resources: resources.iter().map(|r| &r.def).collect(),
        },
        next_cursor,
    }
}

#[derive(Serialize)]
struct Templates<'a> {
    #[serde(rename = "resourceTemplates")]
    templates: Vec<&'a crate::catalog::ResourceTemplateDef>,
}

/// A `resources/templates/list` result of `templates`.
pub fn templates_page(id: &Value, templates: &[ResourceTemplate], next: Option<&str>) -> Bytes {
    result(id, templates_result(templates, next))
}

fn templates_result<'a>(
    templates: &'a [ResourceTemplate],
    next: Option<&'a str>,
) -> Page<'a, Templates<'a>> {
    Page {
        items: Templates {
            templates: templates.iter().map(|t| &t.def).collect(),
        },
        next_cursor: next,
    }
}

#[derive(Serialize)]
struct WirePrompt<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    arguments: &'a [crate::catalog::PromptArgument],
}

#[derive(Serialize)]
struct Prompts<'a> {
    prompts: Vec<WirePrompt<'a>>,
}

/// A `prompts/list` result of `prompts`, served under `names` (one per prompt, in order).
pub fn prompts_page(
    id: &Value,
    prompts: &[Prompt],
    names: &[String],
    next_cursor: Option<&str>,
) -> Bytes {
    result(id, prompts_result(prompts, names, next_cursor))
}

fn prompts_result<'a>(
    prompts: &'a [Prompt],
    names: &'a [String],
    next_cursor: Option<&'a str>,
) -> Page<'a, Prompts<'a>> {
    Page {
        items: Prompts {
            prompts: prompts
                .iter()
                .zip(names)
                .map(|(p, name)| WirePrompt {
                    name,
                    title: p.def.title.as_deref(),
                    description: p.def.description.as_deref(),
                    arguments: &p.def.arguments,
                })
                .collect(),
        },
        next_cursor,
    }
}

/// One page of a list, by kind: what the four `*_page` functions answer with.
#[derive(Debug, Clone, Copy)]
pub enum ListPage<'a> {
    /// Tools, with the names they are served under.
    Tools(&'a [Tool], &'a [String]),
    /// Resources.
    Resources(&'a [Resource]),
    /// Resource templates.
    Templates(&'a [ResourceTemplate]),
    /// Prompts, with the names they are served under.
    Prompts(&'a [Prompt], &'a [String]),
}

/// The `result` of a list page as JSON text, exactly what the page's `*_page` function writes
/// under `result`; [`result`] of it is that function's frame (`&RawValue` is written as is).
pub fn page_text(page: ListPage<'_>, next: Option<&str>) -> Box<serde_json::value::RawValue> {
    use serde_json::value::to_raw_value;
    // Serializing these types cannot fail (see `to_bytes`); `null` would never be served as
    // a page: the debug builds' comparison with the `*_page` frame would catch it.
    match page {
        ListPage::Tools(t, n) => to_raw_value(&tools_result(t, n, next)),
        ListPage::Resources(r) => to_raw_value(&resources_result(r, next)),
        ListPage::Templates(t) => to_raw_value(&templates_result(t, next)),
        ListPage::Prompts(p, n) => to_raw_value(&prompts_result(p, n, next)),
    }
    .unwrap_or_else(|_| to_raw_value(&()).expect("null is JSON"))
}

/// A `tools/call` result: exactly what the server sent when it came from one.
pub fn tool_result(id: &Value, r: &ToolResult) -> Bytes {
    match &r.raw {
        Some(raw) => result(id, raw),
        None => result(id, r),
    }
}

/// A tool error the model can read: `isError: true` with one text part.
pub fn tool_error(id: &Value, text: &str) -> Bytes {
    result(
        id,
        serde_json::json!({"content": [{"type": "text", "text": text}], "isError": true}),
    )
}

/// A `resources/read` result.
pub fn read_result(id: &Value, r: &ReadResult) -> Bytes {
    result(id, serde_json::json!({ "contents": r.contents }))
}

/// A `prompts/get` result.
pub fn prompt_result(id: &Value, p: &PromptResult) -> Bytes {
    let mut out = Map::new();
    if let Some(d) = &p.description {
        out.insert("description".into(), Value::String(d.clone()));
    }
    out.insert(
        "messages".into(),
        serde_json::to_value(&p.messages).unwrap_or(Value::Array(Vec::new())),
    );
    result(id, Value::Object(out))
}

/// A `completion/complete` result.
pub fn completion_result(id: &Value, c: &Completion) -> Bytes {
    let mut completion = serde_json::json!({ "values": c.values, "hasMore": c.has_more });
    if let (Some(total), Some(obj)) = (c.total, completion.as_object_mut()) {
        obj.insert("total".into(), Value::from(total));
    }
    result(id, serde_json::json!({ "completion": completion }))
}
