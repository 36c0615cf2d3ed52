//! The resources side of the codec: what a server declares in `initialize` beyond tools
//! ([`ServerCapabilities`]), one page of `resources/list`, `resources/templates/list` or
//! `prompts/list` ([`CatalogPage`]), and the params and results of `resources/read`,
//! `resources/subscribe` and `resources/unsubscribe`.
//!
//! A malformed definition on a page is skipped and reported, as a malformed tool is; it never
//! fails the page.

use super::message::malformed;
use super::ProtocolError;
use crate::catalog::{ReadResult, ResourceContent};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// Most contents items of one `resources/read` answer the client keeps; more is a protocol
/// error for that read.
pub const MAX_READ_CONTENTS: usize = 10_000;

/// What a server declared it offers besides tools, from its `initialize` answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ServerCapabilities {
    /// It offers tools.
    pub tools: bool,
    /// It sends `notifications/tools/list_changed`.
    pub tools_list_changed: bool,
    /// It offers resources (`resources/list`, `resources/templates/list`, `resources/read`).
    pub resources: bool,
    /// Its resources can be subscribed to (`resources/subscribe`).
    pub resources_subscribe: bool,
    /// It sends `notifications/resources/list_changed`.
    pub resources_list_changed: bool,
    /// It offers prompts (`prompts/list`, `prompts/get`).
    pub prompts: bool,
    /// It sends `notifications/prompts/list_changed`.
    pub prompts_list_changed: bool,
    /// It completes arguments (`completion/complete`).
    pub completions: bool,
    /// It sends log messages and takes `logging/setLevel`.
    pub logging: bool,
    /// It lists its tasks (`tasks/list`; `capabilities.tasks.list`).
    pub tasks_list: bool,
}

impl ServerCapabilities {
    /// Read from an `initialize` answer's `capabilities` object (a member that is missing
    /// or `null` is not declared).
    pub fn parse(caps: Option<&Value>) -> ServerCapabilities {
        let get = |k: &str| caps.and_then(|c| c.get(k)).filter(|v| !v.is_null());
        let flag = |k: &str, f: &str| {
            get(k)
                .and_then(|v| v.get(f))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        ServerCapabilities {
            tools: get("tools").is_some(),
            tools_list_changed: flag("tools", "listChanged"),
            resources: get("resources").is_some(),
            resources_subscribe: flag("resources", "subscribe"),
            resources_list_changed: flag("resources", "listChanged"),
            prompts: get("prompts").is_some(),
            prompts_list_changed: flag("prompts", "listChanged"),
            completions: get("completions").is_some(),
            logging: get("logging").is_some(),
            tasks_list: get("tasks")
                .and_then(|t| t.get("list"))
                .is_some_and(|l| !l.is_null()),
        }
    }
}

/// One page of a list of definitions.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogPage<T> {
    /// The well-formed definitions, in the server's order.
    pub items: Vec<T>,
    /// The cursor of the next page, if any.
    pub next_cursor: Option<String>,
    /// The malformed definitions skipped: each one's name (or URI), or `(unnamed)`.
    pub skipped: Vec<String>,
    /// The page's `ttlMs` and `cacheScope`.
    pub hint: super::CacheHint,
}

/// Parse one page of `method`, whose definitions are in the array member `key`.
pub fn parse_catalog_page<T: DeserializeOwned>(
    raw: &RawValue,
    method: &str,
    key: &str,
) -> Result<CatalogPage<T>, ProtocolError> {
    let v: Value = serde_json::from_str(raw.get()).map_err(|e| malformed(method, e.to_string()))?;
    catalog_page_of(v, method, key)
}

/// [`parse_catalog_page`] of the result already read as a `Value`.
pub fn catalog_page_of<T: DeserializeOwned>(
    v: Value,
    method: &str,
    key: &str,
) -> Result<CatalogPage<T>, ProtocolError> {
    let Value::Object(mut o) = v else {
        return Err(malformed(method, "not an object"));
    };
    let listed = match o.remove(key) {
        Some(Value::Array(a)) => a,
        _ => return Err(malformed(method, format!("missing \"{key}\" array"))),
    };
    let next_cursor = match o.remove("nextCursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err(malformed(method, "nextCursor is not a string")),
    };
    let hint = super::cache_hint(o.get("ttlMs"), o.get("cacheScope"));
    let mut items = Vec::with_capacity(listed.len());
    let mut skipped = Vec::new();
    for item in listed {
        let label = ["name", "uri", "uriTemplate"]
            .iter()
            .find_map(|k| item.get(*k).and_then(Value::as_str))
            .unwrap_or("(unnamed)")
            .to_string();
        match serde_json::from_value::<T>(item) {
            Ok(def) => items.push(def),
            Err(_) => skipped.push(label),
        }
    }
    Ok(CatalogPage {
        items,
        next_cursor,
        skipped,
        hint,
    })
}

/// The params of a page of a `*/list` request: the cursor, on every page but the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ListParams<'a> {
    /// Where the page starts.
    pub cursor: &'a str,
}

/// `tools/list`, `resources/list`, `resources/templates/list` and `prompts/list` params: none
/// on the first page, the cursor on the next.
pub fn list_params(cursor: Option<&str>) -> Option<ListParams<'_>> {
    cursor.map(|cursor| ListParams { cursor })
}

/// `resources/read`, `resources/subscribe` and `resources/unsubscribe` params.
pub fn uri_params(uri: &str) -> Value {
    json!({ "uri": uri })
}

/// Parse a `resources/read` answer of `server`.
pub fn parse_read_result(raw: &RawValue, server: &str) -> Result<ReadResult, ProtocolError> {
    #[derive(serde::Deserialize)]
    struct Read {
        contents: Vec<ResourceContent>,
    }
    let r: Read =
        serde_json::from_str(raw.get()).map_err(|e| malformed("resources/read", e.to_string()))?;
    if r.contents.len() > MAX_READ_CONTENTS {
        return Err(malformed(
            "resources/read",
            format!("more than {MAX_READ_CONTENTS} contents items"),
        ));
    }
    Ok(ReadResult {
        server: server.to_string(),
        contents: r.contents,
    })
}

/// Check an answer that must be an object (`{}` for subscribe, unsubscribe, setLevel).
pub fn parse_empty_result(raw: &RawValue, method: &str) -> Result<(), ProtocolError> {
    match serde_json::from_str::<Value>(raw.get()) {
        Ok(Value::Object(_)) => Ok(()),
        Ok(_) => Err(malformed(method, "not an object")),
        Err(e) => Err(malformed(method, e.to_string())),
    }
}
