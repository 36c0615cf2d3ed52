//! Scripted traces of the flow against the answers a server would give, and property tests
//! of the refusal guard. No network: each test plays the server.

use super::*;
use proptest::prelude::*;

const SERVER: &str = "http://rs.test:1/mcp";
const ISSUER: &str = "http://as.test:2";

fn settings() -> AuthSettings {
    AuthSettings {
        server_url: SERVER.into(),
        redirect_uri: "http://127.0.0.1:9/callback".into(),
        client_name: "switchboard".into(),
        interactive: true,
        ..AuthSettings::default()
    }
}

fn entropy() -> Entropy {
    Entropy {
        verifier: [7; 32],
        state: [9; 16],
    }
}

fn ok(json: serde_json::Value) -> HttpResponse {
    HttpResponse::Answered {
        status: 200,
        body: json.to_string().into_bytes(),
    }
}

fn status(code: u16) -> HttpResponse {
    HttpResponse::Answered {
        status: code,
        body: b"{}".to_vec(),
    }
}

fn prm(resource: &str) -> HttpResponse {
    ok(serde_json::json!({"resource": resource, "authorization_servers": [ISSUER]}))
}

fn asm(extra: serde_json::Value) -> HttpResponse {
    let mut m = serde_json::json!({
        "issuer": ISSUER,
        "authorization_endpoint": format!("{ISSUER}/authorize"),
        "token_endpoint": format!("{ISSUER}/token"),
        "registration_endpoint": format!("{ISSUER}/register"),
        "code_challenge_methods_supported": ["S256"],
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        m[k] = v;
    }
    ok(m)
}

fn fetch(step: Step) -> HttpRequest {
    match step {
        Step::Fetch(r) => r,
        other => panic!("expected a fetch, got {other:?}"),
    }
}

fn authorize_url(step: Step) -> String {
    match step {
        Step::Authorize { url } => url,
        other => panic!("expected an authorization, got {other:?}"),
    }
}

fn query_of(url: &str) -> Vec<(String, String)> {
    encode::parse_query(url.split_once('?').map_or("", |(_, q)| q))
}

fn param(url: &str, name: &str) -> Option<String> {
    query_of(url)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

fn form(req: &HttpRequest) -> Vec<(String, String)> {
    encode::parse_query(req.body.as_deref().unwrap_or(""))
}

fn form_param(req: &HttpRequest, name: &str) -> Option<String> {
    form(req)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

/// Runs discovery and registration up to the authorization URL: PRM from the challenge,
/// metadata at the first well-known URL, dynamic registration.
fn to_authorization(challenge: Challenge, asm_extra: serde_json::Value) -> (Flow, String) {
    let (mut flow, step) = Flow::authorize(settings(), challenge, None, false, &entropy(), 1000);
    let r = fetch(step);
    assert_eq!(
        r.url,
        "http://rs.test:1/.well-known/oauth-protected-resource/mcp"
    );
    let r = fetch(flow.on_response(prm(SERVER)));
    assert_eq!(
        r.url,
        format!("{ISSUER}/.well-known/oauth-authorization-server")
    );
    let r = fetch(flow.on_response(asm(asm_extra)));
    assert_eq!(r.url, format!("{ISSUER}/register"));
    let body: serde_json::Value = serde_json::from_str(r.body.as_deref().unwrap()).unwrap();
    assert_eq!(body["application_type"], "native");
    assert_eq!(
        body["grant_types"],
        serde_json::json!(["authorization_code", "refresh_token"])
    );
    assert_eq!(
        body["redirect_uris"],
        serde_json::json!(["http://127.0.0.1:9/callback"])
    );
    let url = authorize_url(flow.on_response(ok(serde_json::json!({"client_id": "c1"}))));
    (flow, url)
}

fn redirect(flow: &Flow, url: &str, iss: Option<&str>) -> String {
    let _ = flow;
    let mut q = vec![
        ("code", "the-code".to_string()),
        ("state", param(url, "state").unwrap()),
    ];
    if let Some(iss) = iss {
        q.push(("iss", iss.to_string()));
    }
    let pairs: Vec<(&str, &str)> = q.iter().map(|(k, v)| (*k, v.as_str())).collect();
    encode::form_encode(&pairs)
}

#[test]
fn full_authorization_code_flow_with_pkce_resource_and_registration() {
    let (mut flow, url) = to_authorization(Challenge::default(), serde_json::json!({}));
    assert!(url.starts_with(&format!("{ISSUER}/authorize?")));
    assert_eq!(param(&url, "response_type").as_deref(), Some("code"));
    assert_eq!(param(&url, "client_id").as_deref(), Some("c1"));
    assert_eq!(
        param(&url, "code_challenge_method").as_deref(),
        Some("S256")
    );
    assert_eq!(param(&url, "resource").as_deref(), Some(SERVER));
    assert_eq!(param(&url, "scope"), None, "no scope anywhere: omitted");
    let verifier = encode::base64_url(&[7; 32]);
    assert_eq!(
        param(&url, "code_challenge").unwrap(),
        encode::pkce_challenge(&verifier)
    );

    let token = fetch(flow.on_redirect(&redirect(&flow, &url, Some(ISSUER))));
    assert_eq!(token.url, format!("{ISSUER}/token"));
    assert_eq!(
        form_param(&token, "grant_type").as_deref(),
        Some("authorization_code")
    );
    assert_eq!(form_param(&token, "code_verifier"), Some(verifier));
    assert_eq!(form_param(&token, "resource").as_deref(), Some(SERVER));
    assert_eq!(form_param(&token, "client_id").as_deref(), Some("c1"));
    assert!(!token.headers.iter().any(|(k, _)| k == "authorization"));

    let done = flow.on_response(ok(serde_json::json!({
        "access_token": "secret-access", "token_type": "Bearer", "expires_in": 3600,
        "refresh_token": "secret-refresh"
    })));
    let Step::Done(creds) = done else {
        panic!("{done:?}")
    };
    assert_eq!(creds.issuer, ISSUER);
    assert_eq!(creds.expires_at, Some(4600));
    assert_eq!(creds.access_token, "secret-access");
    let shown = format!("{creds:?} {token:?}");
    assert!(
        !shown.contains("secret-"),
        "Debug never shows tokens: {shown}"
    );
}

#[test]
fn resource_metadata_url_from_the_challenge_comes_first() {
    let challenge = parse_www_authenticate(
        r#"Bearer resource_metadata="http://rs.test:1/custom.json", scope="a b""#,
    );
    let (mut flow, step) = Flow::authorize(settings(), challenge, None, false, &entropy(), 0);
    assert_eq!(fetch(step).url, "http://rs.test:1/custom.json");
    // Not there: the well-known URLs follow, path first.
    let r = fetch(flow.on_response(status(404)));
    assert_eq!(
        r.url,
        "http://rs.test:1/.well-known/oauth-protected-resource/mcp"
    );
    let r = fetch(flow.on_response(status(404)));
    assert_eq!(
        r.url,
        "http://rs.test:1/.well-known/oauth-protected-resource"
    );
    let _ = fetch(flow.on_response(prm("http://rs.test:1")));
    let _ = fetch(flow.on_response(asm(serde_json::json!({}))));
    let url = authorize_url(flow.on_response(ok(serde_json::json!({"client_id": "c"}))));
    assert_eq!(
        param(&url, "scope").as_deref(),
        Some("a b"),
        "the challenge's scope wins"
    );
    assert_eq!(
        param(&url, "resource").as_deref(),
        Some("http://rs.test:1"),
        "sent as published"
    );
}

#[test]
fn issuer_with_a_path_tries_every_variant_and_never_the_root() {
    let (mut flow, step) =
        Flow::authorize(settings(), Challenge::default(), None, false, &entropy(), 0);
    let _ = fetch(step);
    let r = fetch(flow.on_response(ok(serde_json::json!({
        "resource": SERVER, "authorization_servers": ["http://as.test:2/tenant1"]
    }))));
    assert_eq!(
        r.url,
        "http://as.test:2/.well-known/oauth-authorization-server/tenant1"
    );
    let r = fetch(flow.on_response(status(404)));
    assert_eq!(
        r.url,
        "http://as.test:2/.well-known/openid-configuration/tenant1"
    );
    let r = fetch(flow.on_response(status(404)));
    assert_eq!(
        r.url,
        "http://as.test:2/tenant1/.well-known/openid-configuration"
    );
    let step = flow.on_response(status(404));
    assert!(
        matches!(step, Step::Failed(AuthError::NoServerMetadata { .. })),
        "{step:?}"
    );
}

#[test]
fn mismatched_resource_or_issuer_stops_before_authorization() {
    let (mut flow, step) =
        Flow::authorize(settings(), Challenge::default(), None, false, &entropy(), 0);
    let _ = fetch(step);
    let step = flow.on_response(prm("https://evil.example.com/mcp"));
    assert!(
        matches!(step, Step::Failed(AuthError::ResourceMismatch { .. })),
        "{step:?}"
    );

    let (mut flow, step) =
        Flow::authorize(settings(), Challenge::default(), None, false, &entropy(), 0);
    let _ = fetch(step);
    let _ = fetch(flow.on_response(prm(SERVER)));
    let step = flow.on_response(asm(serde_json::json!({"issuer": "http://as.test:2/"})));
    assert!(
        matches!(step, Step::Failed(AuthError::IssuerMismatch { .. })),
        "{step:?}"
    );
}

#[test]
fn pkce_without_s256_is_refused() {
    let (mut flow, step) =
        Flow::authorize(settings(), Challenge::default(), None, false, &entropy(), 0);
    let _ = fetch(step);
    let _ = fetch(flow.on_response(prm(SERVER)));
    let step = flow.on_response(asm(
        serde_json::json!({"code_challenge_methods_supported": ["plain"]}),
    ));
    assert_eq!(step, Step::Failed(AuthError::PkceUnsupported));
}

#[test]
fn iss_is_compared_as_a_plain_string_and_required_when_advertised() {
    let cases: [(bool, Option<&str>, bool); 6] = [
        (true, Some(ISSUER), true),
        (false, None, true),
        (true, None, false),
        (true, Some("https://evil.example.com"), false),
        (false, Some("https://evil.example.com"), false),
        (true, Some("http://as.test:2/"), false),
    ];
    for (advertised, iss, accepted) in cases {
        let (mut flow, url) = to_authorization(
            Challenge::default(),
            serde_json::json!({"authorization_response_iss_parameter_supported": advertised}),
        );
        let step = flow.on_redirect(&redirect(&flow, &url, iss));
        assert_eq!(
            matches!(step, Step::Fetch(_)),
            accepted,
            "{advertised} {iss:?}: {step:?}"
        );
    }
}

#[test]
fn non_interactive_flow_makes_no_request_and_needs_login() {
    let mut s = settings();
    s.interactive = false;
    let (_, step) = Flow::authorize(s.clone(), Challenge::default(), None, false, &entropy(), 0);
    assert_eq!(step, Step::Failed(AuthError::NeedsLogin));
    // A refused refresh falls back to discovery, which stops before registering.
    let mut creds = held(true);
    creds.token_endpoint = format!("{ISSUER}/token");
    let (mut flow, step) = Flow::refresh(s, creds, &entropy(), 0);
    let _ = fetch(step);
    let _ = fetch(flow.on_response(status(400)));
    let _ = fetch(flow.on_response(prm(SERVER)));
    assert_eq!(
        flow.on_response(asm(serde_json::json!({}))),
        Step::Failed(AuthError::NeedsLogin)
    );
}

#[test]
fn wrong_state_is_refused() {
    let (mut flow, _) = to_authorization(Challenge::default(), serde_json::json!({}));
    assert_eq!(
        flow.on_redirect("code=x&state=forged"),
        Step::Failed(AuthError::StateMismatch)
    );
}

#[test]
fn legacy_server_without_resource_metadata_uses_its_origin_then_default_endpoints() {
    let (mut flow, step) =
        Flow::authorize(settings(), Challenge::default(), None, false, &entropy(), 0);
    let _ = fetch(step);
    let _ = fetch(flow.on_response(status(404)));
    let r = fetch(flow.on_response(status(404)));
    assert_eq!(
        r.url,
        "http://rs.test:1/.well-known/oauth-authorization-server"
    );
    let r = fetch(flow.on_response(status(404)));
    assert_eq!(r.url, "http://rs.test:1/register");
    let url = authorize_url(flow.on_response(ok(serde_json::json!({"client_id": "c"}))));
    assert!(url.starts_with("http://rs.test:1/authorize?"));
    assert_eq!(param(&url, "resource").as_deref(), Some(SERVER));
}

#[test]
fn pre_registered_client_uses_its_token_endpoint_method() {
    for (method, basic, post) in [
        (AuthMethod::ClientSecretBasic, true, false),
        (AuthMethod::ClientSecretPost, false, true),
    ] {
        let mut s = settings();
        s.pre_registered = Some(PreRegistered {
            client_id: "pre id".into(),
            client_secret: Some("s3cret".into()),
            auth_method: Some(method),
            signing_algorithm: None,
        });
        let (mut flow, step) = Flow::authorize(s, Challenge::default(), None, false, &entropy(), 0);
        let _ = fetch(step);
        let _ = fetch(flow.on_response(prm(SERVER)));
        let url = authorize_url(flow.on_response(asm(serde_json::json!({}))));
        assert_eq!(param(&url, "client_id").as_deref(), Some("pre id"));
        let token = fetch(flow.on_redirect(&redirect(&flow, &url, None)));
        let header = token
            .headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.clone());
        assert_eq!(header.is_some(), basic);
        if basic {
            assert_eq!(
                header.unwrap(),
                format!("Basic {}", encode::base64_standard(b"pre%20id:s3cret"))
            );
        }
        assert_eq!(form_param(&token, "client_secret").is_some(), post);
    }
}

#[test]
fn client_id_metadata_document_replaces_registration_where_supported() {
    let mut s = settings();
    s.client_metadata_url = Some("https://client.example/meta.json".into());
    let (mut flow, step) = Flow::authorize(s, Challenge::default(), None, false, &entropy(), 0);
    let _ = fetch(step);
    let _ = fetch(flow.on_response(prm(SERVER)));
    let url = authorize_url(flow.on_response(asm(
        serde_json::json!({"client_id_metadata_document_supported": true}),
    )));
    assert_eq!(
        param(&url, "client_id").as_deref(),
        Some("https://client.example/meta.json")
    );
}

#[test]
fn registration_follows_the_servers_token_endpoint_methods() {
    let (mut flow, step) =
        Flow::authorize(settings(), Challenge::default(), None, false, &entropy(), 0);
    let _ = fetch(step);
    let _ = fetch(flow.on_response(prm(SERVER)));
    let reg = fetch(flow.on_response(asm(
        serde_json::json!({"token_endpoint_auth_methods_supported": ["client_secret_post"]}),
    )));
    let body: serde_json::Value = serde_json::from_str(reg.body.as_deref().unwrap()).unwrap();
    assert_eq!(body["token_endpoint_auth_method"], "client_secret_post");
    let url = authorize_url(flow.on_response(ok(
        serde_json::json!({"client_id": "c", "client_secret": "s"}),
    )));
    let token = fetch(flow.on_redirect(&redirect(&flow, &url, None)));
    assert_eq!(form_param(&token, "client_secret").as_deref(), Some("s"));
}

#[test]
fn step_up_asks_for_held_and_challenged_scopes_and_offline_access() {
    let previous = Credentials {
        issuer: ISSUER.into(),
        resource: SERVER.into(),
        token_endpoint: format!("{ISSUER}/token"),
        client: Client {
            client_id: "held".into(),
            client_secret: None,
            auth_method: AuthMethod::None,
            signing_algorithm: None,
        },
        access_token: "t".into(),
        refresh_token: None,
        expires_at: None,
        scopes: vec!["mcp:basic".into()],
        grant: Grant::AuthorizationCode,
    };
    let challenge =
        parse_www_authenticate(r#"Bearer error="insufficient_scope", scope="mcp:write""#);
    let (mut flow, step) = Flow::authorize(
        settings(),
        challenge,
        Some(previous.clone()),
        true,
        &entropy(),
        0,
    );
    let _ = fetch(step);
    let _ = fetch(flow.on_response(prm(SERVER)));
    let url = authorize_url(flow.on_response(asm(
        serde_json::json!({"scopes_supported": ["offline_access"]}),
    )));
    assert_eq!(
        param(&url, "client_id").as_deref(),
        Some("held"),
        "same issuer: client reused"
    );
    assert_eq!(
        param(&url, "scope").as_deref(),
        Some("mcp:basic mcp:write offline_access")
    );

    // Another issuer: the held client is not presented there.
    let mut moved = previous;
    moved.issuer = "http://old.test".into();
    let (mut flow, step) = Flow::authorize(
        settings(),
        Challenge::default(),
        Some(moved),
        false,
        &entropy(),
        0,
    );
    let _ = fetch(step);
    let _ = fetch(flow.on_response(prm(SERVER)));
    let r = fetch(flow.on_response(asm(serde_json::json!({}))));
    assert_eq!(r.url, format!("{ISSUER}/register"));
}

#[test]
fn refresh_then_full_authorization_when_refused() {
    let creds = Credentials {
        issuer: ISSUER.into(),
        resource: SERVER.into(),
        token_endpoint: format!("{ISSUER}/token"),
        client: Client {
            client_id: "c".into(),
            client_secret: None,
            auth_method: AuthMethod::None,
            signing_algorithm: None,
        },
        access_token: "old".into(),
        refresh_token: Some("r1".into()),
        expires_at: Some(10),
        scopes: vec![],
        grant: Grant::AuthorizationCode,
    };
    let (mut flow, step) = Flow::refresh(settings(), creds.clone(), &entropy(), 100);
    let r = fetch(step);
    assert_eq!(
        form_param(&r, "grant_type").as_deref(),
        Some("refresh_token")
    );
    assert_eq!(form_param(&r, "resource").as_deref(), Some(SERVER));
    let Step::Done(new) = flow.on_response(ok(
        serde_json::json!({"access_token": "new", "expires_in": 60}),
    )) else {
        panic!()
    };
    assert_eq!(
        (
            new.access_token.as_str(),
            new.refresh_token.as_deref(),
            new.expires_at
        ),
        ("new", Some("r1"), Some(160))
    );

    let (mut flow, step) = Flow::refresh(settings(), creds, &entropy(), 100);
    let _ = fetch(step);
    let r = fetch(flow.on_response(HttpResponse::Answered {
        status: 400,
        body: br#"{"error":"invalid_grant"}"#.to_vec(),
    }));
    assert_eq!(
        r.url,
        "http://rs.test:1/.well-known/oauth-protected-resource/mcp"
    );
}

#[test]
fn endpoint_errors_never_quote_the_body() {
    let (mut flow, url) = to_authorization(Challenge::default(), serde_json::json!({}));
    let _ = fetch(flow.on_redirect(&redirect(&flow, &url, None)));
    let step = flow.on_response(HttpResponse::Answered {
        status: 400,
        body: br#"{"error":"invalid_grant","token":"leak"}"#.to_vec(),
    });
    let Step::Failed(e) = step else { panic!() };
    assert_eq!(
        e.to_string(),
        "token endpoint answered HTTP 400 (invalid_grant)"
    );
}

fn client_credentials(method: AuthMethod, secret: Option<&str>) -> AuthSettings {
    let mut s = settings();
    s.interactive = false;
    s.redirect_uri = String::new();
    s.grant = Grant::ClientCredentials;
    s.pre_registered = Some(PreRegistered {
        client_id: "m2m".into(),
        client_secret: secret.map(str::to_string),
        auth_method: Some(method),
        signing_algorithm: None,
    });
    s
}

#[test]
fn client_credentials_with_a_secret_need_no_person_and_no_pkce() {
    let (mut flow, step) = Flow::authorize(
        client_credentials(AuthMethod::ClientSecretBasic, Some("s")),
        parse_www_authenticate(r#"Bearer scope="mcp:read""#),
        None,
        false,
        &entropy(),
        1000,
    );
    let _ = fetch(step);
    let _ = fetch(flow.on_response(prm(SERVER)));
    // A machine-to-machine server: no authorization endpoint, no PKCE, offline_access
    // offered; none of it matters to this grant.
    let token = fetch(flow.on_response(ok(serde_json::json!({
        "issuer": ISSUER,
        "token_endpoint": format!("{ISSUER}/token"),
        "scopes_supported": ["offline_access"],
        "grant_types_supported": ["client_credentials"],
    }))));
    assert_eq!(token.url, format!("{ISSUER}/token"));
    assert_eq!(
        form(&token),
        [
            ("grant_type".to_string(), "client_credentials".to_string()),
            ("scope".into(), "mcp:read".into()),
            ("resource".into(), SERVER.into()),
        ]
    );
    assert!(token.headers.contains(&(
        "authorization".into(),
        format!("Basic {}", encode::base64_standard(b"m2m:s"))
    )));
    let Step::Done(creds) = flow.on_response(ok(
        serde_json::json!({"access_token": "at", "token_type": "Bearer", "expires_in": 60}),
    )) else {
        panic!("done")
    };
    assert_eq!(creds.grant, Grant::ClientCredentials);
    assert_eq!(creds.expires_at, Some(1060));
    // Renewed without a person before it expires, though there is no refresh token.
    assert!(Guard::should_refresh(&creds, 1000));
    let (mut flow, step) = Flow::refresh(
        client_credentials(AuthMethod::ClientSecretBasic, Some("s")),
        *creds,
        &entropy(),
        1001,
    );
    let _ = fetch(step);
    let _ = fetch(flow.on_response(prm(SERVER)));
    let again = fetch(flow.on_response(asm(serde_json::json!({}))));
    assert_eq!(
        form_param(&again, "grant_type").as_deref(),
        Some("client_credentials")
    );

    // Without a configured client there is nothing to present.
    let mut s = client_credentials(AuthMethod::None, None);
    s.pre_registered = None;
    let (mut flow, step) = Flow::authorize(s, Challenge::default(), None, false, &entropy(), 0);
    let _ = fetch(step);
    let _ = fetch(flow.on_response(prm(SERVER)));
    assert!(matches!(
        flow.on_response(asm(serde_json::json!({}))),
        Step::Failed(AuthError::NoRegistration { .. })
    ));
}

#[test]
fn private_key_jwt_asks_the_shell_to_sign_a_short_lived_assertion_for_the_issuer() {
    let (mut flow, step) = Flow::authorize(
        client_credentials(AuthMethod::PrivateKeyJwt, None),
        Challenge::default(),
        None,
        false,
        &entropy(),
        1000,
    );
    let _ = fetch(step);
    let _ = fetch(flow.on_response(prm(SERVER)));
    let Step::Sign { algorithm, input } = flow.on_response(asm(serde_json::json!({}))) else {
        panic!("expected a signature request")
    };
    assert_eq!(algorithm, SigningAlgorithm::ES256);
    let (header, claims) = input.split_once('.').unwrap();
    let decode = |part: &str| -> serde_json::Value {
        serde_json::from_slice(&encode::base64_url_decode(part).unwrap()).unwrap()
    };
    assert_eq!(
        decode(header),
        serde_json::json!({"alg": "ES256", "typ": "JWT"})
    );
    let claims = decode(claims);
    assert_eq!(
        (&claims["iss"], &claims["sub"], &claims["aud"]),
        (
            &serde_json::json!("m2m"),
            &serde_json::json!("m2m"),
            &serde_json::json!(ISSUER)
        )
    );
    assert_eq!(
        (&claims["iat"], &claims["exp"]),
        (&serde_json::json!(1000), &serde_json::json!(1300))
    );
    assert!(claims["jti"].as_str().is_some_and(|j| !j.is_empty()));

    let token = fetch(flow.on_signature(Ok(vec![1, 2, 3])));
    assert_eq!(
        form_param(&token, "client_assertion_type").as_deref(),
        Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
    );
    assert_eq!(
        form_param(&token, "client_assertion"),
        Some(format!("{input}.{}", encode::base64_url(&[1, 2, 3])))
    );
    assert!(!token.headers.iter().any(|(k, _)| k == "authorization"));

    // A key the shell cannot use ends the flow with its reason.
    let (mut flow, step) = Flow::authorize(
        client_credentials(AuthMethod::PrivateKeyJwt, None),
        Challenge::default(),
        None,
        false,
        &entropy(),
        1000,
    );
    let _ = fetch(step);
    let _ = fetch(flow.on_response(prm(SERVER)));
    let _ = flow.on_response(asm(serde_json::json!({})));
    assert_eq!(
        flow.on_signature(Err("no key".into())),
        Step::Failed(AuthError::Signing {
            reason: "no key".into()
        })
    );
}

fn held(refresh: bool) -> Credentials {
    Credentials {
        issuer: ISSUER.into(),
        resource: SERVER.into(),
        token_endpoint: String::new(),
        client: Client {
            client_id: "c".into(),
            client_secret: None,
            auth_method: AuthMethod::None,
            signing_algorithm: None,
        },
        access_token: "t".into(),
        refresh_token: refresh.then(|| "r".into()),
        expires_at: Some(100),
        scopes: vec![],
        grant: Grant::AuthorizationCode,
    }
}

#[test]
fn guard_refreshes_then_reauthorizes_then_gives_up() {
    let mut g = Guard::default();
    let c = held(true);
    let none = Challenge::default();
    assert_eq!(
        g.refused(401, &none, 0, None),
        Reaction::Authorize { step_up: false }
    );
    g.installed();
    assert_eq!(g.refused(401, &none, 1, Some(&c)), Reaction::Refresh);
    g.installed();
    assert!(matches!(
        g.refused(401, &none, 2, Some(&c)),
        Reaction::GiveUp(AuthError::Rejected { .. })
    ));
    // A refusal of credentials replaced since is just retried.
    assert_eq!(g.refused(401, &none, 1, Some(&c)), Reaction::Retry);
    // The give-up ended that chain: the next request's refusal starts a new one.
    assert_eq!(g.refused(401, &none, 2, Some(&c)), Reaction::Refresh);
    g.accepted();
    assert_eq!(g.refused(401, &none, 2, Some(&c)), Reaction::Refresh);
    assert_eq!(
        g.refused(403, &none, 2, Some(&c)),
        Reaction::GiveUp(AuthError::Forbidden)
    );
    assert!(Guard::should_refresh(&c, 41));
    assert!(!Guard::should_refresh(&c, 39));
    assert!(!Guard::should_refresh(&held(false), 1000));
}

proptest! {
    /// However a server refuses (any mix of 401, 403 and insufficient_scope, any age of the
    /// credentials sent), one refusal chain (until it is given up) runs at most 1 refresh,
    /// 1 re-authorization and MAX_STEP_UPS step-ups.
    #[test]
    fn refusal_storms_are_bounded(
        refusals in proptest::collection::vec((prop_oneof![Just(401u16), Just(403u16)], any::<bool>(), any::<bool>(), any::<bool>()), 1..60)
    ) {
        let mut g = Guard::default();
        let (mut refreshes, mut authorizations, mut step_ups) = (0u32, 0u32, 0u32);
        let c = held(true);
        for (status, scope, stale, have_creds) in refusals {
            let challenge = Challenge { error: scope.then(|| "insufficient_scope".into()), ..Challenge::default() };
            let sent = if stale { g.generation().saturating_sub(1) } else { g.generation() };
            match g.refused(status, &challenge, sent, have_creds.then_some(&c)) {
                Reaction::Retry => prop_assert!(sent < g.generation()),
                Reaction::Refresh => { refreshes += 1; g.installed(); }
                Reaction::Authorize { step_up: true } => { step_ups += 1; g.installed(); }
                Reaction::Authorize { step_up: false } => { authorizations += 1; g.installed(); }
                Reaction::GiveUp(_) => {
                    // The chain ended; the next refusal starts another.
                    prop_assert!(refreshes <= 1 && authorizations <= MAX_REAUTHORIZATIONS && step_ups <= MAX_STEP_UPS);
                    (refreshes, authorizations, step_ups) = (0, 0, 0);
                }
            }
            prop_assert!(refreshes <= 1 && authorizations <= MAX_REAUTHORIZATIONS && step_ups <= MAX_STEP_UPS);
        }
    }

    /// The challenge parser never panics and only reads the Bearer challenge.
    #[test]
    fn challenge_parser_is_total(header in ".{0,200}") {
        let _ = parse_www_authenticate(&header);
    }

    /// Flows fed arbitrary answers end (within a bounded number of steps) and never panic.
    #[test]
    fn flows_end_whatever_the_answers(answers in proptest::collection::vec((0u16..600, any::<bool>()), 0..20)) {
        let (mut flow, mut step) = Flow::authorize(settings(), Challenge::default(), None, false, &entropy(), 0);
        for (code, json) in answers {
            step = match step {
                Step::Fetch(_) => flow.on_response(if json { asm(serde_json::json!({})) } else { status(code) }),
                Step::Authorize { .. } => flow.on_redirect("code=x"),
                done => { step = done; break; }
            };
        }
        let _ = step;
    }
}
