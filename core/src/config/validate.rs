//! Validation and resolution of one server entry: the name and fields a transport needs are
//! checked (one error per entry, in the words the user sees), then variables are expanded to
//! build the [`TransportConfig`] the shell opens.

use super::{expand_vars, ConfigError, ServerConfig, TransportConfig, TransportKind};
use std::collections::BTreeMap;

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
    if let Some(ms) = config.call_timeout_ms {
        if ms <= 0 {
            return Err(ConfigError::server(
                name,
                format!("the call timeout must be a positive number of milliseconds, got {ms}"),
            ));
        }
    }
    let kind = config.transport_kind().map_err(|t| {
        let message = match t.to_ascii_lowercase().as_str() {
            "ws" | "websocket" | "tcp" => format!("the \"{t}\" transport is not supported"),
            _ => format!("unknown server type \"{t}\""),
        };
        ConfigError::server(name, message)
    })?;
    if let Some(url) = &config.url {
        for scheme in ["unix:", "pipe:", "ws:", "wss:"] {
            if url.to_ascii_lowercase().starts_with(scheme) {
                return Err(ConfigError::server(
                    name,
                    format!("\"{scheme}\" URLs are not supported"),
                ));
            }
        }
    }
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

/// Validate and resolve a server entry: expand variables in command, args, env, cwd, url and
/// headers from `env`, and build the transport the shell opens.
pub fn resolve(
    name: &str,
    config: &ServerConfig,
    env: &BTreeMap<String, String>,
) -> Result<TransportConfig, ConfigError> {
    let kind = validate(name, config)?;
    // The values read with the entry win over the environment's (they are the fresher).
    let overlaid;
    let env = if config.values.0.is_empty() {
        env
    } else {
        let mut all = env.clone();
        all.extend(config.values.0.iter().map(|(k, v)| (k.clone(), v.clone())));
        overlaid = all;
        &overlaid
    };
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
            headers: with_credentials(name, config, env, map(&config.headers))?,
        },
        TransportKind::Sse => TransportConfig::Sse {
            url: config.url.as_ref().map(x).unwrap_or_default(),
            headers: with_credentials(name, config, env, map(&config.headers))?,
        },
    })
}

/// `headers` plus the ones the entry's credential indirections name.
fn with_credentials(
    name: &str,
    config: &ServerConfig,
    env: &BTreeMap<String, String>,
    mut headers: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    super::credentials::add_credential_headers(config, env, &mut headers)
        .map_err(|e| ConfigError::server(name, e))?;
    Ok(headers)
}
