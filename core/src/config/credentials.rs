//! Credential indirections other clients' configs use for HTTP servers, resolved from the
//! environment map the caller passes in (never from the process environment): Codex's
//! `bearer_token_env_var` (the variable holds a token sent as `Authorization: Bearer`) and
//! `env_http_headers` (header name → the variable holding its value). A variable that is
//! unset or empty is an error for that server, naming the variable, never a value.

use super::ServerConfig;
use serde_json::Value;
use std::collections::BTreeMap;

/// The largest value taken from a variable for a header.
const MAX_VALUE: usize = 16 * 1024;

fn from_env(env: &BTreeMap<String, String>, var: &str, field: &str) -> Result<String, String> {
    match env.get(var).map(|v| v.trim()) {
        Some(v) if !v.is_empty() && v.len() <= MAX_VALUE => Ok(v.to_string()),
        Some(v) if v.len() > MAX_VALUE => Err(format!(
            "\"{field}\": the variable {var} is longer than {MAX_VALUE} bytes"
        )),
        _ => Err(format!("\"{field}\": the variable {var} is not set")),
    }
}

/// Adds the headers `config`'s indirections name to `headers` (they replace configured
/// headers of the same name, case-insensitively).
pub fn add_credential_headers(
    config: &ServerConfig,
    env: &BTreeMap<String, String>,
    headers: &mut BTreeMap<String, String>,
) -> Result<(), String> {
    let mut set = |name: &str, value: String| {
        headers.retain(|k, _| !k.eq_ignore_ascii_case(name));
        headers.insert(name.to_string(), value);
    };
    if let Some(map) = config
        .extra
        .get("env_http_headers")
        .filter(|v| !v.is_null())
    {
        let Some(map) = map.as_object() else {
            return Err(
                "\"env_http_headers\" must be a table of header names to variable names".into(),
            );
        };
        for (header, var) in map {
            let Some(var) = var.as_str() else {
                return Err(format!(
                    "\"env_http_headers.{header}\" must be a variable name"
                ));
            };
            set(header, from_env(env, var, "env_http_headers")?);
        }
    }
    match config.extra.get("bearer_token_env_var") {
        None | Some(Value::Null) => {}
        Some(Value::String(var)) => {
            let token = from_env(env, var, "bearer_token_env_var")?;
            set("Authorization", format!("Bearer {token}"));
        }
        Some(_) => return Err("\"bearer_token_env_var\" must be a variable name".into()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_indirections_become_headers_and_missing_variables_name_the_variable() {
        let mut c = ServerConfig::default();
        c.extra
            .insert("bearer_token_env_var".into(), "FIGMA_TOKEN".into());
        c.extra.insert(
            "env_http_headers".into(),
            serde_json::json!({"X-Auth": "AUTH_ENV"}),
        );
        let env = BTreeMap::from([
            ("FIGMA_TOKEN".to_string(), "tok-123".to_string()),
            ("AUTH_ENV".to_string(), "a1".to_string()),
        ]);
        let mut headers = BTreeMap::from([("authorization".to_string(), "old".to_string())]);
        add_credential_headers(&c, &env, &mut headers).unwrap();
        assert_eq!(
            headers,
            BTreeMap::from([
                ("Authorization".to_string(), "Bearer tok-123".to_string()),
                ("X-Auth".to_string(), "a1".to_string()),
            ])
        );
        let e = add_credential_headers(&c, &BTreeMap::new(), &mut BTreeMap::new()).unwrap_err();
        assert!(e.contains("AUTH_ENV") && e.contains("not set"), "{e}");
        let mut only_token = env.clone();
        only_token.remove("AUTH_ENV");
        only_token.insert("AUTH_ENV".into(), "  ".into());
        let e = add_credential_headers(&c, &only_token, &mut BTreeMap::new()).unwrap_err();
        assert!(!e.contains("tok-123"), "{e}");
    }
}
