//! Bringing the server set to what the embedder asks: `Connect` starts what is not running,
//! `Reload` stops everything and connects the new set, `Sync` starts, restarts and stops only
//! what differs, and `Disconnect` forgets a server entirely.

use super::errors::{RequestError, ServerError, ServerErrorKind};
use super::rounds::Round;
use super::servers::Stage;
use super::{ConnId, Event, Level, Manager, RequestId, TimerReason};
use crate::config::{self, ServerSpec};
use std::collections::{BTreeMap, BTreeSet};

impl Manager {
    pub(super) fn connect(&mut self, request: RequestId, specs: Vec<ServerSpec>) {
        let round_id = self.rounds.next_id();
        let mut round = Round::new(request, self.now, self.now + self.opts.gate);
        self.emit(Event::RoundStarted {
            request,
            round: round_id,
        });
        // Deduplicate by name: the first spec of a name wins (merging did that already;
        // this guards embedders that pass duplicates).
        let mut seen = BTreeSet::new();
        for spec in specs {
            if !seen.insert(spec.name.clone()) {
                self.diag(
                    Some(&spec.name),
                    Level::Warn,
                    "duplicate server in one request; the first one is used".into(),
                );
                continue;
            }
            if !spec.config.enabled {
                continue;
            }
            let name = spec.name.clone();
            if let Some(s) = self.servers.get_mut(&name) {
                // Source metadata follows the latest request, even for a server it skips.
                s.spec.source = spec.source.clone();
                if !matches!(s.phase, Stage::Idle) {
                    round.skipped.push(name);
                    continue;
                }
                // An explicit connect clears a tripped breaker and the retry ladder.
                s.closes.clear();
                s.retry_attempt = 0;
            }
            match self.start_server(spec, Some(round_id)) {
                Ok(()) => {
                    round.members.insert(name);
                }
                Err(e) => {
                    round.errors.insert(name, e);
                }
            }
        }
        self.timers
            .arm(round.gate_at(), TimerReason::Gate { round: round_id });
        self.rounds.open.insert(round_id, round);
    }

    /// `Disconnect` from the embedder: done at once, or refused for an unknown server.
    pub(super) fn disconnect_request(&mut self, request: RequestId, server: &str) {
        if !self.servers.contains_key(server) {
            let error = RequestError::UnknownServer(server.to_string());
            self.emit(Event::RequestFailed { request, error });
            return;
        }
        let closed = self.disconnect(server).into_iter().collect();
        self.emit(Event::Disconnected { request, closed });
    }

    /// Stop and forget one server; the attempt it closed, if it had one open.
    pub(super) fn disconnect(&mut self, server: &str) -> Option<ConnId> {
        let s = self.servers.get(server)?;
        let closed = s.phase.conn().filter(|c| self.conns.contains_key(c));
        // A member of an open round is reported in it as disconnected, not dropped from it.
        if let Some(r) = s.round.and_then(|id| self.rounds.open.get_mut(&id)) {
            if r.members.contains(server) {
                r.disconnected.insert(server.to_string());
            }
        }
        let error = ServerError::new(
            ServerErrorKind::Disconnected,
            format!("server \"{server}\" was disconnected"),
        );
        self.stop_attempt(server, true, &error);
        // Forgotten entirely, pending or not: its source metadata goes too.
        self.servers.remove(server);
        self.phase_gen += 1;
        self.view_gen += 1;
        self.catalog.generation += 1;
        closed
    }

    /// Stop and forget every server; the attempts it closed.
    pub(super) fn disconnect_all(&mut self) -> Vec<ConnId> {
        // Pending connects are aborted too, not only connected ones: nothing started before
        // keeps running behind the embedder's back.
        let names: Vec<String> = self.servers.keys().cloned().collect();
        names.iter().filter_map(|n| self.disconnect(n)).collect()
    }

    pub(super) fn sync(&mut self, request: RequestId, specs: Vec<ServerSpec>) {
        let wanted: BTreeMap<String, ServerSpec> = specs
            .into_iter()
            .filter(|s| s.config.enabled)
            .map(|s| (s.name.clone(), s))
            .collect();
        let known: Vec<String> = self.servers.keys().cloned().collect();
        for n in &known {
            if !wanted.contains_key(n) {
                self.disconnect(n);
            }
        }
        let mut start = Vec::new();
        for (name, spec) in wanted {
            // Is the running config (with its hash) the one wanted: equal, or equal as
            // written with the same values read for it (a `${file:…}` whose content changed
            // is a change)?
            let unchanged = match self.servers.get(&name) {
                None => None,
                Some(s) if s.spec.config == spec.config => Some(true),
                Some(s) if s.spec.config.values != spec.config.values => Some(false),
                Some(s) => {
                    let running = s.hash.clone();
                    Some(self.hashes.hash(&name, &spec.config) == running)
                }
            };
            match (unchanged, self.servers.get_mut(&name)) {
                // Unchanged and running (connected, connecting, waiting to reconnect): leave
                // its transport, calls and tools alone.
                (Some(true), Some(s)) if !matches!(s.phase, Stage::Idle) => {
                    s.spec.source = spec.source;
                }
                // Unchanged but stopped (failed, its breaker tripped, or lost with reconnects
                // off): Sync says "this is the set I want", so start it, like `Connect`.
                (Some(true), Some(_)) => {
                    self.counters.syncs_restarted_stopped += 1;
                    start.push(spec);
                }
                (Some(_), Some(_)) => {
                    self.disconnect(&name);
                    start.push(spec);
                }
                _ => start.push(spec),
            }
        }
        if start.is_empty() {
            self.emit(Event::SyncCompleted { request });
        } else {
            self.connect(request, start);
        }
    }
}

/// Most server names whose last config hash [`HashMemo`] keeps.
const HASH_MEMO_LIMIT: usize = 256;

/// The config hash last computed for each server name, with the config it was computed from.
/// A server connected again after it was forgotten (`Disconnect`, `DisconnectAll`, `Reload`, a
/// `Sync` that replaced its config) with the same config finds its hash here instead of
/// serializing and hashing the config again. An entry answers only for a config equal to its
/// own, so it is never stale; it is replaced when another config of that name is hashed, and
/// past [`HASH_MEMO_LIMIT`] names the first name in order makes room.
#[derive(Debug, Default)]
pub(super) struct HashMemo {
    entries: BTreeMap<String, (config::ServerConfig, String)>,
}

impl HashMemo {
    /// The hash of `config`, the config of server `name`.
    pub(super) fn hash(&mut self, name: &str, config: &config::ServerConfig) -> String {
        if let Some((c, h)) = self.entries.get(name) {
            if c == config {
                return h.clone();
            }
        }
        let hash = config::config_hash(config);
        if !self.entries.contains_key(name) && self.entries.len() >= HASH_MEMO_LIMIT {
            self.entries.pop_first();
        }
        self.entries
            .insert(name.to_string(), (config.clone(), hash.clone()));
        hash
    }
}

#[cfg(test)]
mod tests {
    use super::{HashMemo, HASH_MEMO_LIMIT};
    use crate::config::{config_hash, ServerConfig};

    #[test]
    fn the_hash_memo_answers_what_hashing_answers_and_stays_bounded() {
        let mut memo = HashMemo::default();
        let a = ServerConfig::stdio("run", &["a"]);
        let b = ServerConfig::stdio("run", &["b"]);
        for _ in 0..2 {
            assert_eq!(memo.hash("s", &a), config_hash(&a));
            assert_eq!(memo.hash("s", &b), config_hash(&b));
        }
        // Values read for a config are not hashed: the memo answers alike.
        let mut read = a.clone();
        read.values.0.insert("file:/t".into(), "x".into());
        assert_eq!(memo.hash("s", &read), config_hash(&a));
        for i in 0..HASH_MEMO_LIMIT + 10 {
            let c = ServerConfig::stdio("run", &[&i.to_string()]);
            assert_eq!(memo.hash(&format!("n{i}"), &c), config_hash(&c));
        }
        assert_eq!(memo.entries.len(), HASH_MEMO_LIMIT);
    }
}
