//! `--tool-search`: instead of the whole view, two tools — one searches the view by name and
//! description, ranked, and one calls a tool found there — for agents whose context cannot
//! hold thousands of tool definitions.
//!
//! The search is answered at once from the view the gateway holds (deferred tools included:
//! a call to one waits for its server like any call). Its list of two never changes, so no
//! `tools/list_changed` is sent for view changes in this mode; a search made after a change
//! sees it.

use super::{wire, Gateway, View};
use bytes::Bytes;
use serde_json::{json, Map, Value};

/// The tool that searches the view.
pub const SEARCH_TOOL: &str = "search_tools";
/// The tool that calls a tool of the view by name.
pub const CALL_TOOL: &str = "call_tool";
/// Results of a search when the client does not say.
const DEFAULT_LIMIT: usize = 10;
/// Most results of one search.
const MAX_LIMIT: usize = 50;
/// Most terms of a query that are scored.
const MAX_TERMS: usize = 32;

/// The two tools served instead of the view.
pub(super) fn tools_list(id: &Value) -> Bytes {
    wire::result(
        id,
        json!({ "tools": [
            {
                "name": SEARCH_TOOL,
                "description": "Search the available tools by name and description. Returns the best matches, each with its name, description and input schema; call one with call_tool.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "query": { "type": "string", "description": "Words to look for in tool names and descriptions" },
                        "limit": { "type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Most results (default 10)" }
                    },
                    "required": ["query"]
                }
            },
            {
                "name": CALL_TOOL,
                "description": "Call a tool found with search_tools, by its name, with its arguments.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "name": { "type": "string", "description": "The tool's name, as search_tools gave it" },
                        "arguments": { "type": "object", "description": "The tool's arguments" }
                    },
                    "required": ["name"]
                }
            }
        ]}),
    )
}

/// Lower-case words of `text` (runs of letters and digits).
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// How well a tool named `name` described by `description` matches `terms`: a whole-name
/// match first, then each term found in the name (worth more) or the description.
fn score(terms: &[String], query: &str, name: &str, description: &str) -> u32 {
    let name_l = name.to_lowercase();
    let description_l = description.to_lowercase();
    let mut score = 0;
    if name_l == query.trim().to_lowercase() {
        score += 100;
    }
    for term in terms {
        if name_l.contains(term.as_str()) {
            score += 10;
        }
        if words(description).any(|w| &w == term) {
            score += 3;
        } else if description_l.contains(term.as_str()) {
            score += 1;
        }
    }
    score
}

/// The ranked matches of `query` among `view`'s tools, served under `names`: best first,
/// ties by name, at most `limit`.
pub(super) fn search(view: &View, names: &[String], query: &str, limit: usize) -> Vec<Value> {
    let terms: Vec<String> = words(query).take(MAX_TERMS).collect();
    let mut scored: Vec<(u32, &str, usize)> = view
        .tools
        .iter()
        .zip(names)
        .enumerate()
        .map(|(i, (t, name))| {
            let description = t.def.description.as_deref().unwrap_or("");
            (score(&terms, query, name, description), name.as_str(), i)
        })
        .filter(|(s, _, _)| *s > 0)
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    scored
        .into_iter()
        .take(limit)
        .map(|(_, name, i)| {
            let t = &view.tools[i];
            let mut entry = Map::new();
            entry.insert("name".into(), Value::String(name.to_string()));
            if let Some(d) = &t.def.description {
                entry.insert("description".into(), Value::String(d.to_string()));
            }
            entry.insert("inputSchema".into(), t.def.input_schema.to_value());
            Value::Object(entry)
        })
        .collect()
}

impl Gateway {
    /// A `search_tools` call: answered at once.
    pub(super) fn search_answer(&self, id: &Value, arguments: Option<&Value>) -> Bytes {
        let query = arguments
            .and_then(|a| a.get("query"))
            .and_then(Value::as_str);
        let Some(query) = query else {
            return wire::error(id, wire::INVALID_PARAMS, "query must be a string", None);
        };
        let limit = arguments
            .and_then(|a| a.get("limit"))
            .and_then(Value::as_u64)
            .map_or(DEFAULT_LIMIT, |l| (l as usize).clamp(1, MAX_LIMIT));
        let found = search(&self.view, &self.names.tools, query, limit);
        let text = if found.is_empty() {
            format!("no tool matches {query:?}")
        } else {
            serde_json::to_string_pretty(&found).unwrap_or_default()
        };
        wire::result(
            id,
            json!({
                "content": [{ "type": "text", "text": text }],
                "structuredContent": { "tools": found },
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{Tool, ToolDef};
    use std::sync::Arc;

    fn tool(name: &str, description: &str) -> Tool {
        let mut def = ToolDef::named(name);
        def.description = Some(description.into());
        Tool {
            qualified_name: format!("mcp_s_{name}"),
            server: "s".into(),
            def,
            deferred: false,
        }
    }

    #[test]
    fn search_ranks_name_matches_above_description_matches() {
        let view = View {
            tools: Arc::new(vec![
                tool("read_file", "Read a file from disk"),
                tool("list_dir", "List a directory; each file with its size"),
                tool("weather", "Today's forecast"),
            ]),
            ..View::default()
        };
        let names: Vec<String> = view
            .tools
            .iter()
            .map(|t| t.qualified_name.clone())
            .collect();
        let found = search(&view, &names, "file", 10);
        let got: Vec<&str> = found.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(got, ["mcp_s_read_file", "mcp_s_list_dir"]);
        assert_eq!(search(&view, &names, "file", 1).len(), 1);
        assert!(search(&view, &names, "nothing", 10).is_empty());
        // The whole name first.
        let found = search(&view, &names, "mcp_s_weather", 10);
        assert_eq!(found[0]["name"], "mcp_s_weather");
    }
}
