//! Which revision of MCP a connection speaks, decided once per connection attempt.
//!
//! An attempt starts `Probing` (when [`ProtocolPolicy::probe`] is on): it asks
//! `server/discover` — the stateless revision's one request every server of it answers — with
//! the stateless `_meta`. A `DiscoverResult` listing a version we speak makes the connection
//! `Modern`; an `UnsupportedProtocolVersion` error naming a version we speak asks once more with
//! it; any other answer, whatever its code (an older server answers an unknown method with an
//! error of its own choosing), a transport that could not deliver it, or no answer within
//! `probe_timeout` on stdio, makes it `Legacy`, and `initialize` follows on the same
//! connection. The decision is remembered per server (and in the tool cache beside its
//! tools), so the next attempt — a reconnect, or a warm start — skips the probe; an attempt
//! that fails before it is ready forgets it, so the one after probes again.
//!
//! On a `Modern` connection every request carries `_meta` (protocol version, client
//! capabilities, client info) and its frame metadata names the
//! version, the request's target and the `x-mcp-header` arguments, from which an HTTP
//! transport makes its headers.

use super::errors::{ServerError, ServerErrorKind};
use super::sessions::Req;
use super::{ConnId, FrameKind, FrameMeta, Level, Manager, Output, TimerReason};
use crate::protocol::{self, InitializeResult, ProbeAnswer, RpcError};
use crate::time::Instant;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use std::time::Duration;

/// The revision family a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Era {
    /// `initialize`, sessions, server-to-client requests (2024-11-05 to 2025-11-25).
    Legacy,
    /// Stateless: `server/discover`, `_meta` on every request (2026-07-28).
    Modern,
}

impl Era {
    /// `legacy` or `modern`.
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }
}

/// How the core chooses a connection's revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolPolicy {
    /// Probe with `server/discover` before `initialize` (off: `initialize` at once, the
    /// legacy revisions only). The library turns it on.
    pub probe: bool,
    /// How long a probe on stdio waits before the server is taken for a legacy one that
    /// ignores unknown requests (2 s, and at most half of what is left of the connect
    /// timeout).
    pub probe_timeout: Duration,
}

impl Default for ProtocolPolicy {
    fn default() -> Self {
        ProtocolPolicy {
            probe: false,
            probe_timeout: Duration::from_secs(2),
        }
    }
}

/// How a server was reached last, kept with its cache entry so a warm start skips the probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handshake {
    /// The revision family it spoke.
    pub era: Era,
    /// A stateless server's `server/discover` answer, as sent (read again at a warm start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discover: Option<String>,
}

/// What a connection speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Wire {
    /// `server/discover` (request `id`, asked with `version`) is out; `retried` after one
    /// `UnsupportedProtocolVersion`; `deadline` is the stdio probe's timer.
    Probing {
        version: &'static str,
        id: u64,
        retried: bool,
        deadline: Option<Instant>,
    },
    /// `initialize`-based.
    Legacy,
    /// Stateless, speaking `version`.
    Modern { version: &'static str },
}

/// A stdio probe that went unanswered within `probe_timeout`: `initialize` went out after it.
/// The server reads both, in order, so `initialize`'s answer decides: a success makes the
/// connection legacy (a server of both revisions set it up as a 2025 session), a refusal makes
/// it stateless once the probe's late `DiscoverResult` is in (whichever of the two comes
/// first: a stateless-only server may answer out of order).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct LateProbe {
    /// The probe's request id (still tracked).
    pub(super) probe: u64,
    /// The version it asked with.
    pub(super) asked: &'static str,
    /// The `initialize` request sent after it.
    pub(super) initialize: u64,
    /// `initialize` was refused for its version (-32022) first: a stateless-only server
    /// that answers out of order. The probe's answer still decides; if it is not a
    /// `DiscoverResult`, this refusal ends the attempt.
    pub(super) refused: Option<RpcError>,
    /// The probe was answered with a `DiscoverResult` while `initialize` was still out: held
    /// until `initialize` is answered, because a server that speaks both revisions reads
    /// `initialize` after the probe and sets the connection up as a 2025 session — its
    /// success makes the connection legacy; a refusal (any error) makes it stateless, from
    /// this answer.
    pub(super) discovered: Option<HeldDiscover>,
}

/// A late `DiscoverResult` waiting for `initialize`'s answer (see [`LateProbe`]).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct HeldDiscover {
    init: InitializeResult,
    raw_text: Option<String>,
    version: &'static str,
}

impl Wire {
    /// The stateless version the connection's requests carry, if any.
    pub(super) fn modern_version(&self) -> Option<&'static str> {
        match self {
            Wire::Probing { version, .. } | Wire::Modern { version } => Some(version),
            Wire::Legacy => None,
        }
    }
}

fn static_version(v: &str) -> Option<&'static str> {
    protocol::MODERN_VERSIONS.into_iter().find(|m| *m == v)
}

impl Manager {
    /// The transport of attempt `conn` is open: probe, or go straight to what the server spoke
    /// last time.
    pub(super) fn begin_handshake(&mut self, conn: ConnId, server: &str, deadline: Instant) {
        // The legacy HTTP+SSE transport only ever carries the initialize-based revisions.
        let sse = self
            .servers
            .get(server)
            .is_some_and(|s| s.transport == Some("sse"));
        if !self.opts.protocol.probe || sse {
            self.send_initialize(conn, server, deadline);
            return;
        }
        let memo = self.servers.get(server).and_then(|s| s.handshake.clone());
        match memo {
            Some(Handshake {
                era: Era::Modern,
                discover: Some(text),
            }) => {
                // A remembered answer that offered no tools has nothing to serve early, and
                // may be a passing state of a restarted server: ask again instead.
                let init = RawValue::from_string(text)
                    .ok()
                    .and_then(|raw| protocol::parse_discover_result(&raw).ok().flatten())
                    .filter(|init| init.has_tools);
                if let Some(init) = init {
                    if let Some(version) = static_version(&init.protocol_version) {
                        self.counters.probes_skipped += 1;
                        self.set_wire(conn, Wire::Modern { version });
                        self.set_phase(
                            server,
                            super::servers::Stage::Initializing { conn, deadline },
                        );
                        // Lists still fresh need not be asked again yet.
                        if !self.ready_from_fresh_cache(conn, server, deadline, &init) {
                            self.on_ready_to_list(conn, server, deadline, init, false);
                        }
                        return;
                    }
                }
            }
            Some(Handshake {
                era: Era::Legacy, ..
            }) => {
                self.counters.probes_skipped += 1;
                self.send_initialize(conn, server, deadline);
                return;
            }
            _ => {}
        }
        self.set_phase(
            server,
            super::servers::Stage::Initializing { conn, deadline },
        );
        self.send_probe(conn, server, protocol::MODERN_VERSION, false);
    }

    /// `initialize`, on a connection that speaks (or falls back to) the legacy revisions.
    pub(super) fn send_initialize(
        &mut self,
        conn: ConnId,
        server: &str,
        deadline: Instant,
    ) -> Option<u64> {
        self.set_wire(conn, Wire::Legacy);
        // The version is copied out: the request is written while the manager is borrowed.
        let version = self.opts.client_version.clone();
        let params = protocol::initialize_params(&version, self.client_capabilities());
        let id = self.request(conn, "initialize", Some(params), Req::Initialize);
        self.set_phase(
            server,
            super::servers::Stage::Initializing { conn, deadline },
        );
        id
    }

    fn set_wire(&mut self, conn: ConnId, wire: Wire) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.wire = wire;
        }
    }

    fn send_probe(&mut self, conn: ConnId, server: &str, version: &'static str, retried: bool) {
        self.counters.probes_sent += 1;
        // The probe itself speaks the stateless revision: mark the wire first so it carries
        // the `_meta` and headers (its id is filled in once issued).
        self.set_wire(
            conn,
            Wire::Probing {
                version,
                id: u64::MAX,
                retried,
                deadline: None,
            },
        );
        let Some(id) = self.request(conn, "server/discover", protocol::NO_PARAMS, Req::Probe)
        else {
            return;
        };
        let stdio = self
            .servers
            .get(server)
            .is_some_and(|s| s.transport == Some("stdio"));
        // At most half of what is left of the connect timeout, so a silent legacy server
        // still has time for `initialize` under a short one.
        let left = self
            .probing_deadline(server, conn)
            .map_or(self.opts.protocol.probe_timeout, |d| {
                d.saturating_duration_since(self.now) / 2
            });
        let wait = self.opts.protocol.probe_timeout.min(left);
        let deadline = stdio.then(|| self.now + wait);
        if let Some(at) = deadline {
            self.timers.arm(at, TimerReason::Probe { conn, id });
        }
        self.set_wire(
            conn,
            Wire::Probing {
                version,
                id,
                retried,
                deadline,
            },
        );
    }

    /// The probe of `conn` is over (answered, failed or timed out): disarm its timer and
    /// say what it asked with.
    fn end_probe(&mut self, conn: ConnId) -> Option<(&'static str, bool)> {
        let wire = self.conns.get(&conn).map(|c| c.wire.clone())?;
        let Wire::Probing {
            version,
            id,
            retried,
            deadline,
        } = wire
        else {
            return None;
        };
        if let Some(at) = deadline {
            self.timers.disarm(at, TimerReason::Probe { conn, id });
        }
        Some((version, retried))
    }

    fn probing_deadline(&self, server: &str, conn: ConnId) -> Option<Instant> {
        match self.servers.get(server).map(|s| &s.phase) {
            Some(super::servers::Stage::Initializing { conn: c, deadline }) if *c == conn => {
                Some(*deadline)
            }
            _ => None,
        }
    }

    /// The answer to `server/discover` on `conn`.
    pub(super) fn on_probe_answer(
        &mut self,
        conn: ConnId,
        server: &str,
        result: Result<Box<RawValue>, RpcError>,
    ) {
        let Some(deadline) = self.probing_deadline(server, conn) else {
            return;
        };
        let late = self.conns.get_mut(&conn).and_then(|c| c.late_probe.take());
        if let Some(late) = late {
            self.on_late_probe_answer(conn, server, deadline, late, result);
            return;
        }
        let Some((asked, retried)) = self.end_probe(conn) else {
            return;
        };
        let raw_text = result.as_ref().ok().map(|r| r.get().to_string());
        match protocol::classify_probe(result.as_deref(), asked) {
            ProbeAnswer::Modern(init) => {
                let Some(version) = static_version(&init.protocol_version) else {
                    return;
                };
                self.counters.probes_modern += 1;
                self.set_wire(conn, Wire::Modern { version });
                if let Some(s) = self.servers.get_mut(server) {
                    s.handshake = Some(Handshake {
                        era: Era::Modern,
                        discover: raw_text,
                    });
                }
                if !self.ready_from_fresh_cache(conn, server, deadline, &init) {
                    self.on_ready_to_list(conn, server, deadline, init, false);
                }
            }
            ProbeAnswer::Retry(version) if !retried => {
                self.counters.probe_version_retries += 1;
                self.send_probe(conn, server, version, true);
            }
            ProbeAnswer::Retry(version) => {
                self.counters.unsupported_versions += 1;
                let error = ServerError::new(
                    ServerErrorKind::UnsupportedVersion,
                    format!(
                        "server/discover failed: the server rejected protocol version {version} although it lists it as supported"
                    ),
                );
                self.fail_server(server, error, true);
            }
            ProbeAnswer::Refused(e) => {
                let error = ServerError::new(
                    ServerErrorKind::InitializeFailed,
                    format!("server/discover failed: {e}"),
                );
                self.fail_server(server, error, true);
            }
            ProbeAnswer::Legacy => {
                self.counters.probes_legacy += 1;
                self.send_initialize(conn, server, deadline);
            }
        }
    }

    /// The transport could not deliver the probe: an older server (an HTTP server that
    /// rejects it without a JSON-RPC answer, ...).
    pub(super) fn on_probe_undelivered(&mut self, conn: ConnId, server: &str, id: u64) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.tracker.complete(id);
            if c.late_probe.as_ref().is_some_and(|l| l.probe == id) {
                // Undelivered after all: `initialize` alone decides.
                c.late_probe = None;
            }
        }
        let Some(deadline) = self.probing_deadline(server, conn) else {
            return;
        };
        if self.end_probe(conn).is_none() {
            return;
        }
        self.counters.probes_legacy += 1;
        self.send_initialize(conn, server, deadline);
    }

    /// The stdio probe `id` of `conn` went unanswered: a legacy server that ignores unknown
    /// requests. Its answer, should it come, is ignored.
    pub(super) fn on_probe_timeout(&mut self, conn: ConnId, id: u64) {
        let Some(server) = self.conns.get(&conn).map(|c| c.server.clone()) else {
            return;
        };
        let current = matches!(
            self.conns.get(&conn).map(|c| &c.wire),
            Some(Wire::Probing { id: i, .. }) if *i == id
        );
        if !current {
            return;
        }
        let Some(deadline) = self.probing_deadline(&server, conn) else {
            return;
        };
        let asked = self
            .conns
            .get(&conn)
            .and_then(|c| c.wire.modern_version())
            .unwrap_or(protocol::MODERN_VERSION);
        self.counters.probe_timeouts += 1;
        self.diag(
            Some(&server),
            Level::Debug,
            format!(
                "server/discover went unanswered for {} ms: trying initialize (a late answer to server/discover that comes first still counts)",
                self.opts.protocol.probe_timeout.as_millis()
            ),
        );
        // The probe stays tracked: the revision is decided by the first of the two answers.
        let Some(initialize) = self.send_initialize(conn, &server, deadline) else {
            return;
        };
        if let Some(c) = self.conns.get_mut(&conn) {
            c.late_probe = Some(LateProbe {
                probe: id,
                asked,
                initialize,
                refused: None,
                discovered: None,
            });
        }
    }

    /// The probe of `conn` was answered after its timeout, while the `initialize` sent after
    /// it is still unanswered: a `DiscoverResult` decides the revision (stateless; the
    /// `initialize`, forgotten, gets no say when its answer comes). Any other answer changes
    /// nothing: `initialize`'s answer decides.
    fn on_late_probe_answer(
        &mut self,
        conn: ConnId,
        server: &str,
        deadline: Instant,
        late: LateProbe,
        result: Result<Box<RawValue>, RpcError>,
    ) {
        let raw_text = result.as_ref().ok().map(|r| r.get().to_string());
        let ProbeAnswer::Modern(init) = protocol::classify_probe(result.as_deref(), late.asked)
        else {
            if let Some(refusal) = late.refused {
                // Not a stateless server after all: `initialize`'s refusal stands.
                self.on_initialize(conn, server, Err(refusal));
                return;
            }
            self.diag(
                Some(server),
                Level::Debug,
                "a late answer to server/discover is not a DiscoverResult: initialize decides"
                    .into(),
            );
            if let Some(c) = self.conns.get_mut(&conn) {
                c.late_probe = Some(late);
            }
            return;
        };
        let Some(version) = static_version(&init.protocol_version) else {
            return;
        };
        self.counters.late_discovers += 1;
        let held = HeldDiscover {
            init,
            raw_text,
            version,
        };
        if late.refused.is_none() {
            // `initialize` is still out: its answer decides (see `LateProbe::discovered`).
            if let Some(c) = self.conns.get_mut(&conn) {
                c.late_probe = Some(LateProbe {
                    discovered: Some(held),
                    ..late
                });
            }
            return;
        }
        self.decide_modern_late(conn, server, deadline, late.initialize, held);
    }

    /// The revision of `conn` is the stateless one, from a `DiscoverResult` that came after
    /// the probe's timeout; `initialize` (sent after it) is forgotten.
    fn decide_modern_late(
        &mut self,
        conn: ConnId,
        server: &str,
        deadline: Instant,
        initialize: u64,
        held: HeldDiscover,
    ) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.tracker.forget(initialize);
        }
        self.counters.probes_modern += 1;
        self.set_wire(
            conn,
            Wire::Modern {
                version: held.version,
            },
        );
        if let Some(s) = self.servers.get_mut(server) {
            s.handshake = Some(Handshake {
                era: Era::Modern,
                discover: held.raw_text,
            });
        }
        self.on_ready_to_list(conn, server, deadline, held.init, false);
    }

    /// `initialize` was answered on `conn` (a result or an error): it decides, so a probe
    /// still unanswered no longer can — except a refusal of its version while the probe is
    /// still out, which waits for the probe's answer (bounded by the connect timeout): a
    /// stateless-only server may answer out of order. Whether the answer decides now.
    pub(super) fn initialize_decides(
        &mut self,
        conn: ConnId,
        server: &str,
        result: &Result<Box<RawValue>, RpcError>,
    ) -> bool {
        let Some(c) = self.conns.get_mut(&conn) else {
            return true;
        };
        let Some(late) = c.late_probe.as_mut() else {
            return true;
        };
        if result.is_err() && late.discovered.is_some() {
            // Refused after the late `DiscoverResult` came: a stateless-only server.
            let Some(late) = c.late_probe.take() else {
                return true;
            };
            let (Some(held), Some(deadline)) =
                (late.discovered, self.probing_deadline(server, conn))
            else {
                return true;
            };
            self.counters.initialize_refusals_held += 1;
            self.decide_modern_late(conn, server, deadline, late.initialize, held);
            return false;
        }
        if let Err(e) = result {
            if refused_for_version(e) && late.refused.is_none() {
                late.refused = Some(e.clone());
                self.counters.initialize_refusals_held += 1;
                return false;
            }
        }
        if let Some(late) = c.late_probe.take() {
            c.tracker.forget(late.probe);
            self.counters.probes_legacy += 1;
        }
        true
    }

    /// The stateless `_meta` members and the frame metadata of `method` on `conn`: the
    /// members a request carries there (none on a legacy connection, none for a
    /// notification), and what the transport needs to know. `name` is the params' `name` or
    /// `uri`, which a stateless `tools/call`, `prompts/get` or `resources/read` mirrors in
    /// its `Mcp-Name` header.
    pub(super) fn frame_for(
        &self,
        conn: ConnId,
        method: &'static str,
        name: Option<&str>,
        kind: FrameKind,
        headers: Vec<(String, String)>,
    ) -> (Option<protocol::StatelessMeta<'_>>, FrameMeta) {
        let Some(c) = self.conns.get(&conn) else {
            return (None, FrameMeta::legacy(kind, Some(method)));
        };
        let Some(version) = c.wire.modern_version() else {
            return (None, FrameMeta::legacy(kind, Some(method)));
        };
        let name = match method {
            "tools/call" | "prompts/get" | "resources/read" => name.map(protocol::header_text),
            _ => None,
        };
        let stateless = matches!(kind, FrameKind::Request { .. }).then(|| {
            let level = self.servers.get(&c.server).and_then(|s| s.log_level);
            protocol::StatelessMeta {
                version,
                capabilities: self.client_capabilities(),
                client_info: protocol::ClientInfo::new(&self.opts.client_version),
                log_level: level.map(crate::catalog::LogLevel::as_str),
            }
        });
        let meta = FrameMeta {
            kind,
            method: Some(method),
            protocol: Some(version),
            name,
            params: headers,
        };
        (stateless, meta)
    }

    /// Is `conn` a stateless connection?
    pub(super) fn is_modern(&self, conn: ConnId) -> bool {
        matches!(
            self.conns.get(&conn).map(|c| &c.wire),
            Some(Wire::Modern { .. })
        )
    }

    /// The request to check a ready connection's health: `ping`, which the stateless revision
    /// removed; there, `server/discover`, which every stateless server answers.
    pub(super) fn health_method(&self, conn: ConnId) -> &'static str {
        if self.is_modern(conn) {
            "server/discover"
        } else {
            "ping"
        }
    }

    /// The tools of a stateless server whose `x-mcp-header` annotations cannot be mirrored
    /// into headers are dropped, each with a diagnostic; the others are kept.
    pub(super) fn drop_unmirrorable_tools(
        &mut self,
        conn: ConnId,
        server: &str,
        tools: Vec<crate::tool::ToolDef>,
    ) -> Vec<crate::tool::ToolDef> {
        if !self.is_modern(conn) {
            return tools;
        }
        let mut kept = Vec::with_capacity(tools.len());
        for t in tools {
            match protocol::header_params(t.input_schema.get()) {
                Ok(_) => kept.push(t),
                Err(e) => {
                    self.counters.tools_dropped_for_headers += 1;
                    self.diag(
                        Some(server),
                        Level::Warn,
                        format!("dropped tool \"{}\": {e}", t.name),
                    );
                }
            }
        }
        kept
    }

    /// The `Mcp-Param-*` headers of a call of `tool` with `arguments` on `conn` (none on a
    /// legacy connection).
    pub(super) fn call_headers(
        &self,
        conn: ConnId,
        server: &str,
        tool: &str,
        arguments: Option<&Value>,
    ) -> Vec<(String, String)> {
        if !self.is_modern(conn) {
            return Vec::new();
        }
        let Some(def) = self
            .servers
            .get(server)
            .and_then(|s| s.tools.iter().find(|t| t.name == tool))
        else {
            return Vec::new();
        };
        match protocol::header_params(def.input_schema.get()) {
            Ok(pairs) => protocol::param_header_values(&pairs, arguments),
            Err(_) => Vec::new(),
        }
    }

    /// Issue request `method` on `conn` again, as the retry of a round of inputs: its params
    /// (`body` and the `_meta` of `extras`, merged as for any request) with `inputResponses`
    /// and the server's `requestState`, echoed byte for byte, spliced in.
    pub(super) fn request_spliced<B: Serialize>(
        &mut self,
        conn: ConnId,
        method: &'static str,
        body: B,
        retry: super::mrtr::Retry,
        req: Req,
        extras: super::sessions::RequestExtras<'_>,
    ) -> Option<u64> {
        let (id, params, meta) = self.request_params(conn, method, Some(body), req, extras)?;
        // The splice works on the params as an object: read back what was written.
        let obj = match serde_json::to_value(&params) {
            Ok(Value::Object(o)) => o,
            _ => serde_json::Map::new(),
        };
        let text = protocol::retry_params_text(obj, retry.responses, retry.state.as_deref());
        let frame = protocol::encode_request_text(id, method, &text);
        self.out.push_back(Output::Send { conn, frame, meta });
        Some(id)
    }
}

/// The answer to `initialize` was a refusal of the version asked for by a stateless-only
/// server: said so, so the error tells what happened.
pub(super) fn refused_for_version(e: &RpcError) -> bool {
    e.code == protocol::modern_codes::UNSUPPORTED_PROTOCOL_VERSION
}
