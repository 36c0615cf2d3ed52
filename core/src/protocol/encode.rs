//! Outgoing frames: our requests and notifications, and our answers to a server's requests.
//! Each is written once, straight from typed fields, into the bytes the shell writes: no
//! `Value` tree is built only to be serialized and dropped.
//!
//! Objects are written with their keys in byte order (the order a `serde_json::Map` keeps),
//! so a frame's bytes do not depend on how it was built.

use super::{ClientFeatures, PeerRequestId};
use bytes::Bytes;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{Map, Value};

/// One serializable value as a frame. Serializing the frame types cannot fail (every map key
/// is a string); a params value that is not an object where one must be merged with `_meta`
/// would, and gives an empty frame.
fn to_frame<T: Serialize>(value: &T) -> Bytes {
    let mut out = Vec::with_capacity(128);
    match serde_json::to_writer(&mut out, value) {
        Ok(()) => Bytes::from(out),
        Err(_) => Bytes::new(),
    }
}

/// A request frame: `params` (any serializable value, usually a [`RequestParams`]) is left
/// out when `None`.
pub fn encode_request<P: Serialize>(id: u64, method: &str, params: Option<P>) -> Bytes {
    #[derive(Serialize)]
    struct Request<'a, P> {
        id: u64,
        jsonrpc: &'static str,
        method: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<P>,
    }
    to_frame(&Request {
        id,
        jsonrpc: "2.0",
        method,
        params,
    })
}

/// A request frame whose params are JSON text already (spliced in as they are).
pub fn encode_request_text(id: u64, method: &str, params: &str) -> Bytes {
    let method = serde_json::to_string(method).unwrap_or_else(|_| "\"\"".into());
    Bytes::from(format!(
        r#"{{"id":{id},"jsonrpc":"2.0","method":{method},"params":{params}}}"#
    ))
}

/// A notification frame.
pub fn encode_notification<P: Serialize>(method: &str, params: Option<P>) -> Bytes {
    #[derive(Serialize)]
    struct Notification<'a, P> {
        jsonrpc: &'static str,
        method: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<P>,
    }
    to_frame(&Notification {
        jsonrpc: "2.0",
        method,
        params,
    })
}

/// A successful answer to a server's request.
pub fn encode_result<R: Serialize>(id: &PeerRequestId, result: R) -> Bytes {
    #[derive(Serialize)]
    struct Answer<'a, R> {
        id: &'a Value,
        jsonrpc: &'static str,
        result: R,
    }
    to_frame(&Answer {
        id: &id.0,
        jsonrpc: "2.0",
        result,
    })
}

/// An error answer to a server's request.
pub fn encode_error(id: &PeerRequestId, code: i64, message: &str) -> Bytes {
    #[derive(Serialize)]
    struct Error<'a> {
        code: i64,
        message: &'a str,
    }
    #[derive(Serialize)]
    struct Answer<'a> {
        error: Error<'a>,
        id: &'a Value,
        jsonrpc: &'static str,
    }
    to_frame(&Answer {
        error: Error { code, message },
        id: &id.0,
        jsonrpc: "2.0",
    })
}

/// `notifications/cancelled` for one of our requests.
pub fn encode_cancelled(request_id: u64, reason: &str) -> Bytes {
    #[derive(Serialize)]
    struct Cancelled<'a> {
        reason: &'a str,
        #[serde(rename = "requestId")]
        request_id: u64,
    }
    encode_notification(
        "notifications/cancelled",
        Some(Cancelled { reason, request_id }),
    )
}

/// An empty object, `{}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Empty {}

/// The `capabilities` object a client declares for its features: exactly those that are on
/// (`roots: {listChanged: true}`, `sampling: {}`, `elicitation: {form: {}, url: {}}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientCapabilities(pub ClientFeatures);

impl Serialize for ClientCapabilities {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Roots {
            #[serde(rename = "listChanged")]
            list_changed: bool,
        }
        #[derive(Serialize)]
        struct Elicitation {
            #[serde(skip_serializing_if = "Option::is_none")]
            form: Option<Empty>,
            #[serde(skip_serializing_if = "Option::is_none")]
            url: Option<Empty>,
        }
        let f = &self.0;
        let mut m = s.serialize_map(None)?;
        if f.elicitation() {
            let modes = Elicitation {
                form: f.elicitation_form.then_some(Empty {}),
                url: f.elicitation_url.then_some(Empty {}),
            };
            m.serialize_entry("elicitation", &modes)?;
        }
        if f.roots {
            m.serialize_entry("roots", &Roots { list_changed: true })?;
        }
        if f.sampling {
            m.serialize_entry("sampling", &Empty {})?;
        }
        m.end()
    }
}

/// `clientInfo`: our name and version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ClientInfo<'a> {
    /// Always `switchboard`.
    pub name: &'static str,
    /// The embedder's client version.
    pub version: &'a str,
}

impl<'a> ClientInfo<'a> {
    /// Switchboard at `version`.
    pub fn new(version: &'a str) -> Self {
        ClientInfo {
            name: "switchboard",
            version,
        }
    }
}

/// The `_meta` members every stateless (2026-07-28) request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatelessMeta<'a> {
    /// `io.modelcontextprotocol/protocolVersion`.
    pub version: &'a str,
    /// `io.modelcontextprotocol/clientCapabilities`.
    pub capabilities: ClientCapabilities,
    /// `io.modelcontextprotocol/clientInfo`.
    pub client_info: ClientInfo<'a>,
    /// `io.modelcontextprotocol/logLevel`, when a level was set for the server.
    pub log_level: Option<&'a str>,
}

/// One of our `_meta` members' values.
enum MetaMember<'a> {
    Capabilities(&'a ClientCapabilities),
    Info(&'a ClientInfo<'a>),
    Text(&'a str),
}

impl Serialize for MetaMember<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MetaMember::Capabilities(c) => c.serialize(s),
            MetaMember::Info(i) => i.serialize(s),
            MetaMember::Text(t) => s.serialize_str(t),
        }
    }
}

impl StatelessMeta<'_> {
    /// The members, in key order.
    fn members(&self) -> impl Iterator<Item = (&'static str, MetaMember<'_>)> {
        use super::modern::{
            META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION,
        };
        [
            Some((
                META_CLIENT_CAPABILITIES,
                MetaMember::Capabilities(&self.capabilities),
            )),
            Some((META_CLIENT_INFO, MetaMember::Info(&self.client_info))),
            self.log_level
                .map(|l| (META_LOG_LEVEL, MetaMember::Text(l))),
            Some((META_PROTOCOL_VERSION, MetaMember::Text(self.version))),
        ]
        .into_iter()
        .flatten()
    }
}

/// A request's `_meta`: the caller's own members (a tool call's progress token and the
/// embedder's `_meta`) merged with the stateless members, which win a key both have (the
/// protocol's keys are always ours). Written in key order.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestMeta<'a> {
    /// The stateless members, on a stateless connection.
    pub stateless: Option<StatelessMeta<'a>>,
    /// The caller's members.
    pub own: Option<&'a Map<String, Value>>,
}

impl RequestMeta<'_> {
    /// Nothing to write: no `_meta` member at all.
    pub fn is_empty(&self) -> bool {
        self.stateless.is_none() && self.own.is_none_or(Map::is_empty)
    }
}

impl Serialize for RequestMeta<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        let mut own = self.own.into_iter().flatten().peekable();
        if let Some(ours) = &self.stateless {
            for (key, value) in ours.members() {
                while let Some((k, v)) = own.next_if(|(k, _)| k.as_str() < key) {
                    m.serialize_entry(k, v)?;
                }
                // A caller's member under one of our keys is replaced by ours.
                own.next_if(|(k, _)| k.as_str() == key);
                m.serialize_entry(key, &value)?;
            }
        }
        for (k, v) in own {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// A request's params: its `_meta` (when there is one), then the members of `body` (an
/// object: a typed params struct, or a `Value` holding an object). Every params member of
/// MCP starts with a lowercase letter, so `_meta` first is key order. The whole is left out
/// of the frame when [`is_absent`](Self::is_absent).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RequestParams<'a, B> {
    /// The `_meta` member.
    #[serde(rename = "_meta", skip_serializing_if = "RequestMeta::is_empty")]
    pub meta: RequestMeta<'a>,
    /// The request's own members.
    #[serde(flatten)]
    pub body: Option<B>,
}

impl<B> RequestParams<'_, B> {
    /// No body and no `_meta`: the request has no params.
    pub fn is_absent(&self) -> bool {
        self.body.is_none() && self.meta.is_empty()
    }
}

/// No params: a request or notification that carries none.
pub const NO_PARAMS: Option<Empty> = None;
