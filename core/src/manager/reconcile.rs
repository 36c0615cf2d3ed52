//! Bringing the server set to what the embedder asks: `Connect` starts what is not running,
//! `Reload` stops everything and connects the new set, `Sync` starts, restarts and stops only
//! what differs, and `Disconnect` forgets a server entirely.

use super::rounds::Round;
use super::servers::Phase;
use super::{Level, Manager, TimerReason};
use crate::config::{self, ServerSpec};
use std::collections::{BTreeMap, BTreeSet};

impl Manager {
    pub(super) fn connect(&mut self, specs: Vec<ServerSpec>) {
        let round_id = self.rounds.next_id();
        let mut round = Round::new(self.now, self.now + self.opts.gate);
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
                if !matches!(s.phase, Phase::Idle) {
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

    pub(super) fn disconnect(&mut self, server: &str) {
        let Some(s) = self.servers.get(server) else {
            return;
        };
        // A member of an open round is reported in it as disconnected, not dropped from it.
        if let Some(r) = s.round.and_then(|id| self.rounds.open.get_mut(&id)) {
            if r.members.contains(server) {
                r.disconnected.insert(server.to_string());
            }
        }
        self.stop_attempt(
            server,
            true,
            &format!("MCP error: server \"{server}\" was disconnected"),
        );
        // Forgotten entirely, pending or not: its source metadata goes too.
        self.servers.remove(server);
    }

    pub(super) fn disconnect_all(&mut self) {
        // Pending connects are aborted too, not only connected ones: nothing started before
        // keeps running behind the embedder's back.
        let names: Vec<String> = self.servers.keys().cloned().collect();
        for n in names {
            self.disconnect(&n);
        }
    }

    pub(super) fn sync(&mut self, specs: Vec<ServerSpec>) {
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
            match self.servers.get_mut(&name) {
                // Unchanged and running (connected, connecting, waiting to reconnect): leave
                // its transport, calls and tools alone.
                Some(s)
                    if s.hash == config::config_hash(&spec.config)
                        && !matches!(s.phase, Phase::Idle) =>
                {
                    s.spec.source = spec.source;
                }
                // Unchanged but stopped (failed, its breaker tripped, or lost with reconnects
                // off): Sync says "this is the set I want", so start it, like `Connect`.
                Some(s) if s.hash == config::config_hash(&spec.config) => {
                    self.counters.syncs_restarted_stopped += 1;
                    start.push(spec);
                }
                Some(_) => {
                    self.disconnect(&name);
                    start.push(spec);
                }
                None => start.push(spec),
            }
        }
        if !start.is_empty() {
            self.connect(start);
        }
    }
}
