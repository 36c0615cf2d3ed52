//! `switchboard login SERVER` and `switchboard logout SERVER`: an OAuth authorization of one
//! HTTP server, run by the library's authorization layer with the loopback authorizer, and
//! the removal of its stored tokens. Tokens are never printed.

use super::{Fatal, Global, EXIT_OK};
use std::sync::Arc;
use switchboard::auth::{AuthContext, AuthLayer, LoopbackAuthorizer, TokenStore};
use switchboard::core::config::{oauth_config, resolve};
use switchboard::{discover, DiscoveryOptions, TransportConfig};

fn store() -> Result<TokenStore, Fatal> {
    TokenStore::default_location()
        .ok_or_else(|| Fatal::usage("no token store: set XDG_DATA_HOME or HOME"))
}

/// The URL and `oauth` settings of HTTP server `name`, from the configs a command would use.
async fn http_server(
    g: &Global,
    name: &str,
) -> Result<(String, switchboard::core::config::OAuthConfig), Fatal> {
    let project = match &g.project {
        Some(p) => p.clone(),
        None => std::env::current_dir()
            .map_err(|e| Fatal::usage(format!("no current directory: {e}")))?,
    };
    let mut options = DiscoveryOptions::new(&project);
    options.project_configs = !g.no_project_config;
    options.explicit_files = g.configs.clone();
    let discovered = blocking::unblock(move || discover(&options)).await;
    let Some(spec) = discovered.servers.iter().find(|s| s.name == name) else {
        return Err(Fatal::usage(format!("no server named {name:?}")));
    };
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let url = match resolve(name, &spec.config, &env).map_err(|e| Fatal::usage(e.to_string()))? {
        TransportConfig::Http { url, .. } | TransportConfig::Sse { url, .. } => url,
        TransportConfig::Stdio { .. } => {
            return Err(Fatal::usage(format!(
                "server {name:?} is not an HTTP server: nothing to log in to"
            )))
        }
    };
    let oauth = oauth_config(&spec.config)
        .map_err(|e| Fatal::usage(format!("server {name:?}: {e}")))?
        .unwrap_or_default();
    Ok((url, oauth))
}

/// Runs a full authorization for `name` and stores its tokens.
pub(super) async fn login(g: &Global, name: &str, open_browser: bool) -> Result<u8, Fatal> {
    let (url, oauth) = http_server(g, name).await?;
    let ctx = AuthContext {
        store: Some(store()?),
        handler: Some(Arc::new(LoopbackAuthorizer {
            open_browser,
            ..LoopbackAuthorizer::default()
        })),
    };
    let layer = AuthLayer::new(name, &url, oauth, ctx);
    layer
        .login()
        .await
        .map_err(|e| Fatal::failed(format!("login to {name} failed: {e}")))?;
    if !g.quiet {
        eprintln!("switchboard: logged in to {name}; tokens stored");
    }
    Ok(EXIT_OK)
}

/// Forgets `name`'s stored tokens.
pub(super) async fn logout(name: &str) -> Result<u8, Fatal> {
    let store = store()?;
    let name_owned = name.to_string();
    let removed = blocking::unblock(move || store.remove(&name_owned))
        .await
        .map_err(|e| Fatal::failed(e.to_string()))?;
    eprintln!(
        "switchboard: {}",
        if removed {
            format!("logged out of {name}")
        } else {
            format!("no stored tokens for {name}")
        }
    );
    Ok(EXIT_OK)
}
