//! Roots, mirrored from the downstream client: a client that declared the `roots`
//! capability is asked `roots/list` once it is initialized and again whenever it sends
//! `notifications/roots/list_changed`; its answer becomes the manager's roots
//! ([`Input::SetRoots`]), which answers every upstream server's `roots/list` from them and
//! tells the initialized servers `notifications/roots/list_changed`. Without such a client
//! the configured roots ([`GatewayOptions::roots`](super::GatewayOptions)) stay.
//!
//! Mirrored rather than forwarded per request: a server asks for roots whenever it likes
//! (often right after `initialize`, before any downstream call exists to carry a forwarded
//! request over stdio), and the client announces every change, so the mirror is exact and a
//! server's request is answered at once, exactly once, by the manager.
//!
//! With several sessions, the roots of the newest session that gave any apply; when it
//! ends, the next newest's, else the configured ones. Bounded: at most [`MAX_ROOTS`] roots
//! are taken from one answer.

use super::{wire, Gateway, GatewayOutput, SessionId, Target};
use crate::manager::Input;
use crate::protocol::Root;
use serde_json::Value;

/// The most roots taken from one client's answer.
pub const MAX_ROOTS: usize = 256;

/// The id of the gateway's `roots/list` to a session: its own prefix, so a response reads
/// as the answer to it and never as one to a forwarded server request.
fn roots_id(n: u64) -> Value {
    Value::String(format!("switchboard-roots-{n}"))
}

/// `true` when `initialize`'s params declare the `roots` capability.
pub(super) fn declares_roots(params: &Value) -> bool {
    declares_roots_in(params.get("capabilities"))
}

/// `true` when a `capabilities` object declares `roots` (member lookups, as the JSON pointer
/// `/capabilities/roots` reads, without its per-token allocations).
pub(super) fn declares_roots_in(caps: Option<&Value>) -> bool {
    caps.and_then(|c| c.get("roots"))
        .is_some_and(Value::is_object)
}

/// A `roots/list` result's roots (bounded); `None` when it is not one.
fn roots_of(result: &Value) -> Option<Vec<Root>> {
    let list = result.get("roots")?.as_array()?;
    Some(
        list.iter()
            .filter_map(|r| {
                Some(Root {
                    uri: r.get("uri")?.as_str()?.to_string(),
                    name: r.get("name").and_then(Value::as_str).map(str::to_string),
                })
            })
            .take(MAX_ROOTS)
            .collect(),
    )
}

impl Gateway {
    /// Ask `session` for its roots, if it declared the capability.
    pub(super) fn ask_roots(&mut self, session: SessionId) {
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        if !s.roots_capable {
            return;
        }
        self.next_peer += 1;
        let id = roots_id(self.next_peer);
        s.roots_asked = Some(id.clone());
        let frame = wire::request(&id, "roots/list", serde_json::json!({}));
        self.send(session, Target::Session, frame);
    }

    /// A response from `session`: `true` when it answers the gateway's `roots/list`.
    pub(super) fn roots_response(
        &mut self,
        session: SessionId,
        id: &Value,
        outcome: &Result<Value, (i64, String)>,
    ) -> bool {
        let Some(s) = self.sessions.get_mut(&session) else {
            return false;
        };
        if s.roots_asked.as_ref() != Some(id) {
            return id
                .as_str()
                .is_some_and(|i| i.starts_with("switchboard-roots-"));
        }
        s.roots_asked = None;
        if let Ok(result) = outcome {
            if let Some(roots) = roots_of(result) {
                s.roots = Some(roots);
                self.apply_roots();
            }
        }
        true
    }

    /// Hand the manager the roots that apply now, when they changed.
    pub(super) fn apply_roots(&mut self) {
        let roots = self
            .sessions
            .values()
            .rev()
            .find_map(|s| s.roots.clone())
            .unwrap_or_else(|| self.options.roots.clone());
        let current = self.roots_applied.as_ref().unwrap_or(&self.options.roots);
        if *current == roots {
            return;
        }
        self.roots_applied = Some(roots.clone());
        self.outputs
            .push_back(GatewayOutput::Manager(Input::SetRoots { roots }));
    }
}
