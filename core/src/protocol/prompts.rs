//! The prompts and completion side of the codec: `prompts/get` params and result,
//! `completion/complete` params and result, `logging/setLevel` params. `prompts/list` pages
//! are read by [`parse_catalog_page`](super::parse_catalog_page).

use super::message::malformed;
use super::ProtocolError;
use crate::catalog::{Completion, LogLevel, PromptMessage, PromptResult};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Most messages of one `prompts/get` answer the client keeps; more is a protocol error.
pub const MAX_PROMPT_MESSAGES: usize = 10_000;

/// Most values of one completion (the protocol's own limit).
pub const MAX_COMPLETION_VALUES: usize = 100;

/// `prompts/get` params: the prompt's raw name and its arguments.
pub fn get_prompt_params(name: &str, arguments: &BTreeMap<String, String>) -> Value {
    let args: Map<String, Value> = arguments
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    json!({ "name": name, "arguments": args })
}

/// Parse a `prompts/get` answer of `server`.
pub fn parse_prompt_result(raw: &RawValue, server: &str) -> Result<PromptResult, ProtocolError> {
    #[derive(serde::Deserialize)]
    struct Get {
        #[serde(default)]
        description: Option<String>,
        messages: Vec<PromptMessage>,
    }
    let g: Get =
        serde_json::from_str(raw.get()).map_err(|e| malformed("prompts/get", e.to_string()))?;
    if g.messages.len() > MAX_PROMPT_MESSAGES {
        return Err(malformed(
            "prompts/get",
            format!("more than {MAX_PROMPT_MESSAGES} messages"),
        ));
    }
    Ok(PromptResult {
        server: server.to_string(),
        description: g.description,
        messages: g.messages,
    })
}

/// What a completion is for, on the wire: a prompt's raw name or a template's URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireRef<'a> {
    /// `ref/prompt` with the prompt's name on its server.
    Prompt(&'a str),
    /// `ref/resource` with the template's URI.
    Resource(&'a str),
}

/// `completion/complete` params.
pub fn complete_params(
    reference: WireRef<'_>,
    argument: &str,
    value: &str,
    context: &BTreeMap<String, String>,
) -> Value {
    let r = match reference {
        WireRef::Prompt(name) => json!({ "type": "ref/prompt", "name": name }),
        WireRef::Resource(uri) => json!({ "type": "ref/resource", "uri": uri }),
    };
    let mut params = json!({ "ref": r, "argument": { "name": argument, "value": value } });
    if !context.is_empty() {
        params["context"] = json!({ "arguments": context });
    }
    params
}

/// Parse a `completion/complete` answer of `server`.
pub fn parse_completion_result(raw: &RawValue, server: &str) -> Result<Completion, ProtocolError> {
    #[derive(serde::Deserialize)]
    struct Inner {
        values: Vec<String>,
        #[serde(default)]
        total: Option<u64>,
        #[serde(rename = "hasMore", default)]
        has_more: Option<bool>,
    }
    #[derive(serde::Deserialize)]
    struct Outer {
        completion: Inner,
    }
    let o: Outer = serde_json::from_str(raw.get())
        .map_err(|e| malformed("completion/complete", e.to_string()))?;
    let c = o.completion;
    if c.values.len() > MAX_COMPLETION_VALUES {
        return Err(malformed(
            "completion/complete",
            format!("more than {MAX_COMPLETION_VALUES} values"),
        ));
    }
    Ok(Completion {
        server: server.to_string(),
        values: c.values,
        total: c.total,
        has_more: c.has_more.unwrap_or(false),
    })
}

/// Most tasks kept from one `tasks/list` page: more is a protocol error.
pub const MAX_TASKS_PER_PAGE: usize = 10_000;

/// A `tasks/list` answer: its tasks kept byte for byte, and the next cursor.
pub fn parse_task_page(
    raw: &RawValue,
    server: &str,
) -> Result<crate::catalog::TaskPage, ProtocolError> {
    #[derive(serde::Deserialize)]
    struct Page {
        tasks: Vec<Box<RawValue>>,
        #[serde(rename = "nextCursor", default)]
        next_cursor: Option<String>,
    }
    let p: Page =
        serde_json::from_str(raw.get()).map_err(|e| malformed("tasks/list", e.to_string()))?;
    if p.tasks.len() > MAX_TASKS_PER_PAGE {
        return Err(malformed(
            "tasks/list",
            format!("more than {MAX_TASKS_PER_PAGE} tasks in one page"),
        ));
    }
    Ok(crate::catalog::TaskPage {
        server: server.to_string(),
        tasks: p
            .tasks
            .into_iter()
            .map(crate::tool::RawJson::from)
            .collect(),
        next_cursor: p.next_cursor.filter(|c| !c.is_empty()),
    })
}

/// `logging/setLevel` params.
pub fn set_level_params(level: LogLevel) -> Value {
    json!({ "level": level.as_str() })
}
