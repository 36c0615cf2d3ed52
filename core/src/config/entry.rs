//! One server entry's fields, read from its JSON object. Every client spells a few fields its
//! own way (`serverUrl`, `httpUrl`, `http_headers`, `disabled`, `startup_timeout_sec`); the
//! reader takes the canonical field first and an alias only in its absence, and keeps every
//! field it does not know in [`ServerConfig::extra`]. Type errors name the field and what it
//! held, so a user can find the typo.

use super::document::kind_of;
use super::{ConfigError, Dialect, ServerConfig};
use serde_json::Value;
use std::collections::BTreeMap;

/// Parse one server entry. Canonical fields first; then other clients' spellings, each used
/// only when its canonical field is absent (otherwise it stays in `extra`, untouched).
pub(super) fn parse_entry(
    name: &str,
    entry: &Value,
    dialect: Dialect,
) -> Result<ServerConfig, ConfigError> {
    let err = |message: String| ConfigError::server(name, message);
    let Some(obj) = entry.as_object() else {
        return Err(err(format!(
            "the entry must be an object, got {}",
            kind_of(entry)
        )));
    };
    let mut rest = obj.clone();
    reshape(dialect, &mut rest).map_err(&err)?;
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
        call_timeout_ms: None,
        auth: rest.remove("auth").filter(|v| !v.is_null()),
        enabled_tools: None,
        disabled_tools: Vec::new(),
        extra: BTreeMap::new(),
        values: Default::default(),
    };
    // Tool filters, each client's spelling: the first one present is used.
    for key in ["enabled_tools", "includeTools"] {
        if let Some(list) = take_string_list(&mut rest, key).map_err(&err)? {
            config.enabled_tools = Some(list);
            break;
        }
    }
    for key in ["disabled_tools", "excludeTools", "disabledTools"] {
        if let Some(list) = take_string_list(&mut rest, key).map_err(&err)? {
            config.disabled_tools = list;
            break;
        }
    }
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
    // Gemini: `httpUrl` is Streamable HTTP and wins over `url`; a `url` without `type` is
    // Streamable HTTP with the SSE fallback, as Gemini CLI tries it.
    if dialect == Dialect::Gemini {
        if let Some(url) = take_string(&mut rest, "httpUrl").map_err(&err)? {
            config.url = Some(url);
            config.kind.get_or_insert_with(|| "http".into());
        }
    }
    // Cline: a `url` without `type` is SSE. Roo Code: an error.
    if config.url.is_some() && config.kind.is_none() && config.command.is_none() {
        match dialect {
            Dialect::Cline => config.kind = Some("sse".into()),
            Dialect::Roo => {
                return Err(err(
                    "a \"url\" requires \"type\": \"sse\" or \"streamable-http\"".into(),
                ))
            }
            _ => {}
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
    config.call_timeout_ms = match take_timeout_ms(&mut rest, "call_timeout_ms", 1) {
        Ok(None) => take_timeout_ms(&mut rest, "tool_timeout_sec", 1000),
        other => other,
    }
    .map_err(&err)?;
    if rest.contains_key("tcp") && config.command.is_none() && config.url.is_none() {
        return Err(err(
            "the \"tcp\" (WebSocket) transport is not supported".into()
        ));
    }
    config.extra = rest.into_iter().collect();
    Ok(config)
}

/// The fields of an entry not read yet.
type Fields = serde_json::Map<String, Value>;

/// A client's own shape of an entry, into the common one: opencode's `type` `local` with an
/// argv `command` and `environment` (or `remote`), Zed's older `command` object and its
/// `source` tag, goose-style `cmd`, Cline's legacy `transportType`, Copilot CLI's `local`
/// and `tools`.
fn reshape(dialect: Dialect, rest: &mut Fields) -> Result<(), String> {
    match dialect {
        Dialect::Copilot => {
            if rest.get("type").and_then(Value::as_str) == Some("local") {
                rest.insert("type".into(), Value::String("stdio".into()));
            }
            // `tools`: `["*"]` exposes every tool, a list of names only those.
            if let Some(tools) = rest.remove("tools") {
                let all = tools
                    .as_array()
                    .is_some_and(|t| t.iter().any(|n| n.as_str() == Some("*")));
                if !all && !rest.contains_key("enabled_tools") {
                    rest.insert("enabled_tools".into(), tools);
                }
            }
        }
        Dialect::Opencode => {
            match rest.get("type").and_then(Value::as_str) {
                Some("local") => {
                    rest.remove("type");
                    if let Some(Value::Array(argv)) = rest.remove("command") {
                        let mut argv = argv.into_iter();
                        if let Some(first) = argv.next() {
                            rest.insert("command".into(), first);
                        }
                        rest.insert("args".into(), Value::Array(argv.collect()));
                    }
                }
                Some("remote") => {
                    rest.insert("type".into(), Value::String("http".into()));
                }
                _ => {}
            }
            if let Some(env) = rest.remove("environment") {
                rest.insert("env".into(), env);
            }
            // Version 2's `timeout` is an object of three limits.
            if rest.get("timeout").is_some_and(Value::is_object) {
                let t = rest.remove("timeout").unwrap_or_default();
                rest.insert("timeout (object)".into(), t);
            }
        }
        Dialect::Zed => {
            if let Some(Value::Object(cmd)) = rest.get("command").cloned() {
                rest.remove("command");
                for (from, to) in [("path", "command"), ("args", "args"), ("env", "env")] {
                    if let Some(v) = cmd.get(from) {
                        rest.insert(to.into(), v.clone());
                    }
                }
            }
            if rest.get("source").and_then(Value::as_str) == Some("custom") {
                rest.remove("source");
            }
            // Its unit changed between versions (milliseconds, then seconds): not applied.
            if let Some(t) = rest.remove("timeout") {
                rest.insert("timeout (unit differs between Zed versions)".into(), t);
            }
        }
        Dialect::Goose => {
            match rest.get("type").and_then(Value::as_str) {
                Some("stdio") => {
                    rest.remove("type");
                }
                Some("streamable_http") => {
                    rest.insert("type".into(), Value::String("http".into()));
                }
                Some(other) => {
                    return Err(format!(
                        "goose's \"{other}\" extensions run inside goose, not as an MCP \
                         server Switchboard can start"
                    ))
                }
                None => {}
            }
            for (from, to) in [("cmd", "command"), ("uri", "url"), ("envs", "env")] {
                if let Some(v) = rest.remove(from) {
                    rest.insert(to.into(), v);
                }
            }
            // `env_keys`: names looked up in the environment, like Codex's `env_vars`.
            if let Some(keys) = rest.remove("env_keys") {
                rest.insert("env_vars".into(), keys);
            }
            // An empty list means every tool.
            match rest.remove("available_tools") {
                Some(Value::Array(a)) if !a.is_empty() => {
                    rest.insert("enabled_tools".into(), Value::Array(a));
                }
                _ => {}
            }
            // Names and descriptions for goose's own menus.
            for key in ["name", "display_name", "description", "bundled"] {
                rest.remove(key);
            }
        }
        Dialect::Continue => {
            rest.remove("name");
            if let Some(Value::Object(mut options)) = rest.remove("requestOptions") {
                if let Some(headers) = options.remove("headers") {
                    rest.insert("headers".into(), headers);
                }
                if !options.is_empty() {
                    rest.insert("requestOptions".into(), Value::Object(options));
                }
            }
        }
        Dialect::Cline if !rest.contains_key("type") => {
            if let Some(t) = rest.remove("transportType") {
                let t = match t.as_str() {
                    Some("http") => Value::String("streamableHttp".into()),
                    _ => t,
                };
                rest.insert("type".into(), t);
            }
        }
        _ => {}
    }
    Ok(())
}

/// Remove `key`: absent or null is `None`, a string is its text, anything else an error.
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

/// Remove `key` as a list of strings (scalars written unquoted are taken as their text).
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

/// Remove `key` as an object of strings (scalars written unquoted are taken as their text);
/// absent or null is an empty map.
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

/// Remove `key` as `true` or `false`; absent or null is `None`.
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
