//! The shell of authorization: performs what the core's [`Flow`] asks (HTTP requests with
//! the library's hyper client, the user's browser through an [`AuthorizationHandler`]), keeps
//! the credentials of each server in memory and in the [`TokenStore`], and answers the HTTP
//! transport's questions: which `Authorization` header to send, and what to do about a
//! `401`/`403` (the core's [`Guard`] decides). One flow runs at a time per server; requests
//! refused meanwhile are retried with its result instead of starting their own.

mod loopback;
mod signing;
mod sources;
mod store;

pub use loopback::{AuthorizationHandler, AuthorizationSession, LoopbackAuthorizer};
pub use sources::HeaderSources;
pub use store::{StoreError, TokenStore};

use crate::http::client::{HttpClient, Url};
use async_io::Timer;
use bytes::Bytes;
use futures_lite::future;
use http::{HeaderName, HeaderValue, Method};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use switchboard_core::auth::{
    parse_www_authenticate, AuthError, AuthSettings, Credentials, Entropy, Flow, Grant, Guard,
    HttpMethod, HttpRequest, HttpResponse, Reaction, Step,
};
use switchboard_core::config::OAuthConfig;

/// The largest answer read from an authorization or resource server.
const MAX_BODY: usize = 256 * 1024;
/// How long one request to an authorization server may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Requests one flow may make, at most (discovery tries at most 5 URLs per document).
const MAX_FETCHES: usize = 16;

/// What the library needs to authorize servers: where tokens live and who can send the user
/// to a browser (`None`: nobody; a server that needs a login fails with
/// `ServerErrorKind::NeedsLogin`).
#[derive(Clone, Default)]
pub struct AuthContext {
    /// The token store (`None`: tokens live only in memory).
    pub store: Option<TokenStore>,
    /// The interactive part.
    pub handler: Option<Arc<dyn AuthorizationHandler>>,
}

impl std::fmt::Debug for AuthContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthContext")
            .field("store", &self.store)
            .field("interactive", &self.handler.is_some())
            .finish()
    }
}

struct State {
    creds: Option<Credentials>,
    guard: Guard,
    loaded: bool,
    /// Headers from the header sources (helper, `!command` values run again).
    made: Vec<(String, String)>,
    /// The helper ran for the first request.
    made_loaded: bool,
    /// The header sources ran again in this refusal chain.
    remade: bool,
}

/// The authorization state of one HTTP server.
pub struct AuthLayer {
    server: String,
    url: String,
    oauth: OAuthConfig,
    ctx: AuthContext,
    client: HttpClient,
    sources: HeaderSources,
    state: Mutex<State>,
    /// One flow at a time.
    flows: async_lock::Mutex<()>,
}

impl std::fmt::Debug for AuthLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthLayer")
            .field("server", &self.server)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn entropy() -> Result<Entropy, AuthError> {
    let mut e = Entropy {
        verifier: [0; 32],
        state: [0; 16],
    };
    getrandom::getrandom(&mut e.verifier)
        .and_then(|()| getrandom::getrandom(&mut e.state))
        .map_err(|err| AuthError::Unreachable {
            url: "the system RNG".into(),
            reason: err.to_string(),
        })?;
    Ok(e)
}

impl AuthLayer {
    /// The layer of `server` at `url`.
    pub fn new(server: &str, url: &str, oauth: OAuthConfig, ctx: AuthContext) -> Arc<Self> {
        Self::with_sources(server, url, oauth, ctx, HeaderSources::default())
    }

    /// The layer of `server` at `url`, whose headers also come from `sources` (run again
    /// after a `401`, before any OAuth reaction).
    pub fn with_sources(
        server: &str,
        url: &str,
        oauth: OAuthConfig,
        ctx: AuthContext,
        sources: HeaderSources,
    ) -> Arc<Self> {
        Arc::new(AuthLayer {
            server: server.to_string(),
            url: url.to_string(),
            oauth,
            ctx,
            // No idle connections kept: the flow's requests are minutes apart around the
            // browser, longer than servers keep an idle connection open.
            client: HttpClient::new(Duration::from_secs(10), 0, 4),
            sources,
            state: Mutex::new(State {
                creds: None,
                guard: Guard::default(),
                loaded: false,
                made: Vec::new(),
                made_loaded: false,
                remade: false,
            }),
            flows: async_lock::Mutex::new(()),
        })
    }

    /// The server URL this layer authorizes.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The headers to send now besides the configured ones (which they replace): those
    /// the header sources made, then `Authorization` from the OAuth credentials, if any.
    pub fn headers(&self) -> Vec<(String, String)> {
        let st = self.lock();
        let mut out = st.made.clone();
        if let Some(c) = &st.creds {
            out.push(("authorization".into(), format!("Bearer {}", c.access_token)));
        }
        out
    }

    /// The `Authorization` header value to send now, if there are credentials.
    pub fn header(&self) -> Option<String> {
        self.lock()
            .creds
            .as_ref()
            .map(|c| format!("Bearer {}", c.access_token))
    }

    /// Loads stored credentials (once) and refreshes them when they are about to expire;
    /// returns the generation of the credentials to send (pass it back to
    /// [`refused`](Self::refused)). Errors here are not fatal: the request goes out with what
    /// there is and the server's answer decides.
    pub async fn ready(&self) -> u64 {
        if self.sources.helper.is_some() && !self.lock().made_loaded {
            let _flow = self.flows.lock().await;
            if !self.lock().made_loaded {
                let made = self.sources.helper_headers(&self.server, &self.url).await;
                let mut st = self.lock();
                st.made_loaded = true;
                match made {
                    Ok(h) => st.made = h,
                    Err(e) => {
                        tracing::warn!(target: "switchboard::auth", server = %self.server, "{e}")
                    }
                }
            }
        }
        if !self.lock().loaded {
            let _flow = self.flows.lock().await;
            if !self.lock().loaded {
                let loaded = match &self.ctx.store {
                    Some(store) => {
                        let (store, server, url) =
                            (store.clone(), self.server.clone(), self.url.clone());
                        blocking::unblock(move || store.load(&server, &url)).await
                    }
                    None => Ok(None),
                };
                let mut st = self.lock();
                st.loaded = true;
                match loaded {
                    Ok(Some(c)) => {
                        st.creds = Some(c);
                        st.guard.installed();
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(target: "switchboard::auth", server = %self.server, "{e}")
                    }
                }
            }
        }
        let (due, generation) = {
            let st = self.lock();
            let due = st
                .creds
                .as_ref()
                .filter(|c| Guard::should_refresh(c, unix_now()))
                .cloned();
            (due, st.guard.generation())
        };
        if let Some(creds) = due {
            let _flow = self.flows.lock().await;
            if self.lock().guard.generation() == generation {
                let settings = self.settings(None);
                if let Ok(e) = entropy() {
                    let (flow, step) = Flow::refresh(settings, creds, &e, unix_now());
                    if let Err(err) = self.run(flow, step, None).await {
                        tracing::info!(target: "switchboard::auth", server = %self.server, "token refresh failed: {err}");
                    }
                }
            }
        }
        self.lock().guard.generation()
    }

    /// What this server's guard decided so far (refusals, retries, refreshes,
    /// authorizations, step-ups, give-ups).
    pub fn counters(&self) -> switchboard_core::auth::GuardCounters {
        self.lock().guard.counters()
    }

    /// A request was accepted: a refusal chain is over.
    pub fn accepted(&self) {
        let mut st = self.lock();
        st.guard.accepted();
        st.remade = false;
    }

    /// The server refused a request sent with credentials of generation `sent`: refresh,
    /// authorize or step up as the core's guard decides. `Ok` means: send it again.
    pub async fn refused(
        &self,
        status: u16,
        www_authenticate: Option<&str>,
        sent: u64,
    ) -> Result<(), AuthError> {
        let challenge = www_authenticate
            .map(parse_www_authenticate)
            .unwrap_or_default();
        let _flow = self.flows.lock().await;
        // Headers made by commands go stale (a token that expired): a `401` first runs
        // them again, once per refusal chain, before any OAuth reaction.
        if status == 401 && !self.sources.is_empty() {
            let again = {
                let mut st = self.lock();
                if sent < st.guard.generation() {
                    return Ok(());
                }
                !std::mem::replace(&mut st.remade, true)
            };
            if again {
                let mut made = self
                    .sources
                    .rerun_commands()
                    .await
                    .map_err(|reason| AuthError::HeaderCommand { reason })?;
                made.extend(
                    self.sources
                        .helper_headers(&self.server, &self.url)
                        .await
                        .map_err(|reason| AuthError::HeaderCommand { reason })?,
                );
                made.extend(
                    self.sources
                        .provider_headers(&self.server)
                        .await
                        .map_err(|reason| AuthError::HeaderCommand { reason })?,
                );
                let mut st = self.lock();
                st.made = made;
                st.guard.installed();
                return Ok(());
            }
        }
        let (reaction, creds) = {
            let mut st = self.lock();
            let creds = st.creds.clone();
            (
                st.guard.refused(status, &challenge, sent, creds.as_ref()),
                creds,
            )
        };
        tracing::debug!(target: "switchboard::auth", server = %self.server, status, ?reaction, "request refused");
        match reaction {
            Reaction::Retry => Ok(()),
            Reaction::GiveUp(e) => Err(e),
            Reaction::Refresh => {
                let session = self.begin().await?;
                let settings = self.settings(session.as_deref());
                let (flow, step) = Flow::refresh(
                    settings,
                    creds.expect("refresh needs credentials"),
                    &entropy()?,
                    unix_now(),
                );
                self.run(flow, step, session).await
            }
            Reaction::Authorize { step_up } => {
                let session = self.begin().await?;
                let settings = self.settings(session.as_deref());
                let (flow, step) =
                    Flow::authorize(settings, challenge, creds, step_up, &entropy()?, unix_now());
                self.run(flow, step, session).await
            }
        }
    }

    /// A full authorization now, whatever is stored (`switchboard login`).
    pub async fn login(&self) -> Result<(), AuthError> {
        let _flow = self.flows.lock().await;
        let session = self.begin().await?;
        if session.is_none() && self.oauth.grant == Grant::AuthorizationCode {
            return Err(AuthError::NeedsLogin);
        }
        let settings = self.settings(session.as_deref());
        let previous = self.lock().creds.clone();
        let (flow, step) = Flow::authorize(
            settings,
            Default::default(),
            previous,
            false,
            &entropy()?,
            unix_now(),
        );
        self.run(flow, step, session).await
    }

    async fn begin(&self) -> Result<Option<Box<dyn AuthorizationSession>>, AuthError> {
        if self.oauth.grant == Grant::ClientCredentials {
            // Nobody to send anywhere: no redirect listener.
            return Ok(None);
        }
        match &self.ctx.handler {
            None => Ok(None),
            Some(h) => h
                .begin(&self.server, self.oauth.callback_port)
                .await
                .map(Some)
                .map_err(|reason| AuthError::Unreachable {
                    url: "the redirect listener".into(),
                    reason,
                }),
        }
    }

    fn settings(&self, session: Option<&dyn AuthorizationSession>) -> AuthSettings {
        let mut pre_registered = self.oauth.client.clone();
        if let (Some(p), Some(key)) = (&mut pre_registered, &self.oauth.private_key) {
            if p.signing_algorithm.is_none() {
                // The key's kind names the algorithm when the config does not.
                p.signing_algorithm = signing::algorithm_of(key);
            }
        }
        AuthSettings {
            server_url: self.url.clone(),
            redirect_uri: session.map(|s| s.redirect_uri()).unwrap_or_default(),
            client_name: "switchboard".into(),
            pre_registered,
            client_metadata_url: self.oauth.client_metadata_url.clone(),
            scopes: self.oauth.scopes.clone(),
            auth_server_metadata_url: self.oauth.auth_server_metadata_url.clone(),
            interactive: session.is_some(),
            grant: self.oauth.grant,
        }
    }

    /// Drives `flow` to its end; stores and installs what it produced.
    async fn run(
        &self,
        mut flow: Flow,
        mut step: Step,
        mut session: Option<Box<dyn AuthorizationSession>>,
    ) -> Result<(), AuthError> {
        let mut fetches = 0;
        loop {
            step = match step {
                Step::Fetch(req) => {
                    fetches += 1;
                    if fetches > MAX_FETCHES {
                        return Err(AuthError::Malformed {
                            what: "authorization flow",
                            reason: "too many requests".into(),
                        });
                    }
                    let resp = self.fetch(&req).await;
                    flow.on_response(resp)
                }
                Step::Sign { algorithm, input } => {
                    let key = self.oauth.private_key.clone();
                    let signature = blocking::unblock(move || match key {
                        Some(key) => signing::sign(&key, algorithm, input.as_bytes()),
                        None => Err("no private key configured (oauth.privateKey)".to_string()),
                    })
                    .await;
                    flow.on_signature(signature)
                }
                Step::Authorize { url } => {
                    let Some(s) = session.take() else {
                        return Err(AuthError::NeedsLogin);
                    };
                    match s.authorize(url).await {
                        Ok(query) => flow.on_redirect(&query),
                        Err(reason) => {
                            return Err(AuthError::Unreachable {
                                url: "the authorization redirect".into(),
                                reason,
                            })
                        }
                    }
                }
                Step::Done(creds) => {
                    if let Some(store) = &self.ctx.store {
                        let (store, server, url, c) = (
                            store.clone(),
                            self.server.clone(),
                            self.url.clone(),
                            (*creds).clone(),
                        );
                        if let Err(e) =
                            blocking::unblock(move || store.save(&server, &url, &c)).await
                        {
                            tracing::warn!(target: "switchboard::auth", server = %self.server, "could not store the tokens: {e}");
                        }
                    }
                    let mut st = self.lock();
                    st.creds = Some(*creds);
                    st.guard.installed();
                    return Ok(());
                }
                Step::Failed(e) => return Err(e),
            };
        }
    }

    async fn fetch(&self, req: &HttpRequest) -> HttpResponse {
        let url = match Url::parse(&req.url) {
            Ok(u) => u,
            Err(e) => return HttpResponse::Unreachable(e),
        };
        let mut headers = Vec::new();
        for (k, v) in &req.headers {
            if let (Ok(k), Ok(v)) = (
                HeaderName::from_bytes(k.as_bytes()),
                HeaderValue::from_str(v),
            ) {
                headers.push((k, v));
            }
        }
        headers.push((
            http::header::USER_AGENT,
            HeaderValue::from_static(concat!("switchboard/", env!("CARGO_PKG_VERSION"))),
        ));
        let method = match req.method {
            HttpMethod::Get => Method::GET,
            HttpMethod::Post => Method::POST,
        };
        let body = Bytes::from(req.body.clone().unwrap_or_default());
        let exchange = async {
            let mut resp = self
                .client
                .request(method, &url, &headers, body)
                .await
                .map_err(|e| e.to_string())?;
            let status = resp.status.as_u16();
            let body = resp
                .body
                .read_to_end(MAX_BODY)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(HttpResponse::Answered {
                status,
                body: body.to_vec(),
            })
        };
        let timed = future::or(exchange, async {
            Timer::after(REQUEST_TIMEOUT).await;
            Err(format!("no answer within {} s", REQUEST_TIMEOUT.as_secs()))
        });
        timed.await.unwrap_or_else(HttpResponse::Unreachable)
    }
}

/// Logs `server` out: forgets its stored credentials. True when there were some.
pub fn logout(store: &TokenStore, server: &str) -> Result<bool, StoreError> {
    store.remove(server)
}
