//! Secrets at connect time: `!command` values in `env` and `headers`, and bearer tokens from
//! the embedder's credential provider.
//!
//! A value that starts with `!` is a shell command (`sh -c`); its trimmed stdout becomes the
//! value. `!!` escapes a literal leading `!` (`"!!x"` is the value `"!x"`). Each command runs
//! at most once per process (every [`Switchboard`](crate::Switchboard) shares
//! [`SecretCache::shared`]'s results) — concurrent connects that need the same command share
//! one run — with a 10 s timeout, in its own process group that is killed on timeout or if the
//! resolution is cancelled. Failures are not cached: the next connect tries again. For an HTTP
//! server, a `401` forgets the value of its header commands and runs them again, and asks the
//! credential provider again (`refused: true`), before the request is retried (see
//! `auth::HeaderSources`).
//!
//! A failure is an error for that server only, worded `secret command "<cmd>" failed: ...`,
//! and never contains the secret's value. A command that prints nothing is a failure too: an
//! empty secret is nearly always a mistake (an unset variable, a logged-out password manager)
//! that would otherwise surface later as a confusing authentication error.
//!
//! Secrets are resolved in the shell, after the core decided to connect: the core only ever
//! sees the unresolved config (which is also what the cache key hashes).

use crate::stdio::{GroupGuard, ProcessRegistry};
use async_io::Timer;
use async_lock::OnceCell;
use futures_lite::future;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The most a secret command may print on stdout (and on stderr): a token or a header value
/// is far smaller, and a runaway command must not grow memory.
const MAX_SECRET_OUTPUT: usize = 64 * 1024;
use switchboard_core::config::TransportConfig;

/// How long a secret command may run.
pub const SECRET_COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// The environment variable that carries a provider's token to a stdio server.
pub const STDIO_TOKEN_ENV: &str = "OAUTH_ACCESS_TOKEN";

/// What a [`CredentialProvider`] answers with.
pub type CredentialFuture<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Option<String>, String>> + Send + 'a>,
>;

/// Supplies bearer tokens for servers whose config has an `auth` section.
///
/// Asked on the connect path, and for an HTTP server asked again (`refused: true`) when the
/// server refused the token it gave, before the request is retried once with the new one: the
/// moment to refresh it. It may take its time (a refresh round trip); the connect timeout
/// bounds it. `Ok(None)`: no token for this server, connect without one. The error message
/// should not contain a secret.
pub trait CredentialProvider: Send + Sync {
    /// The token for `server`, whose config's `auth` section is `auth`; `refused` when the
    /// server refused the last one.
    fn bearer_token<'a>(
        &'a self,
        server: &'a str,
        auth: &'a Value,
        refused: bool,
    ) -> CredentialFuture<'a>;
}

/// Results of secret commands, keyed by the command string.
type SecretValues = Arc<Mutex<BTreeMap<String, Arc<OnceCell<String>>>>>;

/// The process-wide results behind [`SecretCache::shared`].
fn process_values() -> SecretValues {
    static VALUES: OnceLock<SecretValues> = OnceLock::new();
    VALUES.get_or_init(SecretValues::default).clone()
}

/// Results of secret commands, keyed by the command string: process-wide
/// ([`SecretCache::shared`], what the library uses) or private to one cache
/// ([`SecretCache::new`]).
pub struct SecretCache {
    values: SecretValues,
    timeout: Duration,
    registry: ProcessRegistry,
}

impl fmt::Debug for SecretCache {
    /// Never shows values.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let commands = self.values.lock().map(|v| v.len()).unwrap_or(0);
        f.debug_struct("SecretCache")
            .field("commands", &commands)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Default for SecretCache {
    fn default() -> Self {
        Self::new()
    }
}

impl SecretCache {
    /// An empty cache of its own, with the 10 s command timeout and a private process
    /// registry.
    pub fn new() -> Self {
        SecretCache {
            values: SecretValues::default(),
            timeout: SECRET_COMMAND_TIMEOUT,
            registry: ProcessRegistry::new(),
        }
    }

    /// A cache whose results live for the life of the process: every `shared()` cache sees
    /// the values any of them resolved (each command runs once per process; failures are not
    /// kept). The timeout and the process registry stay per cache.
    pub fn shared() -> Self {
        SecretCache {
            values: process_values(),
            ..Self::new()
        }
    }

    /// Track running secret commands in `registry` (the library handle's), so its
    /// `kill_all_now` covers them too.
    pub fn with_registry(mut self, registry: ProcessRegistry) -> Self {
        self.registry = registry;
        self
    }

    /// Give up on a command after `timeout` (default 10 s) and kill its process group.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The value of `!<command>`: cached, or run now.
    pub async fn resolve_command(&self, command: &str) -> Result<String, String> {
        let cell = {
            let mut values = self.values.lock().unwrap_or_else(|e| e.into_inner());
            values.entry(command.to_string()).or_default().clone()
        };
        cell.get_or_try_init(|| run_secret_command(command, &[], self.timeout, &self.registry))
            .await
            .cloned()
    }

    /// Forgets the value of `command`, so the next resolution runs it again (after the server
    /// refused what it printed: a token that expired, a password manager that relocked).
    pub fn forget(&self, command: &str) {
        let mut values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        values.remove(command);
    }

    /// Runs `command` now, uncached, with `env` added to its environment: its trimmed stdout
    /// (at most 64 KiB), with this cache's timeout and process registry.
    pub async fn run_uncached(
        &self,
        command: &str,
        env: &[(&str, &str)],
    ) -> Result<String, String> {
        run_secret_command(command, env, self.timeout, &self.registry).await
    }

    /// A config value: `!cmd` runs `cmd`, `!!x` is the literal `!x`, anything else is itself.
    pub async fn resolve_value(&self, value: &str) -> Result<String, String> {
        if let Some(literal) = value.strip_prefix("!!") {
            Ok(format!("!{literal}"))
        } else if let Some(command) = value.strip_prefix('!') {
            self.resolve_command(command).await
        } else {
            Ok(value.to_string())
        }
    }
}

/// Resolves every `!command` value in `config`'s env (stdio) or headers (HTTP/SSE), and adds
/// the provider's bearer token when the server has an `auth` section: env
/// `OAUTH_ACCESS_TOKEN` for stdio, `Authorization: Bearer <token>` for HTTP/SSE (either one
/// replaces a value of the same name from the config). Cancel-safe: dropping the future kills
/// a secret command that is still running.
pub async fn resolve_secrets(
    server: &str,
    config: TransportConfig,
    auth: Option<&Value>,
    provider: Option<&dyn CredentialProvider>,
    cache: &SecretCache,
) -> Result<TransportConfig, String> {
    let token = match (auth, provider) {
        (Some(auth), Some(provider)) => provider
            .bearer_token(server, auth, false)
            .await
            .map_err(|e| format!("credential provider failed for server \"{server}\": {e}"))?,
        _ => None,
    };
    match config {
        TransportConfig::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut env = resolve_map(env, cache, "env").await?;
            if let Some(token) = token {
                env.insert(STDIO_TOKEN_ENV.to_string(), token);
            }
            Ok(TransportConfig::Stdio {
                command,
                args,
                env,
                cwd,
            })
        }
        TransportConfig::Http { url, headers } => Ok(TransportConfig::Http {
            url,
            headers: with_bearer(resolve_map(headers, cache, "header").await?, token),
        }),
        TransportConfig::Sse { url, headers } => Ok(TransportConfig::Sse {
            url,
            headers: with_bearer(resolve_map(headers, cache, "header").await?, token),
        }),
    }
}

async fn resolve_map(
    map: BTreeMap<String, String>,
    cache: &SecretCache,
    what: &str,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (name, value) in map {
        let value = cache
            .resolve_value(&value)
            .await
            .map_err(|e| format!("{e} (for {what} {name})"))?;
        out.insert(name, value);
    }
    Ok(out)
}

fn with_bearer(
    mut headers: BTreeMap<String, String>,
    token: Option<String>,
) -> BTreeMap<String, String> {
    if let Some(token) = token {
        headers.retain(|name, _| !name.eq_ignore_ascii_case("authorization"));
        headers.insert("Authorization".to_string(), format!("Bearer {token}"));
    }
    headers
}

async fn run_secret_command(
    command: &str,
    env: &[(&str, &str)],
    limit: Duration,
    registry: &ProcessRegistry,
) -> Result<String, String> {
    let fail = |why: String| format!("secret command \"{command}\" failed: {why}");
    let mut std_cmd = std::process::Command::new("sh");
    std_cmd.arg("-c").arg(command);
    for (k, v) in env {
        std_cmd.env(k, v);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        std_cmd.process_group(0);
    }
    std_cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Killed when dropped before it was reaped (on timeout or cancellation).
    let mut child =
        crate::proc::Child::spawn(std_cmd).map_err(|e| fail(format!("could not run sh: {e}")))?;
    // Kills the group (grandchildren included) on timeout, on cancellation, and after the
    // command finished (stragglers).
    let _guard = GroupGuard::new(registry, child.id());
    let output = future::or(
        async { Some(child.output(MAX_SECRET_OUTPUT).await) },
        async {
            Timer::after(limit).await;
            None
        },
    )
    .await;
    let output = match output {
        None => return Err(fail(format!("timed out after {} s", limit.as_secs_f64()))),
        Some(Err(e)) => return Err(fail(e.to_string())),
        Some(Ok(output)) => output,
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(fail(match last {
            Some(line) => format!("{}; stderr: {}", output.status, truncate(line.trim(), 200)),
            None => output.status.to_string(),
        }));
    }
    let value = String::from_utf8(output.stdout)
        .map_err(|_| fail("its output is not UTF-8".to_string()))?;
    let value = value.trim();
    if value.is_empty() {
        return Err(fail("it printed nothing".to_string()));
    }
    Ok(value.to_string())
}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}
