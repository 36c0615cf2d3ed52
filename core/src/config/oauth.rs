//! A server's OAuth settings, read from its entry's `oauth` object in any client's spelling
//! (Claude Code's `clientId`, `callbackPort`, `authServerMetadataUrl`, `scopes`; snake_case as
//! in Codex and VS Code): a pre-registered client, a fixed redirect port, the authorization
//! server's metadata URL, the scopes to ask for, and this client's metadata document URL.
//! For machine-to-machine servers: `grantType: "client_credentials"` with the client's secret
//! or its private key (`privateKey` PEM text or `privateKeyFile`, signing `private_key_jwt`
//! assertions with `signingAlgorithm` ES256 or RS256).

use super::ServerConfig;
use crate::auth::{AuthMethod, Grant, PreRegistered, SigningAlgorithm};
use serde_json::Value;
use std::fmt;

/// Where a `private_key_jwt` client's private key is: PEM text in the config, or a file.
/// `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub enum PrivateKey {
    /// PEM text (`privateKey`).
    Pem(String),
    /// A PEM file's path (`privateKeyFile`), read by the shell.
    File(String),
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrivateKey::Pem(_) => f.write_str("Pem(<redacted>)"),
            PrivateKey::File(path) => f.debug_tuple("File").field(path).finish(),
        }
    }
}

/// The `oauth` settings of one server; every field optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OAuthConfig {
    /// A pre-registered client (`clientId`, `clientSecret`, `tokenEndpointAuthMethod`).
    pub client: Option<PreRegistered>,
    /// The loopback redirect port (`callbackPort`); any free port when absent.
    pub callback_port: Option<u16>,
    /// The authorization server's metadata URL (`authServerMetadataUrl`), skipping discovery.
    pub auth_server_metadata_url: Option<String>,
    /// The scopes to ask for (`scopes`, a list or a space-separated string).
    pub scopes: Option<Vec<String>>,
    /// This client's metadata document URL (`clientMetadataUrl`), used as its client id by
    /// authorization servers that support client ID metadata documents.
    pub client_metadata_url: Option<String>,
    /// How tokens are obtained (`grantType`): a person's authorization (default) or the
    /// client-credentials grant, which needs `clientId`.
    pub grant: Grant,
    /// The `private_key_jwt` client's key (`privateKey` or `privateKeyFile`).
    pub private_key: Option<PrivateKey>,
}

fn field<'a>(obj: &'a serde_json::Map<String, Value>, names: &[&str]) -> Option<&'a Value> {
    names
        .iter()
        .find_map(|n| obj.get(*n))
        .filter(|v| !v.is_null())
}

fn string(obj: &serde_json::Map<String, Value>, names: &[&str]) -> Result<Option<String>, String> {
    match field(obj, names) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("\"oauth.{}\" must be a string", names[0])),
    }
}

/// The `oauth` settings of `config`; `None` when it has none, an error naming the field when
/// one has the wrong type.
pub fn oauth_config(config: &ServerConfig) -> Result<Option<OAuthConfig>, String> {
    let v = match config.extra.get("oauth").filter(|v| !v.is_null()) {
        // opencode: `"oauth": false` turns OAuth off.
        Some(Value::Bool(false)) => return Ok(None),
        Some(v) => v,
        None => return cursor_auth(config),
    };
    let Some(obj) = v.as_object() else {
        return Err("\"oauth\" must be an object".into());
    };
    let client_id = string(obj, &["clientId", "client_id"])?;
    let client_secret = string(obj, &["clientSecret", "client_secret"])?;
    let private_key = match (
        string(
            obj,
            &[
                "privateKey",
                "private_key",
                "privateKeyPem",
                "private_key_pem",
            ],
        )?,
        string(obj, &["privateKeyFile", "private_key_file"])?,
    ) {
        (Some(_), Some(_)) => {
            return Err(
                "\"oauth.privateKey\" and \"oauth.privateKeyFile\" exclude each other".into(),
            )
        }
        (Some(pem), None) => Some(PrivateKey::Pem(pem)),
        (None, Some(path)) => Some(PrivateKey::File(path)),
        (None, None) => None,
    };
    let method = match string(obj, &["tokenEndpointAuthMethod", "token_endpoint_auth_method"])? {
        None if private_key.is_some() => Some(AuthMethod::PrivateKeyJwt),
        None => None,
        Some(m) => Some(AuthMethod::parse(&m).ok_or_else(|| {
            format!("\"oauth.tokenEndpointAuthMethod\" must be none, client_secret_basic, client_secret_post or private_key_jwt, got {m:?}")
        })?),
    };
    if method == Some(AuthMethod::PrivateKeyJwt) && private_key.is_none() {
        return Err("\"oauth.tokenEndpointAuthMethod\" private_key_jwt needs \"oauth.privateKey\" or \"oauth.privateKeyFile\"".into());
    }
    let signing_algorithm = match string(obj, &["signingAlgorithm", "signing_algorithm"])? {
        None => None,
        Some(a) => Some(SigningAlgorithm::parse(&a).ok_or_else(|| {
            format!("\"oauth.signingAlgorithm\" must be ES256 or RS256, got {a:?}")
        })?),
    };
    let grant = match string(obj, &["grantType", "grant_type"])?.as_deref() {
        None | Some("authorization_code") => Grant::AuthorizationCode,
        Some("client_credentials") => Grant::ClientCredentials,
        Some(g) => {
            return Err(format!(
                "\"oauth.grantType\" must be authorization_code or client_credentials, got {g:?}"
            ))
        }
    };
    let client = match client_id {
        Some(client_id) => Some(PreRegistered {
            client_id,
            client_secret,
            auth_method: method,
            signing_algorithm,
        }),
        None if client_secret.is_some() || private_key.is_some() => {
            return Err(
                "\"oauth.clientSecret\" and \"oauth.privateKey\" need \"oauth.clientId\"".into(),
            )
        }
        None if grant == Grant::ClientCredentials => {
            return Err("\"oauth.grantType\" client_credentials needs \"oauth.clientId\"".into())
        }
        None => None,
    };
    let callback_port = match field(obj, &["callbackPort", "callback_port"]) {
        None => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .filter(|p| *p > 0)
                .ok_or("\"oauth.callbackPort\" must be a port number (1-65535)")?,
        ),
    };
    let scopes = match field(obj, &["scopes", "scope"]) {
        None => None,
        Some(Value::String(s)) => Some(s.split_whitespace().map(str::to_string).collect()),
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or("\"oauth.scopes\" must be a list of strings")?,
        ),
        Some(_) => return Err("\"oauth.scopes\" must be a list of strings".into()),
    };
    Ok(Some(OAuthConfig {
        client,
        callback_port,
        auth_server_metadata_url: string(
            obj,
            &["authServerMetadataUrl", "auth_server_metadata_url"],
        )?,
        scopes,
        client_metadata_url: string(obj, &["clientMetadataUrl", "client_metadata_url"])?,
        grant,
        private_key,
    }))
}

/// Cursor's static OAuth client: `auth: { CLIENT_ID, CLIENT_SECRET, scopes }` (upper-case
/// keys as Cursor writes them). An `auth` section without `CLIENT_ID` is not Cursor's and is
/// left to the embedder's credential provider.
fn cursor_auth(config: &ServerConfig) -> Result<Option<OAuthConfig>, String> {
    let Some(obj) = config
        .auth
        .as_ref()
        .and_then(Value::as_object)
        .filter(|o| o.contains_key("CLIENT_ID"))
    else {
        return Ok(None);
    };
    let text = |k: &str| match obj.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("\"auth.{k}\" must be a string")),
    };
    let client_id = text("CLIENT_ID")?.unwrap_or_default();
    let client_secret = text("CLIENT_SECRET")?;
    let scopes = match obj.get("scopes") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or("\"auth.scopes\" must be a list of strings")?,
        ),
        Some(_) => return Err("\"auth.scopes\" must be a list of strings".into()),
    };
    Ok(Some(OAuthConfig {
        client: Some(PreRegistered {
            client_id,
            client_secret,
            auth_method: None,
            signing_algorithm: None,
        }),
        scopes,
        ..OAuthConfig::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(oauth: Value) -> ServerConfig {
        let mut c = ServerConfig::default();
        c.extra.insert("oauth".into(), oauth);
        c
    }

    #[test]
    fn reads_every_spelling() {
        let c = oauth_config(&with(serde_json::json!({
            "clientId": "id", "clientSecret": "s", "callbackPort": 8765,
            "authServerMetadataUrl": "https://as/.well-known/oauth-authorization-server",
            "scopes": "a b", "token_endpoint_auth_method": "client_secret_post"
        })))
        .unwrap()
        .unwrap();
        let client = c.client.unwrap();
        assert_eq!(client.client_id, "id");
        assert_eq!(client.auth_method, Some(AuthMethod::ClientSecretPost));
        assert_eq!(c.callback_port, Some(8765));
        assert_eq!(c.scopes, Some(vec!["a".into(), "b".into()]));
        assert_eq!(oauth_config(&ServerConfig::default()), Ok(None));
        assert_eq!(c.grant, Grant::AuthorizationCode);
    }

    #[test]
    fn cursor_auth_and_opencode_off() {
        let mut c = ServerConfig {
            auth: Some(
                serde_json::json!({"CLIENT_ID": "cid", "CLIENT_SECRET": "cs", "scopes": ["read", "write"]}),
            ),
            ..ServerConfig::default()
        };
        let o = oauth_config(&c).unwrap().unwrap();
        let client = o.client.unwrap();
        assert_eq!(
            (client.client_id.as_str(), client.client_secret.as_deref()),
            ("cid", Some("cs"))
        );
        assert_eq!(o.scopes, Some(vec!["read".into(), "write".into()]));
        // Another shape of `auth` is the embedder's business.
        c.auth = Some(serde_json::json!({"token": "x"}));
        assert_eq!(oauth_config(&c), Ok(None));
        assert_eq!(oauth_config(&with(serde_json::json!(false))), Ok(None));
    }

    #[test]
    fn client_credentials_with_a_private_key() {
        let c = oauth_config(&with(serde_json::json!({
            "grantType": "client_credentials", "clientId": "m2m",
            "privateKey": "-----BEGIN PRIVATE KEY-----", "signingAlgorithm": "RS256"
        })))
        .unwrap()
        .unwrap();
        assert_eq!(c.grant, Grant::ClientCredentials);
        let client = c.client.unwrap();
        assert_eq!(client.auth_method, Some(AuthMethod::PrivateKeyJwt));
        assert_eq!(client.signing_algorithm, Some(SigningAlgorithm::RS256));
        assert!(!format!("{:?}", c.private_key).contains("BEGIN"));
    }

    #[test]
    fn wrong_types_name_the_field() {
        for (bad, word) in [
            (serde_json::json!({"callbackPort": 70000}), "callbackPort"),
            (serde_json::json!({"clientSecret": "s"}), "clientId"),
            (serde_json::json!({"scopes": [1]}), "scopes"),
            (
                serde_json::json!({"clientId": "x", "tokenEndpointAuthMethod": "jwt"}),
                "tokenEndpointAuthMethod",
            ),
            (serde_json::json!("x"), "object"),
            (
                serde_json::json!({"grantType": "client_credentials"}),
                "clientId",
            ),
            (serde_json::json!({"grantType": "password"}), "grantType"),
            (
                serde_json::json!({"clientId": "x", "tokenEndpointAuthMethod": "private_key_jwt"}),
                "privateKey",
            ),
            (
                serde_json::json!({"clientId": "x", "privateKey": "k", "signingAlgorithm": "HS256"}),
                "signingAlgorithm",
            ),
        ] {
            let e = oauth_config(&with(bad)).unwrap_err();
            assert!(e.contains(word), "{e}");
        }
    }
}
