//! Headers that come from commands and are fetched again when the server refuses them:
//! Claude Code's `headersHelper` (a shell command printing a JSON object of header names to
//! values; it overrides configured headers of the same name) and `!command` header values.
//! A helper runs before the first request and again after a `401`; a `!command` value is
//! resolved at connect time (and cached for the process), and after a `401` the cached value
//! is forgotten and the command runs again. Outputs are bounded (64 KiB, 64 headers) and
//! never logged or quoted in an error.

use crate::secrets::{CredentialProvider, SecretCache};
use serde_json::Value;
use std::sync::Arc;

/// The most headers a helper may set.
const MAX_HELPER_HEADERS: usize = 64;

/// Where a server's command-made headers come from.
#[derive(Clone, Default)]
pub struct HeaderSources {
    /// The `headersHelper` command.
    pub helper: Option<String>,
    /// Headers whose configured value is `!command`: (name, command).
    pub commands: Vec<(String, String)>,
    /// Runs the commands (the process-wide cache of `!command` values).
    pub cache: Option<Arc<SecretCache>>,
    /// The embedder's credential provider and the server's `auth` section, asked again for a
    /// token after a refusal.
    pub provider: Option<(Arc<dyn CredentialProvider>, Value)>,
}

impl std::fmt::Debug for HeaderSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeaderSources")
            .field("helper", &self.helper.is_some())
            .field("commands", &self.commands.len())
            .field("provider", &self.provider.is_some())
            .finish()
    }
}

impl HeaderSources {
    /// Whether there is anything to run again after a refusal.
    pub fn is_empty(&self) -> bool {
        self.helper.is_none() && self.commands.is_empty() && self.provider.is_none()
    }

    /// The provider's new token after a refusal, as an `Authorization` header.
    pub(super) async fn provider_headers(
        &self,
        server: &str,
    ) -> Result<Vec<(String, String)>, String> {
        let Some((provider, auth)) = &self.provider else {
            return Ok(Vec::new());
        };
        match provider.bearer_token(server, auth, true).await {
            Ok(Some(token)) => Ok(vec![("authorization".into(), format!("Bearer {token}"))]),
            Ok(None) => Ok(Vec::new()),
            Err(e) => Err(format!(
                "credential provider failed for server \"{server}\": {e}"
            )),
        }
    }

    /// The helper's headers, run now (`Ok(empty)` without a helper).
    pub(super) async fn helper_headers(
        &self,
        server: &str,
        url: &str,
    ) -> Result<Vec<(String, String)>, String> {
        let (Some(helper), Some(cache)) = (&self.helper, &self.cache) else {
            return Ok(Vec::new());
        };
        let out = cache
            .run_uncached(
                helper,
                &[
                    ("CLAUDE_CODE_MCP_SERVER_NAME", server),
                    ("CLAUDE_CODE_MCP_SERVER_URL", url),
                ],
            )
            .await
            .map_err(|e| format!("headersHelper: {e}"))?;
        parse_helper_output(&out)
    }

    /// Forgets and re-runs every `!command` header value; returns the fresh headers.
    pub(super) async fn rerun_commands(&self) -> Result<Vec<(String, String)>, String> {
        let Some(cache) = &self.cache else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for (name, command) in &self.commands {
            cache.forget(command);
            let value = cache
                .resolve_command(command)
                .await
                .map_err(|e| format!("{e} (for header {name})"))?;
            out.push((name.clone(), value));
        }
        Ok(out)
    }
}

/// A helper's stdout: a JSON object of string values. Never quotes the output.
pub(super) fn parse_helper_output(out: &str) -> Result<Vec<(String, String)>, String> {
    let value: serde_json::Value = serde_json::from_str(out)
        .map_err(|_| "headersHelper did not print a JSON object".to_string())?;
    let Some(obj) = value.as_object() else {
        return Err("headersHelper did not print a JSON object".into());
    };
    if obj.len() > MAX_HELPER_HEADERS {
        return Err(format!(
            "headersHelper printed more than {MAX_HELPER_HEADERS} headers"
        ));
    }
    obj.iter()
        .map(|(k, v)| match v.as_str() {
            Some(v) => Ok((k.clone(), v.to_string())),
            None => Err(format!("headersHelper: the value of {k} is not a string")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_output_is_an_object_of_strings_and_errors_never_quote_it() {
        assert_eq!(
            parse_helper_output(r#"{"Authorization": "Bearer t", "X-A": "1"}"#).unwrap(),
            [
                ("Authorization".to_string(), "Bearer t".to_string()),
                ("X-A".to_string(), "1".to_string())
            ]
        );
        for bad in ["Bearer secret-token", r#"["secret-token"]"#, r#"{"A": 5}"#] {
            let e = parse_helper_output(bad).unwrap_err();
            assert!(!e.contains("secret-token"), "{e}");
        }
    }

    #[test]
    fn the_helper_runs_with_the_server_name_and_url_and_commands_rerun() {
        smol::block_on(async {
            let dir =
                std::env::temp_dir().join(format!("switchboard-helper-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let counter = dir.join("n");
            let sources = HeaderSources {
                helper: Some(
                    r#"printf '{"X-Server": "%s %s"}' "$CLAUDE_CODE_MCP_SERVER_NAME" "$CLAUDE_CODE_MCP_SERVER_URL""#
                        .into(),
                ),
                commands: vec![(
                    "X-Token".into(),
                    format!("echo x >> {0}; wc -l < {0}", counter.display()),
                )],
                cache: Some(Arc::new(SecretCache::new())),
                provider: None,
            };
            assert_eq!(
                sources.helper_headers("s1", "http://h/mcp").await.unwrap(),
                [("X-Server".to_string(), "s1 http://h/mcp".to_string())]
            );
            let first = sources.rerun_commands().await.unwrap();
            let second = sources.rerun_commands().await.unwrap();
            assert_eq!(first[0].1.trim(), "1");
            assert_eq!(second[0].1.trim(), "2", "ran again, not cached");
            let _ = std::fs::remove_dir_all(&dir);
        });
    }
}
