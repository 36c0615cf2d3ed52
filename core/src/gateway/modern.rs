//! The stateless revision (2026-07-28) downstream: requests that carry their own envelope
//! (`_meta` with the protocol version, the client's capabilities and identity) and need no
//! session, answered beside the `initialize`-based sessions of the older revisions.
//!
//! What this side decides:
//! - which requests are of the stateless revision (an envelope in `_meta`, a stateless
//!   `MCP-Protocol-Version` header, or a method only that revision has), and, over HTTP, that
//!   the `Mcp-Method`/`Mcp-Name` headers match the body (`-32020`), that the envelope is
//!   complete (`-32602`), that its version is one we speak (`-32022`, listing ours and
//!   echoing the one asked), each with the HTTP status the revision gives it
//!   ([`ExchangeStatus`]);
//! - `server/discover`; `resultType` on every result; cache hints (`ttlMs`, `cacheScope`) on
//!   the results the revision caches; the methods the revision removed (`initialize`, `ping`,
//!   `logging/setLevel`, `resources/subscribe`/`unsubscribe`) as not found;
//! - `subscriptions/listen`: a stream acknowledged first, then the view's changes and the
//!   updates of the resources it named, each tagged with the stream's id, filtered to what
//!   it asked for;
//! - multi round-trip requests (see `mrtr`): a server's request for input in the middle of a
//!   client's call becomes an `InputRequiredResult` answer, and the client's retry with
//!   `inputResponses` answers the server, once.
//!
//! Over HTTP, each stateless request arrives on a session of its own that the shell opened
//! for that one exchange; the gateway closes it once answered (a listen stream stays until
//! the client goes).

use super::peer::ClientCaps;
use super::wire;
use super::{id_key, ExchangeId, Gateway, GatewayOutput, SessionId, Target};
use crate::manager::CallId;
use crate::protocol::{
    modern_codes, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL,
    META_PROTOCOL_VERSION, META_SUBSCRIPTION_ID, MODERN_VERSIONS,
};
use bytes::Bytes;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The request headers of the stateless revision over HTTP, as the client sent them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestHeaders {
    /// `MCP-Protocol-Version`.
    pub protocol_version: Option<String>,
    /// `Mcp-Method`.
    pub method: Option<String>,
    /// `Mcp-Name`.
    pub name: Option<String>,
}

/// The HTTP status of an exchange of the stateless revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ExchangeStatus {
    /// `200 OK`: a result, or an error the revision answers in band.
    Ok,
    /// `400 Bad Request`: the headers or the envelope are wrong, or the version is not ours.
    BadRequest,
    /// `404 Not Found`: no such method.
    NotFound,
}

/// How long a client may reuse a list result, in milliseconds: the view changes whenever a
/// server arrives, leaves or changes its lists, and the listen stream says when, so the
/// hint is to ask again rather than to cache.
const LIST_TTL_MS: u64 = 0;

/// One open `subscriptions/listen` stream.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Listen {
    exchange: ExchangeId,
    /// The listen request's id: every notification on the stream carries it.
    id: Value,
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: BTreeSet<String>,
}

/// What the stateless side keeps.
#[derive(Debug, Default)]
pub(super) struct ModernState {
    /// Sessions opened for one exchange (closed once it is answered).
    pub(super) one_shot: BTreeSet<SessionId>,
    /// Exchanges whose answer is a result of the stateless revision (gets `resultType`),
    /// and whether the revision caches it (gets cache hints too).
    pub(super) resulting: BTreeMap<(SessionId, ExchangeId), bool>,
    /// Open listen streams, by session.
    pub(super) listens: BTreeMap<SessionId, Listen>,
    /// Requests of stateless clients in the manager (see `mrtr`).
    pub(super) calls: BTreeMap<CallId, super::mrtr::ModernCall>,
    /// The number of the last round handed out.
    pub(super) next_round: u64,
}

impl ModernState {
    /// Whether a listen stream holds `uri`.
    pub(super) fn holds(&self, uri: &str) -> bool {
        self.listens.values().any(|l| l.uris.contains(uri))
    }
}

/// The envelope of one request.
pub(super) struct Envelope {
    pub caps: ClientCaps,
    /// The level at or above which the servers' logs may go on the request's stream (none:
    /// no logs).
    pub log_level: Option<crate::catalog::LogLevel>,
}

/// A request refused, with its code, data and status.
pub(super) struct Refusal {
    code: i64,
    message: String,
    data: Option<Value>,
    status: ExchangeStatus,
}

impl Refusal {
    pub(super) fn new(code: i64, message: impl Into<String>, status: ExchangeStatus) -> Self {
        Refusal {
            code,
            message: message.into(),
            data: None,
            status,
        }
    }
}

fn refused(code: i64, message: impl Into<String>, status: ExchangeStatus) -> Refusal {
    Refusal::new(code, message, status)
}

/// The protocol versions the gateway speaks downstream, both revisions, newest first.
pub fn supported_versions() -> Vec<&'static str> {
    MODERN_VERSIONS
        .iter()
        .chain(super::DOWNSTREAM_VERSIONS.iter())
        .copied()
        .collect()
}

/// Whether a request is of the stateless revision.
pub(super) fn is_modern(method: &str, params: &Value, headers: Option<&RequestHeaders>) -> bool {
    if matches!(method, "server/discover" | "subscriptions/listen") {
        return true;
    }
    if params
        .get("_meta")
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        .is_some()
    {
        return true;
    }
    headers
        .and_then(|h| h.protocol_version.as_deref())
        .is_some_and(|v| !super::DOWNSTREAM_VERSIONS.contains(&v.trim()))
}

/// The name a request's `Mcp-Name` header must repeat.
fn named(method: &str, params: &Value) -> Option<String> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return None,
    };
    params.get(key).and_then(Value::as_str).map(str::to_string)
}

/// Check the headers and the envelope, in the order the revision gives: the routing headers,
/// then the envelope's presence, then the version header against the envelope, then the
/// version itself.
fn check(
    method: &str,
    params: &Value,
    headers: Option<&RequestHeaders>,
) -> Result<Envelope, Refusal> {
    if let Some(h) = headers {
        let mismatch = |what: &str| {
            refused(
                modern_codes::HEADER_MISMATCH,
                format!("the {what} header does not match the request body"),
                ExchangeStatus::BadRequest,
            )
        };
        match h.method.as_deref().map(str::trim) {
            Some(m) if m == method => {}
            _ => return Err(mismatch("Mcp-Method")),
        }
        if let Some(name) = named(method, params) {
            if h.name.as_deref().map(str::trim) != Some(name.as_str()) {
                return Err(mismatch("Mcp-Name"));
            }
        }
    }
    let invalid = |what: &str| {
        refused(
            wire::INVALID_PARAMS,
            format!("_meta must carry {what} (a request of the 2026-07-28 revision)"),
            ExchangeStatus::BadRequest,
        )
    };
    let meta = params
        .get("_meta")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("the request envelope"))?;
    let version = meta
        .get(META_PROTOCOL_VERSION)
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(META_PROTOCOL_VERSION))?;
    let caps = meta
        .get(META_CLIENT_CAPABILITIES)
        .filter(|c| c.is_object())
        .ok_or_else(|| invalid(META_CLIENT_CAPABILITIES))?;
    if let Some(h) = headers {
        if h.protocol_version.as_deref().map(str::trim) != Some(version) {
            return Err(refused(
                modern_codes::HEADER_MISMATCH,
                "the MCP-Protocol-Version header does not match the request's protocol version",
                ExchangeStatus::BadRequest,
            ));
        }
    }
    if !MODERN_VERSIONS.contains(&version) {
        return Err(Refusal {
            code: modern_codes::UNSUPPORTED_PROTOCOL_VERSION,
            message: format!("unsupported protocol version: {version}"),
            data: Some(json!({ "supported": supported_versions(), "requested": version })),
            status: ExchangeStatus::BadRequest,
        });
    }
    Ok(Envelope {
        caps: ClientCaps::from_capabilities(Some(caps)),
        log_level: meta
            .get(META_LOG_LEVEL)
            .and_then(Value::as_str)
            .and_then(crate::catalog::LogLevel::parse),
    })
}

/// `params` without what only the gateway reads: the envelope's members, the retry's
/// `inputResponses` and `requestState` (the servers behind get their own).
fn stripped(params: &Value) -> Value {
    let mut params = params.clone();
    if let Some(obj) = params.as_object_mut() {
        obj.remove("inputResponses");
        obj.remove("requestState");
        let empty = match obj.get_mut("_meta").and_then(Value::as_object_mut) {
            Some(meta) => {
                for key in [
                    META_PROTOCOL_VERSION,
                    META_CLIENT_CAPABILITIES,
                    META_CLIENT_INFO,
                    META_LOG_LEVEL,
                ] {
                    meta.remove(key);
                }
                meta.is_empty()
            }
            None => false,
        };
        if empty {
            obj.remove("_meta");
        }
    }
    params
}

/// `frame` (a response of ours) with `fields` added to its `result`; an error response is
/// left as it is.
#[cfg(test)]
fn with_result_fields(frame: &[u8], fields: &Map<String, Value>) -> Bytes {
    let mut members = Vec::new();
    for (k, v) in fields {
        if !members.is_empty() {
            members.push(b',');
        }
        members.extend_from_slice(&serde_json::to_vec(k).unwrap_or_default());
        members.push(b':');
        members.extend_from_slice(&serde_json::to_vec(v).unwrap_or_default());
    }
    with_result_members(frame, &members)
}

/// What the stateless revision adds to a result of ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ResultFields {
    /// `resultType: "complete"`.
    Complete,
    /// That and the cache hints of a list (`cacheScope`, `ttlMs`).
    Cacheable,
}

impl ResultFields {
    /// The members as JSON text, in key order (as a `Map` of them serializes).
    fn members(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        if self == ResultFields::Cacheable {
            out.extend_from_slice(br#""cacheScope":"private","#);
        }
        out.extend_from_slice(br#""resultType":"complete""#);
        if self == ResultFields::Cacheable {
            out.extend_from_slice(br#","ttlMs":"#);
            out.extend_from_slice(LIST_TTL_MS.to_string().as_bytes());
        }
        out
    }
}

/// `frame` (a response of ours) with `fields` added to its `result`; an error response is
/// left as it is.
fn with_fields(frame: &[u8], fields: ResultFields) -> Bytes {
    with_result_members(frame, &fields.members())
}

/// `frame` (a response of ours) with `members` (JSON object members, comma-separated) added
/// to its `result`; an error response is left as it is. Our own frames are
/// `{"jsonrpc":"2.0","id":…,"result":{…}}` in that order, and an id is a number or a string
/// (whose quotes are escaped), so the first `,"result":{` is where the result begins.
fn with_result_members(frame: &[u8], members: &[u8]) -> Bytes {
    const MARK: &[u8] = b",\"result\":{";
    let Some(at) = frame.windows(MARK.len()).position(|w| w == MARK) else {
        return Bytes::copy_from_slice(frame);
    };
    let start = at + MARK.len();
    if members.is_empty() {
        return Bytes::copy_from_slice(frame);
    }
    let mut out = Vec::with_capacity(frame.len() + members.len() + 1);
    out.extend_from_slice(&frame[..start]);
    out.extend_from_slice(members);
    if frame.get(start) != Some(&b'}') {
        out.push(b',');
    }
    out.extend_from_slice(&frame[start..]);
    Bytes::from(out)
}

impl Gateway {
    /// One downstream frame, with its HTTP headers when it came over HTTP: a request of the
    /// stateless revision is served here, everything else as a session's.
    pub(super) fn any_frame(
        &mut self,
        session: SessionId,
        exchange: ExchangeId,
        frame: &[u8],
        headers: Option<&RequestHeaders>,
    ) {
        let legacy_session = self.sessions.get(&session).is_some_and(|s| s.initialized);
        // Decoded once: a request of the stateless revision is served here, anything else
        // (a malformed frame too) as a session's.
        match wire::decode(frame) {
            Ok(wire::Message::Request { id, method, params })
                if !legacy_session && is_modern(&method, &params, headers) =>
            {
                self.modern_request(session, exchange, id, &method, params, headers)
            }
            message => self.frame(session, exchange, message),
        }
    }

    fn modern_request(
        &mut self,
        session: SessionId,
        exchange: ExchangeId,
        id: Value,
        method: &str,
        params: Value,
        headers: Option<&RequestHeaders>,
    ) {
        let Some(s) = self.sessions.get(&session) else {
            return;
        };
        // A session the shell opened for this exchange alone (HTTP without a session id).
        if s.strict && !s.initialized {
            self.modern.one_shot.insert(session);
        }
        let envelope = match check(method, &params, headers) {
            Ok(e) => e,
            Err(r) => return self.refuse_modern(session, exchange, &id, r),
        };
        let frame = match method {
            "server/discover" => self.discover(&id),
            "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list" => {
                let page = if method == "tools/list" && self.options.tool_search {
                    super::search::tools_list(&id)
                } else {
                    self.list(&id, method, &params)
                };
                with_fields(&page, ResultFields::Cacheable)
            }
            "subscriptions/listen" => return self.listen(session, exchange, id, &params),
            "tools/call" | "resources/read" | "prompts/get" | "completion/complete" => {
                if params.get("requestState").is_some() {
                    if let Some(r) = self.retry(session, exchange, &id, &params, envelope, method) {
                        self.refuse_modern(session, exchange, &id, r);
                    }
                    return;
                }
                self.modern_forward(session, exchange, id, method, &params, envelope);
                return;
            }
            _ => {
                return self.refuse_modern(
                    session,
                    exchange,
                    &id,
                    refused(
                        wire::METHOD_NOT_FOUND,
                        format!("method not found: {method}"),
                        ExchangeStatus::NotFound,
                    ),
                )
            }
        };
        self.modern_status(session, exchange, ExchangeStatus::Ok);
        self.answer(session, exchange, frame);
    }

    /// Tell the shell the exchange's status (before its first frame).
    pub(super) fn modern_status(
        &mut self,
        session: SessionId,
        exchange: ExchangeId,
        status: ExchangeStatus,
    ) {
        if self.modern.one_shot.contains(&session) {
            self.outputs.push_back(GatewayOutput::Stateless {
                session,
                exchange,
                status,
            });
        }
    }

    fn refuse_modern(&mut self, session: SessionId, exchange: ExchangeId, id: &Value, r: Refusal) {
        self.modern_status(session, exchange, r.status);
        let frame = wire::error(id, r.code, &r.message, r.data.as_ref());
        self.answer(session, exchange, frame);
    }

    fn discover(&self, id: &Value) -> Bytes {
        let mut result = json!({
            "supportedVersions": supported_versions(),
            "capabilities": {
                "tools": { "listChanged": true },
                "resources": { "subscribe": true, "listChanged": true },
                "prompts": { "listChanged": true },
                "completions": {},
            },
            "serverInfo": { "name": self.options.name, "version": self.options.version },
            "resultType": "complete",
            "ttlMs": LIST_TTL_MS,
            "cacheScope": "private",
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {
                    "name": self.options.name, "version": self.options.version
                }
            },
        });
        if let (Some(text), Some(obj)) = (&self.options.instructions, result.as_object_mut()) {
            obj.insert("instructions".into(), Value::String(text.clone()));
        }
        wire::result(id, result)
    }

    /// Hand a call or operation to the manager as a session's would be, remembering it is a
    /// stateless client's (its answer gets `resultType`; a server's request for input in its
    /// middle becomes an `InputRequiredResult`).
    pub(super) fn modern_forward(
        &mut self,
        session: SessionId,
        exchange: ExchangeId,
        id: Value,
        method: &str,
        params: &Value,
        envelope: Envelope,
    ) -> Option<CallId> {
        self.modern_status(session, exchange, ExchangeStatus::Ok);
        self.modern
            .resulting
            .insert((session, exchange), method == "resources/read");
        let key = id_key(&id);
        self.request(session, exchange, id, method, stripped(params));
        let call = self
            .sessions
            .get(&session)
            .and_then(|s| s.in_flight.get(&key))
            .copied();
        // None: answered at once (an error).
        let call = call?;
        let server = self.server_of(call, method, params);
        let mut m = super::mrtr::ModernCall::new(server, envelope.caps, method);
        m.log_level = envelope.log_level;
        self.modern.calls.insert(call, m);
        Some(call)
    }

    /// A server's log: on the stream of each running request of a stateless client to that
    /// server that asked for logs at that level or below.
    pub(super) fn modern_server_log(
        &mut self,
        server: &str,
        level: crate::catalog::LogLevel,
        frame: &Bytes,
    ) {
        let to: Vec<(SessionId, ExchangeId)> = self
            .modern
            .calls
            .iter()
            .filter(|(_, m)| {
                m.server.as_deref() == Some(server) && m.log_level.is_some_and(|min| level >= min)
            })
            .filter_map(|(c, _)| self.pending.get(c).map(|p| (p.session, p.exchange)))
            .collect();
        for (session, exchange) in to {
            self.send(
                session,
                Target::Exchange {
                    exchange,
                    last: false,
                },
                frame.clone(),
            );
        }
    }

    /// The server a call or operation goes to, as far as the view says.
    fn server_of(&self, call: CallId, method: &str, params: &Value) -> Option<String> {
        if let Some(super::PendingKind::Tool { server }) = self.pending.get(&call).map(|p| &p.kind)
        {
            return server.clone();
        }
        let name = params.get("name").and_then(Value::as_str)?;
        if method != "prompts/get" {
            return None;
        }
        let qualified = super::served::resolve(
            name,
            &self.names.prompts,
            self.view.prompts.iter().map(|p| p.qualified_name.as_str()),
        );
        self.view
            .prompts
            .iter()
            .find(|p| p.qualified_name == qualified)
            .map(|p| p.server.clone())
    }

    /// The answer frame for `exchange`: a result of the stateless revision gets its
    /// `resultType` (and cache hints where the revision caches it).
    pub(super) fn modern_answer_frame(
        &mut self,
        session: SessionId,
        exchange: ExchangeId,
        frame: Bytes,
    ) -> Bytes {
        match self.modern.resulting.remove(&(session, exchange)) {
            None => frame,
            Some(false) => with_fields(&frame, ResultFields::Complete),
            Some(true) => with_fields(&frame, ResultFields::Cacheable),
        }
    }

    /// After an answer: a one-exchange session with nothing left in flight is closed.
    pub(super) fn modern_answered(&mut self, session: SessionId) {
        if !self.modern.one_shot.contains(&session) || self.modern.listens.contains_key(&session) {
            return;
        }
        let idle = self
            .sessions
            .get(&session)
            .is_none_or(|s| s.in_flight.is_empty());
        if idle {
            self.modern.one_shot.remove(&session);
            self.close(session, true);
        }
    }

    /// A session ended: what the stateless side kept for it goes.
    pub(super) fn modern_session_closed(&mut self, session: SessionId) {
        self.modern.one_shot.remove(&session);
        self.modern.resulting.retain(|(s, _), _| *s != session);
        if let Some(listen) = self.modern.listens.remove(&session) {
            for uri in listen.uris {
                self.release_subscription(&uri);
            }
        }
    }

    fn listen(&mut self, session: SessionId, exchange: ExchangeId, id: Value, params: &Value) {
        let wanted = params.get("notifications");
        let flag = |name: &str| {
            wanted
                .and_then(|n| n.get(name))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let uris: BTreeSet<String> = wanted
            .and_then(|n| n.get("resourceSubscriptions"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .take(self.options.max_subscriptions)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let listen = Listen {
            exchange,
            id,
            tools: flag("toolsListChanged"),
            prompts: flag("promptsListChanged"),
            resources: flag("resourcesListChanged"),
            uris,
        };
        // Each named resource is watched upstream once, whoever else holds it.
        let new: Vec<String> = listen
            .uris
            .iter()
            .filter(|u| {
                !self.modern.holds(u)
                    && !self.sessions.values().any(|s| s.subscriptions.contains(*u))
            })
            .cloned()
            .collect();
        let mut honored = Map::new();
        for (name, on) in [
            ("toolsListChanged", listen.tools),
            ("promptsListChanged", listen.prompts),
            ("resourcesListChanged", listen.resources),
        ] {
            if on {
                honored.insert(name.into(), Value::Bool(true));
            }
        }
        if !listen.uris.is_empty() {
            honored.insert(
                "resourceSubscriptions".into(),
                Value::from(listen.uris.iter().cloned().collect::<Vec<_>>()),
            );
        }
        let ack = wire::notification(
            "notifications/subscriptions/acknowledged",
            Some(json!({
                "notifications": honored,
                "_meta": { META_SUBSCRIPTION_ID: listen.id },
            })),
        );
        self.modern_status(session, exchange, ExchangeStatus::Ok);
        self.modern.listens.insert(session, listen);
        self.send(
            session,
            Target::Exchange {
                exchange,
                last: false,
            },
            ack,
        );
        for uri in new {
            let call = self.fresh_call();
            self.outputs
                .push_back(GatewayOutput::Manager(crate::manager::Input::Operation {
                    call,
                    op: crate::catalog::Operation::Subscribe {
                        server: super::templates::server_for_uri(&self.view, &uri),
                        uri,
                    },
                    timeout: None,
                }));
        }
    }

    /// The view changed: tell the listen streams that asked for those kinds.
    pub(super) fn listen_view_changed(&mut self, tools: bool, resources: bool, prompts: bool) {
        let mut out = Vec::new();
        for (&session, l) in &self.modern.listens {
            for (changed, wants, method) in [
                (tools, l.tools, "notifications/tools/list_changed"),
                (
                    resources,
                    l.resources,
                    "notifications/resources/list_changed",
                ),
                (prompts, l.prompts, "notifications/prompts/list_changed"),
            ] {
                if changed && wants {
                    let params = json!({ "_meta": { META_SUBSCRIPTION_ID: l.id } });
                    out.push((
                        session,
                        l.exchange,
                        wire::notification(method, Some(params)),
                    ));
                }
            }
        }
        for (session, exchange, frame) in out {
            self.counters.list_changed += 1;
            self.send(
                session,
                Target::Exchange {
                    exchange,
                    last: false,
                },
                frame,
            );
        }
    }

    /// A resource changed: tell the listen streams that named it.
    pub(super) fn listen_resource_updated(&mut self, uri: &str) {
        let out: Vec<(SessionId, ExchangeId, Bytes)> = self
            .modern
            .listens
            .iter()
            .filter(|(_, l)| l.uris.contains(uri))
            .map(|(&session, l)| {
                let params = json!({ "uri": uri, "_meta": { META_SUBSCRIPTION_ID: l.id } });
                let frame = wire::notification("notifications/resources/updated", Some(params));
                (session, l.exchange, frame)
            })
            .collect();
        for (session, exchange, frame) in out {
            self.send(
                session,
                Target::Exchange {
                    exchange,
                    last: false,
                },
                frame,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_fields_go_into_the_result_and_leave_errors_alone() {
        let mut f = Map::new();
        f.insert("resultType".into(), json!("complete"));
        let r = with_result_fields(
            br#"{"jsonrpc":"2.0","id":"a,\"result\":{","result":{"x":1}}"#,
            &f,
        );
        let v: Value = serde_json::from_slice(&r).unwrap();
        assert_eq!(v["result"], json!({ "resultType": "complete", "x": 1 }));
        assert_eq!(v["id"], json!("a,\"result\":{"));
        let r = with_result_fields(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &f);
        let v: Value = serde_json::from_slice(&r).unwrap();
        assert_eq!(v["result"], json!({ "resultType": "complete" }));
        let e = br#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}"#;
        assert_eq!(&with_result_fields(e, &f)[..], &e[..]);
    }

    #[test]
    fn result_fields_read_as_their_map_would() {
        let mut m = Map::new();
        m.insert("resultType".into(), Value::from("complete"));
        let frame = br#"{"jsonrpc":"2.0","id":1,"result":{"x":1}}"#;
        let complete = with_result_fields(frame, &m);
        assert_eq!(with_fields(frame, ResultFields::Complete), complete);
        m.insert("ttlMs".into(), Value::from(LIST_TTL_MS));
        m.insert("cacheScope".into(), Value::from("private"));
        let cacheable = with_result_fields(frame, &m);
        assert_eq!(with_fields(frame, ResultFields::Cacheable), cacheable);
    }

    #[test]
    fn the_envelope_is_checked_in_the_revisions_order() {
        let meta = |v: &str| json!({ "_meta": { META_PROTOCOL_VERSION: v, META_CLIENT_CAPABILITIES: {} } });
        let h = |v: &str, m: &str| RequestHeaders {
            protocol_version: Some(v.into()),
            method: Some(m.into()),
            name: None,
        };
        let code = |r: Result<Envelope, Refusal>| r.err().map(|r| (r.code, r.status));
        assert_eq!(
            code(check(
                "tools/list",
                &meta("2026-07-28"),
                Some(&h("2026-07-28", "tools/list"))
            )),
            None
        );
        assert_eq!(code(check("tools/list", &meta("2026-07-28"), None)), None);
        assert_eq!(
            code(check(
                "tools/list",
                &json!({}),
                Some(&h("2026-07-28", "tools/list"))
            )),
            Some((wire::INVALID_PARAMS, ExchangeStatus::BadRequest))
        );
        assert_eq!(
            code(check(
                "tools/list",
                &meta("2026-07-28"),
                Some(&h("2026-07-28", "prompts/list"))
            )),
            Some((modern_codes::HEADER_MISMATCH, ExchangeStatus::BadRequest))
        );
        assert_eq!(
            code(check(
                "tools/list",
                &meta("v9"),
                Some(&h("2026-07-28", "tools/list"))
            )),
            Some((modern_codes::HEADER_MISMATCH, ExchangeStatus::BadRequest))
        );
        assert_eq!(
            code(check(
                "tools/list",
                &meta("v9"),
                Some(&h("v9", "tools/list"))
            )),
            Some((
                modern_codes::UNSUPPORTED_PROTOCOL_VERSION,
                ExchangeStatus::BadRequest
            ))
        );
        let call = json!({ "name": "t", "_meta": { META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {} } });
        let mut ch = h("2026-07-28", " tools/call ");
        assert!(code(check("tools/call", &call, Some(&ch))).is_some());
        ch.name = Some("t".into());
        assert_eq!(code(check("tools/call", &call, Some(&ch))), None);
    }

    #[test]
    fn the_envelope_never_reaches_the_servers() {
        let p = json!({
            "name": "t", "requestState": "s", "inputResponses": {},
            "_meta": { META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}, "progressToken": 1 }
        });
        assert_eq!(
            stripped(&p),
            json!({ "name": "t", "_meta": { "progressToken": 1 } })
        );
    }
}
