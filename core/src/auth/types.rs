//! The flow's vocabulary: requests it asks for, responses it is fed, the settings it starts
//! from, the credentials it produces and the errors it ends with.

use serde::{Deserialize, Serialize};
use std::fmt;

/// GET or POST: all the flow ever asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum HttpMethod {
    /// Metadata documents.
    Get,
    /// Registration and token requests.
    Post,
}

/// One HTTP request for the shell to perform. Its `Debug` hides the body and the
/// `Authorization` header, which may carry secrets.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct HttpRequest {
    /// GET or POST.
    pub method: HttpMethod,
    /// The absolute URL.
    pub url: String,
    /// Headers to send (lowercase names).
    pub headers: Vec<(String, String)>,
    /// The body, when there is one (its content type is in `headers`).
    pub body: Option<String>,
}

impl fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("url", &self.url)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.as_str(),
                            if k == "authorization" {
                                "<redacted>"
                            } else {
                                v
                            },
                        )
                    })
                    .collect::<Vec<_>>(),
            )
            .field("body", &self.body.as_ref().map(|b| b.len()))
            .finish()
    }
}

/// What came back: a status and a (bounded) body, or no answer at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpResponse {
    /// The server answered.
    Answered {
        /// The HTTP status.
        status: u16,
        /// The body (the shell reads at most its limit of it).
        body: Vec<u8>,
    },
    /// The request failed before an answer (connect, TLS, timeout), in words.
    Unreachable(String),
}

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    /// A public client: `client_id` in the body, no secret.
    #[default]
    None,
    /// HTTP Basic with the client id and secret.
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the form body.
    ClientSecretPost,
    /// A JWT signed with the client's private key (RFC 7523 section 2.2), made per request.
    PrivateKeyJwt,
}

impl AuthMethod {
    /// The registered name (`none`, `client_secret_basic`, `client_secret_post`,
    /// `private_key_jwt`).
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::None => "none",
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
            AuthMethod::PrivateKeyJwt => "private_key_jwt",
        }
    }

    /// The method a registered name stands for; `None` for methods this client lacks.
    pub fn parse(s: &str) -> Option<AuthMethod> {
        match s {
            "none" => Some(AuthMethod::None),
            "client_secret_basic" => Some(AuthMethod::ClientSecretBasic),
            "client_secret_post" => Some(AuthMethod::ClientSecretPost),
            "private_key_jwt" => Some(AuthMethod::PrivateKeyJwt),
            _ => None,
        }
    }
}

/// How the client gets its tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Grant {
    /// A person authorizes in a browser; the code comes back on the loopback redirect.
    #[default]
    AuthorizationCode,
    /// Machine to machine: the client's own credentials buy the token, no person involved
    /// (the MCP client-credentials extension). Needs a pre-registered client.
    ClientCredentials,
}

/// The signature algorithm of a `private_key_jwt` client assertion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum SigningAlgorithm {
    /// ECDSA with P-256 and SHA-256.
    #[default]
    ES256,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    RS256,
}

impl SigningAlgorithm {
    /// The JOSE name (`ES256`, `RS256`).
    pub fn as_str(self) -> &'static str {
        match self {
            SigningAlgorithm::ES256 => "ES256",
            SigningAlgorithm::RS256 => "RS256",
        }
    }

    /// The algorithm a JOSE name stands for; `None` for ones this client cannot sign with.
    pub fn parse(s: &str) -> Option<SigningAlgorithm> {
        match s {
            "ES256" => Some(SigningAlgorithm::ES256),
            "RS256" => Some(SigningAlgorithm::RS256),
            _ => None,
        }
    }
}

/// A client registration at one authorization server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Client {
    /// The client id (for a client ID metadata document, its URL).
    pub client_id: String,
    /// The secret, for confidential clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// How to authenticate at the token endpoint.
    #[serde(default)]
    pub auth_method: AuthMethod,
    /// The assertion's algorithm, for `private_key_jwt` (the key itself stays with the
    /// shell, which signs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_algorithm: Option<SigningAlgorithm>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("auth_method", &self.auth_method)
            .field("signing_algorithm", &self.signing_algorithm)
            .finish()
    }
}

/// A client the user registered by hand, from the server's config.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct PreRegistered {
    /// The client id.
    pub client_id: String,
    /// The secret, if any.
    pub client_secret: Option<String>,
    /// The token endpoint method; without one, Basic when there is a secret, else `none`.
    pub auth_method: Option<AuthMethod>,
    /// The `private_key_jwt` assertion's algorithm (ES256 when not given).
    pub signing_algorithm: Option<SigningAlgorithm>,
}

impl fmt::Debug for PreRegistered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreRegistered")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("auth_method", &self.auth_method)
            .field("signing_algorithm", &self.signing_algorithm)
            .finish()
    }
}

impl PreRegistered {
    /// The client it stands for: its method, or Basic when it has a secret, else `none`.
    pub fn client(&self) -> Client {
        let auth_method = self.auth_method.unwrap_or(if self.client_secret.is_some() {
            AuthMethod::ClientSecretBasic
        } else {
            AuthMethod::None
        });
        Client {
            client_id: self.client_id.clone(),
            client_secret: self.client_secret.clone(),
            auth_method,
            signing_algorithm: self.signing_algorithm,
        }
    }
}

/// Everything a flow starts from besides the server's answers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthSettings {
    /// The MCP server's URL (the protected resource).
    pub server_url: String,
    /// Where the authorization server sends the user back (`http://127.0.0.1:PORT/callback`).
    pub redirect_uri: String,
    /// The name shown to the user at registration.
    pub client_name: String,
    /// A pre-registered client from the config; used before anything else.
    pub pre_registered: Option<PreRegistered>,
    /// This client's metadata document URL, used as the client id where the server supports
    /// client ID metadata documents.
    pub client_metadata_url: Option<String>,
    /// Scopes the config asks for, instead of the server's suggestions.
    pub scopes: Option<Vec<String>>,
    /// The authorization server's metadata URL from the config, skipping discovery.
    pub auth_server_metadata_url: Option<String>,
    /// Whether the user can be sent to the authorization endpoint. When not, a flow that
    /// would need that ends with [`AuthError::NeedsLogin`] before registering anything.
    /// (The client-credentials grant never needs a person.)
    pub interactive: bool,
    /// How tokens are obtained.
    pub grant: Grant,
}

/// The random input of one flow: the PKCE verifier and the `state` value, from the shell's
/// operating-system RNG.
#[derive(Clone, PartialEq, Eq)]
pub struct Entropy {
    /// 32 random bytes for the PKCE code verifier (43 characters once encoded).
    pub verifier: [u8; 32],
    /// 16 random bytes for `state`.
    pub state: [u8; 16],
}

impl fmt::Debug for Entropy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Entropy(<redacted>)")
    }
}

/// What a completed flow produced, as the token store keeps it: one entry per server and
/// authorization server (`issuer`). `Debug` hides the tokens and the secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// The authorization server's issuer identifier.
    pub issuer: String,
    /// The resource the tokens are for, as sent in `resource`.
    pub resource: String,
    /// Where to refresh.
    pub token_endpoint: String,
    /// The client registration at `issuer`.
    pub client: Client,
    /// The access token.
    pub access_token: String,
    /// The refresh token, when one was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires, in seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The scopes requested for these tokens (kept for step-up: the next request asks for
    /// these plus the challenged ones).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The grant that produced them: client-credentials tokens are renewed with the same
    /// grant, without a person, when they expire.
    #[serde(default)]
    pub grant: Grant,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("issuer", &self.issuer)
            .field("resource", &self.resource)
            .field("token_endpoint", &self.token_endpoint)
            .field("client", &self.client)
            .field("access_token", &"<redacted>")
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<redacted>"),
            )
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .field("grant", &self.grant)
            .finish()
    }
}

/// Why authorization did not succeed. No variant holds a token or secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AuthError {
    /// The user has to log in (`switchboard login SERVER`); the run was not interactive.
    #[error("needs login")]
    NeedsLogin,
    /// A URL the flow was given or found is not an absolute http(s) URL.
    #[error("invalid URL {url}")]
    InvalidUrl {
        /// The URL.
        url: String,
    },
    /// A request got no answer.
    #[error("{url} is unreachable: {reason}")]
    Unreachable {
        /// The URL.
        url: String,
        /// Why, in the shell's words.
        reason: String,
    },
    /// The protected resource metadata names another resource than this server.
    #[error("the protected resource metadata is for {published}, not {server}")]
    ResourceMismatch {
        /// The `resource` it published.
        published: String,
        /// The server's URL.
        server: String,
    },
    /// The protected resource metadata names no authorization server.
    #[error("the protected resource metadata names no authorization server")]
    NoAuthorizationServer,
    /// No authorization server metadata was found at any of its well-known URLs.
    #[error("no authorization server metadata for {issuer} (tried {tried})")]
    NoServerMetadata {
        /// The issuer.
        issuer: String,
        /// The URLs tried, comma-separated.
        tried: String,
    },
    /// The metadata's `issuer` is not the authorization server it was fetched for.
    #[error("the authorization server metadata names issuer {found}, expected {expected}")]
    IssuerMismatch {
        /// The issuer it was fetched for.
        expected: String,
        /// The issuer it names.
        found: String,
    },
    /// A document did not parse or lacked a required field.
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// Which document.
        what: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// The authorization server does not support PKCE with S256.
    #[error("the authorization server does not support PKCE with S256")]
    PkceUnsupported,
    /// No way to get a client id: no pre-registered client, no client ID metadata document
    /// support, no registration endpoint.
    #[error("no way to register a client with {issuer}: configure a client id for this server")]
    NoRegistration {
        /// The issuer.
        issuer: String,
    },
    /// An endpoint answered with an error status.
    #[error("{endpoint} endpoint answered HTTP {status}{}", error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default())]
    Endpoint {
        /// `registration` or `token`.
        endpoint: &'static str,
        /// The status.
        status: u16,
        /// The OAuth `error` code, when the body had one.
        error: Option<String>,
    },
    /// The authorization response was an error (`access_denied`, ...).
    #[error("authorization failed: {error}")]
    Denied {
        /// The OAuth `error` code.
        error: String,
    },
    /// The authorization response's `state` is not the one sent.
    #[error("the authorization response has the wrong state")]
    StateMismatch,
    /// The authorization response's `iss` is missing where advertised, or not the issuer.
    #[error("the authorization response's issuer is {}, expected {expected}", found.as_deref().unwrap_or("missing"))]
    IssMismatch {
        /// The issuer.
        expected: String,
        /// The `iss` it carried.
        found: Option<String>,
    },
    /// The server still refuses the token after every permitted retry.
    #[error("the server refused the credentials (HTTP {status}) after {attempts} authorization attempts")]
    Rejected {
        /// The last status (401 or 403).
        status: u16,
        /// How many times the flow ran for this request.
        attempts: u32,
    },
    /// `403` without `insufficient_scope`: another authorization would not help.
    #[error("the server denied access (HTTP 403)")]
    Forbidden,
    /// A client assertion could not be signed (the key is missing, unreadable or of
    /// another kind than the algorithm); never names the key's contents.
    #[error("could not sign the client assertion: {reason}")]
    Signing {
        /// Why, in the shell's words.
        reason: String,
    },
    /// A command that makes headers (`headersHelper`, a `!command` value) failed when run
    /// again after a refusal; never quotes what it printed.
    #[error("{reason}")]
    HeaderCommand {
        /// Why, in the shell's words.
        reason: String,
    },
    /// The flow was fed an input it was not waiting for.
    #[error("the authorization flow is not waiting for that")]
    Unexpected,
}
