//! Discovery documents and where to look for them: protected resource metadata (RFC 9728)
//! and authorization server metadata (RFC 8414, OpenID Connect Discovery), with the path
//! variants the MCP specification lists, in its order.

use super::url::HttpUrl;
use serde::Deserialize;

/// The protected resource metadata fields the flow reads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ResourceMetadata {
    /// The resource identifier, sent back byte for byte in `resource`.
    pub resource: Option<String>,
    /// Authorization servers (issuer identifiers); the first is used.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// Scopes the resource suggests.
    pub scopes_supported: Option<Vec<String>>,
}

/// The authorization server metadata fields the flow reads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
pub struct AuthServerMetadata {
    /// Must equal the issuer the document was fetched for.
    pub issuer: Option<String>,
    /// Where the user authorizes.
    pub authorization_endpoint: Option<String>,
    /// Where codes and refresh tokens become tokens.
    pub token_endpoint: Option<String>,
    /// Dynamic client registration (RFC 7591).
    pub registration_endpoint: Option<String>,
    /// Scopes the server knows (`offline_access` among them means refresh tokens).
    pub scopes_supported: Option<Vec<String>>,
    /// PKCE methods; S256 is required.
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// Token endpoint authentication methods.
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// RFC 9207: the authorization response carries `iss`.
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
    /// Client ID metadata documents are accepted as client ids.
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
}

/// Where to look for the protected resource metadata of `server`, in order: the
/// `resource_metadata` of the challenge when there is one, else the path-specific well-known
/// URL, then the root one.
pub fn protected_resource_metadata_urls(
    server: &HttpUrl,
    from_challenge: Option<&str>,
) -> Vec<String> {
    if let Some(url) = from_challenge {
        return vec![url.to_string()];
    }
    let base = format!("{}/.well-known/oauth-protected-resource", server.origin());
    let path = server.trimmed_path();
    if path.is_empty() {
        vec![base]
    } else {
        vec![format!("{base}{path}"), base]
    }
}

/// Where to look for the metadata of the authorization server `issuer`, in order. With a
/// path: RFC 8414 path insertion, OpenID path insertion, OpenID path appending; without:
/// RFC 8414, then OpenID.
pub fn authorization_server_metadata_urls(issuer: &HttpUrl) -> Vec<String> {
    let origin = issuer.origin();
    let path = issuer.trimmed_path();
    if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// Whether the resource a server's metadata published covers `server`: the same origin and
/// a path that is the server's path or one of its parent paths, by whole segments.
pub fn resource_matches(published: &HttpUrl, server: &HttpUrl) -> bool {
    if !published.same_origin(server) {
        return false;
    }
    let p = published.trimmed_path();
    let s = server.trimmed_path();
    s == p || (s.starts_with(p) && s[p.len()..].starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> HttpUrl {
        HttpUrl::parse(s).unwrap()
    }

    #[test]
    fn well_known_urls_follow_the_specification_order() {
        assert_eq!(
            protected_resource_metadata_urls(&u("http://h:1/mcp/"), None),
            [
                "http://h:1/.well-known/oauth-protected-resource/mcp",
                "http://h:1/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            protected_resource_metadata_urls(&u("http://h:1"), None),
            ["http://h:1/.well-known/oauth-protected-resource"]
        );
        assert_eq!(
            protected_resource_metadata_urls(&u("http://h:1/mcp"), Some("http://x/m.json")),
            ["http://x/m.json"]
        );
        assert_eq!(
            authorization_server_metadata_urls(&u("https://a/tenant1")),
            [
                "https://a/.well-known/oauth-authorization-server/tenant1",
                "https://a/.well-known/openid-configuration/tenant1",
                "https://a/tenant1/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            authorization_server_metadata_urls(&u("https://a/")),
            [
                "https://a/.well-known/oauth-authorization-server",
                "https://a/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn resource_covers_its_own_path_and_children_only() {
        assert!(resource_matches(&u("http://h:1/mcp"), &u("http://h:1/mcp")));
        assert!(resource_matches(&u("http://h:1"), &u("http://h:1/mcp")));
        assert!(resource_matches(&u("http://H:1/"), &u("http://h:1/mcp/x")));
        assert!(!resource_matches(&u("http://h:1/mc"), &u("http://h:1/mcp")));
        assert!(!resource_matches(
            &u("https://evil.example.com/mcp"),
            &u("http://h:1/mcp")
        ));
        assert!(!resource_matches(
            &u("http://h:2/mcp"),
            &u("http://h:1/mcp")
        ));
    }
}
