//! Config documents: which dialect a file is written in, its top level (JSON, JSONC or Codex
//! TOML), the key its servers live under, and Claude Code's `~/.claude.json`, which keeps one
//! server list for the user and one per project directory.

use super::codex::parse_toml_root;
use super::entry::parse_entry;
use super::jsonc::strip_jsonc;
use super::{ConfigError, ServerConfig};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which client's spelling of a document to expect. Every dialect accepts every alias (a
/// Windsurf `serverUrl` in a Cursor file still works); the dialect only decides what is
/// ambiguous between clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    /// JSON with `mcpServers` (Claude Code, Cursor, Windsurf, `.mcp.json`, Switchboard) or
    /// `servers` (VS Code). A plain `url` without `type` means Streamable HTTP.
    Json,
    /// Gemini CLI's `settings.json`: like [`Dialect::Json`], but a plain `url` without `type`
    /// means SSE (Gemini spells Streamable HTTP `httpUrl`).
    Gemini,
    /// Codex's TOML: `[mcp_servers.<name>]` tables.
    Toml,
    /// Cline: a `url` without `type` is the SSE transport; `streamableHttp` is Streamable
    /// HTTP.
    Cline,
    /// Roo Code: a `url` requires `type` (`sse` or `streamable-http`).
    Roo,
    /// Zed's `settings.json`: servers under `context_servers`; an older `command` object
    /// (`{path, args, env}`) is read too.
    Zed,
    /// opencode: servers under `mcp` (or `mcp.servers`), `type` `local` (with `command` an
    /// argv array and `environment`) or `remote`.
    Opencode,
    /// VS Code's user `settings.json` before its `mcp.json`: servers under `mcp.servers`.
    VsCodeSettings,
    /// goose's YAML `config.yaml`: servers under `extensions`, `type` `stdio` (`cmd`,
    /// `args`, `envs`, `env_keys`) or `streamable_http` (`uri`, `headers`).
    Goose,
    /// Continue's YAML (`config.yaml` and `.continue/mcpServers/*.yaml`): `mcpServers` is a
    /// list of entries, each with its `name`.
    Continue,
    /// A Claude Code plugin's `.mcp.json` (or the file its `plugin.json` names): servers
    /// under `mcpServers`, or (as plugins also write it) directly at the top level.
    ClaudePlugin,
    /// GitHub Copilot CLI's `mcp-config.json`: like [`Dialect::Json`], with `type` `local`
    /// (stdio) and `tools` (`["*"]` for all, else the only tools exposed).
    Copilot,
}

impl Dialect {
    /// The dialect a file's path implies: `.toml` is Codex TOML, a `settings.json` inside a
    /// `.gemini` folder is Gemini, anything else is JSON.
    pub fn from_path(path: &str) -> Dialect {
        let normalized = path.replace('\\', "/");
        let lower = normalized.to_ascii_lowercase();
        if lower.ends_with(".toml") {
            Dialect::Toml
        } else if lower.ends_with(".yaml") || lower.ends_with(".yml") {
            if normalized.contains("/goose/") {
                Dialect::Goose
            } else {
                Dialect::Continue
            }
        } else if normalized.ends_with(".gemini/settings.json") {
            Dialect::Gemini
        } else {
            Dialect::Json
        }
    }
}

/// One parsed document: the servers that parsed, in name order (both serde_json's and toml's
/// maps are sorted, so the file's own order is not kept), and one [`ConfigError::Server`] per
/// entry that did not. A bad entry never hides the good ones.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ParsedDocument {
    /// Each entry that parsed, with its name.
    pub servers: Vec<(String, ServerConfig)>,
    /// One error per entry that did not parse, naming it.
    pub errors: Vec<ConfigError>,
    /// VS Code's `inputs`: the values `${input:id}` asks a person for.
    pub inputs: Vec<super::InputSpec>,
}

/// Parse a config document in the dialect its path implies ([`Dialect::from_path`]).
///
/// `Err` means the whole document is unusable: it does not parse ([`ConfigError::Syntax`],
/// with 1-based line and column) or is not a config document ([`ConfigError::Document`]: the
/// top level, or its `mcpServers`/`servers`/`mcp_servers`, is not an object). An empty or
/// whitespace-only text is an empty config. A document without any servers key is an empty
/// config too (Gemini's `settings.json` holds much else).
pub fn parse_document(path: &str, text: &str) -> Result<ParsedDocument, ConfigError> {
    parse_document_as(path, text, Dialect::from_path(path))
}

/// [`parse_document`] with an explicit dialect.
pub fn parse_document_as(
    path: &str,
    text: &str,
    dialect: Dialect,
) -> Result<ParsedDocument, ConfigError> {
    let root = match parse_root(path, text, dialect)? {
        Some(root) => root,
        None => return Ok(ParsedDocument::default()),
    };
    let mut doc = match dialect {
        Dialect::Toml => {
            parse_servers_value(path, root.get("mcp_servers"), "mcp_servers", dialect)?
        }
        Dialect::Zed => parse_servers_value(
            path,
            root.get("context_servers"),
            "context_servers",
            dialect,
        )?,
        Dialect::Goose => parse_servers_value(path, root.get("extensions"), "extensions", dialect)?,
        Dialect::Continue => match root.get("mcpServers") {
            // A list of entries named by their `name`.
            Some(Value::Array(items)) => {
                let mut map = serde_json::Map::new();
                let mut doc = ParsedDocument::default();
                for (i, item) in items.iter().enumerate() {
                    // Continue's names are for people ("Browser search"): a character a
                    // server name cannot hold becomes `-`.
                    let name = item.get("name").and_then(Value::as_str).map(|n| {
                        n.chars()
                            .map(|c| {
                                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                                    c
                                } else {
                                    '-'
                                }
                            })
                            .collect::<String>()
                    });
                    match name.as_deref() {
                        Some(name) if !map.contains_key(name) => {
                            map.insert(name.to_string(), item.clone());
                        }
                        Some(name) => doc.errors.push(ConfigError::server(
                            name,
                            "a second entry of this name in \"mcpServers\"",
                        )),
                        None => doc.errors.push(ConfigError::server(
                            &format!("mcpServers[{i}]"),
                            "the entry has no \"name\"",
                        )),
                    }
                }
                let map = Value::Object(map);
                let parsed = parse_servers_value(path, Some(&map), "mcpServers", dialect)?;
                doc.servers = parsed.servers;
                doc.errors.extend(parsed.errors);
                doc
            }
            other => parse_servers_value(path, other, "mcpServers", dialect)?,
        },
        Dialect::Opencode | Dialect::VsCodeSettings => {
            let mcp = root.get("mcp");
            // opencode's newer shape and VS Code's settings keep servers under
            // `mcp.servers`; opencode's first one directly under `mcp`.
            let nested = mcp
                .and_then(|m| m.get("servers"))
                .filter(|s| dialect == Dialect::VsCodeSettings || is_server_map(s));
            match nested {
                Some(servers) => parse_servers_value(path, Some(servers), "mcp.servers", dialect)?,
                None if dialect == Dialect::Opencode => {
                    parse_servers_value(path, mcp, "mcp", dialect)?
                }
                None => ParsedDocument::default(),
            }
        }
        Dialect::ClaudePlugin if !root.contains_key("mcpServers") => {
            let map = Value::Object(root.clone());
            parse_servers_value(path, Some(&map), "the top level", Dialect::Json)?
        }
        Dialect::Json
        | Dialect::Gemini
        | Dialect::Cline
        | Dialect::Roo
        | Dialect::Copilot
        | Dialect::ClaudePlugin => {
            // Both keys are read when both are present (`mcpServers` wins a name clash).
            let mut doc = parse_servers_value(path, root.get("mcpServers"), "mcpServers", dialect)?;
            let servers = parse_servers_value(path, root.get("servers"), "servers", dialect)?;
            for (name, config) in servers.servers {
                if !doc.servers.iter().any(|(n, _)| *n == name) {
                    doc.servers.push((name, config));
                }
            }
            doc.errors.extend(servers.errors);
            doc
        }
    };
    let inputs = match dialect {
        Dialect::VsCodeSettings => root.get("mcp").and_then(|m| m.get("inputs")),
        _ => root.get("inputs"),
    };
    if let Some(Value::Array(inputs)) = inputs {
        doc.inputs = inputs
            .iter()
            .filter_map(|i| serde_json::from_value(i.clone()).ok())
            .collect();
    }
    Ok(doc)
}

/// Whether `value` is an object of server objects (opencode's `mcp.servers`), rather than a
/// server named `servers`.
fn is_server_map(value: &Value) -> bool {
    value.as_object().is_some_and(|m| {
        !m.contains_key("type")
            && !m.contains_key("command")
            && !m.contains_key("url")
            && m.values().all(Value::is_object)
    })
}

/// What Claude Code's `~/.claude.json` holds for one project directory.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ClaudeJson {
    /// The top-level `mcpServers` (Claude's "user" scope).
    pub user: ParsedDocument,
    /// `projects["<project dir>"].mcpServers` (Claude's "local" scope: private to this user,
    /// for one directory). Empty when `project_dir` is `None` or not listed.
    pub project: ParsedDocument,
    /// The approval keys of `projects["<project dir>"]` (`enabledMcpjsonServers`,
    /// `disabledMcpjsonServers`, `disabledMcpServers`, `hasTrustDialogAccepted`, ...).
    pub project_settings: super::trust::ClaudeSettings,
}

/// Parse Claude Code's `~/.claude.json`. `project_dir` is the absolute project path as Claude
/// stores it (the shell passes the canonical path); a trailing `/` on either side is ignored.
pub fn parse_claude_json(
    path: &str,
    text: &str,
    project_dir: Option<&str>,
) -> Result<ClaudeJson, ConfigError> {
    let root = match parse_root(path, text, Dialect::Json)? {
        Some(root) => root,
        None => return Ok(ClaudeJson::default()),
    };
    let user = parse_servers_value(path, root.get("mcpServers"), "mcpServers", Dialect::Json)?;
    let project_entry = project_dir.and_then(|dir| {
        let want = trim_dir(dir);
        root.get("projects")?
            .as_object()?
            .iter()
            .find(|(key, _)| trim_dir(key) == want)
            .map(|(_, v)| v)
    });
    let (project, project_settings) = match project_entry.and_then(Value::as_object) {
        Some(p) => (
            parse_servers_value(path, p.get("mcpServers"), "mcpServers", Dialect::Json)?,
            super::trust::claude_settings_of(path, p)?,
        ),
        None => Default::default(),
    };
    Ok(ClaudeJson {
        user,
        project,
        project_settings,
    })
}

fn trim_dir(dir: &str) -> &str {
    match dir.trim_end_matches(['/', '\\']) {
        "" => dir,
        trimmed => trimmed,
    }
}

/// Parse the text into its top-level object; `None` for an empty document.
fn parse_root(
    path: &str,
    text: &str,
    dialect: Dialect,
) -> Result<Option<serde_json::Map<String, Value>>, ConfigError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Ok(None);
    }
    match dialect {
        Dialect::Toml => parse_toml_root(path, text).map(Some),
        Dialect::Goose | Dialect::Continue => super::yaml::parse_yaml_root(path, text),
        _ => {
            let cleaned = strip_jsonc(text);
            let value: Value = serde_json::from_str(&cleaned).map_err(|e| {
                // serde_json's Display appends " at line L column C"; we report those as fields.
                let full = e.to_string();
                let suffix = format!(" at line {} column {}", e.line(), e.column());
                let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
                ConfigError::Syntax {
                    path: path.to_string(),
                    line: e.line().max(1),
                    column: e.column().max(1),
                    message,
                }
            })?;
            match value {
                Value::Object(map) => Ok(Some(map)),
                other => Err(ConfigError::Document {
                    path: path.to_string(),
                    message: format!("the top level must be an object, got {}", kind_of(&other)),
                }),
            }
        }
    }
}

/// How a value's type reads in a message: "got a string", "got an array".
pub(super) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parse the object of servers found under `key`: each entry on its own, so a bad one gives
/// one error and the rest still parse. An absent or null key is an empty config.
fn parse_servers_value(
    path: &str,
    servers: Option<&Value>,
    key: &str,
    dialect: Dialect,
) -> Result<ParsedDocument, ConfigError> {
    let servers = match servers {
        None | Some(Value::Null) => return Ok(ParsedDocument::default()),
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(ConfigError::Document {
                path: path.to_string(),
                message: format!("\"{key}\" must be an object, got {}", kind_of(other)),
            })
        }
    };
    let mut doc = ParsedDocument::default();
    for (name, entry) in servers {
        match parse_entry(name, entry, dialect) {
            Ok(config) => doc.servers.push((name.clone(), config)),
            Err(e) => doc.errors.push(e),
        }
    }
    Ok(doc)
}

/// The key a layered dialect keeps its servers under, and that object of `root`; `None` for
/// a dialect (or shape) whose layers do not merge key by key.
fn layered_servers(
    root: &serde_json::Map<String, Value>,
    dialect: Dialect,
) -> Option<(&'static str, Option<&Value>)> {
    match dialect {
        Dialect::Toml => Some(("mcp_servers", root.get("mcp_servers"))),
        // opencode's newer `mcp.servers` shape replaces a server whole.
        Dialect::Opencode => {
            let mcp = root.get("mcp");
            match mcp
                .and_then(|m| m.get("servers"))
                .filter(|s| is_server_map(s))
            {
                Some(_) => None,
                None => Some(("mcp", mcp)),
            }
        }
        _ => None,
    }
}

/// `over` merged into `under` key by key: objects merge recursively, anything else (arrays
/// included) is replaced by `over`'s value.
fn deep_merge(under: Value, over: &Value) -> Value {
    match (under, over) {
        (Value::Object(mut under), Value::Object(over)) => {
            for (key, value) in over {
                let merged = match under.remove(key) {
                    Some(below) => deep_merge(below, value),
                    None => value.clone(),
                };
                under.insert(key.clone(), merged);
            }
            Value::Object(under)
        }
        (_, over) => over.clone(),
    }
}

/// Parse one layer of a client whose layers merge key by key (Codex's TOML; opencode's
/// `mcp.<name>` shape): each entry this layer names is the entry of the layers `below`
/// (`(path, text)`, nearest first) merged key by key with this layer's own, whose keys win.
/// So a project can switch one key of a user's server (`enabled = false`) and keep the rest.
/// Entries only the lower layers name are theirs, not this layer's. A lower layer that does
/// not parse adds nothing here (it is reported when read itself). Other dialects, and
/// opencode's `mcp.servers` shape (which replaces a server whole), parse as
/// [`parse_document_as`] does.
pub fn parse_layer_over(
    path: &str,
    text: &str,
    dialect: Dialect,
    below: &[(String, String)],
) -> Result<ParsedDocument, ConfigError> {
    let Some(root) = parse_root(path, text, dialect)? else {
        return Ok(ParsedDocument::default());
    };
    let Some((key, Some(Value::Object(own)))) = layered_servers(&root, dialect) else {
        return parse_document_as(path, text, dialect);
    };
    let mut merged: serde_json::Map<String, Value> = serde_json::Map::new();
    // Farthest layer first, so nearer ones win.
    for (lower_path, lower_text) in below.iter().rev() {
        let Ok(Some(lower)) = parse_root(lower_path, lower_text, dialect) else {
            continue;
        };
        let Some((_, Some(Value::Object(entries)))) = layered_servers(&lower, dialect) else {
            continue;
        };
        for (name, entry) in entries.iter().filter(|(n, _)| own.contains_key(*n)) {
            let under = merged.remove(name).unwrap_or(Value::Null);
            merged.insert(name.clone(), deep_merge(under, entry));
        }
    }
    for (name, entry) in own {
        let under = merged.remove(name).unwrap_or(Value::Null);
        merged.insert(name.clone(), deep_merge(under, entry));
    }
    parse_servers_value(path, Some(&Value::Object(merged)), key, dialect)
}
