//! Simulated servers of both protocol revisions: how each answers the `server/discover`
//! probe (legacy ones plainly, misleadingly with an unrelated error, or not at all; stateless
//! ones with a `DiscoverResult`, after refusing the first version now and then), and what a
//! stateless server checks of every request — the `_meta` it must carry, that the revision
//! was decided from the probe's answer, and that a retry after an input-required result
//! echoes the `requestState` it was given byte for byte.

use super::server::Tag;
use super::World;
use crate::scenario::{AttemptPlan, Init, SimEra};
use crate::verdict::Invariant;
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::VecDeque;
use switchboard_core::manager::ConnId;

/// Most request states a process remembers (the oldest is forgotten first).
const MAX_STATES: usize = 64;

/// What one simulated process saw of the protocol revision.
#[derive(Debug, Clone, Default)]
pub(super) struct ProcEra {
    /// It answered the probe with a `DiscoverResult` (the handshake is done).
    pub(super) discovered: bool,
    /// It refused the first probe's version once (`ModernRetry`).
    pub(super) refused_once: bool,
    /// It received a request other than `server/discover` (a warm start skips the probe,
    /// so a later discover is a health check).
    pub(super) in_use: bool,
    /// The `requestState` texts it handed out, exactly as written.
    pub(super) states: VecDeque<String>,
}

fn full_meta(meta: Option<&Value>) -> bool {
    let Some(m) = meta else {
        return false;
    };
    m.get("io.modelcontextprotocol/protocolVersion") == Some(&json!("2026-07-28"))
        && m.get("io.modelcontextprotocol/clientCapabilities")
            .is_some_and(Value::is_object)
        && m.get("io.modelcontextprotocol/clientInfo")
            .is_some_and(Value::is_object)
}

impl World<'_> {
    fn era_violation(&mut self, inv: Invariant, what: String) {
        self.step.output_violations.push((inv, what));
    }

    /// Check a frame the manager sent to server `i` against the revision it speaks.
    pub(super) fn era_check(&mut self, conn: ConnId, i: usize, v: &Value) {
        let Some(method) = v.get("method").and_then(Value::as_str) else {
            return;
        };
        let request = v.get("id").is_some();
        let meta = v.pointer("/params/_meta");
        let era = self.sc.servers[i].era;
        if method == "server/discover" {
            self.cov.stateless_requests_checked += 1;
            if !full_meta(meta) {
                self.era_violation(
                    Invariant::StatelessRequestsCarryMeta,
                    format!("server/discover without the stateless _meta: {v}"),
                );
            }
            return;
        }
        let discovered = self.procs.get(&conn).is_some_and(|p| p.era.discovered);
        if era.is_modern() {
            if (method == "initialize" && discovered) || method == "notifications/initialized" {
                self.era_violation(
                    Invariant::EraDecidedFromProbe,
                    format!("a stateless server that answered the probe got {method}"),
                );
            } else if request && method != "initialize" {
                if let Some(p) = self.procs.get_mut(&conn) {
                    p.era.in_use = true;
                }
                self.cov.stateless_requests_checked += 1;
                if !full_meta(meta) {
                    self.era_violation(
                        Invariant::StatelessRequestsCarryMeta,
                        format!("a stateless request without the protocol _meta: {v}"),
                    );
                }
            }
        } else if request
            && meta
                .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
                .is_some()
        {
            self.era_violation(
                Invariant::EraDecidedFromProbe,
                format!("a legacy server, which refused the probe, got a stateless {method}"),
            );
        }
    }

    /// `server/discover`: the probe, or (on a stateless connection already discovered) a
    /// health check.
    pub(super) fn discover(&mut self, conn: ConnId, i: usize, plan: &AttemptPlan, id: Value) {
        let era = self.sc.servers[i].era;
        match era {
            SimEra::Legacy => {
                self.cov.probes_refused_legacy += 1;
                let r = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found: server/discover"}});
                self.reply(conn, 1, r);
                return;
            }
            SimEra::LegacyUnrelatedError => {
                self.cov.probes_misleading += 1;
                let r = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": "Bad Request: Server not initialized"}});
                self.reply(conn, 1, r);
                return;
            }
            SimEra::LegacySilent => {
                self.cov.probes_unanswered += 1;
                return;
            }
            SimEra::Modern | SimEra::ModernRetry => {}
        }
        let Some(p) = self.procs.get(&conn) else {
            return;
        };
        if p.era.discovered || p.era.in_use {
            // A health check: answered like a ping (a deaf server stays silent).
            let now = self.now;
            let deaf = !self.healed && p.deaf_at.is_some_and(|t| now >= t);
            self.obs.pinged[i] = Some(now);
            if deaf {
                self.cov.pings_unanswered += 1;
            } else {
                self.cov.stateless_health_checks += 1;
                let r = self.discover_result(i, id, true);
                self.reply(conn, 1, r);
            }
            return;
        }
        if era == SimEra::ModernRetry && !p.era.refused_once {
            self.cov.probe_version_refusals += 1;
            if let Some(p) = self.procs.get_mut(&conn) {
                p.era.refused_once = true;
            }
            let r = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32022, "message": "Unsupported protocol version", "data": {"supported": ["2026-07-28"], "requested": "?"}}});
            self.reply(conn, 1, r);
            return;
        }
        // The first discover of an attempt follows the attempt's plan, as `initialize` does.
        let gate = self.sc.options.gate_ms;
        let (ms, r) = match plan.init {
            Init::Ok { ms } => (ms, self.discover_result(i, id, true)),
            Init::NoTools { ms } => {
                self.cov.init_without_tools += 1;
                (ms, self.discover_result(i, id, false))
            }
            Init::Error { ms } => {
                self.cov.init_errors += 1;
                let r = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "discovery failed"}});
                self.reply(conn, ms, r);
                return;
            }
            Init::Unsupported { ms } => {
                self.cov.init_unsupported += 1;
                let r = json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "complete", "supportedVersions": ["2030-01-01"], "capabilities": {"tools": {}}}});
                self.reply(conn, ms, r);
                return;
            }
            Init::Hang => {
                self.cov.init_hangs += 1;
                return;
            }
            Init::Drop { ms } => {
                self.cov.drops_during_init += 1;
                self.exit_in(conn, ms, "crashed during server/discover");
                return;
            }
        };
        if ms >= gate {
            self.cov.init_slow_past_gate += 1;
        }
        self.cov.probes_answered_modern += 1;
        if let Some(p) = self.procs.get_mut(&conn) {
            p.era.discovered = true;
        }
        self.reply(conn, ms, r);
    }

    fn discover_result(&self, i: usize, id: Value, tools: bool) -> Value {
        let caps = self.capabilities(i, tools);
        json!({"jsonrpc": "2.0", "id": id, "result": {
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": caps,
            "serverInfo": {"name": self.sc.servers[i].name, "version": "1.0.0"}
        }})
    }

    /// A stateless server's tool call: a retry is checked (its `requestState` must be one
    /// this process wrote, byte for byte, with the input it asked for); a first call with an
    /// even id is answered with an input-required result asking for the roots. `true` when
    /// it answered (the call is not run yet).
    pub(super) fn ask_for_input(
        &mut self,
        conn: ConnId,
        id: &Value,
        v: &Value,
        frame: &[u8],
    ) -> bool {
        if v.pointer("/params/requestState").is_some() {
            self.cov.request_states_checked += 1;
            let text = String::from_utf8_lossy(frame);
            let echoed = self.procs.get(&conn).is_some_and(|p| {
                p.era
                    .states
                    .iter()
                    .any(|s| text.contains(&format!("\"requestState\":{s}")))
            });
            let answered = v
                .pointer("/params/inputResponses/where/roots")
                .is_some_and(Value::is_array);
            if !echoed || !answered {
                self.era_violation(
                    Invariant::RequestStateEchoed,
                    format!("a retry that does not echo the state or answer the input: {text}"),
                );
            }
            return false;
        }
        let Some(n) = id.as_u64() else {
            return false;
        };
        if n % 2 != 0 {
            return false;
        }
        // Escapes a JSON writer would not produce itself: a client that re-serialized the
        // state instead of echoing it would change them.
        let state = format!("\"st\\u00e9\\/{}-{n}\"", conn.0);
        if let Some(p) = self.procs.get_mut(&conn) {
            if p.era.states.len() >= MAX_STATES {
                p.era.states.pop_front();
            }
            p.era.states.push_back(state.clone());
        }
        self.cov.input_rounds_sent += 1;
        let frame = format!(
            r#"{{"jsonrpc":"2.0","id":{n},"result":{{"resultType":"input_required","inputRequests":{{"where":{{"method":"roots/list","params":{{}}}}}},"requestState":{state}}}}}"#
        );
        self.reply_frame(conn, 2, Bytes::from(frame), Tag::None);
        true
    }
}
