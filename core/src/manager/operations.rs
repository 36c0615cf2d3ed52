//! Operations on a server's resources, prompts, completions and logging (`resources/read`,
//! `prompts/get`, `completion/complete`, `resources/subscribe`/`unsubscribe`,
//! `logging/setLevel`), with the identity and guarantees of tool calls (input rounds included,
//! on a read or a prompt): numbered by a
//! [`CallId`] from the same space as calls, sent at once to a connected server or held until
//! a deferred one connects, bounded by a deadline, cancellable with `CancelCall`, and
//! completed exactly once with `Event::OperationCompleted`.

use super::errors::{CallError, ServerError, ServerErrorKind};
use super::sessions::{Req, RequestExtras};
use super::{CallId, ConnId, Event, Level, Manager, TimerReason};
use crate::catalog::{CompletionRef, Operation, OperationOutcome, OperationResult};
use crate::protocol::{self, ServerCapabilities, WireRef};
use crate::time::Instant;
use serde_json::value::RawValue;
use std::collections::BTreeSet;
use std::time::Duration;

/// Where an operation is.
#[derive(Debug, Clone)]
pub(super) enum OpState {
    /// Waiting for a deferred server to connect.
    Waiting,
    /// Sent as request `req` on `conn`.
    Sent { conn: ConnId, req: u64 },
    /// A stateless server asked for inputs: waiting for them, then retried on `conn`.
    Input {
        conn: ConnId,
        round: Box<super::mrtr::InputRound>,
    },
}

/// An operation in flight.
#[derive(Debug, Clone)]
pub(super) struct Op {
    pub(super) server: String,
    pub(super) op: Operation,
    /// A prompt's (or a completed prompt's) name on its server.
    raw_prompt: Option<String>,
    timeout: Duration,
    deadline: Instant,
    pub(super) state: OpState,
    /// Input rounds so far (multi round-trip requests).
    pub(super) input_rounds: u32,
}

/// Whether `caps` offer what `op` needs.
fn offered(op: &Operation, caps: &ServerCapabilities) -> bool {
    match op {
        Operation::ReadResource { .. } | Operation::Unsubscribe { .. } => caps.resources,
        Operation::Subscribe { .. } => caps.resources_subscribe,
        Operation::GetPrompt { .. } => caps.prompts,
        Operation::Complete { .. } => caps.completions,
        Operation::SetLogLevel { .. } => caps.logging,
        Operation::ListTasks { .. } => caps.tasks_list,
    }
}

/// The params of `op` (`raw_prompt`: the prompt's name on its server).
fn op_params(op: &Operation, raw_prompt: Option<&str>) -> serde_json::Value {
    match op {
        Operation::ReadResource { uri, .. }
        | Operation::Subscribe { uri, .. }
        | Operation::Unsubscribe { uri, .. } => protocol::uri_params(uri),
        Operation::GetPrompt { name, arguments } => {
            protocol::get_prompt_params(raw_prompt.unwrap_or(name), arguments)
        }
        Operation::Complete {
            reference,
            argument,
            value,
            context,
        } => {
            let r = match reference {
                CompletionRef::Prompt { name } => WireRef::Prompt(raw_prompt.unwrap_or(name)),
                CompletionRef::Resource { uri, .. } => WireRef::Resource(uri),
            };
            protocol::complete_params(r, argument, value, context)
        }
        Operation::SetLogLevel { level, .. } => protocol::set_level_params(*level),
        Operation::ListTasks { cursor, .. } => match cursor {
            Some(c) => serde_json::json!({ "cursor": c }),
            None => serde_json::json!({}),
        },
    }
}

/// What a stateless request of `op` mirrors in its `Mcp-Name` header: the prompt's name as
/// sent, or the resource's URI.
fn header_name<'a>(op: &'a Operation, raw_prompt: Option<&'a str>) -> Option<&'a str> {
    match op {
        Operation::GetPrompt { name, .. } => Some(raw_prompt.unwrap_or(name)),
        Operation::ReadResource { uri, .. } => Some(uri),
        _ => None,
    }
}

impl Manager {
    /// `Input::Operation`: resolve its server, then send it, hold it, or fail it.
    pub(super) fn start_op(&mut self, call: CallId, op: Operation, timeout: Option<Duration>) {
        if self.calls.contains_key(&call) || self.catalog.ops.contains_key(&call) {
            self.diag(
                None,
                Level::Warn,
                format!(
                    "call id {} is already in flight; second operation ignored",
                    call.0
                ),
            );
            return;
        }
        self.counters.operations_started += 1;
        let (server, raw_prompt) = match self.op_target(&op) {
            Ok(t) => t,
            Err(e) => {
                self.emit(Event::OperationCompleted {
                    call,
                    outcome: OperationOutcome::Err(e),
                });
                return;
            }
        };
        // The call's own limit, else its server's config, else the manager's default.
        let timeout = timeout
            .or_else(|| {
                self.servers
                    .get(&server)
                    .and_then(|s| s.spec.config.call_timeout())
            })
            .unwrap_or(self.opts.call_timeout);
        let deadline = self.now + timeout;
        let target = self.servers.get(&server).map(|s| s.phase.route());
        if let Operation::SetLogLevel { level, .. } = &op {
            // Kept for every stateless request to come, whatever the server speaks now.
            if let Some(s) = self.servers.get_mut(&server) {
                s.log_level = Some(*level);
            }
        }
        let state = match target {
            Some(Ok(conn)) => {
                if let Err(e) = self.check_offered(&server, &op) {
                    self.emit(Event::OperationCompleted {
                        call,
                        outcome: OperationOutcome::Err(e),
                    });
                    return;
                }
                if self.level_is_per_request(conn, &op) {
                    self.emit(Event::OperationCompleted {
                        call,
                        outcome: OperationOutcome::Ok(OperationResult::Done { server }),
                    });
                    return;
                }
                if let Some(r) = self.subscription_on_stream(conn, &server, &op) {
                    let outcome = match r {
                        Ok(()) => OperationOutcome::Ok(OperationResult::Done { server }),
                        Err(e) => OperationOutcome::Err(e),
                    };
                    self.emit(Event::OperationCompleted { call, outcome });
                    return;
                }
                match self.send_op(conn, call, &op, raw_prompt.as_deref()) {
                    Some(req) => OpState::Sent { conn, req },
                    None => return,
                }
            }
            Some(Err(true)) => OpState::Waiting,
            _ => {
                let reason = self.servers.get(&server).and_then(|s| s.last_error.clone());
                self.emit(Event::OperationCompleted {
                    call,
                    outcome: OperationOutcome::Err(CallError::NotConnected { server, reason }),
                });
                return;
            }
        };
        self.catalog.ops.insert(
            call,
            Op {
                server,
                op,
                raw_prompt,
                timeout,
                deadline,
                state,
                input_rounds: 0,
            },
        );
        self.timers.arm(deadline, TimerReason::Call { call });
    }

    /// The server an operation goes to (and a prompt's raw name), or why none.
    fn op_target(&mut self, op: &Operation) -> Result<(String, Option<String>), CallError> {
        match op {
            Operation::ReadResource { uri, server }
            | Operation::Subscribe { uri, server }
            | Operation::Unsubscribe { uri, server } => self
                .uri_server(uri, server.as_deref(), false)
                .map(|s| (s, None)),
            Operation::GetPrompt { name, .. }
            | Operation::Complete {
                reference: CompletionRef::Prompt { name },
                ..
            } => match self.catalog.prompt_names.resolve(name) {
                Some((s, raw)) => Ok((s.to_string(), Some(raw.to_string()))),
                None => Err(CallError::UnknownPrompt { name: name.clone() }),
            },
            Operation::Complete {
                reference: CompletionRef::Resource { uri, server },
                ..
            } => self
                .uri_server(uri, server.as_deref(), true)
                .map(|s| (s, None)),
            Operation::SetLogLevel { server, .. } | Operation::ListTasks { server, .. } => {
                if self.servers.contains_key(server) {
                    Ok((server.clone(), None))
                } else {
                    Err(CallError::UnknownServer {
                        server: server.clone(),
                    })
                }
            }
        }
    }

    /// The server of `uri`: the one named, or the one server whose shown resources (or, for
    /// `template`, templates first) list it.
    fn uri_server(
        &mut self,
        uri: &str,
        server: Option<&str>,
        template: bool,
    ) -> Result<String, CallError> {
        if let Some(s) = server {
            return if self.servers.contains_key(s) {
                Ok(s.to_string())
            } else {
                Err(CallError::UnknownServer {
                    server: s.to_string(),
                })
            };
        }
        let mut servers = BTreeSet::new();
        for name in self.servers.keys() {
            let Some((c, _)) = self.shown_catalog(name) else {
                continue;
            };
            let listed = if template {
                c.templates.iter().any(|t| t.uri_template == uri)
            } else {
                c.resources.iter().any(|r| r.uri == uri)
            };
            if listed {
                servers.insert(name.clone());
            }
        }
        let mut servers: Vec<String> = servers.into_iter().collect();
        match servers.len() {
            0 => Err(CallError::UnknownResource {
                uri: uri.to_string(),
            }),
            1 => Ok(servers.remove(0)),
            _ => {
                self.counters.ambiguous_uris += 1;
                Err(CallError::AmbiguousResource {
                    uri: uri.to_string(),
                    servers,
                })
            }
        }
    }

    /// A log level set on a stateless connection: nothing to send, since the level rides in
    /// every request's `_meta` from now on.
    fn level_is_per_request(&mut self, conn: ConnId, op: &Operation) -> bool {
        let per_request = matches!(op, Operation::SetLogLevel { .. }) && self.is_modern(conn);
        if per_request {
            self.counters.log_levels_per_request += 1;
        }
        per_request
    }

    fn check_offered(&self, server: &str, op: &Operation) -> Result<(), CallError> {
        match self.capabilities(server) {
            Some(caps) if !offered(op, caps) => Err(CallError::Unsupported {
                server: server.to_string(),
                method: op.method().to_string(),
            }),
            _ => Ok(()),
        }
    }

    fn send_op(
        &mut self,
        conn: ConnId,
        call: CallId,
        op: &Operation,
        raw_prompt: Option<&str>,
    ) -> Option<u64> {
        let params = op_params(op, raw_prompt);
        let extras = RequestExtras {
            name: header_name(op, raw_prompt),
            ..RequestExtras::default()
        };
        self.request_with(conn, op.method(), Some(params), Req::Op(call), extras)
    }

    /// Send operation `call` again on `conn`, with a round's inputs and the server's state.
    pub(super) fn resend_op(
        &mut self,
        conn: ConnId,
        call: CallId,
        retry: super::mrtr::Retry,
    ) -> Option<u64> {
        let o = self.catalog.ops.get(&call)?;
        let (op, raw_prompt) = (o.op.clone(), o.raw_prompt.clone());
        let params = op_params(&op, raw_prompt.as_deref());
        let extras = RequestExtras {
            name: header_name(&op, raw_prompt.as_deref()),
            ..RequestExtras::default()
        };
        self.request_spliced(conn, op.method(), params, retry, Req::Op(call), extras)
    }

    /// The server connected: send the operations that waited for it.
    pub(super) fn flush_waiting_ops(&mut self, server: &str, conn: ConnId) {
        let waiting: Vec<CallId> = self
            .catalog
            .ops
            .iter()
            .filter(|(_, o)| o.server == server && matches!(o.state, OpState::Waiting))
            .map(|(id, _)| *id)
            .collect();
        for call in waiting {
            let Some(o) = self.catalog.ops.get(&call) else {
                continue;
            };
            let (op, raw) = (o.op.clone(), o.raw_prompt.clone());
            if let Err(e) = self.check_offered(server, &op) {
                self.complete_op(call, OperationOutcome::Err(e));
                continue;
            }
            // A deferred prompt may be gone from the live list.
            if let (Operation::GetPrompt { name, .. }, Some(raw)) = (&op, &raw) {
                let listed = self
                    .shown_catalog(server)
                    .is_some_and(|(c, _)| c.prompts.iter().any(|p| &p.name == raw));
                if !listed {
                    let e = CallError::UnknownPrompt { name: name.clone() };
                    self.complete_op(call, OperationOutcome::Err(e));
                    continue;
                }
            }
            if self.level_is_per_request(conn, &op) {
                let done = OperationResult::Done {
                    server: server.to_string(),
                };
                self.complete_op(call, OperationOutcome::Ok(done));
                continue;
            }
            if let Some(r) = self.subscription_on_stream(conn, server, &op) {
                let outcome = match r {
                    Ok(()) => OperationOutcome::Ok(OperationResult::Done {
                        server: server.to_string(),
                    }),
                    Err(e) => OperationOutcome::Err(e),
                };
                self.complete_op(call, outcome);
                continue;
            }
            if let Some(req) = self.send_op(conn, call, &op, raw.as_deref()) {
                self.counters.deferred_operations_sent += 1;
                if let Some(o) = self.catalog.ops.get_mut(&call) {
                    o.state = OpState::Sent { conn, req };
                }
            }
        }
    }

    /// The server answered operation `call`.
    pub(super) fn on_op_result(
        &mut self,
        call: CallId,
        result: Result<Box<RawValue>, protocol::RpcError>,
    ) {
        if !self.catalog.ops.contains_key(&call) {
            return;
        }
        let raw = match result {
            Ok(raw) => raw,
            Err(e) => {
                let e = CallError::Rpc {
                    code: e.code,
                    message: e.message,
                    data: e.data,
                };
                self.complete_op(call, OperationOutcome::Err(e));
                return;
            }
        };
        // A read or a prompt may take input rounds; the revision allows them on nothing else,
        // so any other operation that asks for input fails with a typed error rather than
        // being read as its final result.
        match protocol::result_type(&raw) {
            protocol::ResultType::Complete => {}
            protocol::ResultType::InputRequired => {
                let method = self.catalog.ops.get(&call).map(|o| o.op.method());
                if let Some("resources/read" | "prompts/get") = method {
                    self.on_op_input_required(call, &raw);
                    return;
                }
                self.counters.inputs_unavailable += 1;
                let e = CallError::InputUnavailable {
                    method: method.unwrap_or_default().into(),
                    reason: "the server asked for input on a request that takes none".into(),
                };
                self.complete_op(call, OperationOutcome::Err(e));
                return;
            }
            protocol::ResultType::Unknown(t) => {
                self.counters.unknown_result_types += 1;
                let e = CallError::Protocol(format!("an unknown resultType {t}"));
                self.complete_op(call, OperationOutcome::Err(e));
                return;
            }
        }
        let Some(o) = self.catalog.ops.get(&call) else {
            return;
        };
        let server = o.server.as_str();
        let parsed = match &o.op {
            Operation::ReadResource { .. } => {
                protocol::parse_read_result(&raw, server).map(OperationResult::Read)
            }
            Operation::GetPrompt { .. } => {
                protocol::parse_prompt_result(&raw, server).map(OperationResult::Prompt)
            }
            Operation::Complete { .. } => {
                protocol::parse_completion_result(&raw, server).map(OperationResult::Completion)
            }
            Operation::ListTasks { .. } => {
                protocol::parse_task_page(&raw, server).map(OperationResult::Tasks)
            }
            op => protocol::parse_empty_result(&raw, op.method()).map(|()| OperationResult::Done {
                server: server.to_string(),
            }),
        };
        let outcome = match parsed {
            Ok(r) => {
                match &r {
                    OperationResult::Read(_) => self.counters.resources_read += 1,
                    OperationResult::Prompt(_) => self.counters.prompts_got += 1,
                    OperationResult::Completion(_) => self.counters.completions += 1,
                    OperationResult::Tasks(_) => self.counters.task_pages_listed += 1,
                    _ => self.counters.operations_acknowledged += 1,
                }
                OperationOutcome::Ok(r)
            }
            Err(e) => OperationOutcome::Err(CallError::Protocol(e.to_string())),
        };
        self.complete_op(call, outcome);
    }

    /// The transport could not deliver operation `call`.
    pub(super) fn on_op_undelivered(&mut self, call: CallId, error: String) {
        let error = ServerError::new(ServerErrorKind::RequestFailed, error);
        self.complete_op(call, OperationOutcome::Err(CallError::Transport(error)));
    }

    /// Operation `call` reached its deadline; whether it was one (else it is a tool call).
    pub(super) fn on_op_timeout(&mut self, call: CallId) -> bool {
        let Some(o) = self.catalog.ops.get(&call) else {
            return false;
        };
        self.counters.operation_timeouts += 1;
        let error = CallError::OperationTimeout {
            method: o.op.method().to_string(),
            after: o.timeout,
            waiting_for: match o.state {
                OpState::Waiting => Some(o.server.clone()),
                OpState::Sent { .. } | OpState::Input { .. } => None,
            },
        };
        self.abort_op(call, "request timed out", OperationOutcome::Err(error));
        true
    }

    /// `CancelCall` for an operation; whether it was one.
    pub(super) fn cancel_op(&mut self, call: CallId) -> bool {
        if !self.catalog.ops.contains_key(&call) {
            return false;
        }
        self.counters.operations_cancelled += 1;
        self.abort_op(call, "cancelled by the client", OperationOutcome::Cancelled);
        true
    }

    fn abort_op(&mut self, call: CallId, reason: &str, outcome: OperationOutcome) {
        let Some(o) = self.catalog.ops.get(&call) else {
            return;
        };
        if let OpState::Sent { conn, req } = o.state {
            if let Some(cn) = self.conns.get_mut(&conn) {
                cn.tracker.forget(req);
                self.send_cancelled(conn, req, reason);
            }
        }
        self.complete_op(call, outcome);
    }

    /// Every operation completes exactly once: this is the only place that says so.
    pub(super) fn complete_op(&mut self, call: CallId, outcome: OperationOutcome) {
        let Some(o) = self.catalog.ops.remove(&call) else {
            return;
        };
        self.timers.disarm(o.deadline, TimerReason::Call { call });
        match o.state {
            OpState::Sent { conn, req } => {
                if let Some(cn) = self.conns.get_mut(&conn) {
                    cn.tracker.forget(req);
                }
            }
            OpState::Input { .. } => self.withdraw_inputs(call),
            OpState::Waiting => {}
        }
        self.emit(Event::OperationCompleted { call, outcome });
    }

    /// `server`'s connection is gone: fail the operations sent on it (and, unless
    /// `keep_waiting`, those waiting for it).
    pub(super) fn drop_ops(&mut self, server: &str, error: &ServerError, keep_waiting: bool) {
        let ops: Vec<CallId> = self
            .catalog
            .ops
            .iter()
            .filter(|(_, o)| {
                o.server == server && !(keep_waiting && matches!(o.state, OpState::Waiting))
            })
            .map(|(id, _)| *id)
            .collect();
        for call in ops {
            let e = if error.kind == ServerErrorKind::Disconnected {
                CallError::Disconnected {
                    server: server.to_string(),
                }
            } else {
                CallError::Transport(error.clone())
            };
            self.complete_op(call, OperationOutcome::Err(e));
        }
    }

    /// `notifications/resources/updated`.
    pub(super) fn on_resource_updated(&mut self, server: &str, uri: String) {
        self.counters.resource_updates += 1;
        self.emit(Event::ResourceUpdated {
            server: server.to_string(),
            uri,
        });
    }

    /// Operations not yet completed.
    pub fn operations_in_flight(&self) -> Vec<CallId> {
        self.catalog.ops.keys().copied().collect()
    }
}
