//! `switchboard serve`: every configured server as one MCP server, over stdio (for a client
//! to spawn) or Streamable HTTP (`--http ADDR`). Discovery, flags and the startup gate are
//! every other command's; the serving itself is the library's (`switchboard::serve`).

use super::{interrupt, Fatal, Global, Session, Settle, EXIT_OK};
use std::net::SocketAddr;
use switchboard::core::gateway::{GatewayOptions, StateKey};
use switchboard::serve::{
    discovered_files, serve_http, serve_stdio, watch_files, HttpServeOptions, PeerForwarder,
    DEFAULT_WATCH_INTERVAL,
};

/// The environment variable read for the bearer token when `--bearer-token` is not given
/// (so the token stays out of the process list).
pub(super) const TOKEN_ENV: &str = "SWITCHBOARD_BEARER_TOKEN";

/// `serve`'s own flags.
pub(super) struct ServeArgs {
    pub http: Option<SocketAddr>,
    pub bearer_token: Option<String>,
    pub allowed_origins: Vec<String>,
    pub plain_names: bool,
    pub tool_search: bool,
    pub state_key_file: Option<std::path::PathBuf>,
}

/// The longest state key file read.
const MAX_STATE_KEY_FILE: u64 = 4096;

/// The key in `path`: the file's bytes (at least 32 of them), hashed.
fn read_state_key(path: &std::path::Path) -> Result<StateKey, Fatal> {
    use std::io::Read;
    let mut secret = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_STATE_KEY_FILE + 1).read_to_end(&mut secret))
        .map_err(|e| Fatal::usage(format!("--state-key-file {}: {e}", path.display())))?;
    let secret = secret.trim_ascii();
    if secret.len() < 32 || secret.len() as u64 > MAX_STATE_KEY_FILE {
        return Err(Fatal::usage(format!(
            "--state-key-file {}: the secret must be 32 to {MAX_STATE_KEY_FILE} bytes long",
            path.display()
        )));
    }
    Ok(StateKey::from_secret(secret))
}

pub(super) async fn run(
    g: &Global,
    interrupt: &interrupt::Interrupt,
    args: ServeArgs,
) -> Result<u8, Fatal> {
    let state_key = args
        .state_key_file
        .as_deref()
        .map(read_state_key)
        .transpose()?;
    let token = args
        .bearer_token
        .or_else(|| std::env::var(TOKEN_ENV).ok())
        .filter(|t| !t.is_empty());
    if let Some(addr) = args.http {
        if !addr.ip().is_loopback() && token.is_none() {
            return Err(Fatal::usage(format!(
                "--http {addr} is not a loopback address: set --bearer-token (or {TOKEN_ENV})"
            )));
        }
    }
    // The servers' sampling and elicitation requests go to the downstream client that made
    // the call (and are refused, saying why, when it cannot take them), unless --elicit or
    // --sampling-command say how to answer them here.
    let forward = g.elicit.is_none() && g.sampling_command.is_none();
    let peers = forward.then(PeerForwarder::new);
    // Like `tools`: servers with cached tools are served deferred at the gate; servers
    // without are waited for (bounded by their connect timeouts), so a first run's list is
    // complete too. Later runs answer at once from the cache.
    let session = Session::start_with(g, interrupt, Settle::Uncached, |b| match &peers {
        Some(p) => p.install(b),
        None => b,
    })
    .await?;
    let sb = session.sb;
    // The configured roots (the project directory) apply until a downstream client that
    // declared roots gives its own.
    let (project, _) = super::discovery_options(g)?;
    let gateway = GatewayOptions {
        plain_names: args.plain_names,
        tool_search: args.tool_search,
        roots: super::peer::project_roots(&project),
        request_state_key: state_key,
        ..GatewayOptions::default()
    };
    // Edits of the config files it read (and of the files their values come from, and of
    // the approvals) are picked up while it serves: discovered again with the answers given
    // at start, and synced through the library (unchanged servers keep running, a server
    // whose values changed restarts); the client is told of the new view, and of what awaits
    // approval now.
    let watching = async {
        let quiet = g.quiet;
        let files = discovered_files(&session.discovered);
        let answered = session.answered.clone();
        // The first re-read is the watcher's catch-up for edits made before it began, not
        // necessarily a change: it says nothing.
        let mut first = true;
        watch_files(files, DEFAULT_WATCH_INTERVAL, || {
            let sb = sb.clone();
            let options = answered.clone();
            let announce = !quiet && !std::mem::take(&mut first);
            async move {
                let d = blocking::unblock(move || switchboard::discover(&options)).await;
                if announce {
                    eprintln!("switchboard: a config file changed; syncing the servers");
                }
                let files = discovered_files(&d);
                let _ = sb.sync_discovered(d).await;
                files
            }
        })
        .await;
        futures_lite::future::pending::<Result<(), Fatal>>().await
    };
    let serving = async {
        match args.http {
            None => serve_stdio(&sb, gateway, peers)
                .await
                .map_err(|e| Fatal::failed(format!("serving on stdio failed: {e}"))),
            Some(addr) => {
                let quiet = g.quiet;
                serve_http(
                    &sb,
                    HttpServeOptions {
                        addr,
                        bearer_token: token,
                        allowed_origins: args.allowed_origins,
                        gateway,
                        peers,
                    },
                    |local| {
                        if !quiet {
                            eprintln!("switchboard: serving http://{local}/mcp");
                        }
                    },
                )
                .await
                .map_err(|e| Fatal::failed(e.to_string()))
            }
        }
    };
    let result = futures_lite::future::or(serving, watching).await;
    sb.shutdown().await;
    result.map(|()| EXIT_OK)
}
