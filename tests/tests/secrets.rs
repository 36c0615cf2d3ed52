//! Secrets at connect time: `!command` values, their cache, their failures (which never show
//! the value), cancellation, and bearer tokens from a credential provider.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use switchboard::__test::secrets::{resolve_secrets, SecretCache};
use switchboard::__test::stdio::ProcessRegistry;
use switchboard::CredentialProvider;
use switchboard_core::TransportConfig;

fn stdio_with_env(env: &[(&str, &str)]) -> TransportConfig {
    TransportConfig::Stdio {
        command: "server".into(),
        args: vec![],
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        cwd: None,
    }
}

fn env_of(config: &TransportConfig) -> &BTreeMap<String, String> {
    match config {
        TransportConfig::Stdio { env, .. } => env,
        other => panic!("not stdio: {other:?}"),
    }
}

#[test]
fn bang_values_run_once_and_are_trimmed() {
    smol::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let counter = dir.path().join("runs");
        let cmd = format!("echo run >> '{}'; printf '  s3cret \\n'", counter.display());
        let cache = SecretCache::new();
        let config = stdio_with_env(&[
            ("TOKEN", &format!("!{cmd}")),
            ("PLAIN", "value"),
            ("LITERAL", "!!not a command"),
        ]);
        let resolved = resolve_secrets("s", config.clone(), None, None, &cache)
            .await
            .unwrap();
        assert_eq!(env_of(&resolved)["TOKEN"], "s3cret");
        assert_eq!(env_of(&resolved)["PLAIN"], "value");
        assert_eq!(env_of(&resolved)["LITERAL"], "!not a command");
        let again = resolve_secrets("other", config, None, None, &cache)
            .await
            .unwrap();
        assert_eq!(env_of(&again)["TOKEN"], "s3cret");
        let runs = std::fs::read_to_string(&counter).unwrap();
        assert_eq!(runs.lines().count(), 1, "the command ran once");
    });
}

#[test]
fn a_failing_secret_command_is_a_clear_error_without_the_value() {
    smol::block_on(async {
        let cache = SecretCache::new();
        let config = stdio_with_env(&[("K", "!echo hunter2; echo 'vault locked' >&2; exit 3")]);
        let err = resolve_secrets("s", config, None, None, &cache)
            .await
            .unwrap_err();
        assert!(
            err.starts_with(
                "secret command \"echo hunter2; echo 'vault locked' >&2; exit 3\" failed:"
            ),
            "{err}"
        );
        assert!(err.contains("exit status: 3"), "{err}");
        assert!(err.contains("vault locked"), "{err}");
        assert!(err.contains("env K"), "{err}");
        assert!(
            !err.contains("hunter2\n") && !err.ends_with("hunter2"),
            "{err}"
        );

        let empty = stdio_with_env(&[("K", "!true")]);
        let err = resolve_secrets("s", empty, None, None, &cache)
            .await
            .unwrap_err();
        assert!(err.contains("printed nothing"), "{err}");
    });
}

#[test]
fn a_secret_command_that_hangs_times_out_and_is_killed() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        let cache = SecretCache::new()
            .with_registry(registry.clone())
            .with_timeout(Duration::from_millis(300));
        let config = stdio_with_env(&[("K", "!sleep 1000 & sleep 1000")]);
        let err = resolve_secrets("s", config, None, None, &cache)
            .await
            .unwrap_err();
        assert!(err.contains("timed out"), "{err}");
        assert!(registry.is_empty(), "the command's group was killed");
    });
}

#[test]
fn cancelling_a_resolution_kills_the_secret_command() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        let cache = SecretCache::new().with_registry(registry.clone());
        let config = stdio_with_env(&[("K", "!sleep 1000")]);
        let resolution = resolve_secrets("s", config, None, None, &cache);
        // Poll it until the command is running, then drop it (the driver cancelling an
        // attempt that is still opening).
        let start = Instant::now();
        let mut resolution = Box::pin(resolution);
        while registry.is_empty() {
            assert!(start.elapsed() < Duration::from_secs(30));
            let _ = smol::future::poll_once(&mut resolution).await;
            smol::Timer::after(Duration::from_millis(10)).await;
        }
        drop(resolution);
        assert!(registry.is_empty());
    });
}

struct Tokens;

impl CredentialProvider for Tokens {
    fn bearer_token<'a>(
        &'a self,
        server: &'a str,
        auth: &'a Value,
        _refused: bool,
    ) -> switchboard::CredentialFuture<'a> {
        Box::pin(async move {
            match (server, auth.get("kind").and_then(Value::as_str)) {
                (_, Some("oauth")) => Ok(Some(format!("tok-{server}"))),
                (_, Some("broken")) => Err("refresh failed".into()),
                _ => Ok(None),
            }
        })
    }
}

#[test]
fn provider_tokens_become_env_or_authorization_header() {
    smol::block_on(async {
        let cache = SecretCache::new();
        let oauth = json!({"kind": "oauth"});

        let stdio = resolve_secrets(
            "gh",
            stdio_with_env(&[]),
            Some(&oauth),
            Some(&Tokens),
            &cache,
        )
        .await
        .unwrap();
        assert_eq!(env_of(&stdio)["OAUTH_ACCESS_TOKEN"], "tok-gh");

        let http = TransportConfig::Http {
            url: "https://example.invalid/mcp".into(),
            headers: BTreeMap::from([
                ("authorization".to_string(), "Basic old".to_string()),
                ("X-Key".to_string(), "!echo k".to_string()),
            ]),
        };
        let resolved = resolve_secrets("api", http, Some(&oauth), Some(&Tokens), &cache)
            .await
            .unwrap();
        let TransportConfig::Http { headers, .. } = resolved else {
            panic!("http stays http");
        };
        assert_eq!(
            headers,
            BTreeMap::from([
                ("Authorization".to_string(), "Bearer tok-api".to_string()),
                ("X-Key".to_string(), "k".to_string()),
            ])
        );

        // No auth section: the provider is not asked.
        let plain = resolve_secrets("gh", stdio_with_env(&[]), None, Some(&Tokens), &cache)
            .await
            .unwrap();
        assert!(env_of(&plain).is_empty());

        let err = resolve_secrets(
            "gh",
            stdio_with_env(&[]),
            Some(&json!({"kind": "broken"})),
            Some(&Tokens),
            &cache,
        )
        .await
        .unwrap_err();
        assert_eq!(
            err,
            "credential provider failed for server \"gh\": refresh failed"
        );
    });
}

#[test]
fn secret_results_are_kept_for_the_life_of_the_process_across_handles_and_failures_are_not() {
    use switchboard::core::config::{ServerConfig, ServerSpec};
    smol::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let counter = dir.path().join("runs");
        // The temporary path makes the command (the cache key) unique to this test.
        let ok = format!("!echo run >> '{}'; echo s3cret", counter.display());
        let spec = |ok: &str| {
            let mut config = ServerConfig::stdio(
                crate::support::demo_server_bin().to_string_lossy(),
                &["--name", "s"],
            );
            config.env.insert("TOKEN".into(), ok.to_string());
            ServerSpec::new("s", config)
        };
        // Two separate switchboards (not clones): the second one does not run it again.
        for _ in 0..2 {
            let (sb, report) = switchboard::Builder::servers(vec![spec(&ok)])
                .no_cache()
                .start()
                .await
                .unwrap();
            assert_eq!(report.connected, ["s"], "{report:?}");
            sb.shutdown().await;
        }
        let runs = std::fs::read_to_string(&counter).unwrap();
        assert_eq!(
            runs.lines().count(),
            1,
            "the command ran once in this process"
        );
        // Two more `shared()` caches see the value without running it.
        let resolved = resolve_secrets(
            "t",
            stdio_with_env(&[("TOKEN", &ok)]),
            None,
            None,
            &SecretCache::shared(),
        )
        .await
        .unwrap();
        assert_eq!(env_of(&resolved)["TOKEN"], "s3cret");
        assert_eq!(
            std::fs::read_to_string(&counter).unwrap().lines().count(),
            1
        );

        // A failure is not kept: each resolution runs the command again.
        let failing = format!("!echo fail >> '{}'; exit 3", counter.display());
        for _ in 0..2 {
            let err = resolve_secrets(
                "t",
                stdio_with_env(&[("TOKEN", &failing)]),
                None,
                None,
                &SecretCache::shared(),
            )
            .await
            .unwrap_err();
            assert!(err.contains("failed"), "{err}");
        }
        let fails = std::fs::read_to_string(&counter)
            .unwrap()
            .lines()
            .filter(|l| *l == "fail")
            .count();
        assert_eq!(fails, 2);
    });
}
