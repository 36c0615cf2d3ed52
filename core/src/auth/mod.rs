//! OAuth 2.1 authorization for remote MCP servers, as pure decisions.
//!
//! The MCP authorization specification (2025-03-26 through 2026-07-28) is a chain of HTTP
//! exchanges: a `401` names the protected resource metadata (RFC 9728), which names the
//! authorization server, whose metadata (RFC 8414, OpenID discovery) names the endpoints; the
//! client registers (pre-registered, a client ID metadata document URL, or dynamic
//! registration), sends the user to the authorization endpoint with PKCE, and trades the code
//! for tokens. Every decision in that chain lives here, fed by the shell:
//!
//! - [`Flow`]: one authorization or refresh. [`Flow::authorize`] / [`Flow::refresh`] start it
//!   and return the first [`Step`]; the shell performs each [`Step::Fetch`] and hands the
//!   answer to [`Flow::on_response`], opens [`Step::Authorize`]'s URL and hands the redirect's
//!   query to [`Flow::on_redirect`], signs [`Step::Sign`]'s input (a `private_key_jwt`
//!   client assertion) and hands the signature to [`Flow::on_signature`], and stores
//!   [`Step::Done`]'s [`Credentials`]. [`Grant::ClientCredentials`] runs the same discovery
//!   and then asks for tokens with the client's own credentials, without a person.
//! - [`Guard`]: what to do about a `401`/`403` from the MCP server (refresh, authorize again,
//!   step up the scope, or give up), with the retry limits that stop a `401` storm.
//!
//! Inputs are HTTP responses, the wall-clock time in seconds and random bytes ([`Entropy`]);
//! nothing here performs IO or reads a clock. Tokens and secrets never appear in an
//! [`AuthError`] or in a `Debug` rendering.

mod challenge;
pub mod encode;
mod flow;
mod guard;
mod metadata;
mod types;
mod url;

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;

pub use challenge::{parse_www_authenticate, Challenge};
pub use flow::{Flow, Step};
pub use guard::{
    Guard, GuardCounters, Reaction, MAX_REAUTHORIZATIONS, MAX_STEP_UPS, REFRESH_MARGIN_SECS,
};
pub use metadata::{
    authorization_server_metadata_urls, protected_resource_metadata_urls, resource_matches,
    AuthServerMetadata, ResourceMetadata,
};
pub use types::{
    AuthError, AuthMethod, AuthSettings, Client, Credentials, Entropy, Grant, HttpMethod,
    HttpRequest, HttpResponse, PreRegistered, SigningAlgorithm,
};
pub use url::HttpUrl;
