//! Tool calls that run as tasks (MCP 2025-11-25): a tool whose `execution.taskSupport` is
//! `required`, on a server that declared `tasks.requests.tools.call`, is called with a `task`
//! param. The server answers with a task instead of the result; the core then polls
//! `tasks/get` at the server's `pollInterval` (bounded by [`TASK_POLL_MIN`] and
//! [`TASK_POLL_MAX`]), and once the task stops `working` (or a `notifications/tasks/status`
//! says so) fetches `tasks/result`, whose answer completes the call like a direct one. The
//! caller sees one `CallCompleted` either way: the call's deadline, cancellation and the
//! loss of the connection end a task call as they end any call, and a task the caller gave
//! up on is cancelled on the server (`tasks/cancel`).

use super::calls::CallState;
use super::sessions::Req;
use super::{CallId, CallOutcome, ConnId, Manager, TimerReason};
use crate::manager::errors::CallError;
use crate::protocol;
use crate::tool::TaskSupport;
use serde_json::value::RawValue;
use serde_json::Value;
use std::time::Duration;

/// `tasks/get`, `tasks/result` and `tasks/cancel` params.
#[derive(serde::Serialize)]
struct TaskParams<'a> {
    #[serde(rename = "taskId")]
    task_id: &'a str,
}

/// The shortest wait between two `tasks/get` of one task, whatever the server asks.
pub const TASK_POLL_MIN: Duration = Duration::from_millis(100);
/// The longest wait between two `tasks/get` of one task, whatever the server asks.
pub const TASK_POLL_MAX: Duration = Duration::from_secs(30);
/// The wait between two `tasks/get` when the server gave no `pollInterval`.
pub const TASK_POLL_DEFAULT: Duration = Duration::from_secs(1);
/// Longest task id kept; a longer one is a protocol error (ids are echoed in every poll).
const MAX_TASK_ID_LEN: usize = 1024;

/// A call running as a task on its server.
#[derive(Debug, Clone)]
pub(super) struct TaskRun {
    /// The server's id for the task.
    pub(super) id: String,
    /// The `tasks/get` or `tasks/result` about it in flight, if any.
    pub(super) req: Option<u64>,
    /// When the next `tasks/get` is due (its `TaskPoll` timer), if one is armed.
    pub(super) poll: Option<crate::time::Instant>,
}

/// What a task object says (`CreateTaskResult.task`, a `tasks/get` answer, a status
/// notification's params).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct TaskInfo {
    pub(super) id: String,
    pub(super) status: TaskStatus,
    pub(super) poll_interval: Option<Duration>,
}

/// A task's status, as the protocol names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TaskStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
    /// A word this version does not know: polled like `working`, bounded by the deadline.
    Other,
}

impl TaskStatus {
    fn parse(s: &str) -> TaskStatus {
        match s {
            "working" => TaskStatus::Working,
            "input_required" => TaskStatus::InputRequired,
            "completed" => TaskStatus::Completed,
            "failed" => TaskStatus::Failed,
            "cancelled" => TaskStatus::Cancelled,
            _ => TaskStatus::Other,
        }
    }

    /// Past `working`: its result (or the server's requests for input) come from
    /// `tasks/result`.
    fn ready(self) -> bool {
        !matches!(self, TaskStatus::Working | TaskStatus::Other)
    }
}

/// A task object: `taskId` (a string, bounded), `status`, optional `pollInterval` (ms).
pub(super) fn parse_task(v: &Value) -> Option<TaskInfo> {
    let id = v.get("taskId")?.as_str()?;
    if id.is_empty() || id.len() > MAX_TASK_ID_LEN {
        return None;
    }
    Some(TaskInfo {
        id: id.to_string(),
        status: TaskStatus::parse(v.get("status")?.as_str()?),
        poll_interval: v
            .get("pollInterval")
            .and_then(Value::as_u64)
            .map(Duration::from_millis),
    })
}

fn poll_delay(asked: Option<Duration>) -> Duration {
    asked
        .unwrap_or(TASK_POLL_DEFAULT)
        .clamp(TASK_POLL_MIN, TASK_POLL_MAX)
}

impl Manager {
    /// Whether tool `raw` of the server behind `conn` is called as a task: its definition
    /// requires it and the server declared task-augmented `tools/call`.
    pub(super) fn call_as_task(&self, conn: ConnId, raw: &str) -> bool {
        let Some(server) = self.conns.get(&conn).map(|c| c.server.as_str()) else {
            return false;
        };
        let Some(s) = self.servers.get(server) else {
            return false;
        };
        let declared = s.init.as_ref().is_some_and(|i| i.tasks_tool_call);
        declared
            && s.tools
                .iter()
                .find(|t| t.name == raw)
                .is_some_and(|t| t.task_support() == TaskSupport::Required)
    }

    /// The answer to a `tools/call` sent as a task: a `CreateTaskResult` starts polling;
    /// anything else is the call's answer (a server may run it directly after all). True
    /// when the answer was taken as a task.
    pub(super) fn on_task_created(&mut self, call: CallId, result: &RawValue) -> bool {
        let Ok(v) = serde_json::from_str::<Value>(result.get()) else {
            return false;
        };
        let Some(task) = v.get("task") else {
            return false;
        };
        let Some(info) = parse_task(task) else {
            let error = CallError::Protocol(
                "tools/call answered with a task without a valid taskId and status".into(),
            );
            self.complete_call(call, CallOutcome::Err(error));
            return true;
        };
        let Some(c) = self.calls.get_mut(&call) else {
            return true;
        };
        let CallState::Sent { conn, .. } = c.state else {
            return true;
        };
        c.state = CallState::Task {
            conn,
            run: TaskRun {
                id: info.id.clone(),
                req: None,
                poll: None,
            },
        };
        self.counters.task_calls += 1;
        self.task_step(call, &info);
        true
    }

    /// What a task's status asks for next: its result, or another poll.
    fn task_step(&mut self, call: CallId, info: &TaskInfo) {
        if info.status.ready() {
            self.fetch_task_result(call);
        } else {
            self.arm_task_poll(call, poll_delay(info.poll_interval));
        }
    }

    fn arm_task_poll(&mut self, call: CallId, delay: Duration) {
        let at = self.now + delay;
        let Some(c) = self.calls.get_mut(&call) else {
            return;
        };
        let CallState::Task { run, .. } = &mut c.state else {
            return;
        };
        if let Some(old) = run.poll.replace(at) {
            self.timers.disarm(old, TimerReason::TaskPoll { call });
        }
        self.timers.arm(at, TimerReason::TaskPoll { call });
    }

    /// The poll timer of a task call: ask `tasks/get`.
    pub(super) fn on_task_poll(&mut self, call: CallId) {
        let Some(c) = self.calls.get_mut(&call) else {
            return;
        };
        let CallState::Task { conn, run } = &mut c.state else {
            return;
        };
        run.poll = None;
        if run.req.is_some() {
            return;
        }
        let (conn, id) = (*conn, run.id.clone());
        self.counters.task_polls += 1;
        let req = self.request(
            conn,
            "tasks/get",
            Some(TaskParams { task_id: &id }),
            Req::TaskGet(call),
        );
        self.set_task_req(call, req);
    }

    fn set_task_req(&mut self, call: CallId, req: Option<u64>) {
        if let Some(CallState::Task { run, .. }) = self.calls.get_mut(&call).map(|c| &mut c.state) {
            run.req = req;
        }
    }

    /// A `tasks/get` answer: poll again, or fetch the result; an error ends the call.
    pub(super) fn on_task_status(
        &mut self,
        call: CallId,
        result: Result<Box<RawValue>, protocol::RpcError>,
    ) {
        self.set_task_req(call, None);
        let info = match result {
            Ok(v) => serde_json::from_str::<Value>(v.get())
                .ok()
                .as_ref()
                .and_then(parse_task),
            Err(e) => {
                let error = CallError::Rpc {
                    code: e.code,
                    message: e.message,
                    data: e.data,
                };
                self.complete_call(call, CallOutcome::Err(error));
                return;
            }
        };
        match info {
            Some(info) => self.task_step(call, &info),
            None => {
                let error =
                    CallError::Protocol("tasks/get answered without a valid task status".into());
                self.complete_call(call, CallOutcome::Err(error));
            }
        }
    }

    /// `tasks/result`: its answer is the call's (a `CallToolResult`, or the server's error).
    fn fetch_task_result(&mut self, call: CallId) {
        let Some(c) = self.calls.get_mut(&call) else {
            return;
        };
        let CallState::Task { conn, run } = &mut c.state else {
            return;
        };
        if run.req.is_some() {
            return;
        }
        let (conn, id, poll) = (*conn, run.id.clone(), run.poll.take());
        if let Some(at) = poll {
            self.timers.disarm(at, TimerReason::TaskPoll { call });
        }
        let req = self.request(
            conn,
            "tasks/result",
            Some(TaskParams { task_id: &id }),
            Req::TaskResult(call),
        );
        self.set_task_req(call, req);
    }

    /// `notifications/tasks/status` from `server`: a task of one of its calls that is no
    /// longer working has its result fetched now instead of at the next poll.
    pub(super) fn on_task_notification(&mut self, server: &str, params: &Value) {
        let Some(info) = parse_task(params) else {
            return;
        };
        let call = self.calls.iter().find_map(|(id, c)| match &c.state {
            CallState::Task { run, .. } if c.server == server && run.id == info.id => Some(*id),
            _ => None,
        });
        let Some(call) = call else {
            return;
        };
        self.counters.task_status_notifications += 1;
        if info.status.ready() {
            self.fetch_task_result(call);
        }
    }

    /// The caller gave up on a task call (timeout, cancel): stop waiting for the request
    /// about it and cancel the task on the server. Its answer, if any, changes nothing.
    pub(super) fn cancel_task(&mut self, call: CallId, conn: ConnId, run: &TaskRun, why: &str) {
        if let Some(at) = run.poll {
            self.timers.disarm(at, TimerReason::TaskPoll { call });
        }
        if let Some(req) = run.req {
            if let Some(cn) = self.conns.get_mut(&conn) {
                cn.tracker.forget(req);
                self.send_cancelled(conn, req, why);
            }
        }
        self.counters.task_cancels += 1;
        self.request(
            conn,
            "tasks/cancel",
            Some(TaskParams { task_id: &run.id }),
            Req::TaskCancel,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn task_objects_and_poll_bounds() {
        let t = parse_task(&json!({"taskId": "a", "status": "working", "pollInterval": 5}));
        assert_eq!(
            t,
            Some(TaskInfo {
                id: "a".into(),
                status: TaskStatus::Working,
                poll_interval: Some(Duration::from_millis(5)),
            })
        );
        assert_eq!(poll_delay(Some(Duration::from_millis(5))), TASK_POLL_MIN);
        assert_eq!(poll_delay(Some(Duration::from_secs(3600))), TASK_POLL_MAX);
        assert_eq!(poll_delay(None), TASK_POLL_DEFAULT);
        assert_eq!(parse_task(&json!({"taskId": 3, "status": "working"})), None);
        assert_eq!(
            parse_task(&json!({"taskId": "", "status": "working"})),
            None
        );
        assert_eq!(parse_task(&json!({"taskId": "x"})), None);
        let long = "x".repeat(MAX_TASK_ID_LEN + 1);
        assert_eq!(
            parse_task(&json!({"taskId": long, "status": "working"})),
            None
        );
        for (word, ready) in [
            ("working", false),
            ("input_required", true),
            ("completed", true),
            ("failed", true),
            ("cancelled", true),
            ("paused", false),
        ] {
            assert_eq!(TaskStatus::parse(word).ready(), ready, "{word}");
        }
    }
}
