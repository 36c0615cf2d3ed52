//! The simulated embedder: the application using the manager. It connects, reloads and syncs
//! server sets, disconnects, refreshes, calls tools (live, deferred, unknown, withdrawn) and
//! cancels calls at its scheduled times; after the heal it drives the liveness phase —
//! reconnect everything, call every server, tear down — and takes the calls' completions.

use super::{Invariant, World};
use crate::invariants::liveness;
use crate::observe::{CallObs, CallTiming};
use crate::scenario::{ActionKind, CallTarget, ReconnectMode, Scenario};
use serde_json::json;
use std::fmt::Write as _;
use std::time::Duration;
use switchboard_core::config::{config_hash, ServerConfig, ServerSpec};
use switchboard_core::manager::{
    CallError, CallId, CallOutcome, ConnId, HealthPolicy, Input, ManagerOptions, ReconnectPolicy,
    ServerStatus,
};
use switchboard_core::names::NamingScheme;
use switchboard_core::protocol::Root;
use switchboard_core::tool::ToolDef;
use switchboard_core::Instant;

/// The manager's options for a scenario, as the embedder builds them.
pub(super) fn manager_options(sc: &Scenario) -> ManagerOptions {
    let o = &sc.options;
    ManagerOptions {
        seed: sc.world_seed,
        gate: Duration::from_millis(o.gate_ms),
        uncached_wait: o.uncached_wait_ms.map(Duration::from_millis),
        naming: if o.double_underscore {
            NamingScheme::DoubleUnderscore
        } else {
            NamingScheme::Seed
        },
        call_timeout: Duration::from_millis(o.call_timeout_ms),
        request_timeout: Duration::from_millis(o.request_timeout_ms),
        roots: if o.roots {
            vec![Root {
                uri: "file:///work/project".into(),
                name: Some("project".into()),
            }]
        } else {
            Vec::new()
        },
        max_frame_len: o.max_frame_len,
        client_version: "sim".into(),
        health: o.health.map(|(interval, timeout, misses)| HealthPolicy {
            interval: Duration::from_millis(interval),
            timeout: Duration::from_millis(timeout),
            misses,
        }),
        reset_timeout_on_progress: o.reset_timeout_on_progress,
        max_call_time: Duration::from_millis(o.max_call_time_ms),
        max_tool_pages: o
            .max_tool_pages
            .unwrap_or(ManagerOptions::default().max_tool_pages),
        reconnect: match o.reconnect {
            ReconnectMode::On => ReconnectPolicy::default(),
            ReconnectMode::Off => ReconnectPolicy::never(),
            ReconnectMode::RetryStartup => ReconnectPolicy {
                retry_startup_failures: true,
                ..ReconnectPolicy::default()
            },
        },
        client_features: match &o.peer {
            Some(p) => switchboard_core::protocol::ClientFeatures {
                sampling: p.sampling,
                elicitation_form: p.form,
                elicitation_url: p.url,
                roots: o.roots,
            },
            None => Default::default(),
        },
        peer_request_timeout: o
            .peer
            .as_ref()
            .map_or(ManagerOptions::default().peer_request_timeout, |p| {
                Duration::from_millis(p.timeout_ms)
            }),
        max_peer_requests: o
            .peer
            .as_ref()
            .map_or(ManagerOptions::default().max_peer_requests, |p| {
                p.max_waiting
            }),
        protocol: switchboard_core::manager::ProtocolPolicy {
            probe: o.probe,
            ..Default::default()
        },
        output_validator: Some(super::schemas::validator()),
        ..ManagerOptions::default()
    }
}

/// Every third server of a scenario is an HTTP one; the others run on stdio.
pub fn is_http(i: usize) -> bool {
    i % 3 == 2
}

/// The config a scenario server runs with (`variant` 0 is the base config the cache knows).
pub fn config_for(sc: &Scenario, i: usize, variant: u8) -> ServerConfig {
    let s = &sc.servers[i];
    let mut c = if is_http(i) {
        ServerConfig::http(format!("http://{}.sim/mcp", s.name))
    } else {
        ServerConfig::stdio(format!("{}-server", s.name), &[])
    };
    if variant == 3 {
        c.enabled = false;
    } else if variant > 0 {
        c.args.push(format!("--variant={variant}"));
        if c.url.is_some() {
            c.headers.insert("X-Variant".into(), variant.to_string());
        }
    }
    c.timeout_ms = s.timeout_ms;
    if s.invalid {
        c.command = Some("both".into());
        c.url = Some("http://both.sim".into());
    }
    c
}

pub(super) fn tool_defs(names: &[String]) -> Vec<ToolDef> {
    names.iter().map(ToolDef::named).collect()
}

impl World<'_> {
    /// After the heal: all work must finish, every server come back and serve, and the final
    /// teardown leave nothing behind.
    pub(super) fn liveness(&mut self, budget: Instant) {
        self.cov.runs_healed += 1;
        let idle = self.m.poll_timeout().is_none() && self.queue.is_empty();
        if let Err(d) = liveness::work_finished(&self.m, &self.obs, idle, budget) {
            self.fail(Invariant::WorkFinishes, d);
            return;
        }
        if let Err(d) = self.peer_requests_settled() {
            self.fail(Invariant::PeerRequestsAnsweredOnce, d);
            return;
        }
        self.gateway_settled();
        if self.violation.is_some() {
            return;
        }
        self.reconnect_healed();
        if self.violation.is_some() {
            return;
        }
        // The final teardown.
        self.tr(|t| {
            let _ = writeln!(t, "--- liveness: final DisconnectAll");
        });
        let request = self.rid();
        self.input(Input::DisconnectAll { request }, |s| {
            s.disconnect_all = true;
        });
        let end = self.now + Duration::from_secs(3_600);
        self.run_until(end);
        if self.violation.is_some() {
            return;
        }
        let alive: Vec<u64> = self
            .procs
            .iter()
            .filter(|(_, p)| p.alive())
            .map(|(c, _)| c.0)
            .collect();
        let retry_startup = self.sc.options.reconnect == ReconnectMode::RetryStartup;
        let verdict = liveness::no_process_alive(&alive)
            .map_err(|d| (Invariant::TeardownLeavesNothing, d))
            .and_then(|()| {
                liveness::startup_retries_allowed(&self.m, retry_startup)
                    .map_err(|d| (Invariant::StartupRetriesFollowPolicy, d))
            })
            .and_then(|()| {
                liveness::registries_empty(&self.m)
                    .map_err(|d| (Invariant::TeardownLeavesNothing, d))
            })
            .and_then(|()| {
                let open = self.requests.in_flight();
                if open.is_empty() {
                    Ok(())
                } else {
                    let d = format!("requests never completed: {open:?}");
                    Err((Invariant::EveryRequestCompletesOnce, d))
                }
            });
        if let Err((invariant, d)) = verdict {
            self.fail(invariant, d);
            return;
        }
        self.tr(|t| {
            let _ = writeln!(t, "--- liveness ok: no process alive, every registry empty");
        });
    }

    /// The embedder connects these servers (their base configs) and the world runs until it
    /// is idle or a minute of virtual time has passed.
    fn connect_and_settle(&mut self, servers: &[usize]) {
        let sc = self.sc;
        let specs = servers
            .iter()
            .map(|&i| ServerSpec::new(sc.servers[i].name.clone(), config_for(sc, i, 0)))
            .collect();
        let request = self.rid();
        self.input(
            Input::Connect {
                request,
                servers: specs,
            },
            |_| {},
        );
        let horizon = self.now + Duration::from_secs(60);
        self.run_until(horizon);
    }

    /// After the heal: connect every valid server again; each must come up, the ones started
    /// now with exactly their tools, and a call to each of them must succeed.
    fn reconnect_healed(&mut self) {
        let sc = self.sc;
        let valid: Vec<usize> = (0..sc.servers.len())
            .filter(|&i| !sc.servers[i].invalid)
            .collect();
        self.tr(|t| {
            let _ = writeln!(t, "--- liveness: reconnect every server");
        });
        let before: Vec<Option<ConnId>> = self.obs.latest_conn.clone();
        self.connect_and_settle(&valid);
        if self.violation.is_some() {
            return;
        }
        if sc.options.reconnect == ReconnectMode::Off {
            // With reconnects off, a connection that stalled before the heal (it stays
            // stalled) is found dead by its health check and left disconnected, as the policy
            // says; the embedder connects it again, as an embedder must.
            let down: Vec<usize> = valid
                .iter()
                .copied()
                .filter(|&i| self.view.status[i] != ServerStatus::Connected)
                .collect();
            if !down.is_empty() {
                self.tr(|t| {
                    let _ = writeln!(
                        t,
                        "--- liveness: reconnects are off; connect the dead again"
                    );
                });
                self.connect_and_settle(&down);
                if self.violation.is_some() {
                    return;
                }
            }
        }
        let mut calls = Vec::new();
        for &i in &valid {
            let name = &sc.servers[i].name;
            // A connection ready from lists still fresh by the server's TTL shows what an
            // earlier process listed (invariant 35 checks that was allowed): like one kept.
            let reused = self.obs.latest_conn[i]
                .and_then(|c| self.procs.get(&c))
                .is_some_and(|p| p.era.fresh_checked);
            let fresh = self.obs.latest_conn[i] != before[i] && !reused;
            let back =
                liveness::healed_server_back(&self.view, i, name, fresh, &sc.servers[i].tools);
            if let Err(d) = back {
                self.fail(Invariant::HealedServersServe, d);
                return;
            }
            if !fresh {
                continue;
            }
            self.cov.reconnected_after_heal += 1;
            if let Some(t) = self.view.tools.iter().find(|t| t.server == *name) {
                calls.push((i, t.qualified.clone()));
            }
        }
        for (i, tool) in calls {
            let call = CallId(self.next_call);
            self.next_call += 1;
            self.expect_ok.insert(call);
            let timeout = Duration::from_millis(sc.servers[i].call_latency_ms + 5_000);
            let timing = Some(CallTiming {
                started: self.now,
                timeout,
                deadline: self.now + timeout,
                extended: false,
            });
            self.obs.calls.insert(
                call,
                CallObs {
                    server: Some(i),
                    deferred: false,
                    withdrawn_target: false,
                    progress: false,
                    timing,
                },
            );
            self.input(
                Input::CallTool {
                    call,
                    tool,
                    arguments: None,
                    timeout: Some(timeout),
                    progress: false,
                    meta: None,
                },
                |s| s.scope = Some(i),
            );
        }
        let horizon = self.now + Duration::from_millis(6_000);
        self.run_until(horizon);
        if self.violation.is_none() {
            if let Err(d) = liveness::healed_calls_done(&self.expect_ok) {
                self.fail(Invariant::HealedServersServe, d);
            }
        }
    }

    /// A call completed: a healed server's call must succeed; the rest is the step's to check.
    pub(super) fn call_completed(&mut self, call: CallId, outcome: CallOutcome) {
        if self.expect_ok.remove(&call) {
            if let Err(d) = liveness::healed_call_ok(call, &outcome) {
                self.fail(Invariant::HealedServersServe, d);
            }
        }
        let deferred = self.obs.calls.get(&call).is_some_and(|c| c.deferred);
        match &outcome {
            CallOutcome::Ok(r) => {
                self.cov.calls_ok += 1;
                self.cov.deferred_call_succeeded += u64::from(deferred);
                if !r.is_error && r.render_text().starts_with(super::schemas::BAD_MARK) {
                    let d = format!(
                        "call {} completed Ok with a result that breaks its tool's output schema: {r:?}",
                        call.0
                    );
                    self.fail(Invariant::OutputSchemaHonoured, d);
                }
            }
            CallOutcome::Err(CallError::OutputSchema { server, tool, .. }) => {
                self.cov.schema_errors_seen += 1;
                let key = (server.clone(), tool.clone());
                match self.obs.bad_outputs.get_mut(&key) {
                    Some(n) if *n > 0 => *n -= 1,
                    _ => {
                        let d = format!(
                            "call {} failed its output schema, but {server}/{tool} sent no result breaking it: {outcome:?}",
                            call.0
                        );
                        self.fail(Invariant::OutputSchemaHonoured, d);
                    }
                }
            }
            CallOutcome::Err(CallError::UnknownTool { .. }) => self.cov.calls_unknown_tool += 1,
            _ => {}
        }
        self.step.completed.push((call, outcome));
    }

    /// Which servers an embedder request explicitly starts, stops or keeps.
    pub(super) fn note_lifecycle(&mut self, input: &Input) {
        let n = self.obs.names.len();
        match input {
            Input::Connect { .. } => self.step.explicit_start = true,
            Input::Reload { .. } => {
                self.step.explicit_start = true;
                self.step.removed = (0..n).collect();
            }
            Input::DisconnectAll { .. } => self.step.removed = (0..n).collect(),
            Input::Disconnect { server, .. } => {
                self.step.removed = self.obs.index.get(server).copied().into_iter().collect();
            }
            Input::Sync { servers, .. } => {
                self.step.explicit_start = true;
                for i in 0..n {
                    let name = &self.obs.names[i];
                    let specs: Vec<&ServerSpec> =
                        servers.iter().filter(|s| s.name == *name).collect();
                    if !specs.iter().any(|s| s.config.enabled) {
                        self.step.removed.push(i);
                        continue;
                    }
                    let Some(state) = self.m.server_state(name) else {
                        continue;
                    };
                    // Of several enabled specs of one name, a Sync runs the last.
                    let Some(spec) = specs.iter().rev().find(|s| s.config.enabled) else {
                        continue;
                    };
                    let hash = match &self.hashes[i] {
                        Some((config, hash)) if *config == spec.config => hash.clone(),
                        _ => {
                            let hash = config_hash(&spec.config);
                            self.hashes[i] = Some((spec.config.clone(), hash.clone()));
                            hash
                        }
                    };
                    debug_assert_eq!(hash, config_hash(&spec.config), "a remembered hash");
                    let unchanged = hash == state.config_hash;
                    if unchanged && state.status != ServerStatus::Disconnected {
                        self.step.sync_unchanged.push(i);
                    } else if self.sc.servers[i].invalid {
                        // It cannot start: its round reports the config error.
                    } else if unchanged {
                        self.step.sync_stopped.push(i);
                    } else {
                        self.step.sync_changed.push(i);
                    }
                }
            }
            _ => return,
        }
        self.step.lifecycle = true;
    }
    pub(super) fn action(&mut self, idx: usize) {
        let sc = self.sc;
        let a = &sc.actions[idx];
        let specs = |list: &Vec<(usize, u8)>| -> Vec<ServerSpec> {
            list.iter()
                .filter(|(i, _)| *i < sc.servers.len())
                .map(|&(i, v)| ServerSpec::new(sc.servers[i].name.clone(), config_for(sc, i, v)))
                .collect()
        };
        match &a.kind {
            ActionKind::Connect(list) => {
                let s = specs(list);
                let request = self.rid();
                self.input(
                    Input::Connect {
                        request,
                        servers: s,
                    },
                    |_| {},
                );
            }
            ActionKind::Reload(list) => {
                self.cov.reloads += 1;
                for w in self.obs.withdrawn.iter_mut() {
                    *w = true;
                }
                let s = specs(list);
                let request = self.rid();
                self.input(
                    Input::Reload {
                        request,
                        servers: s,
                    },
                    |_| {},
                );
            }
            ActionKind::Sync(list) => {
                self.cov.syncs += 1;
                let keep: Vec<usize> = list
                    .iter()
                    .filter(|(_, v)| *v != 3)
                    .map(|(i, _)| *i)
                    .collect();
                for (i, w) in self.obs.withdrawn.iter_mut().enumerate() {
                    if !keep.contains(&i) {
                        *w = true;
                    }
                }
                let s = specs(list);
                let request = self.rid();
                self.input(
                    Input::Sync {
                        request,
                        servers: s,
                    },
                    |_| {},
                );
            }
            &ActionKind::Disconnect(i) => {
                let i = i % sc.servers.len();
                if self.view.status[i] == ServerStatus::Connecting {
                    self.cov.disconnects_while_pending += 1;
                }
                self.obs.withdrawn[i] = true;
                let server = sc.servers[i].name.clone();
                let request = self.rid();
                self.input(Input::Disconnect { request, server }, |s| {
                    s.scope = Some(i);
                    s.disconnect = Some(i);
                });
            }
            ActionKind::DisconnectAll => {
                self.cov.disconnect_alls += 1;
                for w in self.obs.withdrawn.iter_mut() {
                    *w = true;
                }
                let request = self.rid();
                self.input(Input::DisconnectAll { request }, |s| {
                    s.disconnect_all = true
                });
            }
            &ActionKind::RefreshTools(i) => {
                let i = i % sc.servers.len();
                self.cov.refreshes += 1;
                let server = sc.servers[i].name.clone();
                let request = self.rid();
                self.input(Input::RefreshTools { request, server }, |s| {
                    s.scope = Some(i)
                });
            }
            &ActionKind::CallTool {
                target,
                pick,
                timeout_ms,
            } => self.call(target, pick, timeout_ms),
            &ActionKind::CancelCall(pick) => {
                let ids: Vec<CallId> = self
                    .obs
                    .calls
                    .keys()
                    .chain(self.obs.ops.keys())
                    .copied()
                    // The gateway's calls are its clients' to cancel.
                    .filter(|c| c.0 < super::gateway::FIRST_CALL)
                    .collect();
                let call = if ids.is_empty() {
                    CallId(pick as u64 + 1)
                } else {
                    self.cov.cancels += 1;
                    ids[pick % ids.len()]
                };
                self.input(Input::CancelCall { call }, |_| {});
            }
        }
    }

    fn call(&mut self, target: CallTarget, pick: usize, timeout_ms: Option<u64>) {
        let pick_from = |v: Vec<String>| -> Option<String> {
            (!v.is_empty()).then(|| v[pick % v.len()].clone())
        };
        let name = match target {
            CallTarget::Live => pick_from(
                self.view
                    .tools
                    .iter()
                    .filter(|t| !t.deferred)
                    .map(|t| t.qualified.clone())
                    .collect(),
            ),
            CallTarget::Deferred => pick_from(
                self.view
                    .tools
                    .iter()
                    .filter(|t| t.deferred)
                    .map(|t| t.qualified.clone())
                    .collect(),
            ),
            CallTarget::Unknown => None,
            CallTarget::Withdrawn => pick_from(
                self.ever_named
                    .iter()
                    .filter(|q| !self.view.tools.iter().any(|t| &t.qualified == *q))
                    .cloned()
                    .collect(),
            ),
        };
        let withdrawn_target = target == CallTarget::Withdrawn && name.is_some();
        let name = name.unwrap_or_else(|| format!("mcp_nosuch_tool_{pick}"));
        let deferred = self
            .view
            .tools
            .iter()
            .any(|t| t.qualified == name && t.deferred);
        if deferred {
            self.cov.deferred_calls += 1;
        }
        if withdrawn_target {
            self.cov.calls_withdrawn_tool += 1;
        }
        let server = self
            .m
            .resolve_tool(&name)
            .and_then(|(s, _)| self.obs.index.get(s).copied());
        let call = CallId(self.next_call);
        self.next_call += 1;
        let timeout = timeout_ms.map_or(
            Duration::from_millis(self.sc.options.call_timeout_ms),
            Duration::from_millis,
        );
        self.obs.calls.insert(
            call,
            CallObs {
                server,
                deferred,
                withdrawn_target,
                progress: call.0 % 3 == 0,
                timing: Some(CallTiming {
                    started: self.now,
                    timeout,
                    deadline: self.now + timeout,
                    extended: false,
                }),
            },
        );
        self.input(
            Input::CallTool {
                call,
                tool: name,
                arguments: Some(json!({ "n": call.0 })),
                timeout: timeout_ms.map(Duration::from_millis),
                // Every third call asks for progress itself.
                progress: call.0 % 3 == 0,
                meta: None,
            },
            |s| s.scope = server,
        );
        self.maybe_operation(pick, target == CallTarget::Deferred);
    }
}
