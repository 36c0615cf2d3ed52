//! MCP server configuration: the document formats, validation, `${VAR}` expansion, merging of
//! sources by priority, filters, and the stable config hash used as the tool-cache key.
//!
//! Pure: the shell reads files and passes their text and path in; the environment used for
//! expansion is a map the caller passes, never the process environment.

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
        match self.timeout_ms {
            Some(ms) if ms > 0 => Duration::from_millis(ms as u64),
            _ => DEFAULT_CONNECT_TIMEOUT,
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
}
