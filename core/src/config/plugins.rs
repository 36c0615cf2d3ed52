//! Claude Code plugins: which plugins are installed (`~/.claude/plugins/installed_plugins.json`),
//! which are enabled (`enabledPlugins` in the settings), and where an enabled plugin keeps
//! its servers (`.mcp.json` at its root, or `mcpServers` in `.claude-plugin/plugin.json`:
//! inline, or the path of a file relative to the plugin root).
//!
//! Pure: the shell reads the files and passes their text.

use super::jsonc::strip_jsonc;
use super::{parse_document_as, ConfigError, Dialect, ParsedDocument};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// One installed plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstalledPlugin {
    /// `<plugin>@<marketplace>`, as `enabledPlugins` names it.
    pub id: String,
    /// The directory it is installed in (its root: `${CLAUDE_PLUGIN_ROOT}`).
    pub install_path: String,
}

fn root(path: &str, text: &str) -> Result<Option<serde_json::Map<String, Value>>, ConfigError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Ok(None);
    }
    let value: Value = serde_json::from_str(&strip_jsonc(text)).map_err(|e| {
        let full = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        ConfigError::Syntax {
            path: path.to_string(),
            line: e.line().max(1),
            column: e.column().max(1),
            message: full.strip_suffix(&suffix).unwrap_or(&full).to_string(),
        }
    })?;
    match value {
        Value::Object(map) => Ok(Some(map)),
        _ => Err(document(path, "the top level must be an object")),
    }
}

fn document(path: &str, message: &str) -> ConfigError {
    ConfigError::Document {
        path: path.to_string(),
        message: message.to_string(),
    }
}

/// The plugins `installed_plugins.json` lists, by id. Each id maps to one installation (the
/// file's first form) or a list of them (its newer form, where the first wins).
pub fn parse_installed_plugins(
    path: &str,
    text: &str,
) -> Result<Vec<InstalledPlugin>, ConfigError> {
    let Some(root) = root(path, text)? else {
        return Ok(Vec::new());
    };
    let plugins = match root.get("plugins") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(p)) => p,
        Some(_) => return Err(document(path, "\"plugins\" must be an object")),
    };
    let mut out = Vec::new();
    for (id, entry) in plugins {
        let install = match entry {
            Value::Array(items) => items.first(),
            other => Some(other),
        };
        if let Some(dir) = install
            .and_then(|i| i.get("installPath"))
            .and_then(Value::as_str)
        {
            out.push(InstalledPlugin {
                id: id.clone(),
                install_path: dir.to_string(),
            });
        }
    }
    Ok(out)
}

/// `enabledPlugins` of a Claude Code settings file: plugin id → on or off.
pub fn parse_enabled_plugins(
    path: &str,
    text: &str,
) -> Result<BTreeMap<String, bool>, ConfigError> {
    let Some(root) = root(path, text)? else {
        return Ok(BTreeMap::new());
    };
    match root.get("enabledPlugins") {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => Ok(map
            .iter()
            .filter_map(|(id, on)| Some((id.clone(), on.as_bool()?)))
            .collect()),
        Some(_) => Err(document(path, "\"enabledPlugins\" must be an object")),
    }
}

/// What a plugin's `.claude-plugin/plugin.json` says of its servers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PluginManifest {
    /// Servers written inline under `mcpServers`.
    pub servers: ParsedDocument,
    /// Files (relative to the plugin root, as written) holding more servers.
    pub files: Vec<String>,
}

/// Read a plugin's `plugin.json`: `mcpServers` inline (an object), or the path of a file
/// (a string, or a list of them).
pub fn parse_plugin_manifest(path: &str, text: &str) -> Result<PluginManifest, ConfigError> {
    let Some(root) = root(path, text)? else {
        return Ok(PluginManifest::default());
    };
    match root.get("mcpServers") {
        None | Some(Value::Null) => Ok(PluginManifest::default()),
        Some(Value::String(file)) => Ok(PluginManifest {
            files: vec![file.clone()],
            ..Default::default()
        }),
        Some(Value::Array(files)) => Ok(PluginManifest {
            files: files
                .iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect(),
            ..Default::default()
        }),
        Some(Value::Object(_)) => Ok(PluginManifest {
            servers: parse_document_as(path, text, Dialect::Json)?,
            files: Vec::new(),
        }),
        Some(_) => Err(document(
            path,
            "\"mcpServers\" must be an object, a file path or a list of file paths",
        )),
    }
}
