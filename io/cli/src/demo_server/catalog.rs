//! `--catalog`: resources, a resource template, prompts, argument completion, resource
//! subscriptions and `logging/setLevel`, written from the MCP specification like the rest of
//! this server. Lists are paginated by `--page-size` like `tools/list`.

use super::{Server, INVALID_PARAMS};
use serde_json::{json, Value};

/// JSON-RPC error code the specification gives for an unknown resource.
const RESOURCE_NOT_FOUND: i64 = -32002;

/// Names the `greet` prompt and the greeting template complete from.
const NAMES: [&str; 4] = ["alice", "albert", "bob", "carol"];

const LOGO_PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// The capabilities `--catalog` adds to `initialize`.
pub(super) fn capabilities() -> Value {
    json!({
        "resources": {"subscribe": true, "listChanged": false},
        "prompts": {"listChanged": false},
        "completions": {},
        "logging": {},
    })
}

fn resources() -> Vec<Value> {
    vec![
        json!({"uri": "demo://readme", "name": "readme", "title": "Read me",
               "description": "What this server is", "mimeType": "text/plain"}),
        json!({"uri": "demo://logo", "name": "logo", "description": "A one-pixel PNG",
               "mimeType": "image/png", "size": 68}),
        json!({"uri": "demo://numbers", "name": "numbers", "mimeType": "application/json"}),
    ]
}

fn templates() -> Vec<Value> {
    vec![
        json!({"uriTemplate": "demo://greeting/{name}", "name": "greeting",
                "description": "A greeting for anyone", "mimeType": "text/plain"}),
    ]
}

fn prompts() -> Vec<Value> {
    vec![
        json!({"name": "greet", "title": "Greet someone", "description": "Say hello to a person",
               "arguments": [{"name": "name", "description": "Who to greet", "required": true},
                             {"name": "style", "description": "formal or casual"}]}),
        json!({"name": "summary", "description": "Summarise the readme"}),
    ]
}

/// One page of `items` under `key`, starting at the cursor `params` carries.
fn page(server: &Server, key: &str, items: Vec<Value>, params: &Value) -> Result<Value, String> {
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(c) => c
            .as_str()
            .and_then(|c| c.strip_prefix("at-"))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&n| n <= items.len())
            .ok_or_else(|| format!("invalid cursor {c}"))?,
    };
    let end = match server.flags.page_size {
        Some(size) => (start + size).min(items.len()),
        None => items.len(),
    };
    let mut result = json!({ key: items[start..end].to_vec() });
    if end < items.len() {
        result["nextCursor"] = json!(format!("at-{end}"));
    }
    Ok(result)
}

fn completions(prefix: &str) -> Value {
    let values: Vec<&str> = NAMES
        .iter()
        .copied()
        .filter(|n| n.starts_with(prefix))
        .collect();
    json!({"completion": {"values": values, "total": values.len(), "hasMore": false}})
}

impl Server {
    /// Answer a `--catalog` method; `false` when `method` is not one.
    pub(super) fn handle_catalog(&self, method: &str, id: &Value, params: &Value) -> bool {
        if !self.flags.catalog {
            return false;
        }
        let answer = match method {
            "resources/list" => page(self, "resources", resources(), params),
            "resources/templates/list" => page(self, "resourceTemplates", templates(), params),
            "prompts/list" => page(self, "prompts", prompts(), params),
            "resources/read" => return self.read(id, params),
            "resources/subscribe" | "resources/unsubscribe" => {
                let Some(uri) = params.get("uri").and_then(Value::as_str) else {
                    self.respond_error(id, INVALID_PARAMS, "missing uri");
                    return true;
                };
                self.respond(id, json!({}));
                if method == "resources/subscribe" {
                    // A subscriber hears about the resource at once: it "changed" for them.
                    self.notify("notifications/resources/updated", Some(json!({"uri": uri})));
                }
                return true;
            }
            "prompts/get" => return self.get_prompt(id, params),
            "completion/complete" => {
                let prefix = params
                    .pointer("/argument/value")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                Ok(completions(prefix))
            }
            "logging/setLevel" => {
                let level = params
                    .get("level")
                    .and_then(Value::as_str)
                    .unwrap_or("info");
                self.respond(id, json!({}));
                self.notify(
                    "notifications/message",
                    Some(json!({"level": level, "logger": "demo",
                                "data": format!("log level set to {level}")})),
                );
                return true;
            }
            _ => return false,
        };
        match answer {
            Ok(result) => self.respond(id, result),
            Err(message) => self.respond_error(id, INVALID_PARAMS, &message),
        }
        true
    }

    fn read(&self, id: &Value, params: &Value) -> bool {
        let uri = params.get("uri").and_then(Value::as_str).unwrap_or("");
        let content = match uri {
            "demo://readme" => json!({"uri": uri, "mimeType": "text/plain",
                                      "text": "mcp-demo-server: echo, add, sleep."}),
            "demo://logo" => json!({"uri": uri, "mimeType": "image/png", "blob": LOGO_PNG_BASE64}),
            "demo://numbers" => json!({"uri": uri, "mimeType": "application/json",
                                       "text": "[1,2,3]"}),
            _ => match uri.strip_prefix("demo://greeting/") {
                Some(name) if !name.is_empty() => {
                    json!({"uri": uri, "mimeType": "text/plain", "text": format!("Hello, {name}!")})
                }
                _ => {
                    self.respond_error(
                        id,
                        RESOURCE_NOT_FOUND,
                        &format!("Resource not found: {uri}"),
                    );
                    return true;
                }
            },
        };
        self.respond(id, json!({ "contents": [content] }));
        true
    }

    fn get_prompt(&self, id: &Value, params: &Value) -> bool {
        let args = params.get("arguments").cloned().unwrap_or(json!({}));
        let arg = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
        let result = match params.get("name").and_then(Value::as_str) {
            Some("greet") => match arg("name") {
                Some(name) => {
                    let style = arg("style").unwrap_or_else(|| "casual".into());
                    json!({"description": "Say hello to a person",
                           "messages": [{"role": "user", "content": {"type": "text",
                               "text": format!("Say hello to {name}, {style}ly.")}}]})
                }
                None => {
                    self.respond_error(id, INVALID_PARAMS, "greet needs argument `name`");
                    return true;
                }
            },
            Some("summary") => json!({"messages": [
                {"role": "user", "content": {"type": "resource", "resource":
                    {"uri": "demo://readme", "mimeType": "text/plain",
                     "text": "mcp-demo-server: echo, add, sleep."}}},
                {"role": "user", "content": {"type": "text", "text": "Summarise this."}}]}),
            other => {
                let name = other.unwrap_or("(none)");
                self.respond_error(id, INVALID_PARAMS, &format!("unknown prompt {name}"));
                return true;
            }
        };
        self.respond(id, result);
        true
    }
}
