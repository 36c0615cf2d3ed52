//! Simulated servers that run tool calls as tasks (MCP 2025-11-25). With the fault mix's
//! `task_pct` above 0 every server declares task-augmented `tools/call`, and a tool is listed
//! `taskSupport: required` when its name falls in that percentage. A call sent with a `task`
//! param is answered with a task, then `tasks/get`, `tasks/result` and `tasks/cancel` are
//! answered from the task's plan: it finishes after a while, fails, is cancelled by the
//! server, or stalls forever; its `pollInterval` is anything from 1 ms to an hour (the core
//! bounds it), and some tasks announce their end with `notifications/tasks/status`.

use super::received::{self, Received};
use super::server::Tag;
use super::{answers, World};
use serde_json::{json, Value};
use switchboard_core::manager::ConnId;
use switchboard_core::Instant;

/// How one simulated task ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TaskEnd {
    Completes,
    Fails,
    CancelledByServer,
    Stalls,
}

/// A task a simulated server runs.
#[derive(Debug, Clone)]
pub(super) struct SimTask {
    tool: String,
    end: TaskEnd,
    /// When it stops working (never for `Stalls`).
    done_at: Option<Instant>,
    poll_ms: u64,
    /// Cancelled by the client's `tasks/cancel`.
    cancelled: bool,
}

/// Whether `tool` is listed as `taskSupport: required` under `task_pct` (by a hash of its
/// name, so every listing and attempt agrees).
pub(super) fn task_required(tool: &str, task_pct: u8) -> bool {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in tool.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    task_pct > 0 && h % 100 < u64::from(task_pct)
}

impl SimTask {
    fn status(&self, now: Instant) -> &'static str {
        if self.cancelled {
            return "cancelled";
        }
        match (self.end, self.done_at) {
            (_, Some(t)) if now >= t => match self.end {
                TaskEnd::Completes => "completed",
                TaskEnd::Fails => "failed",
                TaskEnd::CancelledByServer => "cancelled",
                TaskEnd::Stalls => "working",
            },
            _ => "working",
        }
    }

    /// [`SimTask::object`], written.
    fn write(&self, id: &str, now: Instant) -> Vec<u8> {
        let mut b = Vec::with_capacity(192);
        let mut o = answers::Obj::new(&mut b);
        o.val("createdAt", "2025-11-25T00:00:00Z")
            .val("lastUpdatedAt", "2025-11-25T00:00:00Z")
            .val("pollInterval", &self.poll_ms)
            .val("status", self.status(now))
            .val("taskId", id)
            .val("ttl", &600000);
        o.end();
        b
    }

    fn object(&self, id: &str, now: Instant) -> Value {
        json!({"taskId": id, "status": self.status(now), "createdAt": "2025-11-25T00:00:00Z",
               "lastUpdatedAt": "2025-11-25T00:00:00Z", "ttl": 600000, "pollInterval": self.poll_ms})
    }
}

impl World<'_> {
    /// A `tools/call` with a `task` param: create the task and answer with it.
    pub(super) fn task_call(&mut self, conn: ConnId, i: usize, id: Value, tool: String) {
        let task_id = format!("task-{}-{}", conn.0, id);
        let lat = self.sc.servers[i].call_latency_ms;
        let cf = self.sc.mix.call_fault_pct;
        let end = if self.pct(cf) {
            match self.rng.below(3) {
                0 => TaskEnd::Fails,
                1 => TaskEnd::CancelledByServer,
                _ => TaskEnd::Stalls,
            }
        } else {
            TaskEnd::Completes
        };
        let poll_ms = [1, 50, 300, 1_000, 3_600_000][self.rng.below(5) as usize];
        let run_ms = 20 + self.rng.below(1_500);
        let done_at = (end != TaskEnd::Stalls).then(|| self.after_ms(lat + run_ms));
        let task = SimTask {
            tool,
            end,
            done_at,
            poll_ms,
            cancelled: false,
        };
        let created = json!({"jsonrpc": "2.0", "id": id, "result": {"task": task.object(&task_id, self.now)}});
        self.cov.tasks_created += 1;
        self.reply(conn, lat, created);
        // Some servers say when the task is done.
        let cp = self.sc.mix.chatter_pct;
        if done_at.is_some() && (self.healed || self.pct(cp.max(30))) {
            let mut done = task.clone();
            done.done_at = Some(self.now);
            let note = json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
                              "params": done.object(&task_id, self.now)});
            self.cov.task_status_sent += 1;
            self.reply(conn, lat + run_ms, note);
        }
        if let Some(p) = self.procs.get_mut(&conn) {
            p.tasks.insert(task_id, task);
        }
    }

    /// `tasks/get`, `tasks/result` and `tasks/cancel`.
    pub(super) fn task_request(&mut self, conn: ConnId, method: &str, id: Value, req: &Received) {
        let task_id = received::str_of(req.params.task_id);
        let task_id = task_id.as_deref().unwrap_or("").to_string();
        let now = self.now;
        let Some(task) = self
            .procs
            .get_mut(&conn)
            .and_then(|p| p.tasks.get_mut(&task_id))
        else {
            let message = format!("unknown task {task_id}");
            self.reply_error(conn, 1, &id, -32602, &message, Tag::None);
            return;
        };
        match method {
            "tasks/get" => {
                let object = task.write(&task_id, now);
                let r = answers::checked_result(&id, &object, || task.object(&task_id, now));
                self.cov.task_polls_answered += 1;
                self.reply_frame(conn, 1, r, Tag::None);
            }
            "tasks/cancel" => {
                task.cancelled = true;
                let object = task.write(&task_id, now);
                let r = answers::checked_result(&id, &object, || task.object(&task_id, now));
                self.cov.task_cancels_received += 1;
                self.reply_frame(conn, 1, r, Tag::None);
            }
            _ => {
                // tasks/result: answered once the task is done (never, if it stalls).
                let (end, done_at, tool, cancelled) =
                    (task.end, task.done_at, task.tool.clone(), task.cancelled);
                let Some(at) = done_at.filter(|_| !cancelled) else {
                    if cancelled {
                        self.reply_error(conn, 1, &id, -32000, "task cancelled", Tag::None);
                    }
                    return;
                };
                let wait = at.as_millis().saturating_sub(now.as_millis());
                let server = self.procs.get(&conn).map_or(0, |p| p.server);
                let r = match end {
                    TaskEnd::Completes => {
                        let mut result =
                            self.tool_result(server, &tool, format!("ok:{tool}"), false);
                        result["_meta"] =
                            json!({"io.modelcontextprotocol/related-task": {"taskId": task_id}});
                        json!({"jsonrpc": "2.0", "id": id, "result": result})
                    }
                    TaskEnd::Fails => {
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": "task failed"}})
                    }
                    _ => {
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": "task cancelled by the server"}})
                    }
                };
                self.cov.task_results_sent += 1;
                self.reply(conn, wait + 1, r);
            }
        }
    }
}
