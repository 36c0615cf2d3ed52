//! Tool calls: routed by qualified name, sent at once to a connected server or held until a
//! deferred one connects, bounded by a deadline (which progress may push out), cancellable,
//! and completed exactly once.

use super::errors::CallError;
use super::sessions::{Req, RequestExtras};
use super::tasks::TaskRun;
use super::{CallId, CallOutcome, ConnId, Event, Level, Manager, TimerReason};
use crate::protocol;
use crate::time::Instant;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::time::Duration;

/// Where a call is.
#[derive(Debug, Clone)]
pub(super) enum CallState {
    /// Waiting for a deferred server to connect.
    Waiting,
    /// Sent as request `req` on `conn`.
    Sent { conn: ConnId, req: u64 },
    /// Running as a task on `conn` (`tasks.rs`): polled until its result is fetched.
    Task { conn: ConnId, run: TaskRun },
    /// A stateless server asked for inputs: waiting for them, then retried on `conn`.
    Input {
        conn: ConnId,
        round: Box<super::mrtr::InputRound>,
    },
}

/// A call in flight.
#[derive(Debug, Clone)]
pub(super) struct Call {
    pub(super) server: String,
    pub(super) tool: String,
    /// Kept while the call waits; taken when it is sent, except on a stateless connection,
    /// where a retry with inputs sends them again.
    pub(super) arguments: Option<Value>,
    /// The caller's `_meta` for the request; kept like the arguments.
    pub(super) meta: Option<Map<String, Value>>,
    timeout: Duration,
    deadline: Instant,
    started: Instant,
    /// The call went out with a progress token (its number), so progress names it.
    pub(super) progress: bool,
    pub(super) state: CallState,
    /// Input rounds so far (multi round-trip requests).
    pub(super) input_rounds: u32,
    /// The `tools/call` went out with a `task` param: its answer may be a task.
    as_task: bool,
    /// The output schema of the definition the call was made against (live or cached): its
    /// result is checked against it even when the server's list changed in the meantime.
    pub(super) output_schema: Option<crate::tool::RawJson>,
}

impl Manager {
    /// A call reached its deadline: fail it, saying whether it was still waiting for its
    /// server.
    pub(super) fn on_call_timeout(&mut self, call: CallId) {
        let Some(c) = self.calls.get(&call) else {
            return;
        };
        self.counters.call_timeouts += 1;
        let error = CallError::Timeout {
            after: c.timeout,
            waiting_for: match c.state {
                CallState::Waiting => Some(c.server.clone()),
                CallState::Sent { .. } | CallState::Task { .. } | CallState::Input { .. } => None,
            },
        };
        self.abort_call(call, "request timed out", CallOutcome::Err(error));
    }

    pub(super) fn call_tool(
        &mut self,
        call: CallId,
        tool: &str,
        arguments: Option<Value>,
        timeout: Option<Duration>,
        progress: bool,
        meta: Option<Map<String, Value>>,
    ) {
        if self.calls.contains_key(&call) {
            self.diag(
                None,
                Level::Warn,
                format!(
                    "call id {} is already in flight; second call ignored",
                    call.0
                ),
            );
            return;
        }
        let Some((server, raw)) = self
            .names
            .resolve(tool)
            .map(|(s, t)| (s.to_string(), t.to_string()))
        else {
            let message = self.unknown_tool_error(tool);
            self.emit(Event::CallCompleted {
                call,
                outcome: CallOutcome::Err(message),
            });
            return;
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
        // Ok(conn): send now; Err(true): wait; Err(false): fail.
        let target = self.servers.get(&server).map(|s| s.phase.route());
        let progress = progress || self.opts.reset_timeout_on_progress;
        let (state, arguments, meta, as_task) = match target {
            Some(Ok(conn)) => {
                let kept = self.keep_for_retry(conn, &arguments, &meta);
                match self.send_call(conn, call, &raw, arguments, progress, meta, None) {
                    Some((req, as_task)) => {
                        (CallState::Sent { conn, req }, kept.0, kept.1, as_task)
                    }
                    None => return,
                }
            }
            // A deferred tool: its server is still connecting, so the call waits for it.
            Some(Err(true)) => (CallState::Waiting, arguments, meta, false),
            _ => {
                let reason = self.servers.get(&server).and_then(|s| s.last_error.clone());
                self.emit(Event::CallCompleted {
                    call,
                    outcome: CallOutcome::Err(CallError::NotConnected { server, reason }),
                });
                return;
            }
        };
        let output_schema = self.servers.get(&server).and_then(|s| {
            let cached = match &s.cache {
                super::servers::CacheState::Hit(tools) => Some(tools),
                _ => None,
            };
            s.tools
                .iter()
                .chain(cached.into_iter().flat_map(|t| t.iter()))
                .find(|t| t.name == raw)
                .and_then(|t| t.output_schema.clone())
        });
        self.calls.insert(
            call,
            Call {
                output_schema,
                server,
                tool: raw,
                arguments,
                meta,
                timeout,
                deadline,
                started: self.now,
                progress,
                state,
                as_task,
                input_rounds: 0,
            },
        );
        self.timers.arm(deadline, TimerReason::Call { call });
    }

    /// What a call on `conn` keeps after it is sent: its arguments and `_meta` on a stateless
    /// connection (a retry with inputs sends them again), nothing otherwise.
    fn keep_for_retry(
        &self,
        conn: ConnId,
        arguments: &Option<Value>,
        meta: &Option<Map<String, Value>>,
    ) -> (Option<Value>, Option<Map<String, Value>>) {
        if self.is_modern(conn) {
            (arguments.clone(), meta.clone())
        } else {
            (None, None)
        }
    }

    /// Send `tools/call`; `input` is a retry's answers and the state to echo.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send_call(
        &mut self,
        conn: ConnId,
        call: CallId,
        raw: &str,
        arguments: Option<Value>,
        progress: bool,
        meta: Option<Map<String, Value>>,
        input: Option<super::mrtr::Retry>,
    ) -> Option<(u64, bool)> {
        let server = &self.conns.get(&conn)?.server;
        let headers = self.call_headers(conn, server, raw, arguments.as_ref());
        let mut params = protocol::call_tool_params(raw, arguments.as_ref());
        let as_task = self.call_as_task(conn, raw);
        if as_task {
            params.task = Some(protocol::Empty {});
        }
        let mut meta = meta.unwrap_or_default();
        // Progress tokens are the core's: a caller's own could name another call.
        meta.remove("progressToken");
        if progress {
            meta.insert("progressToken".into(), Value::from(call.0));
        }
        let extras = RequestExtras {
            name: Some(raw),
            headers,
            own_meta: Some(&meta),
        };
        let req = match input {
            Some(retry) => {
                self.request_spliced(conn, "tools/call", params, retry, Req::Call(call), extras)
            }
            None => self.request_with(conn, "tools/call", Some(params), Req::Call(call), extras),
        };
        req.map(|req| (req, as_task))
    }

    pub(super) fn flush_waiting_calls(&mut self, server: &str, conn: ConnId) {
        let waiting: Vec<CallId> = self
            .calls
            .iter()
            .filter(|(_, c)| c.server == server && matches!(c.state, CallState::Waiting))
            .map(|(id, _)| *id)
            .collect();
        for call in waiting {
            let Some(c) = self.calls.get(&call) else {
                continue;
            };
            // The tool may be gone from the live list.
            if !self
                .servers
                .get(server)
                .is_some_and(|s| s.tools.iter().any(|t| t.name == c.tool))
            {
                let error = CallError::RetiredTool {
                    server: server.to_string(),
                    raw: c.tool.clone(),
                    called_as: None,
                };
                self.complete_call(call, CallOutcome::Err(error));
                continue;
            }
            let raw = c.tool.clone();
            let progress = c.progress;
            // It was made against the cached definition; it is sent against the live one,
            // whose output schema its result must keep to.
            let live_schema = self
                .servers
                .get(server)
                .and_then(|s| s.tools.iter().find(|t| t.name == raw))
                .and_then(|t| t.output_schema.clone());
            let (args, meta) = match self.calls.get_mut(&call) {
                Some(c) => {
                    c.output_schema = live_schema;
                    (c.arguments.take(), c.meta.take())
                }
                None => (None, None),
            };
            let kept = self.keep_for_retry(conn, &args, &meta);
            if let Some((req, as_task)) =
                self.send_call(conn, call, &raw, args, progress, meta, None)
            {
                self.counters.deferred_calls_sent += 1;
                if let Some(c) = self.calls.get_mut(&call) {
                    c.state = CallState::Sent { conn, req };
                    c.as_task = as_task;
                    (c.arguments, c.meta) = kept;
                }
            }
        }
    }

    pub(super) fn on_call_result(
        &mut self,
        call: CallId,
        result: Result<Box<RawValue>, protocol::RpcError>,
    ) {
        let created = self
            .calls
            .get(&call)
            .is_some_and(|c| c.as_task && matches!(c.state, CallState::Sent { .. }));
        if created {
            if let Ok(v) = &result {
                if self.on_task_created(call, v) {
                    return;
                }
            }
        }
        let outcome = match result {
            // What the answer is and, when complete, the result: one reading of a plain
            // answer.
            Ok(v) => match protocol::read_call_answer(v) {
                protocol::CallAnswer::Complete(Ok(r)) => self.check_output(call, r),
                protocol::CallAnswer::Complete(Err(e)) => {
                    CallOutcome::Err(CallError::Protocol(e.to_string()))
                }
                protocol::CallAnswer::InputRequired(v) => {
                    self.on_call_input_required(call, &v);
                    return;
                }
                protocol::CallAnswer::Unknown(t) => {
                    self.counters.unknown_result_types += 1;
                    let error = CallError::Protocol(format!(
                        "tools/call answered with an unknown resultType {t}"
                    ));
                    CallOutcome::Err(error)
                }
            },
            Err(e) => CallOutcome::Err(CallError::Rpc {
                code: e.code,
                message: e.message,
                data: e.data,
            }),
        };
        self.complete_call(call, outcome);
    }

    pub(super) fn cancel_call(&mut self, call: CallId) {
        if self.calls.contains_key(&call) {
            self.counters.calls_cancelled += 1;
            self.abort_call(call, "cancelled by the client", CallOutcome::Cancelled);
        }
    }

    /// End a call early (timeout, cancel): tell the server with `notifications/cancelled`
    /// if the request went out, so it can stop the work nobody waits for, then complete it.
    fn abort_call(&mut self, call: CallId, reason: &str, outcome: CallOutcome) {
        let Some(c) = self.calls.get(&call) else {
            return;
        };
        match &c.state {
            CallState::Sent { conn, req } => {
                let (conn, req) = (*conn, *req);
                if let Some(cn) = self.conns.get_mut(&conn) {
                    cn.tracker.forget(req);
                    self.send_cancelled(conn, req, reason);
                }
            }
            CallState::Task { conn, run } => {
                let (conn, run) = (*conn, run.clone());
                self.cancel_task(call, conn, &run, reason);
            }
            CallState::Waiting | CallState::Input { .. } => {}
        }
        self.complete_call(call, outcome);
    }

    /// Every call completes exactly once: this is the only place that says so.
    pub(super) fn complete_call(&mut self, call: CallId, outcome: CallOutcome) {
        let Some(c) = self.calls.remove(&call) else {
            return;
        };
        self.timers.disarm(c.deadline, TimerReason::Call { call });
        match c.state {
            CallState::Sent { conn, req } => {
                if let Some(cn) = self.conns.get_mut(&conn) {
                    cn.tracker.forget(req);
                }
            }
            CallState::Task { conn, run } => {
                if let Some(at) = run.poll {
                    self.timers.disarm(at, TimerReason::TaskPoll { call });
                }
                if let (Some(req), Some(cn)) = (run.req, self.conns.get_mut(&conn)) {
                    cn.tracker.forget(req);
                }
            }
            CallState::Input { .. } => self.withdraw_inputs(call),
            CallState::Waiting => {}
        }
        self.emit(Event::CallCompleted { call, outcome });
    }

    /// Progress for a call pushes its deadline out (when enabled), never past the ceiling.
    /// The call it is about, if the token is one we issued for a call of this server in flight.
    pub(super) fn on_progress(&mut self, server: &str, token: &Value) -> Option<CallId> {
        let call = token.as_u64().map(CallId)?;
        let max = self.opts.max_call_time;
        let now = self.now;
        let c = self.calls.get_mut(&call)?;
        let out = matches!(
            c.state,
            CallState::Sent { .. } | CallState::Task { .. } | CallState::Input { .. }
        );
        if !c.progress || c.server != server || !out {
            return None;
        }
        if !self.opts.reset_timeout_on_progress {
            return Some(call);
        }
        let new = (now + c.timeout).min(c.started + max);
        if new > c.deadline {
            let old = c.deadline;
            c.deadline = new;
            self.timers.disarm(old, TimerReason::Call { call });
            self.timers.arm(new, TimerReason::Call { call });
            self.counters.progress_resets += 1;
        }
        Some(call)
    }
}
