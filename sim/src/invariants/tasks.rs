//! Tool calls run as tasks: the manager polls a task no more often than the core's floor
//! (`TASK_POLL_MIN`), whatever `pollInterval` the server asks for, and never polls a task
//! after asking for its result. (That its caller gets exactly one outcome is
//! `EveryCallCompletesOnce`, which holds for task calls like any other.)

use super::{output_violation, Ctx};
use crate::json::At;
use crate::observe::{Observer, StepInfo};
use crate::verdict::Invariant;
use serde_json::Value;
use switchboard_core::manager::{ConnId, TASK_POLL_MIN};
use switchboard_core::Instant;

/// A `tasks/get` or `tasks/result` the manager sent on `conn` at `now`.
pub fn task_request_sent(
    now: Instant,
    obs: &mut Observer,
    step: &mut StepInfo,
    conn: ConnId,
    method: &str,
    frame: &[u8],
) {
    let Some(task) = serde_json::from_slice::<Value>(frame)
        .ok()
        .and_then(|v| v.at("/params/taskId")?.as_str().map(str::to_string))
    else {
        return;
    };
    let key = (conn, task);
    match method {
        "tasks/get" => {
            if obs.task_results_asked.contains(&key) {
                let d = format!("tasks/get of task {} after its tasks/result", key.1);
                step.output_violations
                    .push((Invariant::TaskPollsAreBounded, d));
            }
            if let Some(last) = obs.task_polls.insert(key.clone(), now) {
                let gap = now.as_millis().saturating_sub(last.as_millis());
                if gap < TASK_POLL_MIN.as_millis() as u64 {
                    let d = format!("task {} polled again after {gap} ms", key.1);
                    step.output_violations
                        .push((Invariant::TaskPollsAreBounded, d));
                }
            }
        }
        _ => {
            obs.task_results_asked.insert(key);
        }
    }
}

/// The violations [`task_request_sent`] spotted while the step was drained.
pub fn task_polls_are_bounded(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, Invariant::TaskPollsAreBounded)
}
