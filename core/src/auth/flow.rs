//! One authorization (or refresh) as a state machine: discovery, registration, the
//! authorization request, the code exchange. See the module docs of `auth` for the contract.

use super::challenge::Challenge;
use super::encode::{
    base64_standard, base64_url, form_encode, parse_query, percent_encode, pkce_challenge,
};
use super::metadata::{
    authorization_server_metadata_urls, protected_resource_metadata_urls, resource_matches,
    AuthServerMetadata, ResourceMetadata,
};
use super::types::{
    AuthError, AuthMethod, AuthSettings, Client, Credentials, Entropy, Grant, HttpMethod,
    HttpRequest, HttpResponse, SigningAlgorithm,
};
use super::url::HttpUrl;
use serde::Deserialize;

/// What the shell does next.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Step {
    /// Perform this request and pass the answer to [`Flow::on_response`].
    Fetch(HttpRequest),
    /// Send the user to this URL and pass the redirect's query to [`Flow::on_redirect`]
    /// (a run that cannot ask the user ends here with [`AuthError::NeedsLogin`]).
    Authorize {
        /// The authorization request URL.
        url: String,
    },
    /// Sign `input` (the JWS signing input of a `private_key_jwt` client assertion) with the
    /// client's private key and pass the signature to [`Flow::on_signature`].
    Sign {
        /// The algorithm.
        algorithm: SigningAlgorithm,
        /// `base64url(header) . base64url(claims)`.
        input: String,
    },
    /// Finished: store these and use the access token.
    Done(Box<Credentials>),
    /// Finished without credentials.
    Failed(AuthError),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Refreshing,
    /// Fetching protected resource metadata from `urls[next]`.
    Resource {
        urls: Vec<String>,
        next: usize,
    },
    /// Fetching authorization server metadata from `urls[next]`; `legacy` when the server
    /// published no resource metadata (2025-03-26: the server's origin is the issuer, and
    /// without metadata its default endpoints are used).
    Server {
        urls: Vec<String>,
        next: usize,
        legacy: bool,
    },
    Registering {
        method: AuthMethod,
    },
    Authorizing,
    /// Waiting for the signature of a client assertion; then the token request goes to
    /// `endpoint` with `pairs` and the flow waits in `then`.
    Signing {
        endpoint: String,
        pairs: Vec<(String, String)>,
        input: String,
        then: Box<State>,
    },
    Exchanging,
    Finished,
}

/// How long a client assertion is valid, in seconds.
const ASSERTION_LIFETIME: u64 = 300;

/// One authorization or refresh in progress. Feed it with [`on_response`](Flow::on_response)
/// and [`on_redirect`](Flow::on_redirect); each returns the next [`Step`].
#[derive(Debug, Clone)]
pub struct Flow {
    settings: AuthSettings,
    server: HttpUrl,
    state: State,
    challenge: Challenge,
    previous: Option<Credentials>,
    step_up: bool,
    /// The resource identifier, as published (or the server URL without metadata).
    resource: String,
    resource_scopes: Option<Vec<String>>,
    /// The expected issuer; `None` when the config named the metadata URL itself.
    issuer: Option<String>,
    meta: AuthServerMetadata,
    client: Option<Client>,
    verifier: String,
    state_param: String,
    scopes: Vec<String>,
    now: u64,
    /// The URL of the last request asked for (named when it gets no answer).
    last_url: String,
}

/// The largest metadata or token document parsed (the shell also bounds what it reads).
const MAX_DOCUMENT: usize = 256 * 1024;

impl Flow {
    fn new(settings: AuthSettings, server: HttpUrl, entropy: &Entropy, now: u64) -> Flow {
        Flow {
            settings,
            server,
            state: State::Finished,
            challenge: Challenge::default(),
            previous: None,
            step_up: false,
            resource: String::new(),
            resource_scopes: None,
            issuer: None,
            meta: AuthServerMetadata::default(),
            client: None,
            verifier: base64_url(&entropy.verifier),
            state_param: base64_url(&entropy.state),
            scopes: Vec::new(),
            now,
            last_url: String::new(),
        }
    }

    /// A full authorization for the server in `settings`, after `challenge` (the `401`/`403`
    /// that asked for it; default when there was none, as for `switchboard login`).
    /// `previous` are the credentials held so far: their client is reused at the same
    /// issuer, and on a step-up (`step_up`) their scopes are asked for again with the
    /// challenged ones. `now` is the wall-clock time in seconds since the Unix epoch.
    pub fn authorize(
        settings: AuthSettings,
        challenge: Challenge,
        previous: Option<Credentials>,
        step_up: bool,
        entropy: &Entropy,
        now: u64,
    ) -> (Flow, Step) {
        let Some(server) = HttpUrl::parse(&settings.server_url) else {
            let url = settings.server_url.clone();
            let mut flow = Flow::new(
                settings,
                HttpUrl::parse("http://invalid").expect("literal"),
                entropy,
                now,
            );
            let step = flow.fail(AuthError::InvalidUrl { url });
            return (flow, step);
        };
        let mut flow = Flow::new(settings, server, entropy, now);
        flow.challenge = challenge;
        flow.previous = previous;
        flow.step_up = step_up;
        // Nobody to send to the authorization server: no request at all, the user logs in.
        // The client-credentials grant needs nobody.
        let step = if flow.settings.interactive || flow.settings.grant == Grant::ClientCredentials {
            flow.discover()
        } else {
            flow.fail(AuthError::NeedsLogin)
        };
        (flow, step)
    }

    /// Refresh `creds` (grant type `refresh_token`); when that is refused, a full
    /// authorization follows (as [`authorize`](Flow::authorize) after a `401`).
    pub fn refresh(
        settings: AuthSettings,
        creds: Credentials,
        entropy: &Entropy,
        now: u64,
    ) -> (Flow, Step) {
        let Some(refresh_token) = creds.refresh_token.clone() else {
            return Flow::authorize(
                settings,
                Challenge::default(),
                Some(creds),
                false,
                entropy,
                now,
            );
        };
        let Some(server) = HttpUrl::parse(&settings.server_url) else {
            return Flow::authorize(
                settings,
                Challenge::default(),
                Some(creds),
                false,
                entropy,
                now,
            );
        };
        let mut flow = Flow::new(settings, server, entropy, now);
        let pairs = vec![
            ("grant_type".to_string(), "refresh_token".to_string()),
            ("refresh_token".to_string(), refresh_token),
            ("resource".to_string(), creds.resource.clone()),
        ];
        let (endpoint, client, audience) = (
            creds.token_endpoint.clone(),
            creds.client.clone(),
            creds.issuer.clone(),
        );
        flow.previous = Some(creds);
        let step = flow.token_request(&endpoint, &client, &audience, pairs, State::Refreshing);
        (flow, step)
    }

    /// The scopes this flow asks for (empty: the `scope` parameter is omitted).
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }

    /// The answer to the last [`Step::Fetch`].
    pub fn on_response(&mut self, response: HttpResponse) -> Step {
        let (status, body) = match response {
            HttpResponse::Answered { status, body } => (status, body),
            HttpResponse::Unreachable(reason) => {
                let url = self.last_url.clone();
                return self.fail(AuthError::Unreachable { url, reason });
            }
        };
        let ok = (200..300).contains(&status);
        match std::mem::replace(&mut self.state, State::Finished) {
            State::Refreshing => {
                let previous = self
                    .previous
                    .clone()
                    .expect("a refresh starts with credentials");
                if ok {
                    match parse_tokens(&body) {
                        Ok(t) => {
                            let mut creds = previous;
                            creds.refresh_token = t.refresh_token.or(creds.refresh_token);
                            creds.expires_at = t.expires_in.map(|s| self.now.saturating_add(s));
                            creds.access_token = t.access_token;
                            return Step::Done(Box::new(creds));
                        }
                        Err(e) => return self.fail(e),
                    }
                }
                // The refresh token is spent or revoked: authorize from the start.
                self.discover()
            }
            State::Resource { urls, next } => {
                if !ok {
                    return self.next_resource(urls, next + 1);
                }
                match parse::<ResourceMetadata>(&body, "protected resource metadata") {
                    Ok(prm) => self.on_resource_metadata(prm),
                    Err(e) => self.fail(e),
                }
            }
            State::Server { urls, next, legacy } => {
                if !ok {
                    return self.next_server(urls, next + 1, legacy);
                }
                match parse::<AuthServerMetadata>(&body, "authorization server metadata") {
                    Ok(meta) => self.on_server_metadata(meta),
                    Err(e) => self.fail(e),
                }
            }
            State::Registering { method } => {
                if !ok {
                    return self.fail(endpoint_error("registration", status, &body));
                }
                match parse::<Registration>(&body, "registration response") {
                    Ok(r) => {
                        let auth_method = r
                            .token_endpoint_auth_method
                            .as_deref()
                            .and_then(AuthMethod::parse)
                            .unwrap_or(match (&r.client_secret, method) {
                                (Some(_), AuthMethod::None) => AuthMethod::ClientSecretBasic,
                                (_, m) => m,
                            });
                        self.client = Some(Client {
                            client_id: r.client_id,
                            client_secret: r.client_secret,
                            auth_method,
                            signing_algorithm: None,
                        });
                        self.authorization_request()
                    }
                    Err(e) => self.fail(e),
                }
            }
            State::Exchanging => {
                if !ok {
                    return self.fail(endpoint_error("token", status, &body));
                }
                match parse_tokens(&body) {
                    Ok(t) => Step::Done(Box::new(Credentials {
                        issuer: self.issuer.clone().unwrap_or_default(),
                        resource: self.resource.clone(),
                        token_endpoint: self.meta.token_endpoint.clone().unwrap_or_default(),
                        client: self.client.clone().expect("registered before the exchange"),
                        access_token: t.access_token,
                        refresh_token: t.refresh_token,
                        expires_at: t.expires_in.map(|s| self.now.saturating_add(s)),
                        scopes: self.scopes.clone(),
                        grant: self.settings.grant,
                    })),
                    Err(e) => self.fail(e),
                }
            }
            other => {
                self.state = other;
                Step::Failed(AuthError::Unexpected)
            }
        }
    }

    /// The query of the redirect to `redirect_uri` (without the `?`).
    pub fn on_redirect(&mut self, query: &str) -> Step {
        if self.state != State::Authorizing {
            return Step::Failed(AuthError::Unexpected);
        }
        let pairs = parse_query(query);
        let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        if get("state").as_deref() != Some(self.state_param.as_str()) {
            return self.fail(AuthError::StateMismatch);
        }
        // RFC 9207: a present `iss` is compared with the issuer as a plain string, whether
        // or not the server advertised it; an advertised one must be present.
        let expected = self
            .issuer
            .clone()
            .or_else(|| self.meta.issuer.clone())
            .unwrap_or_default();
        match get("iss") {
            Some(iss) if iss != expected => {
                return self.fail(AuthError::IssMismatch {
                    expected,
                    found: Some(iss),
                })
            }
            None if self.meta.authorization_response_iss_parameter_supported => {
                return self.fail(AuthError::IssMismatch {
                    expected,
                    found: None,
                })
            }
            _ => {}
        }
        if let Some(error) = get("error") {
            return self.fail(AuthError::Denied { error });
        }
        let Some(code) = get("code") else {
            return self.fail(AuthError::Malformed {
                what: "authorization response",
                reason: "no code".into(),
            });
        };
        let client = self.client.clone().expect("registered before authorizing");
        let pairs = vec![
            ("grant_type".to_string(), "authorization_code".to_string()),
            ("code".to_string(), code),
            (
                "redirect_uri".to_string(),
                self.settings.redirect_uri.clone(),
            ),
            ("code_verifier".to_string(), self.verifier.clone()),
            ("resource".to_string(), self.resource.clone()),
        ];
        let endpoint = self.meta.token_endpoint.clone().unwrap_or_default();
        let audience = self.issuer.clone().unwrap_or_default();
        self.token_request(&endpoint, &client, &audience, pairs, State::Exchanging)
    }

    /// The signature of the last [`Step::Sign`]'s input, or why the shell could not sign.
    pub fn on_signature(&mut self, signature: Result<Vec<u8>, String>) -> Step {
        let State::Signing {
            endpoint,
            mut pairs,
            input,
            then,
        } = std::mem::replace(&mut self.state, State::Finished)
        else {
            return Step::Failed(AuthError::Unexpected);
        };
        let signature = match signature {
            Ok(s) => s,
            Err(reason) => return self.fail(AuthError::Signing { reason }),
        };
        pairs.push((
            "client_assertion_type".into(),
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into(),
        ));
        pairs.push((
            "client_assertion".into(),
            format!("{input}.{}", base64_url(&signature)),
        ));
        self.state = *then;
        self.fetch(form_post(&endpoint, Vec::new(), &pairs))
    }

    /// A token endpoint request with the client's authentication: sent now, or (for
    /// `private_key_jwt`) after the shell signed the assertion. The flow then waits in `then`.
    fn token_request(
        &mut self,
        endpoint: &str,
        client: &Client,
        audience: &str,
        mut pairs: Vec<(String, String)>,
        then: State,
    ) -> Step {
        let mut headers = Vec::new();
        match (client.auth_method, &client.client_secret) {
            (AuthMethod::PrivateKeyJwt, _) => {
                pairs.push(("client_id".into(), client.client_id.clone()));
                let algorithm = client.signing_algorithm.unwrap_or_default();
                let input = self.assertion_input(client, algorithm, audience);
                self.state = State::Signing {
                    endpoint: endpoint.to_string(),
                    pairs,
                    input: input.clone(),
                    then: Box::new(then),
                };
                return Step::Sign { algorithm, input };
            }
            (AuthMethod::ClientSecretBasic, Some(secret)) => {
                // RFC 6749 section 2.3.1: each part form-encoded before joining.
                let raw = format!(
                    "{}:{}",
                    percent_encode(&client.client_id),
                    percent_encode(secret)
                );
                headers.push((
                    "authorization".into(),
                    format!("Basic {}", base64_standard(raw.as_bytes())),
                ));
            }
            (AuthMethod::ClientSecretPost, Some(secret)) => {
                pairs.push(("client_id".into(), client.client_id.clone()));
                pairs.push(("client_secret".into(), secret.clone()));
            }
            _ => pairs.push(("client_id".into(), client.client_id.clone())),
        }
        self.state = then;
        self.fetch(form_post(endpoint, headers, &pairs))
    }

    /// The JWS signing input of a client assertion (RFC 7523 section 3): issued by and about
    /// the client, for the authorization server (its issuer identifier as the audience),
    /// valid for a few minutes, with a one-time `jti`.
    fn assertion_input(
        &self,
        client: &Client,
        algorithm: SigningAlgorithm,
        audience: &str,
    ) -> String {
        let header = serde_json::json!({"alg": algorithm.as_str(), "typ": "JWT"});
        let claims = serde_json::json!({
            "iss": client.client_id,
            "sub": client.client_id,
            "aud": audience,
            "iat": self.now,
            "exp": self.now.saturating_add(ASSERTION_LIFETIME),
            "jti": self.state_param,
        });
        format!(
            "{}.{}",
            base64_url(header.to_string().as_bytes()),
            base64_url(claims.to_string().as_bytes())
        )
    }

    fn fetch(&mut self, request: HttpRequest) -> Step {
        self.last_url = request.url.clone();
        Step::Fetch(request)
    }

    fn fail(&mut self, e: AuthError) -> Step {
        self.state = State::Finished;
        Step::Failed(e)
    }

    /// Discovery from the start: the resource metadata, unless the config named the
    /// authorization server's metadata.
    fn discover(&mut self) -> Step {
        if let Some(url) = self.settings.auth_server_metadata_url.clone() {
            self.resource = self.server.to_string();
            self.issuer = None;
            return self.next_server(vec![url], 0, false);
        }
        let mut urls = Vec::new();
        if let Some(u) = &self.challenge.resource_metadata {
            urls.push(u.clone());
        }
        for u in protected_resource_metadata_urls(&self.server, None) {
            if !urls.contains(&u) {
                urls.push(u);
            }
        }
        self.next_resource(urls, 0)
    }

    fn next_resource(&mut self, urls: Vec<String>, next: usize) -> Step {
        match urls.get(next) {
            Some(url) => {
                let request = get(url);
                self.state = State::Resource { urls, next };
                self.fetch(request)
            }
            // No resource metadata anywhere: a 2025-03-26 server, its own authorization
            // server at its origin.
            None => {
                self.resource = self.server.to_string();
                let origin = self.server.origin();
                self.issuer = Some(origin.clone());
                self.next_server(
                    vec![format!("{origin}/.well-known/oauth-authorization-server")],
                    0,
                    true,
                )
            }
        }
    }

    fn on_resource_metadata(&mut self, prm: ResourceMetadata) -> Step {
        let Some(published) = prm.resource else {
            return self.fail(AuthError::Malformed {
                what: "protected resource metadata",
                reason: "no resource".into(),
            });
        };
        match HttpUrl::parse(&published) {
            Some(p) if resource_matches(&p, &self.server) => {}
            _ => {
                return self.fail(AuthError::ResourceMismatch {
                    published,
                    server: self.server.to_string(),
                })
            }
        }
        let Some(issuer) = prm.authorization_servers.first().cloned() else {
            return self.fail(AuthError::NoAuthorizationServer);
        };
        let Some(issuer_url) = HttpUrl::parse(&issuer) else {
            return self.fail(AuthError::InvalidUrl { url: issuer });
        };
        self.resource = published;
        self.resource_scopes = prm.scopes_supported;
        self.issuer = Some(issuer);
        self.next_server(authorization_server_metadata_urls(&issuer_url), 0, false)
    }

    fn next_server(&mut self, urls: Vec<String>, next: usize, legacy: bool) -> Step {
        if let Some(url) = urls.get(next) {
            let request = get(url);
            self.state = State::Server { urls, next, legacy };
            return self.fetch(request);
        }
        if legacy {
            // 2025-03-26: no metadata, so the default endpoints at the server's origin.
            let origin = self.server.origin();
            self.meta = AuthServerMetadata {
                issuer: Some(origin.clone()),
                authorization_endpoint: Some(format!("{origin}/authorize")),
                token_endpoint: Some(format!("{origin}/token")),
                registration_endpoint: Some(format!("{origin}/register")),
                code_challenge_methods_supported: Some(vec!["S256".into()]),
                ..AuthServerMetadata::default()
            };
            return self.register();
        }
        self.fail(AuthError::NoServerMetadata {
            issuer: self.issuer.clone().unwrap_or_default(),
            tried: urls.join(", "),
        })
    }

    fn on_server_metadata(&mut self, meta: AuthServerMetadata) -> Step {
        let found = meta.issuer.clone().unwrap_or_default();
        match &self.issuer {
            Some(expected) if *expected != found => {
                let expected = expected.clone();
                return self.fail(AuthError::IssuerMismatch { expected, found });
            }
            Some(_) => {}
            None => self.issuer = Some(found),
        }
        let code_grant = self.settings.grant == Grant::AuthorizationCode;
        for (field, value, needed) in [
            (
                "authorization_endpoint",
                &meta.authorization_endpoint,
                code_grant,
            ),
            ("token_endpoint", &meta.token_endpoint, true),
        ] {
            if needed && value.as_deref().and_then(HttpUrl::parse).is_none() {
                return self.fail(AuthError::Malformed {
                    what: "authorization server metadata",
                    reason: format!("no valid {field}"),
                });
            }
        }
        let s256 = meta
            .code_challenge_methods_supported
            .as_ref()
            .is_some_and(|m| m.iter().any(|m| m == "S256"));
        if !s256 && code_grant {
            return self.fail(AuthError::PkceUnsupported);
        }
        self.meta = meta;
        self.register()
    }

    /// The client: from the config, else the one held for this issuer, else a client ID
    /// metadata document URL where supported, else dynamic registration.
    fn register(&mut self) -> Step {
        let issuer = self.issuer.clone().unwrap_or_default();
        if self.settings.grant == Grant::ClientCredentials {
            // Machine to machine: only a client the user configured has credentials.
            let Some(p) = &self.settings.pre_registered else {
                return self.fail(AuthError::NoRegistration { issuer });
            };
            self.client = Some(p.client());
            return self.client_credentials_request();
        }
        // Reached without a person only after a refused refresh.
        if !self.settings.interactive {
            return self.fail(AuthError::NeedsLogin);
        }
        if let Some(p) = &self.settings.pre_registered {
            self.client = Some(p.client());
            return self.authorization_request();
        }
        // Credentials are bound to the issuer that issued them: a client registered with
        // another authorization server is never presented to this one.
        if let Some(prev) = self.previous.as_ref().filter(|p| p.issuer == issuer) {
            self.client = Some(prev.client.clone());
            return self.authorization_request();
        }
        if self.meta.client_id_metadata_document_supported {
            if let Some(url) = &self.settings.client_metadata_url {
                self.client = Some(Client {
                    client_id: url.clone(),
                    client_secret: None,
                    auth_method: AuthMethod::None,
                    signing_algorithm: None,
                });
                return self.authorization_request();
            }
        }
        let Some(endpoint) = self.meta.registration_endpoint.clone() else {
            return self.fail(AuthError::NoRegistration { issuer });
        };
        let supported = self.meta.token_endpoint_auth_methods_supported.clone();
        let method = match supported {
            None => AuthMethod::None,
            Some(list) if list.iter().any(|m| m == "none") => AuthMethod::None,
            Some(list) => list
                .iter()
                .filter_map(|m| AuthMethod::parse(m))
                .next()
                .unwrap_or(AuthMethod::None),
        };
        let body = serde_json::json!({
            "client_name": self.settings.client_name,
            "redirect_uris": [self.settings.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method.as_str(),
            "application_type": "native",
        });
        self.state = State::Registering { method };
        self.fetch(HttpRequest {
            method: HttpMethod::Post,
            url: endpoint,
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("accept".into(), "application/json".into()),
            ],
            body: Some(body.to_string()),
        })
    }

    /// Scopes: the config's; else the challenge's (on a step-up, with the ones asked for
    /// before), else the resource's `scopes_supported`, else none; plus `offline_access`
    /// where the authorization server offers it, for a refresh token.
    fn choose_scopes(&self) -> Vec<String> {
        let mut scopes: Vec<String> = if let Some(s) = &self.settings.scopes {
            s.clone()
        } else if let Some(s) = &self.challenge.scope {
            s.clone()
        } else {
            self.resource_scopes.clone().unwrap_or_default()
        };
        if self.step_up {
            if let Some(prev) = &self.previous {
                let mut all = prev.scopes.clone();
                all.retain(|s| !scopes.contains(s));
                all.append(&mut scopes);
                scopes = all;
            }
        }
        // A refresh token is for a person's grant; client credentials are simply used again.
        let offered = self.settings.grant == Grant::AuthorizationCode
            && self
                .meta
                .scopes_supported
                .as_ref()
                .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
        if offered && !scopes.iter().any(|s| s == "offline_access") {
            scopes.push("offline_access".into());
        }
        scopes
    }

    /// The client-credentials token request (RFC 6749 section 4.4), with the resource.
    fn client_credentials_request(&mut self) -> Step {
        self.scopes = self.choose_scopes();
        let client = self.client.clone().expect("set by register");
        let mut pairs = vec![("grant_type".to_string(), "client_credentials".to_string())];
        if !self.scopes.is_empty() {
            pairs.push(("scope".into(), self.scopes.join(" ")));
        }
        pairs.push(("resource".into(), self.resource.clone()));
        let endpoint = self.meta.token_endpoint.clone().unwrap_or_default();
        let audience = self.issuer.clone().unwrap_or_default();
        self.token_request(&endpoint, &client, &audience, pairs, State::Exchanging)
    }

    fn authorization_request(&mut self) -> Step {
        self.scopes = self.choose_scopes();
        let Some(endpoint) = self
            .meta
            .authorization_endpoint
            .as_deref()
            .and_then(HttpUrl::parse)
        else {
            return self.fail(AuthError::Malformed {
                what: "authorization server metadata",
                reason: "no valid authorization_endpoint".into(),
            });
        };
        let client = self.client.clone().expect("set by register");
        let challenge = pkce_challenge(&self.verifier);
        let scope = self.scopes.join(" ");
        let mut pairs = vec![
            ("response_type", "code"),
            ("client_id", client.client_id.as_str()),
            ("redirect_uri", self.settings.redirect_uri.as_str()),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("state", self.state_param.as_str()),
        ];
        if !scope.is_empty() {
            pairs.push(("scope", scope.as_str()));
        }
        pairs.push(("resource", self.resource.as_str()));
        let url = endpoint.with_query(&pairs);
        self.state = State::Authorizing;
        Step::Authorize { url }
    }
}

fn get(url: &str) -> HttpRequest {
    HttpRequest {
        method: HttpMethod::Get,
        url: url.to_string(),
        headers: vec![("accept".into(), "application/json".into())],
        body: None,
    }
}

/// A form POST to the token endpoint.
fn form_post(
    endpoint: &str,
    mut headers: Vec<(String, String)>,
    pairs: &[(String, String)],
) -> HttpRequest {
    headers.insert(
        0,
        (
            "content-type".to_string(),
            "application/x-www-form-urlencoded".to_string(),
        ),
    );
    headers.insert(1, ("accept".to_string(), "application/json".to_string()));
    let borrowed: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    HttpRequest {
        method: HttpMethod::Post,
        url: endpoint.to_string(),
        headers,
        body: Some(form_encode(&borrowed)),
    }
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8], what: &'static str) -> Result<T, AuthError> {
    if body.len() > MAX_DOCUMENT {
        return Err(AuthError::Malformed {
            what,
            reason: format!("larger than {MAX_DOCUMENT} bytes"),
        });
    }
    serde_json::from_slice(body).map_err(|e| AuthError::Malformed {
        what,
        reason: e.to_string(),
    })
}

#[derive(Deserialize)]
struct Registration {
    client_id: String,
    client_secret: Option<String>,
    token_endpoint_auth_method: Option<String>,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    token_type: Option<String>,
    expires_in: Option<u64>,
    refresh_token: Option<String>,
}

fn parse_tokens(body: &[u8]) -> Result<TokenResponse, AuthError> {
    // Never quote the body: it holds tokens.
    let t: TokenResponse = serde_json::from_slice(body).map_err(|_| AuthError::Malformed {
        what: "token response",
        reason: "not a JSON object with an access_token".into(),
    })?;
    match t.token_type.as_deref() {
        Some(tt) if !tt.eq_ignore_ascii_case("bearer") => Err(AuthError::Malformed {
            what: "token response",
            reason: format!("token type {tt} is not Bearer"),
        }),
        _ if t.access_token.is_empty() => Err(AuthError::Malformed {
            what: "token response",
            reason: "empty access_token".into(),
        }),
        _ => Ok(t),
    }
}

fn endpoint_error(endpoint: &'static str, status: u16, body: &[u8]) -> AuthError {
    #[derive(Deserialize)]
    struct OAuthError {
        error: String,
    }
    let error = serde_json::from_slice::<OAuthError>(body)
        .ok()
        .map(|e| e.error)
        .filter(|e| e.len() <= 64 && e.bytes().all(|b| b.is_ascii_graphic()));
    AuthError::Endpoint {
        endpoint,
        status,
        error,
    }
}
