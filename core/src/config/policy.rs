//! Client policies: the rules a client applies to servers its own files configure, whoever
//! wrote them, before any approval question. Unlike approvals (which only concern
//! project-level servers), a policy can switch off a user-level server too.
//!
//! Gemini CLI: `mcp.allowed` and `mcp.excluded` in its settings (server names; an allow list
//! that is set admits only the names in it, the exclude list wins over it), the per-server
//! switches of `mcp-server-enablement.json` (`{"<name>": {"enabled": false}}`, names
//! lower-cased), and extensions switched off for the working directory in
//! `extension-enablement.json` (`{"<extension>": {"overrides": ["/path/*", "!/other/"]}}`,
//! the last matching rule wins, enabled by default).
//!
//! Claude Code: a system-wide `managed-mcp.json` takes exclusive control (no other Claude
//! Code server runs, plugins included), and `allowedMcpServers` / `deniedMcpServers` in its
//! settings match a server by name, by its exact command line, or by URL with `*` wildcards;
//! the deny list wins, and a set allow list (even empty) admits only what it matches.
//!
//! Pure: the shell reads the files and passes their text; the decision is made in
//! [`merge`](super::merge) through [`Approvals::policies`](super::Approvals::policies).

use super::filter::glob_match;
use super::{ConfigError, RejectedBy, ServerConfig, SourceMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// Every client policy discovery found.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClientPolicies {
    /// Gemini CLI's, for `gemini` sources.
    pub gemini: GeminiPolicy,
    /// Claude Code's, for `claude-code` sources.
    pub claude: ClaudePolicy,
}

/// Gemini CLI's server switches.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GeminiPolicy {
    /// `mcp.allowed` of the settings file with the highest precedence that sets it: when
    /// set, only these names (compared lower-cased, trimmed) run.
    pub allowed: Option<Vec<String>>,
    /// `mcp.excluded` of every settings file: these names never run.
    pub excluded: Vec<String>,
    /// Servers `mcp-server-enablement.json` switches off (lower-cased names).
    pub disabled: BTreeSet<String>,
    /// The manifests (`gemini-extension.json` paths, as in [`SourceMeta::path`]) of
    /// extensions switched off for this working directory.
    pub disabled_extensions: BTreeSet<String>,
}

/// One `allowedMcpServers` / `deniedMcpServers` entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerRule {
    /// `{"serverName": "github"}`: the server's name.
    Name(String),
    /// `{"serverCommand": ["npx", "-y", "pkg"]}`: a stdio server's command and arguments,
    /// exactly.
    Command(Vec<String>),
    /// `{"serverUrl": "https://*.example.com/*"}`: a remote server's URL, `*` matching any
    /// run of characters.
    Url(String),
}

impl ServerRule {
    fn matches(&self, name: &str, config: &ServerConfig) -> bool {
        match self {
            ServerRule::Name(n) => n == name,
            ServerRule::Command(argv) => {
                config.url.is_none()
                    && config.command.as_deref() == argv.first().map(String::as_str)
                    && config.args.as_slice() == argv.get(1..).unwrap_or(&[])
            }
            ServerRule::Url(pattern) => config
                .url
                .as_deref()
                .is_some_and(|url| glob_match(pattern, url)),
        }
    }
}

/// Claude Code's managed controls.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClaudePolicy {
    /// The `managed-mcp.json` found, if any: only the servers it names run of all Claude
    /// Code's.
    pub managed_file: Option<String>,
    /// The allow list, when one is set (managed settings, extended by the user's own
    /// unless the managed settings say `allowManagedMcpServersOnly`).
    pub allowed: Option<Vec<ServerRule>>,
    /// The deny list: managed and user settings together.
    pub denied: Vec<ServerRule>,
}

/// The MCP keys of one Claude Code settings file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ClaudePolicySettings {
    /// `allowedMcpServers`, when present.
    pub allowed: Option<Vec<ServerRule>>,
    /// `deniedMcpServers`.
    pub denied: Vec<ServerRule>,
    /// `allowManagedMcpServersOnly`.
    pub managed_only: bool,
}

impl ClaudePolicy {
    /// Add the managed settings (`managed = true`) or a user's settings file. Call with the
    /// managed settings first.
    pub fn add(&mut self, settings: ClaudePolicySettings, managed: bool, managed_only: bool) {
        self.denied.extend(settings.denied);
        if let Some(allowed) = settings.allowed {
            if managed || !managed_only {
                self.allowed.get_or_insert_with(Vec::new).extend(allowed);
            }
        }
    }
}

fn norm(name: &str) -> String {
    name.trim().to_lowercase()
}

impl ClientPolicies {
    /// The rule switching server `name` of `source` off, if any.
    pub fn blocked(
        &self,
        name: &str,
        source: &SourceMeta,
        config: &ServerConfig,
    ) -> Option<RejectedBy> {
        match source.provider.as_str() {
            "gemini" => {
                let g = &self.gemini;
                let id = norm(name);
                if g.disabled_extensions.contains(&source.path) {
                    Some(RejectedBy::GeminiExtensionDisabled)
                } else if g
                    .allowed
                    .as_ref()
                    .is_some_and(|list| !list.iter().any(|n| norm(n) == id))
                {
                    Some(RejectedBy::GeminiNotAllowed)
                } else if g.excluded.iter().any(|n| norm(n) == id) {
                    Some(RejectedBy::GeminiExcluded)
                } else if g.disabled.contains(&id) {
                    Some(RejectedBy::GeminiDisabled)
                } else {
                    None
                }
            }
            "claude-code" => {
                let c = &self.claude;
                if c.managed_file.as_ref().is_some_and(|m| *m != source.path) {
                    Some(RejectedBy::ClaudeManagedMcpOnly)
                } else if c.denied.iter().any(|r| r.matches(name, config)) {
                    Some(RejectedBy::ClaudeDeniedMcpServers)
                } else if c
                    .allowed
                    .as_ref()
                    .is_some_and(|list| !list.iter().any(|r| r.matches(name, config)))
                {
                    Some(RejectedBy::ClaudeNotInAllowedMcpServers)
                } else {
                    None
                }
            }
            _ => None,
        }
    }
}

/// A settings file's top-level object (`None` when the file is empty), read as the trust
/// module reads the clients' approval files.
fn json_object(
    path: &str,
    text: &str,
) -> Result<Option<serde_json::Map<String, Value>>, ConfigError> {
    super::trust::json_root(path, text)
}

fn bad(path: &str, key: &str, want: &str) -> ConfigError {
    ConfigError::Document {
        path: path.to_string(),
        message: format!("\"{key}\" must be {want}"),
    }
}

fn names(path: &str, key: &str, value: Option<&Value>) -> Result<Option<Vec<String>>, ConfigError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| bad(path, key, "an array of server names")),
        Some(_) => Err(bad(path, key, "an array of server names")),
    }
}

/// `mcp.allowed` and `mcp.excluded` of a Gemini CLI `settings.json` (each `None` when the
/// file does not set it). A list of the wrong type is an error naming it: an exclusion that
/// cannot be read must not be ignored.
#[allow(clippy::type_complexity)]
pub fn gemini_server_lists(
    path: &str,
    text: &str,
) -> Result<(Option<Vec<String>>, Option<Vec<String>>), ConfigError> {
    let Some(root) = json_object(path, text)? else {
        return Ok((None, None));
    };
    let mcp = root.get("mcp");
    Ok((
        names(path, "mcp.allowed", mcp.and_then(|m| m.get("allowed")))?,
        names(path, "mcp.excluded", mcp.and_then(|m| m.get("excluded")))?,
    ))
}

/// The servers Gemini CLI's `mcp-server-enablement.json` switches off (lower-cased). A file
/// that does not parse is an error, never "everything on".
pub fn gemini_disabled_servers(path: &str, text: &str) -> Result<BTreeSet<String>, ConfigError> {
    let Some(root) = json_object(path, text)? else {
        return Ok(BTreeSet::new());
    };
    let mut off = BTreeSet::new();
    for (name, state) in &root {
        match state.get("enabled") {
            Some(Value::Bool(false)) => {
                off.insert(norm(name));
            }
            Some(Value::Bool(true)) | None => {}
            Some(_) => return Err(bad(path, &format!("{name}.enabled"), "true or false")),
        }
    }
    Ok(off)
}

/// Gemini CLI's `extension-enablement.json`, read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GeminiExtensionEnablement {
    rules: Vec<(String, Vec<String>)>,
}

impl GeminiExtensionEnablement {
    /// Parse the file (`{"<extension>": {"overrides": ["<rule>", ...]}}`).
    pub fn parse(path: &str, text: &str) -> Result<Self, ConfigError> {
        let Some(root) = json_object(path, text)? else {
            return Ok(Self::default());
        };
        let mut rules = Vec::new();
        for (name, entry) in &root {
            let key = format!("{name}.overrides");
            let list = names(path, &key, entry.get("overrides"))?.unwrap_or_default();
            rules.push((name.clone(), list));
        }
        Ok(GeminiExtensionEnablement { rules })
    }

    /// Whether `extension` is enabled in directory `dir` (absolute): the last rule matching
    /// the directory decides (`!` switches off; a trailing `*` covers subdirectories too);
    /// enabled when none matches.
    pub fn enabled(&self, extension: &str, dir: &str) -> bool {
        let dir = slashed(dir);
        let mut enabled = true;
        for (_, rules) in self.rules.iter().filter(|(n, _)| n == extension) {
            for rule in rules {
                let (off, rule) = match rule.strip_prefix('!') {
                    Some(r) => (true, r),
                    None => (false, rule.as_str()),
                };
                let (subdirs, base) = match rule.strip_suffix('*') {
                    Some(b) => (true, b),
                    None => (false, rule),
                };
                let base = slashed(base);
                let hit = if subdirs {
                    dir.starts_with(&base)
                } else {
                    dir == base
                };
                if hit {
                    enabled = !off;
                }
            }
        }
        enabled
    }
}

/// A directory as `/a/b/`: forward slashes, one leading and one trailing.
fn slashed(dir: &str) -> String {
    let mut s = dir.replace('\\', "/");
    if !s.starts_with('/') {
        s.insert(0, '/');
    }
    if !s.ends_with('/') {
        s.push('/');
    }
    s
}

/// The MCP keys of a Claude Code settings file (managed, user or project):
/// `allowedMcpServers`, `deniedMcpServers` (entries `{serverName}`, `{serverCommand}` or
/// `{serverUrl}`) and `allowManagedMcpServersOnly`. A malformed list is an error naming it.
pub fn parse_claude_policy(path: &str, text: &str) -> Result<ClaudePolicySettings, ConfigError> {
    let Some(root) = json_object(path, text)? else {
        return Ok(ClaudePolicySettings::default());
    };
    let rules = |key: &str| -> Result<Option<Vec<ServerRule>>, ConfigError> {
        let items = match root.get(key) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Array(items)) => items,
            Some(_) => return Err(bad(path, key, "an array")),
        };
        let want = "an array of {serverName}, {serverCommand} or {serverUrl} entries";
        items
            .iter()
            .map(|item| {
                if let Some(n) = item.get("serverName").and_then(Value::as_str) {
                    Some(ServerRule::Name(n.to_string()))
                } else if let Some(Value::Array(argv)) = item.get("serverCommand") {
                    argv.iter()
                        .map(|a| a.as_str().map(str::to_string))
                        .collect::<Option<Vec<_>>>()
                        .filter(|argv| !argv.is_empty())
                        .map(ServerRule::Command)
                } else {
                    item.get("serverUrl")
                        .and_then(Value::as_str)
                        .map(|u| ServerRule::Url(u.to_string()))
                }
            })
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| bad(path, key, want))
    };
    let managed_only = match root.get("allowManagedMcpServersOnly") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad(path, "allowManagedMcpServersOnly", "true or false")),
    };
    Ok(ClaudePolicySettings {
        allowed: rules("allowedMcpServers")?,
        denied: rules("deniedMcpServers")?.unwrap_or_default(),
        managed_only,
    })
}
