//! The config model: a server entry as written ([`ServerConfig`]), a server to run with its
//! origin ([`ServerSpec`], [`SourceMeta`]), the transport it resolves to ([`TransportConfig`]),
//! and the errors a config can have ([`ConfigError`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// Where a server's config came from (kept even before a connect finishes).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SourceMeta {
    /// Who wrote the file: `switchboard`, `claude-code`, `codex`, `cursor`, `vscode`, ...
    pub provider: String,
    /// Whether the file belongs to the user or to the project being worked on.
    pub level: SourceLevel,
    /// The file's path as the shell found it.
    pub path: String,
}

/// Whose config a source is. Project-level files come with a checkout, so they can be
/// switched off as a whole ([`FilterOptions::project_configs`](super::FilterOptions::project_configs)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceLevel {
    /// The user's own config, the same in every project (`~/.claude.json`, `~/.codex/...`).
    User,
    /// A file inside the project directory (`.mcp.json`, `.cursor/mcp.json`, ...).
    Project,
}

/// The transport a config asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// A child process speaking newline-delimited JSON-RPC on stdin and stdout.
    Stdio,
    /// Streamable HTTP: JSON-RPC POSTed to one URL, answered as JSON or an event stream.
    Http,
    /// The older HTTP+SSE transport: an event stream to receive, a separate URL to post to.
    Sse,
}

impl TransportKind {
    /// The transport's name as configs and reports spell it: `stdio`, `http` or `sse`.
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
    /// The program a stdio server runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The arguments passed to `command`, one string each, never split by a shell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables set for a stdio server, on top of the inherited environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The working directory of a stdio server; when unset, the shell chooses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The endpoint of an HTTP or SSE server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers sent with every request to an HTTP or SSE server.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// `false` drops the server before any connect attempt.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub enabled: bool,
    /// Connect timeout in milliseconds (open + initialize). Must be positive when set.
    #[serde(rename = "timeout", default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
    /// Limit in milliseconds for each tool call (and other request) to this server: Claude
    /// Code's and Gemini CLI's `timeout` (per call there, in ms), Codex `tool_timeout_sec`,
    /// Switchboard `call_timeout_ms`. `None`: the manager's `call_timeout`; a call's own
    /// timeout wins over both. Must be positive when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout_ms: Option<i64>,
    /// Auth settings, passed through to the embedder's credential provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<Value>,
    /// Only these tools (by the server's own names) are exposed: Codex `enabled_tools`,
    /// Gemini CLI `includeTools`. `None`: every tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled_tools: Option<Vec<String>>,
    /// These tools are never exposed, applied after `enabled_tools` (so a name in both is
    /// hidden): Codex `disabled_tools`, Gemini CLI `excludeTools`, Roo Code and Windsurf
    /// `disabledTools`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled_tools: Vec<String>,
    /// Fields this version does not know: kept, ignored, never an error.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Value>,
    /// The values of the `${input:…}` answers and `${file:…}` contents this entry names, as
    /// they were when it was read: resolving the entry expands them before the environment,
    /// so a reload (or a sync with freshly discovered entries) connects with the current
    /// ones, and a sync restarts a server whose values changed. Never serialized (not in the
    /// config hash, nor in any report); `Debug` shows their names only.
    #[serde(skip)]
    pub values: ReadValues,
}

/// Values read for an entry (see [`ServerConfig::values`]), by variable name (`input:<id>`,
/// `file:<path>`). Secret: `Debug` lists the names only.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ReadValues(pub BTreeMap<String, String>);

impl std::fmt::Debug for ReadValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// The default connect timeout when a config sets none: 30 s.
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

    /// The per-call limit this config asks for, if any (validation rejects `<= 0`).
    pub fn call_timeout(&self) -> Option<Duration> {
        self.call_timeout_ms
            .filter(|ms| *ms > 0)
            .map(|ms| Duration::from_millis(ms as u64))
    }

    /// For a client whose `timeout` field limits each tool call rather than the connect
    /// (Claude Code, Gemini CLI): read it as the call timeout, unless one is set already.
    /// Claude Code ignores values below 1000 ms (`ignore_below_ms`); so does this.
    pub fn timeout_limits_each_call(&mut self, ignore_below_ms: i64) {
        if let Some(ms) = self.timeout_ms.take() {
            if self.call_timeout_ms.is_none() && (ms <= 0 || ms >= ignore_below_ms) {
                self.call_timeout_ms = Some(ms);
            }
        }
    }

    /// Whether the tool the server calls `name` may be listed and called (the config's tool
    /// filters; a filtered tool is neither).
    pub fn tool_allowed(&self, name: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|allowed| allowed.iter().any(|t| t == name))
            && !self.disabled_tools.iter().any(|t| t == name)
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
    /// The server's name, unique among the running servers and the prefix of its tools.
    pub name: String,
    /// The entry as written, before expansion.
    pub config: ServerConfig,
    /// The file the entry came from.
    pub source: SourceMeta,
}

impl ServerSpec {
    /// A server configured in code rather than in a file: its source is Switchboard's own,
    /// user-level, at the path `<inline>`.
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
    /// Spawn a child process and speak JSON-RPC on its stdin and stdout.
    Stdio {
        /// The program to run.
        command: String,
        /// Its arguments, expanded.
        args: Vec<String>,
        /// Variables to set in its environment, expanded.
        env: BTreeMap<String, String>,
        /// Its working directory, when the config sets one.
        cwd: Option<String>,
    },
    /// Streamable HTTP at one endpoint.
    Http {
        /// The endpoint, expanded.
        url: String,
        /// Headers for every request, expanded.
        headers: BTreeMap<String, String>,
    },
    /// HTTP+SSE: the event stream's URL, from which the server names its post endpoint.
    Sse {
        /// The event stream's URL, expanded.
        url: String,
        /// Headers for every request, expanded.
        headers: BTreeMap<String, String>,
    },
}

impl ServerConfig {
    /// Every `env` and header value that would run as a `!command` is made the literal text
    /// it is (a leading `!` doubled: `!!` is the escape for a literal `!`).
    pub fn keep_commands_as_text(&mut self) {
        for value in self.env.values_mut().chain(self.headers.values_mut()) {
            if value.starts_with('!') {
                value.insert(0, '!');
            }
        }
    }
}

/// A configuration error. `Display` gives the message a user sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
pub enum ConfigError {
    /// The document does not parse.
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        /// The file, as the shell named it.
        path: String,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error, in characters.
        column: usize,
        /// The parser's message, without its own position suffix.
        message: String,
    },
    /// The document parses but is not a config document of a known shape.
    #[error("{path}: {message}")]
    Document {
        /// The file, as the shell named it.
        path: String,
        /// What is wrong with its shape.
        message: String,
    },
    /// One server entry is invalid; the others are unaffected.
    #[error("Server \"{server}\": {message}")]
    Server {
        /// The entry's name.
        server: String,
        /// What is wrong with it.
        message: String,
    },
}

impl ConfigError {
    /// A [`ConfigError::Server`] for `server`.
    pub(super) fn server(server: &str, message: impl Into<String>) -> Self {
        ConfigError::Server {
            server: server.to_string(),
            message: message.into(),
        }
    }
}
