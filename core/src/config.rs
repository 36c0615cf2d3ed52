//! MCP server configuration: the document formats, validation, `${VAR}` expansion, merging of
//! sources by priority, filters, and the stable config hash used as the tool-cache key.
//!
//! Pure: the shell reads files and passes their text and path in; the environment used for
//! expansion is a map the caller passes, never the process environment.
//!
//! The pipeline: [`parse_document`] (or [`parse_claude_json`]) turns one file's text into a
//! [`ParsedDocument`] — the entries that parsed plus one error per entry that did not, so one
//! typo never hides a whole file. The shell wraps each in a [`Source`] with its
//! [`SourceMeta`], in priority order, and [`merge`] picks the first source naming each server,
//! applies the [`FilterOptions`], validates, and reports everything it did not run
//! ([`Merged::shadowed`], [`Merged::skipped`], [`Merged::errors`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::time::Duration;

/// Where a server's config came from (kept even before a connect finishes).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SourceMeta {
    /// Who wrote the file: `switchboard`, `claude-code`, `codex`, `cursor`, `vscode`, ...
    pub provider: String,
    pub level: SourceLevel,
    /// The file's path as the shell found it.
    pub path: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceLevel {
    User,
    Project,
}

/// The transport a config asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    Stdio,
    Http,
    Sse,
}

impl TransportKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Stdio => "stdio",
            TransportKind::Http => "http",
            TransportKind::Sse => "sse",
        }
    }
}

/// One server entry as written in a config document, *unresolved* (`${VAR}` still in place,
/// secrets still `!command`). This is what the config hash is computed over.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerConfig {
    /// The `type` field as written (`stdio`, `http`, `sse`, `streamable-http`, ...), if any.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// `false` drops the server before any connect attempt.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub enabled: bool,
    /// Connect timeout in milliseconds (open + initialize). Must be positive when set.
    #[serde(rename = "timeout", default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
    /// Auth settings, passed through to the embedder's credential provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<Value>,
    /// Fields this version does not know: kept, ignored, never an error.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Value>,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// The default connect timeout when a config sets none (the seed's 30 s).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

impl ServerConfig {
    /// A stdio server running `command args...` (tests, simulator, examples).
    pub fn stdio(command: impl Into<String>, args: &[&str]) -> Self {
        ServerConfig {
            command: Some(command.into()),
            args: args.iter().map(|s| s.to_string()).collect(),
            enabled: true,
            ..Default::default()
        }
    }

    /// A Streamable HTTP server at `url`.
    pub fn http(url: impl Into<String>) -> Self {
        ServerConfig {
            url: Some(url.into()),
            enabled: true,
            ..Default::default()
        }
    }

    /// The connect timeout this config asks for (default 30 s; validation rejects `<= 0`).
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout_or(DEFAULT_CONNECT_TIMEOUT)
    }

    /// The connect timeout this config asks for, or `default` when it sets none.
    pub fn connect_timeout_or(&self, default: Duration) -> Duration {
        match self.timeout_ms {
            Some(ms) if ms > 0 => Duration::from_millis(ms as u64),
            _ => default,
        }
    }

    /// The transport this config asks for: the `type` field if set, else inferred from
    /// `command` (stdio) or `url` (http).
    pub fn transport_kind(&self) -> Result<TransportKind, String> {
        match self.kind.as_deref() {
            Some(t) => match t.to_ascii_lowercase().as_str() {
                "stdio" => Ok(TransportKind::Stdio),
                "http" | "streamable-http" | "streamablehttp" | "streamable_http" => {
                    Ok(TransportKind::Http)
                }
                "sse" => Ok(TransportKind::Sse),
                _ => Err(t.to_string()),
            },
            None if self.url.is_some() && self.command.is_none() => Ok(TransportKind::Http),
            None => Ok(TransportKind::Stdio),
        }
    }
}

/// A server the manager is asked to run: its name, its unresolved config, and where it came
/// from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerSpec {
    pub name: String,
    pub config: ServerConfig,
    pub source: SourceMeta,
}

impl ServerSpec {
    pub fn new(name: impl Into<String>, config: ServerConfig) -> Self {
        ServerSpec {
            name: name.into(),
            config,
            source: SourceMeta {
                provider: "switchboard".into(),
                level: SourceLevel::User,
                path: "<inline>".into(),
            },
        }
    }
}

/// A resolved, validated transport: what the shell needs to open a connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum TransportConfig {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    Sse {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// A configuration error. `Display` gives the message a user sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
pub enum ConfigError {
    /// The document does not parse.
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// The document parses but is not a config document of a known shape.
    #[error("{path}: {message}")]
    Document { path: String, message: String },
    /// One server entry is invalid; the others are unaffected.
    #[error("Server \"{server}\": {message}")]
    Server { server: String, message: String },
}

impl ConfigError {
    fn server(server: &str, message: impl Into<String>) -> Self {
        ConfigError::Server {
            server: server.to_string(),
            message: message.into(),
        }
    }
}

/// Is `name` acceptable as a server name? Non-empty, at most 64 characters, letters, digits,
/// `-`, `_` and `.`.
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Validate one server entry (without expanding variables).
pub fn validate(name: &str, config: &ServerConfig) -> Result<TransportKind, ConfigError> {
    if !valid_server_name(name) {
        return Err(ConfigError::server(
            name,
            "invalid server name (use 1-64 letters, digits, '-', '_' or '.')",
        ));
    }
    if let Some(ms) = config.timeout_ms {
        if ms <= 0 {
            return Err(ConfigError::server(
                name,
                format!("\"timeout\" must be a positive number of milliseconds, got {ms}"),
            ));
        }
    }
    let kind = config
        .transport_kind()
        .map_err(|t| ConfigError::server(name, format!("unknown server type \"{t}\"")))?;
    if config.command.is_some() && config.url.is_some() {
        return Err(ConfigError::server(
            name,
            "both \"command\" and \"url\" are set",
        ));
    }
    match kind {
        TransportKind::Stdio if config.command.as_deref().is_none_or(str::is_empty) => Err(
            ConfigError::server(name, "stdio server requires \"command\" field"),
        ),
        TransportKind::Http | TransportKind::Sse
            if config.url.as_deref().is_none_or(str::is_empty) =>
        {
            Err(ConfigError::server(
                name,
                format!("{} server requires \"url\" field", kind.as_str()),
            ))
        }
        _ => Ok(kind),
    }
}

/// Expand `${VAR}` and `${VAR:-default}` in `s` from `env`. An unset variable without a
/// default expands to the empty string.
pub fn expand_vars(s: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                let inner = &after[..end];
                let (var, default) = match inner.find(":-") {
                    Some(i) => (&inner[..i], Some(&inner[i + 2..])),
                    None => (inner, None),
                };
                match (env.get(var), default) {
                    (Some(v), Some(d)) if v.is_empty() => out.push_str(d),
                    (Some(v), _) => out.push_str(v),
                    (None, Some(d)) => out.push_str(d),
                    (None, None) => {}
                }
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Validate and resolve a server entry: expand variables in command, args, env, cwd, url and
/// headers from `env`, and build the transport the shell opens.
pub fn resolve(
    name: &str,
    config: &ServerConfig,
    env: &BTreeMap<String, String>,
) -> Result<TransportConfig, ConfigError> {
    let kind = validate(name, config)?;
    let x = |s: &String| expand_vars(s, env);
    let map = |m: &BTreeMap<String, String>| m.iter().map(|(k, v)| (k.clone(), x(v))).collect();
    Ok(match kind {
        TransportKind::Stdio => TransportConfig::Stdio {
            command: config.command.as_ref().map(x).unwrap_or_default(),
            args: config.args.iter().map(x).collect(),
            env: map(&config.env),
            cwd: config.cwd.as_ref().map(x),
        },
        TransportKind::Http => TransportConfig::Http {
            url: config.url.as_ref().map(x).unwrap_or_default(),
            headers: map(&config.headers),
        },
        TransportKind::Sse => TransportConfig::Sse {
            url: config.url.as_ref().map(x).unwrap_or_default(),
            headers: map(&config.headers),
        },
    })
}

/// The stable hash of an *unresolved* config: SHA-256 (hex) of its key-sorted JSON
/// serialization. Identical on every run and machine; the tool cache's key.
pub fn config_hash(config: &ServerConfig) -> String {
    // serde_json's `Map` is a BTreeMap (no `preserve_order`), so going through `Value` sorts
    // every object's keys, including nested `auth` and unknown fields.
    let value = serde_json::to_value(config).unwrap_or(Value::Null);
    let bytes = serde_json::to_vec(&value).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

// ---------------------------------------------------------------------------------------------
// Documents
// ---------------------------------------------------------------------------------------------

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
}

impl Dialect {
    /// The dialect a file's path implies: `.toml` is Codex TOML, a `settings.json` inside a
    /// `.gemini` folder is Gemini, anything else is JSON.
    pub fn from_path(path: &str) -> Dialect {
        let normalized = path.replace('\\', "/");
        if normalized.to_ascii_lowercase().ends_with(".toml") {
            Dialect::Toml
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
    pub servers: Vec<(String, ServerConfig)>,
    pub errors: Vec<ConfigError>,
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
    let key = match dialect {
        Dialect::Toml => "mcp_servers",
        Dialect::Json | Dialect::Gemini => {
            if root.contains_key("mcpServers") || !root.contains_key("servers") {
                "mcpServers"
            } else {
                "servers"
            }
        }
    };
    parse_servers_value(path, root.get(key), key, dialect)
}

/// What Claude Code's `~/.claude.json` holds for one project directory.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ClaudeJson {
    /// The top-level `mcpServers` (Claude's "user" scope).
    pub user: ParsedDocument,
    /// `projects["<project dir>"].mcpServers` (Claude's "local" scope: private to this user,
    /// for one directory). Empty when `project_dir` is `None` or not listed.
    pub project: ParsedDocument,
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
    let project = match project_entry.and_then(Value::as_object) {
        Some(p) => parse_servers_value(path, p.get("mcpServers"), "mcpServers", Dialect::Json)?,
        None => ParsedDocument::default(),
    };
    Ok(ClaudeJson { user, project })
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
        Dialect::Toml => {
            let table: toml::Table = toml::from_str(text).map_err(|e| {
                let (line, column) = line_column(text, e.span().map_or(0, |s| s.start));
                ConfigError::Syntax {
                    path: path.to_string(),
                    line,
                    column,
                    message: e.message().trim().to_string(),
                }
            })?;
            Ok(Some(
                table
                    .into_iter()
                    .map(|(k, v)| (k, toml_to_json(v)))
                    .collect(),
            ))
        }
        Dialect::Json | Dialect::Gemini => {
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

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// Blank out `//` and `/* */` comments and trailing commas (VS Code and Gemini files are
/// JSONC), byte for byte, so serde_json's line and column still point into the original text.
fn strip_jsonc(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match (b, bytes.get(i + 1)) {
            (b'"', _) => in_string = true,
            (b'/', Some(b'/')) => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
                continue;
            }
            (b'/', Some(b'*')) => {
                let start = i;
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                // An unterminated comment is left as is: serde_json reports it.
                if i < bytes.len() {
                    i += 2;
                    for o in &mut out[start..i] {
                        if *o != b'\n' {
                            *o = b' ';
                        }
                    }
                }
                continue;
            }
            (b'}' | b']', _) => {
                let mut j = i;
                while j > 0 && out[j - 1].is_ascii_whitespace() {
                    j -= 1;
                }
                if j > 0 && out[j - 1] == b',' {
                    out[j - 1] = b' ';
                }
            }
            _ => {}
        }
        i += 1;
    }
    // Only ASCII bytes (and whole comments) were replaced by spaces: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

fn toml_to_json(value: toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(f.to_string())),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => {
            Value::Object(t.into_iter().map(|(k, v)| (k, toml_to_json(v))).collect())
        }
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

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

/// Parse one server entry. Canonical fields first; then other clients' spellings, each used
/// only when its canonical field is absent (otherwise it stays in `extra`, untouched).
fn parse_entry(name: &str, entry: &Value, dialect: Dialect) -> Result<ServerConfig, ConfigError> {
    let err = |message: String| ConfigError::server(name, message);
    let Some(obj) = entry.as_object() else {
        return Err(err(format!(
            "the entry must be an object, got {}",
            kind_of(entry)
        )));
    };
    let mut rest = obj.clone();
    let mut config = ServerConfig {
        kind: take_string(&mut rest, "type").map_err(&err)?,
        command: take_string(&mut rest, "command").map_err(&err)?,
        args: take_string_list(&mut rest, "args")
            .map_err(&err)?
            .unwrap_or_default(),
        env: take_string_map(&mut rest, "env").map_err(&err)?,
        cwd: take_string(&mut rest, "cwd").map_err(&err)?,
        url: take_string(&mut rest, "url").map_err(&err)?,
        headers: take_string_map(&mut rest, "headers").map_err(&err)?,
        enabled: true,
        timeout_ms: take_timeout_ms(&mut rest, "timeout", 1).map_err(&err)?,
        auth: rest.remove("auth").filter(|v| !v.is_null()),
        extra: BTreeMap::new(),
    };
    match take_bool(&mut rest, "enabled").map_err(&err)? {
        Some(enabled) => config.enabled = enabled,
        // Cline and Roo spell it `disabled`.
        None if rest.contains_key("disabled") => {
            config.enabled = !take_bool(&mut rest, "disabled")
                .map_err(&err)?
                .unwrap_or(false);
        }
        None => {}
    }
    // Gemini: `httpUrl` is Streamable HTTP and wins over `url`, which means SSE there.
    if dialect == Dialect::Gemini {
        if let Some(url) = take_string(&mut rest, "httpUrl").map_err(&err)? {
            config.url = Some(url);
            config.kind.get_or_insert_with(|| "http".into());
        } else if config.url.is_some() && config.command.is_none() {
            config.kind.get_or_insert_with(|| "sse".into());
        }
    }
    if config.url.is_none() {
        for alias in ["httpUrl", "serverUrl"] {
            if let Some(url) = take_string(&mut rest, alias).map_err(&err)? {
                config.url = Some(url);
                break;
            }
        }
    }
    if config.headers.is_empty() && rest.contains_key("http_headers") {
        config.headers = take_string_map(&mut rest, "http_headers").map_err(&err)?;
    }
    if config.timeout_ms.is_none() {
        config.timeout_ms = match take_timeout_ms(&mut rest, "startup_timeout_ms", 1) {
            Ok(None) => take_timeout_ms(&mut rest, "startup_timeout_sec", 1000),
            other => other,
        }
        .map_err(&err)?;
    }
    config.extra = rest.into_iter().collect();
    Ok(config)
}

type Fields = serde_json::Map<String, Value>;

fn take_string(rest: &mut Fields, key: &str) -> Result<Option<String>, String> {
    match rest.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!(
            "\"{key}\" must be a string, got {}",
            kind_of(&other)
        )),
    }
}

/// A string, or a number or boolean written where a string was meant (`"PORT": 3000`).
fn scalar_string(value: Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn take_string_list(rest: &mut Fields, key: &str) -> Result<Option<Vec<String>>, String> {
    match rest.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                let kind = kind_of(&item);
                scalar_string(item)
                    .ok_or_else(|| format!("\"{key}\"[{i}] must be a string, got {kind}"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(format!(
            "\"{key}\" must be an array of strings, got {}",
            kind_of(&other)
        )),
    }
}

fn take_string_map(rest: &mut Fields, key: &str) -> Result<BTreeMap<String, String>, String> {
    match rest.remove(key) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .into_iter()
            .map(|(k, v)| {
                let kind = kind_of(&v);
                scalar_string(v)
                    .map(|s| (k.clone(), s))
                    .ok_or_else(|| format!("\"{key}\".\"{k}\" must be a string, got {kind}"))
            })
            .collect(),
        Some(other) => Err(format!(
            "\"{key}\" must be an object of strings, got {}",
            kind_of(&other)
        )),
    }
}

fn take_bool(rest: &mut Fields, key: &str) -> Result<Option<bool>, String> {
    match rest.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(other) => Err(format!(
            "\"{key}\" must be true or false, got {}",
            kind_of(&other)
        )),
    }
}

/// A timeout in units of `scale` milliseconds, as whole milliseconds. Integers and strings
/// holding an integer are accepted; a float only when it comes to whole milliseconds
/// (`5000.0` ms, or `1.5` in a seconds field). Range is checked by [`validate`], not here.
fn take_timeout_ms(rest: &mut Fields, key: &str, scale: i64) -> Result<Option<i64>, String> {
    let unit = if scale == 1 {
        "milliseconds"
    } else {
        "seconds"
    };
    let bad = |shown: String| format!("\"{key}\" must be a whole number of {unit}, got {shown}");
    let value = match rest.remove(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => v,
    };
    let ms = match &value {
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.checked_mul(scale),
            None => n
                .as_f64()
                .map(|f| f * scale as f64)
                .filter(|ms| ms.fract() == 0.0 && ms.abs() < 9.0e15)
                .map(|ms| ms as i64),
        },
        Value::String(s) => s
            .trim()
            .parse::<i64>()
            .ok()
            .and_then(|i| i.checked_mul(scale)),
        _ => None,
    };
    ms.map(Some).ok_or_else(|| bad(value.to_string()))
}

// ---------------------------------------------------------------------------------------------
// Merging and filters
// ---------------------------------------------------------------------------------------------

/// One config source: a document (or a part of one) and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Source {
    pub meta: SourceMeta,
    pub servers: Vec<(String, ServerConfig)>,
    /// Entries of this source that did not parse ([`ParsedDocument::errors`]). A broken
    /// entry still claims its name, so a lower-priority entry of the same name does not run
    /// in its place; whole-document errors belong to the shell's report, not here.
    pub errors: Vec<ConfigError>,
}

impl Source {
    pub fn new(meta: SourceMeta, servers: Vec<(String, ServerConfig)>) -> Self {
        Source {
            meta,
            servers,
            errors: Vec::new(),
        }
    }

    pub fn from_document(meta: SourceMeta, document: ParsedDocument) -> Self {
        Source {
            meta,
            servers: document.servers,
            errors: document.errors,
        }
    }
}

/// Server names and URLs to refuse. Patterns are simple globs: `*` matches any run of
/// characters, everything else matches itself, ignoring ASCII case.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DenyList {
    pub servers: Vec<String>,
    /// Matched against the URL as written (before `${VAR}` expansion).
    pub urls: Vec<String>,
}

impl DenyList {
    /// The seed's default: Exa servers are run by the embedder's native integration, not here.
    pub fn exa() -> Self {
        DenyList {
            servers: vec!["exa".into(), "exa-*".into()],
            urls: vec!["*.exa.ai*".into(), "*//exa.ai*".into()],
        }
    }

    fn server_match(&self, name: &str) -> Option<&str> {
        self.servers
            .iter()
            .find(|p| glob_match(p, name))
            .map(String::as_str)
    }

    fn url_match(&self, url: &str) -> Option<&str> {
        self.urls
            .iter()
            .find(|p| glob_match(p, url))
            .map(String::as_str)
    }
}

/// Which servers [`merge`] keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterOptions {
    /// `false` drops every source whose level is [`SourceLevel::Project`] before precedence
    /// is decided (so they shadow nothing).
    pub project_configs: bool,
    pub deny: DenyList,
}

impl Default for FilterOptions {
    fn default() -> Self {
        FilterOptions {
            project_configs: true,
            deny: DenyList::default(),
        }
    }
}

/// `pattern` matches `text` in full; `*` matches any run of characters; ASCII case ignored.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().map(|c| c.to_ascii_lowercase()).collect();
    let t: Vec<char> = text.chars().map(|c| c.to_ascii_lowercase()).collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// A lower-priority entry that lost to an earlier source naming the same server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shadowed {
    pub server: String,
    pub winner: SourceMeta,
    pub shadowed: SourceMeta,
}

/// Why a server that was configured is not run. Not an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum SkipReason {
    /// `enabled: false` (or `disabled: true`) on the winning entry.
    Disabled,
    /// The source is project-level and project configs are switched off.
    ProjectConfigsOff,
    /// The server's name matches a deny pattern.
    DeniedName { pattern: String },
    /// The server's URL matches a deny pattern.
    DeniedUrl { pattern: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub server: String,
    pub source: SourceMeta,
    #[serde(flatten)]
    pub reason: SkipReason,
}

/// An error together with the source it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceError {
    pub source: SourceMeta,
    pub error: ConfigError,
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.error {
            // These already name the file.
            ConfigError::Syntax { .. } | ConfigError::Document { .. } => self.error.fmt(f),
            ConfigError::Server { .. } => write!(f, "{}: {}", self.source.path, self.error),
        }
    }
}

impl std::error::Error for SourceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// The outcome of [`merge`]: everything is reported, nothing is dropped silently.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Merged {
    /// Valid, enabled, allowed servers, sorted by name.
    pub servers: Vec<ServerSpec>,
    /// In source order.
    pub shadowed: Vec<Shadowed>,
    /// Project sources first (in source order), then the rest by server name.
    pub skipped: Vec<Skipped>,
    /// Parse errors in source order, then validation errors by server name.
    pub errors: Vec<SourceError>,
}

/// Merge sources given in priority order (first = highest).
///
/// 1. Project-level sources are dropped when `options.project_configs` is off.
/// 2. The first source naming a server wins (even when its entry is broken or disabled: a
///    higher layer can switch a server off); every later entry of that name is reported in
///    [`Merged::shadowed`].
/// 3. Winners that are disabled or match the deny list are reported in [`Merged::skipped`].
/// 4. The rest are validated; each invalid one gives one error and the others carry on.
pub fn merge(sources: Vec<Source>, options: &FilterOptions) -> Merged {
    let mut merged = Merged::default();
    // name -> (winning source, its config; `None` when the winning entry did not parse)
    let mut winners: BTreeMap<String, (SourceMeta, Option<ServerConfig>)> = BTreeMap::new();
    let mut claim =
        |merged: &mut Merged, name: &str, meta: &SourceMeta, config: Option<ServerConfig>| {
            match winners.get(name) {
                Some((winner, _)) => merged.shadowed.push(Shadowed {
                    server: name.to_string(),
                    winner: winner.clone(),
                    shadowed: meta.clone(),
                }),
                None => {
                    winners.insert(name.to_string(), (meta.clone(), config));
                }
            }
        };
    for source in sources {
        if source.meta.level == SourceLevel::Project && !options.project_configs {
            for (name, _) in source.servers {
                merged.skipped.push(Skipped {
                    server: name,
                    source: source.meta.clone(),
                    reason: SkipReason::ProjectConfigsOff,
                });
            }
            continue;
        }
        for error in source.errors {
            if let ConfigError::Server { server, .. } = &error {
                claim(&mut merged, server, &source.meta, None);
            }
            merged.errors.push(SourceError {
                source: source.meta.clone(),
                error,
            });
        }
        for (name, config) in source.servers {
            claim(&mut merged, &name, &source.meta, Some(config));
        }
    }
    for (name, (source, config)) in winners {
        let Some(config) = config else { continue };
        let skip = if !config.enabled {
            Some(SkipReason::Disabled)
        } else if let Some(pattern) = options.deny.server_match(&name) {
            Some(SkipReason::DeniedName {
                pattern: pattern.to_string(),
            })
        } else {
            config
                .url
                .as_deref()
                .and_then(|url| options.deny.url_match(url))
                .map(|pattern| SkipReason::DeniedUrl {
                    pattern: pattern.to_string(),
                })
        };
        if let Some(reason) = skip {
            merged.skipped.push(Skipped {
                server: name,
                source,
                reason,
            });
            continue;
        }
        match validate(&name, &config) {
            Ok(_) => merged.servers.push(ServerSpec {
                name,
                config,
                source,
            }),
            Err(error) => merged.errors.push(SourceError { source, error }),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_messages_match_the_documented_wording() {
        let mut both = ServerConfig::stdio("node", &[]);
        both.url = Some("http://x".into());
        assert_eq!(
            validate("x", &both).unwrap_err().to_string(),
            r#"Server "x": both "command" and "url" are set"#
        );
        let no_cmd = ServerConfig {
            kind: Some("stdio".into()),
            ..Default::default()
        };
        assert_eq!(
            validate("x", &no_cmd).unwrap_err().to_string(),
            r#"Server "x": stdio server requires "command" field"#
        );
        let sse = ServerConfig {
            kind: Some("sse".into()),
            ..Default::default()
        };
        assert_eq!(
            validate("x", &sse).unwrap_err().to_string(),
            r#"Server "x": sse server requires "url" field"#
        );
        let mut odd = ServerConfig::stdio("a", &[]);
        odd.kind = Some("carrier-pigeon".into());
        assert_eq!(
            validate("x", &odd).unwrap_err().to_string(),
            r#"Server "x": unknown server type "carrier-pigeon""#
        );
    }

    #[test]
    fn expansion_uses_the_given_map_and_defaults() {
        let env: BTreeMap<_, _> = [("A".to_string(), "1".to_string())].into();
        assert_eq!(expand_vars("x${A}y${B:-two}z${C}", &env), "x1ytwoz");
        assert_eq!(expand_vars("${unclosed", &env), "${unclosed");
    }

    #[test]
    fn config_hash_is_stable_and_sensitive() {
        let a = ServerConfig::stdio("node", &["server.js"]);
        let mut b = a.clone();
        assert_eq!(config_hash(&a), config_hash(&b));
        b.args.push("--flag".into());
        assert_ne!(config_hash(&a), config_hash(&b));
        assert_eq!(config_hash(&a).len(), 64);
    }

    #[test]
    fn config_hash_is_pinned_so_serialization_changes_are_noticed() {
        // SHA-256 of `{"args":["server.js"],"command":"node"}`. If this changes, every user's
        // tool cache is invalidated: change it only on purpose.
        assert_eq!(
            config_hash(&ServerConfig::stdio("node", &["server.js"])),
            "aae5909971f4c15bb28893e09f9ff19884c9578148b991864e9c45e95c6f9718"
        );
        // Keys sorted at every level, including `auth` and unknown fields.
        let mut c = ServerConfig::stdio("node", &[]);
        c.kind = Some("stdio".into());
        c.env.insert("A".into(), "1".into());
        c.timeout_ms = Some(5000);
        c.auth = Some(serde_json::json!({"b": 2, "a": 1}));
        c.extra.insert("x-extra".into(), Value::Bool(true));
        assert_eq!(
            config_hash(&c),
            "8f4f3166caf420a8ed6159664da46330d94f4258323e6de04f8d5626dda6eda5"
        );
    }

    fn parse_ok(path: &str, text: &str) -> ParsedDocument {
        parse_document(path, text).expect("document parses")
    }

    fn only(doc: &ParsedDocument) -> &ServerConfig {
        assert_eq!(doc.servers.len(), 1, "{doc:?}");
        assert!(doc.errors.is_empty(), "{doc:?}");
        &doc.servers[0].1
    }

    #[test]
    fn mcp_servers_document_gives_every_field() {
        let doc = parse_ok(
            "/p/.mcp.json",
            r#"{"mcpServers": {"fs": {
                "type": "stdio", "command": "npx", "args": ["-y", "fs", 3], "env": {"A": "1", "PORT": 80},
                "cwd": "/tmp", "enabled": true, "timeout": 5000, "auth": {"kind": "oauth"},
                "alwaysAllow": ["read"]
            }}}"#,
        );
        let c = only(&doc);
        assert_eq!(c.kind.as_deref(), Some("stdio"));
        assert_eq!(c.command.as_deref(), Some("npx"));
        assert_eq!(c.args, ["-y", "fs", "3"]);
        assert_eq!(c.env.get("PORT").map(String::as_str), Some("80"));
        assert_eq!(c.cwd.as_deref(), Some("/tmp"));
        assert_eq!(c.timeout_ms, Some(5000));
        assert_eq!(c.auth, Some(serde_json::json!({"kind": "oauth"})));
        assert_eq!(
            c.extra.get("alwaysAllow"),
            Some(&serde_json::json!(["read"]))
        );
    }

    #[test]
    fn servers_are_returned_in_name_order() {
        let doc = parse_ok(
            "a.json",
            r#"{"mcpServers": {"zeta": {"command": "z"}, "alpha": {"command": "a"}}}"#,
        );
        let names: Vec<_> = doc.servers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["alpha", "zeta"]);
    }

    #[test]
    fn vscode_servers_key_with_inputs_and_comments_is_accepted() {
        let doc = parse_ok(
            "/p/.vscode/mcp.json",
            "{\n  // VS Code allows comments\n  \"inputs\": [{\"id\": \"key\"}],\n  \"servers\": {\n    \"gh\": {\"type\": \"http\", \"url\": \"https://x/mcp\", /* c */ \"envFile\": \".env\",},\n  },\n}",
        );
        let c = only(&doc);
        assert_eq!(c.transport_kind(), Ok(TransportKind::Http));
        assert_eq!(c.extra.get("envFile"), Some(&Value::String(".env".into())));
    }

    #[test]
    fn comment_markers_inside_strings_are_kept() {
        let doc = parse_ok(
            "a.json",
            r#"{"mcpServers": {"w": {"url": "https://x//y/*z*/", "headers": {"a": "b,}"}}}}"#,
        );
        let c = only(&doc);
        assert_eq!(c.url.as_deref(), Some("https://x//y/*z*/"));
        assert_eq!(c.headers.get("a").map(String::as_str), Some("b,}"));
    }

    #[test]
    fn streamable_http_spellings_mean_http() {
        for t in ["streamable-http", "streamableHttp", "http"] {
            let doc = parse_ok(
                "a.json",
                &format!(r#"{{"mcpServers": {{"s": {{"type": "{t}", "url": "https://x"}}}}}}"#),
            );
            assert_eq!(only(&doc).transport_kind(), Ok(TransportKind::Http), "{t}");
        }
    }

    #[test]
    fn type_is_inferred_from_command_or_url() {
        let doc = parse_ok(
            "a.json",
            r#"{"mcpServers": {"a": {"command": "x"}, "b": {"url": "https://x"}}}"#,
        );
        assert_eq!(doc.servers[0].1.transport_kind(), Ok(TransportKind::Stdio));
        assert_eq!(doc.servers[1].1.transport_kind(), Ok(TransportKind::Http));
    }

    #[test]
    fn gemini_plain_url_is_sse_and_http_url_is_http() {
        let doc = parse_ok(
            "/home/u/.gemini/settings.json",
            r#"{"theme": "dark", "mcpServers": {
                "a": {"url": "https://a/sse"},
                "b": {"httpUrl": "https://b/mcp", "timeout": 1000},
                "c": {"url": "https://c/sse", "httpUrl": "https://c/mcp"}
            }}"#,
        );
        assert!(doc.errors.is_empty());
        let kinds: Vec<_> = doc
            .servers
            .iter()
            .map(|(_, c)| (c.transport_kind(), c.url.clone().unwrap_or_default()))
            .collect();
        assert_eq!(
            kinds,
            [
                (Ok(TransportKind::Sse), "https://a/sse".to_string()),
                (Ok(TransportKind::Http), "https://b/mcp".to_string()),
                (Ok(TransportKind::Http), "https://c/mcp".to_string()),
            ]
        );
        // Outside Gemini a plain url is Streamable HTTP.
        let doc = parse_ok(
            "/p/.cursor/mcp.json",
            r#"{"mcpServers": {"a": {"url": "https://a"}}}"#,
        );
        assert_eq!(only(&doc).transport_kind(), Ok(TransportKind::Http));
    }

    #[test]
    fn windsurf_server_url_and_cline_disabled_are_understood() {
        let doc = parse_ok(
            "mcp_config.json",
            r#"{"mcpServers": {"w": {"serverUrl": "https://w", "disabled": true}}}"#,
        );
        let c = only(&doc);
        assert_eq!(c.url.as_deref(), Some("https://w"));
        assert!(!c.enabled);
    }

    #[test]
    fn codex_toml_maps_its_own_spellings() {
        let doc = parse_ok(
            "/home/u/.codex/config.toml",
            r#"
model = "o3"

[mcp_servers.docs]
command = "docs-server"
args = ["--port", "4000"]
env = { TOKEN = "x" }
startup_timeout_sec = 12.5
tool_timeout_sec = 60

[mcp_servers.remote]
url = "https://r/mcp"
http_headers = { "X-Key" = "k" }
startup_timeout_ms = 3000
enabled = false
"#,
        );
        assert!(doc.errors.is_empty(), "{doc:?}");
        let docs = &doc.servers[0].1;
        assert_eq!(doc.servers[0].0, "docs");
        assert_eq!(docs.timeout_ms, Some(12_500));
        assert_eq!(docs.args, ["--port", "4000"]);
        assert_eq!(
            docs.extra.get("tool_timeout_sec"),
            Some(&serde_json::json!(60))
        );
        let remote = &doc.servers[1].1;
        assert_eq!(remote.headers.get("X-Key").map(String::as_str), Some("k"));
        assert_eq!(remote.timeout_ms, Some(3000));
        assert!(!remote.enabled);
        assert_eq!(remote.transport_kind(), Ok(TransportKind::Http));
    }

    #[test]
    fn canonical_field_wins_over_an_alias_which_stays_in_extra() {
        let doc = parse_ok(
            "a.json",
            r#"{"mcpServers": {"s": {"url": "https://a", "serverUrl": "https://b", "timeout": 10, "startup_timeout_sec": 3}}}"#,
        );
        let c = only(&doc);
        assert_eq!(c.url.as_deref(), Some("https://a"));
        assert_eq!(c.timeout_ms, Some(10));
        assert!(c.extra.contains_key("serverUrl"));
        assert!(c.extra.contains_key("startup_timeout_sec"));
    }

    #[test]
    fn one_malformed_entry_does_not_fail_the_document() {
        let doc = parse_ok(
            "a.json",
            r#"{"mcpServers": {
                "bad-args": {"command": "x", "args": "not-a-list"},
                "bad-entry": 7,
                "bad-env": {"command": "x", "env": {"A": []}},
                "good": {"command": "x"}
            }}"#,
        );
        assert_eq!(doc.servers.len(), 1);
        assert_eq!(doc.servers[0].0, "good");
        let messages: Vec<_> = doc.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                r#"Server "bad-args": "args" must be an array of strings, got a string"#,
                r#"Server "bad-entry": the entry must be an object, got a number"#,
                r#"Server "bad-env": "env"."A" must be a string, got an array"#,
            ]
        );
    }

    #[test]
    fn a_timeout_that_is_not_whole_milliseconds_is_a_server_error() {
        let doc = parse_ok(
            "a.json",
            r#"{"mcpServers": {
                "f": {"command": "x", "timeout": 1.5},
                "s": {"command": "x", "timeout": "soon"},
                "n": {"command": "x", "timeout": "2500"},
                "w": {"command": "x", "timeout": 3000.0}
            }}"#,
        );
        let ok: Vec<_> = doc
            .servers
            .iter()
            .map(|(n, c)| (n.as_str(), c.timeout_ms))
            .collect();
        assert_eq!(ok, [("n", Some(2500)), ("w", Some(3000))]);
        let messages: Vec<_> = doc.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                r#"Server "f": "timeout" must be a whole number of milliseconds, got 1.5"#,
                r#"Server "s": "timeout" must be a whole number of milliseconds, got "soon""#,
            ]
        );
    }

    #[test]
    fn empty_and_whitespace_documents_are_empty_configs() {
        for text in ["", "  \n\t", "\u{feff}"] {
            assert_eq!(parse_ok("a.json", text), ParsedDocument::default());
            assert_eq!(parse_ok("a.toml", text), ParsedDocument::default());
        }
        assert_eq!(parse_ok("a.json", "{}"), ParsedDocument::default());
    }

    #[test]
    fn json_syntax_error_reports_line_and_column() {
        let err = parse_document(
            "/p/.mcp.json",
            "{\n  \"mcpServers\": {\n    \"a\": {\"command\" \"x\"}\n}",
        )
        .unwrap_err();
        match &err {
            ConfigError::Syntax {
                path,
                line,
                column,
                message,
            } => {
                assert_eq!(path, "/p/.mcp.json");
                assert_eq!((*line, *column), (3, 21));
                assert_eq!(message, "expected `:`");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(err.to_string(), "/p/.mcp.json:3:21: expected `:`");
    }

    #[test]
    fn toml_syntax_error_reports_line_and_column() {
        let err =
            parse_document("c.toml", "[mcp_servers.a]\ncommand = \"x\"\nargs = [1,\n").unwrap_err();
        match err {
            ConfigError::Syntax { line, column, .. } => {
                assert!(line >= 3 && column >= 1, "{line}:{column}")
            }
            other => panic!("{other:?}"),
        }
        let err = parse_document("c.toml", "[mcp_servers.a]\ncommand = = \"x\"\n").unwrap_err();
        match err {
            ConfigError::Syntax { line, column, .. } => assert_eq!((line, column), (2, 11)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn wrong_document_shapes_are_document_errors() {
        for (path, text) in [
            ("a.json", "[1, 2]"),
            ("a.json", "\"hi\""),
            ("a.json", r#"{"mcpServers": []}"#),
            ("a.json", r#"{"servers": "x"}"#),
            ("a.toml", "mcp_servers = 3"),
        ] {
            assert!(
                matches!(
                    parse_document(path, text),
                    Err(ConfigError::Document { .. })
                ),
                "{text}"
            );
        }
    }

    #[test]
    fn claude_json_has_user_and_project_servers() {
        let text = r#"{
            "numStartups": 3,
            "mcpServers": {"u": {"command": "user"}},
            "projects": {
                "/work/app/": {"mcpServers": {"p": {"command": "proj"}}},
                "/work/other": {"mcpServers": {"o": {"command": "other"}}}
            }
        }"#;
        let cj = parse_claude_json("/h/.claude.json", text, Some("/work/app")).unwrap();
        assert_eq!(cj.user.servers[0].0, "u");
        assert_eq!(cj.project.servers.len(), 1);
        assert_eq!(cj.project.servers[0].0, "p");
        let none = parse_claude_json("/h/.claude.json", text, None).unwrap();
        assert!(none.project.servers.is_empty());
        let elsewhere = parse_claude_json("/h/.claude.json", text, Some("/nope")).unwrap();
        assert!(elsewhere.project.servers.is_empty());
    }

    fn meta(provider: &str, level: SourceLevel) -> SourceMeta {
        SourceMeta {
            provider: provider.into(),
            level,
            path: format!("/{provider}.json"),
        }
    }

    #[test]
    fn first_source_wins_and_every_duplicate_is_reported() {
        let a = meta("a", SourceLevel::Project);
        let b = meta("b", SourceLevel::User);
        let c = meta("c", SourceLevel::User);
        let merged = merge(
            vec![
                Source::new(
                    a.clone(),
                    vec![("s".into(), ServerConfig::stdio("from-a", &[]))],
                ),
                Source::new(
                    b.clone(),
                    vec![
                        ("s".into(), ServerConfig::stdio("from-b", &[])),
                        ("t".into(), ServerConfig::stdio("t", &[])),
                    ],
                ),
                Source::new(
                    c.clone(),
                    vec![("s".into(), ServerConfig::stdio("from-c", &[]))],
                ),
            ],
            &FilterOptions::default(),
        );
        let names: Vec<_> = merged.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["s", "t"]);
        assert_eq!(merged.servers[0].config.command.as_deref(), Some("from-a"));
        assert_eq!(merged.servers[0].source, a);
        assert_eq!(
            merged.shadowed,
            [
                Shadowed {
                    server: "s".into(),
                    winner: a.clone(),
                    shadowed: b
                },
                Shadowed {
                    server: "s".into(),
                    winner: a,
                    shadowed: c
                },
            ]
        );
    }

    #[test]
    fn invalid_servers_give_one_error_each_and_the_rest_run() {
        let src = meta("a", SourceLevel::User);
        let mut both = ServerConfig::stdio("x", &[]);
        both.url = Some("https://x".into());
        let merged = merge(
            vec![Source::new(
                src.clone(),
                vec![
                    ("both".into(), both),
                    ("bad name!".into(), ServerConfig::stdio("x", &[])),
                    ("ok".into(), ServerConfig::stdio("x", &[])),
                ],
            )],
            &FilterOptions::default(),
        );
        assert_eq!(merged.servers.len(), 1);
        assert_eq!(merged.errors.len(), 2);
        assert_eq!(
            merged.errors[1].to_string(),
            r#"/a.json: Server "both": both "command" and "url" are set"#
        );
    }

    #[test]
    fn a_disabled_winner_switches_the_server_off_and_is_skipped_not_an_error() {
        let top = meta("top", SourceLevel::User);
        let mut off = ServerConfig::stdio("x", &[]);
        off.enabled = false;
        // Disabled entries are not validated either.
        off.kind = Some("nonsense".into());
        let merged = merge(
            vec![
                Source::new(top.clone(), vec![("s".into(), off)]),
                Source::new(
                    meta("low", SourceLevel::User),
                    vec![("s".into(), ServerConfig::stdio("x", &[]))],
                ),
            ],
            &FilterOptions::default(),
        );
        assert!(merged.servers.is_empty());
        assert!(merged.errors.is_empty());
        assert_eq!(
            merged.skipped,
            [Skipped {
                server: "s".into(),
                source: top,
                reason: SkipReason::Disabled
            }]
        );
        assert_eq!(merged.shadowed.len(), 1);
    }

    #[test]
    fn project_configs_off_drops_project_sources_before_precedence() {
        let proj = meta("proj", SourceLevel::Project);
        let user = meta("user", SourceLevel::User);
        let merged = merge(
            vec![
                Source::new(
                    proj.clone(),
                    vec![("s".into(), ServerConfig::stdio("p", &[]))],
                ),
                Source::new(
                    user.clone(),
                    vec![("s".into(), ServerConfig::stdio("u", &[]))],
                ),
            ],
            &FilterOptions {
                project_configs: false,
                ..Default::default()
            },
        );
        assert_eq!(merged.servers.len(), 1);
        assert_eq!(merged.servers[0].source, user);
        assert!(merged.shadowed.is_empty());
        assert_eq!(
            merged.skipped,
            [Skipped {
                server: "s".into(),
                source: proj,
                reason: SkipReason::ProjectConfigsOff
            }]
        );
    }

    #[test]
    fn deny_list_removes_matching_names_and_urls() {
        let src = meta("a", SourceLevel::User);
        let options = FilterOptions {
            project_configs: true,
            deny: DenyList::exa(),
        };
        let merged = merge(
            vec![Source::new(
                src,
                vec![
                    ("exa".into(), ServerConfig::stdio("x", &[])),
                    (
                        "search".into(),
                        ServerConfig::http("https://mcp.exa.ai/mcp?key=${K}"),
                    ),
                    ("fs".into(), ServerConfig::stdio("fs", &[])),
                ],
            )],
            &options,
        );
        let names: Vec<_> = merged.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["fs"]);
        let reasons: Vec<_> = merged
            .skipped
            .iter()
            .map(|s| (s.server.as_str(), s.reason.clone()))
            .collect();
        assert_eq!(
            reasons,
            [
                (
                    "exa",
                    SkipReason::DeniedName {
                        pattern: "exa".into()
                    }
                ),
                (
                    "search",
                    SkipReason::DeniedUrl {
                        pattern: "*.exa.ai*".into()
                    }
                ),
            ]
        );
    }

    #[test]
    fn a_broken_entry_still_claims_its_name() {
        let top = meta("top", SourceLevel::User);
        let doc = parse_document("/top.json", r#"{"mcpServers": {"s": {"command": 1}}}"#).unwrap();
        let merged = merge(
            vec![
                Source::from_document(top.clone(), doc),
                Source::new(
                    meta("low", SourceLevel::User),
                    vec![("s".into(), ServerConfig::stdio("x", &[]))],
                ),
            ],
            &FilterOptions::default(),
        );
        assert!(merged.servers.is_empty());
        assert_eq!(merged.errors.len(), 1);
        assert_eq!(merged.errors[0].source, top);
        assert_eq!(merged.shadowed.len(), 1);
    }

    #[test]
    fn glob_matches_whole_text_with_stars_ignoring_case() {
        assert!(glob_match("exa", "EXA"));
        assert!(!glob_match("exa", "exa2"));
        assert!(glob_match("*exa*", "my-exa-server"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
        assert!(glob_match("*", ""));
        assert!(glob_match("**a", "a"));
    }

    #[test]
    fn codex_toml_written_by_the_toml_crate_round_trips() {
        let mut c = ServerConfig::stdio("node", &["a b", "${HOME}/x"]);
        c.env.insert("K".into(), "v".into());
        c.timeout_ms = Some(1500);
        c.enabled = false;
        c.extra
            .insert("x_tools".into(), serde_json::json!(["a", "b"]));
        let mut servers = BTreeMap::new();
        servers.insert("docs".to_string(), c.clone());
        let mut root = BTreeMap::new();
        root.insert("mcp_servers", servers);
        let text = toml::to_string(&root).unwrap();
        let doc = parse_ok("/h/.codex/config.toml", &text);
        assert_eq!(doc.servers, [("docs".to_string(), c)]);
    }
}
