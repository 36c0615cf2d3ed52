//! A model world for the whole authorization machinery: an authorization server that issues
//! expiring access tokens and rotating refresh tokens (and may revoke them), a resource server
//! that checks them, asks for more scope on writes and may refuse everything for a while (a
//! `401` storm), and the client as the shell runs it — refresh before expiry, the guard's
//! reaction to every refusal, the flows driven to their end — under random schedules of
//! requests, bursts of concurrent requests, waits, revocations and storms.
//!
//! Invariants, for every schedule:
//! 1. every request ends (accepted or given up) within a bounded number of sends;
//! 2. with no storm, every request is accepted (the machinery always finds its way back);
//! 3. a request made while the held refresh token is honoured and the token's scopes suffice
//!    never sends the user to the browser (refresh without a new login);
//! 4. no request goes out with an expired token while its refresh token is honoured;
//! 5. a burst of concurrent refusals costs one fix, the others are plain retries.
//!
//! The guard's counters show which reactions the schedules reached; a fixed set of schedules
//! must reach every one of them.

use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

const SERVER: &str = "http://rs.test/mcp";
const ISSUER: &str = "http://as.test";
/// Sends per request, at most: the first, one after a refresh, the re-authorizations, the
/// step-ups, and one retry after a concurrent fix.
const MAX_SENDS: u32 = 3 + MAX_REAUTHORIZATIONS + MAX_STEP_UPS;

#[derive(Debug, Clone)]
enum Event {
    /// One request; `write` needs the `write` scope.
    Request { write: bool },
    /// `n` requests sent at once with the same credentials.
    Burst(u8),
    /// Time passes (seconds).
    Wait(u64),
    /// The authorization server forgets every refresh token.
    RevokeRefresh,
    /// The authorization server forgets every access token.
    RevokeAccess,
    /// The resource server refuses the next `n` requests whatever they carry.
    Storm(u8),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => any::<bool>().prop_map(|write| Event::Request { write }),
        1 => (2u8..5).prop_map(Event::Burst),
        3 => (0u64..7200).prop_map(Event::Wait),
        1 => Just(Event::RevokeRefresh),
        1 => Just(Event::RevokeAccess),
        1 => (1u8..8).prop_map(Event::Storm),
    ]
}

struct World {
    now: u64,
    lifetime: u64,
    access: BTreeMap<String, (u64, Vec<String>)>,
    refresh: BTreeMap<String, Vec<String>>,
    /// Scopes of the authorization the user last approved in the browser.
    approved: Vec<String>,
    next: u64,
    storm: u8,
    logins: u64,
}

fn ok(json: serde_json::Value) -> HttpResponse {
    HttpResponse::Answered {
        status: 200,
        body: json.to_string().into_bytes(),
    }
}

impl World {
    fn issue(&mut self, scopes: Vec<String>) -> HttpResponse {
        self.next += 1;
        let (a, r) = (format!("a{}", self.next), format!("r{}", self.next));
        self.access
            .insert(a.clone(), (self.now + self.lifetime, scopes.clone()));
        self.refresh.insert(r.clone(), scopes);
        ok(
            serde_json::json!({"access_token": a, "token_type": "Bearer",
            "expires_in": self.lifetime, "refresh_token": r}),
        )
    }

    /// The authorization side: metadata, registration, tokens.
    fn answer(&mut self, req: &HttpRequest) -> HttpResponse {
        let form = encode::parse_query(req.body.as_deref().unwrap_or(""));
        let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        match req.url.as_str() {
            "http://rs.test/.well-known/oauth-protected-resource/mcp" => ok(serde_json::json!({
                "resource": SERVER, "authorization_servers": [ISSUER]})),
            "http://as.test/.well-known/oauth-authorization-server" => ok(serde_json::json!({
                "issuer": ISSUER,
                "authorization_endpoint": format!("{ISSUER}/authorize"),
                "token_endpoint": format!("{ISSUER}/token"),
                "registration_endpoint": format!("{ISSUER}/register"),
                "code_challenge_methods_supported": ["S256"],
                "scopes_supported": ["read", "write", "offline_access"]})),
            "http://as.test/register" => ok(serde_json::json!({"client_id": "c"})),
            "http://as.test/token" => match get("grant_type").as_deref() {
                Some("authorization_code") => {
                    let scopes = self.approved.clone();
                    self.issue(scopes)
                }
                Some("refresh_token") => {
                    match get("refresh_token").and_then(|r| self.refresh.remove(&r)) {
                        Some(scopes) => self.issue(scopes),
                        None => HttpResponse::Answered {
                            status: 400,
                            body: br#"{"error":"invalid_grant"}"#.to_vec(),
                        },
                    }
                }
                _ => HttpResponse::Answered {
                    status: 400,
                    body: b"{}".to_vec(),
                },
            },
            _ => HttpResponse::Answered {
                status: 404,
                body: Vec::new(),
            },
        }
    }

    /// The resource server: status and `WWW-Authenticate`.
    fn resource(&mut self, token: Option<&str>, write: bool) -> (u16, String) {
        let meta = r#"resource_metadata="http://rs.test/.well-known/oauth-protected-resource/mcp""#;
        if self.storm > 0 {
            self.storm -= 1;
            return (401, format!(r#"Bearer error="invalid_token", {meta}"#));
        }
        match token.and_then(|t| self.access.get(t)) {
            Some((expires, scopes)) if *expires > self.now => {
                if write && !scopes.iter().any(|s| s == "write") {
                    (
                        403,
                        format!(r#"Bearer error="insufficient_scope", scope="write", {meta}"#),
                    )
                } else {
                    (200, String::new())
                }
            }
            _ => (401, format!(r#"Bearer scope="read", {meta}"#)),
        }
    }
}

fn settings(interactive: bool) -> AuthSettings {
    AuthSettings {
        server_url: SERVER.into(),
        redirect_uri: "http://127.0.0.1:9/callback".into(),
        client_name: "switchboard".into(),
        interactive,
        ..AuthSettings::default()
    }
}

fn entropy() -> Entropy {
    Entropy {
        verifier: [1; 32],
        state: [2; 16],
    }
}

/// Drives a flow to its end against the world; the browser approves what it is asked.
fn run(world: &mut World, mut flow: Flow, mut step: Step) -> Result<Credentials, AuthError> {
    for _ in 0..32 {
        step = match step {
            Step::Fetch(req) => {
                let answer = world.answer(&req);
                flow.on_response(answer)
            }
            Step::Authorize { url } => {
                world.logins += 1;
                let query = encode::parse_query(url.split_once('?').map_or("", |(_, q)| q));
                let get = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
                world.approved = get("scope")
                    .map(|s| s.split(' ').map(str::to_string).collect())
                    .unwrap_or_default();
                let state = get("state").unwrap_or_default();
                flow.on_redirect(&encode::form_encode(&[("code", "x"), ("state", &state)]))
            }
            Step::Sign { .. } => flow.on_signature(Err("no key in this world".into())),
            Step::Done(c) => return Ok(*c),
            Step::Failed(e) => return Err(e),
        };
    }
    panic!("a flow did not end within 32 steps");
}

#[derive(Default)]
struct Client {
    creds: Option<Credentials>,
    guard: Guard,
}

impl Client {
    /// What the shell does before a send: refresh a token about to expire, without a person.
    fn ready(&mut self, world: &mut World) -> u64 {
        if let Some(c) = self
            .creds
            .clone()
            .filter(|c| Guard::should_refresh(c, world.now))
        {
            let (flow, step) = Flow::refresh(settings(false), c, &entropy(), world.now);
            if let Ok(new) = run(world, flow, step) {
                self.creds = Some(new);
                self.guard.installed();
            }
        }
        self.guard.generation()
    }

    /// The guard's reaction to one refusal, carried out. `Ok(())`: send again.
    fn refused(
        &mut self,
        world: &mut World,
        status: u16,
        header: &str,
        sent: u64,
    ) -> Result<(), AuthError> {
        let challenge = parse_www_authenticate(header);
        let held = self.creds.clone();
        let (flow, step) = match self.guard.refused(status, &challenge, sent, held.as_ref()) {
            Reaction::Retry => return Ok(()),
            Reaction::GiveUp(e) => return Err(e),
            Reaction::Refresh => Flow::refresh(
                settings(true),
                held.expect("refresh needs credentials"),
                &entropy(),
                world.now,
            ),
            Reaction::Authorize { step_up } => Flow::authorize(
                settings(true),
                challenge,
                held,
                step_up,
                &entropy(),
                world.now,
            ),
        };
        let creds = run(world, flow, step)?;
        self.creds = Some(creds);
        self.guard.installed();
        Ok(())
    }

    fn token(&self) -> Option<String> {
        self.creds.as_ref().map(|c| c.access_token.clone())
    }
}

/// Whether the held refresh token is honoured and the held scopes cover the request.
fn refreshable(world: &World, client: &Client, write: bool) -> bool {
    client.creds.as_ref().is_some_and(|c| {
        c.refresh_token
            .as_ref()
            .is_some_and(|r| world.refresh.contains_key(r))
            && (!write || c.scopes.iter().any(|s| s == "write"))
    })
}

/// Runs `events`; checks the invariants; returns the guard's counters.
fn play(lifetime: u64, events: &[Event]) -> Result<GuardCounters, TestCaseError> {
    let mut world = World {
        now: 1_000_000,
        lifetime,
        access: BTreeMap::new(),
        refresh: BTreeMap::new(),
        approved: Vec::new(),
        next: 0,
        storm: 0,
        logins: 0,
    };
    let mut client = Client::default();
    for e in events {
        match e {
            Event::Wait(s) => world.now += s,
            Event::RevokeRefresh => world.refresh.clear(),
            Event::RevokeAccess => world.access.clear(),
            Event::Storm(n) => world.storm = *n,
            Event::Request { write } => {
                let calm = world.storm == 0;
                let quiet = refreshable(&world, &client, *write);
                let logins = world.logins;
                let mut sends = 0;
                let outcome = loop {
                    let sent = client.ready(&mut world);
                    if sends == 0 && quiet {
                        // 4: refreshed before it went out.
                        let c = client.creds.as_ref().expect("held");
                        prop_assert!(c.expires_at.is_some_and(|at| at > world.now));
                    }
                    sends += 1;
                    // 1: bounded.
                    prop_assert!(sends <= MAX_SENDS, "{sends} sends");
                    let (status, header) = world.resource(client.token().as_deref(), *write);
                    if status == 200 {
                        client.guard.accepted();
                        break Ok(());
                    }
                    if let Err(e) = client.refused(&mut world, status, &header, sent) {
                        break Err(e);
                    }
                };
                // 2: without a storm the machinery always finds its way back.
                if calm {
                    prop_assert!(outcome.is_ok(), "{outcome:?} with no storm");
                }
                // 3: refresh, not a new login.
                if calm && quiet {
                    prop_assert_eq!(world.logins, logins, "a login despite a live refresh token");
                }
            }
            Event::Burst(n) => {
                // All sent with the same credentials, all refused (or not) before any fix.
                let sent = client.ready(&mut world);
                let answers: Vec<(u16, String)> = (0..*n)
                    .map(|_| world.resource(client.token().as_deref(), false))
                    .collect();
                let before = client.guard.counters();
                let mut fixes = 0;
                for (status, header) in answers.into_iter().filter(|(s, _)| *s != 200) {
                    let generation = client.guard.generation();
                    if client.refused(&mut world, status, &header, sent).is_ok()
                        && client.guard.generation() > generation
                    {
                        fixes += 1;
                    }
                }
                let after = client.guard.counters();
                // 5: one fix for the burst; the rest retry with it.
                prop_assert!(fixes <= 1 || after.give_ups > before.give_ups);
                if fixes == 1 {
                    prop_assert_eq!(
                        after.retries - before.retries + 1,
                        after.refusals - before.refusals - (after.give_ups - before.give_ups)
                    );
                }
                client.guard.accepted();
            }
        }
    }
    Ok(client.guard.counters())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn expiry_refresh_and_storms_keep_every_invariant(
        lifetime in prop_oneof![Just(30u64), Just(600), Just(3600)],
        events in proptest::collection::vec(event(), 1..40),
    ) {
        play(lifetime, &events)?;
    }
}

/// A fixed set of schedules reaches every reaction the guard has.
#[test]
fn the_schedules_reach_every_reaction() {
    use Event::*;
    let schedules: &[(u64, &[Event])] = &[
        // First login, a write (step-up), expiry with a live refresh token.
        (
            600,
            &[
                Request { write: false },
                Request { write: true },
                Wait(5000),
                Request { write: true },
            ],
        ),
        // The server forgets the access token: a refresh after the refusal.
        (
            3600,
            &[
                Request { write: false },
                RevokeAccess,
                Request { write: false },
            ],
        ),
        // Refresh token revoked too: the refresh is refused, a new login follows.
        (
            3600,
            &[
                Request { write: false },
                RevokeAccess,
                RevokeRefresh,
                Request { write: false },
            ],
        ),
        // A burst after the server forgot the token: one refresh, the rest retry.
        (3600, &[Request { write: false }, RevokeAccess, Burst(4)]),
        // A storm longer than the limits: given up.
        (
            3600,
            &[Request { write: false }, Storm(7), Request { write: false }],
        ),
    ];
    let mut total = GuardCounters::default();
    for (lifetime, events) in schedules {
        let c = play(*lifetime, events).expect("invariants hold");
        total.refusals += c.refusals;
        total.retries += c.retries;
        total.refreshes += c.refreshes;
        total.authorizations += c.authorizations;
        total.step_ups += c.step_ups;
        total.give_ups += c.give_ups;
    }
    assert!(
        total.retries > 0
            && total.refreshes > 0
            && total.authorizations > 0
            && total.step_ups > 0
            && total.give_ups > 0,
        "{total:?}"
    );
}
