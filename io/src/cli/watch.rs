//! `switchboard watch`: start like `status`, then stay connected and print every status
//! change, tool change, reconnect attempt and diagnostic as it happens, until Ctrl-C or
//! `--for-ms`; then shut down cleanly.
//!
//! With `--json`, one JSON object per line, each with at least `time_ms` (since the watch
//! started), `event` and `server`:
//! - `{"event": "server", "status", "tools", "error"}`: the state of each server once connected;
//! - `{"event": "status_changed", "status"}` (`connected`, `connecting`, `disconnected`);
//! - `{"event": "reconnect_scheduled", "status", "attempt", "error"}` (the diagnostic that
//!   follows says when the attempt starts);
//! - `{"event": "tools_changed", "tools", "deferred"}`: that server's tool count now;
//! - `{"event": "diagnostic", "level", "message"}` (`server` may be null);
//! - `{"event": "stopped", "reason"}` (`ctrl-c` or `for-ms`), the last line.

use super::{Fatal, Global, Session, Settle};
use futures_lite::future;
use serde_json::{json, Value};
use std::io::Write;
use std::time::{Duration, Instant};
use switchboard::{Event, ServerStatus, Switchboard};

fn status_word(s: ServerStatus) -> &'static str {
    match s {
        ServerStatus::Connected => "connected",
        ServerStatus::Connecting => "connecting",
        ServerStatus::Disconnected => "disconnected",
    }
}

struct Printer {
    json: bool,
    started: Instant,
}

impl Printer {
    fn emit(&self, event: &str, server: Option<&str>, fields: Value, human: String) {
        let mut out = std::io::stdout().lock();
        let ms = self.started.elapsed().as_millis() as u64;
        if self.json {
            let mut obj = json!({"time_ms": ms, "event": event, "server": server});
            if let (Some(o), Value::Object(f)) = (obj.as_object_mut(), fields) {
                o.extend(f);
            }
            let _ = writeln!(out, "{obj}");
        } else {
            let _ = writeln!(
                out,
                "{:>9}  {:<12} {human}",
                format!("+{:.3}s", ms as f64 / 1000.0),
                server.unwrap_or("-")
            );
        }
        let _ = out.flush();
    }
}

fn tool_counts(sb: &Switchboard, server: &str) -> (usize, usize) {
    let tools = sb.tools();
    let mine = tools.iter().filter(|t| t.server == server);
    let (mut live, mut deferred) = (0, 0);
    for t in mine {
        if t.deferred {
            deferred += 1;
        } else {
            live += 1;
        }
    }
    (live + deferred, deferred)
}

pub(super) async fn run(g: &Global, as_json: bool, for_ms: Option<u64>) -> Result<u8, Fatal> {
    let started = Instant::now();
    let session = Session::start(g, Settle::Uncached).await?;
    let sb = session.sb.clone();
    let p = Printer {
        json: as_json,
        started,
    };
    for s in sb.servers() {
        let (tools, _) = tool_counts(&sb, &s.name);
        p.emit(
            "server",
            Some(&s.name),
            json!({"status": status_word(s.status), "tools": tools, "error": s.last_error}),
            format!(
                "{} with {tools} tools{}",
                status_word(s.status),
                s.last_error
                    .as_deref()
                    .map(|e| format!(" ({})", super::term::first_line(e)))
                    .unwrap_or_default()
            ),
        );
    }
    let events = sb.events();
    let signals =
        async_signal::Signals::new([async_signal::Signal::Int, async_signal::Signal::Term])
            .map_err(|e| Fatal::failed(format!("cannot listen for Ctrl-C: {e}")))?;
    let stop = async {
        use futures_lite::StreamExt;
        let mut signals = signals;
        let _ = signals.next().await;
        "ctrl-c"
    };
    let limit = async {
        match for_ms {
            Some(ms) => {
                async_io::Timer::after(Duration::from_millis(ms)).await;
                "for-ms"
            }
            None => future::pending().await,
        }
    };
    let watch = async {
        while let Ok(ev) = events.recv().await {
            print_event(&p, &sb, ev);
        }
        "stopped"
    };
    let reason = future::or(watch, future::or(stop, limit)).await;
    sb.shutdown().await;
    p.emit(
        "stopped",
        None,
        json!({"reason": reason, "processes_left": sb.live_processes().len()}),
        format!(
            "stopped ({reason}); processes left: {}",
            sb.live_processes().len()
        ),
    );
    Ok(super::EXIT_OK)
}

fn print_event(p: &Printer, sb: &Switchboard, ev: Event) {
    match ev {
        Event::StatusChanged { server, status } => {
            let state = sb.server_state(&server);
            let retry = state
                .as_ref()
                .filter(|s| s.status == ServerStatus::Connecting && s.reconnect_attempt > 0);
            match retry {
                Some(s) => {
                    let err = s.last_error.clone();
                    p.emit(
                        "reconnect_scheduled",
                        Some(&server),
                        json!({"status": "connecting", "attempt": s.reconnect_attempt, "error": err}),
                        format!(
                            "connection lost ({}); reconnect attempt {} scheduled",
                            err.as_deref().map(super::term::first_line).unwrap_or("?"),
                            s.reconnect_attempt
                        ),
                    );
                }
                None => {
                    let word = status_word(status);
                    let attempts = state.as_ref().map_or(0, |s| s.attempts);
                    p.emit(
                        "status_changed",
                        Some(&server),
                        json!({"status": word, "attempts": attempts}),
                        format!("status {word}"),
                    );
                }
            }
        }
        Event::ToolsChanged { servers } => {
            for server in servers {
                let (tools, deferred) = tool_counts(sb, &server);
                p.emit(
                    "tools_changed",
                    Some(&server),
                    json!({"tools": tools, "deferred": deferred}),
                    format!("tools changed: {tools} tools ({deferred} deferred)"),
                );
            }
        }
        Event::Diagnostic {
            server,
            level,
            message,
        } => {
            let level = format!("{level:?}").to_lowercase();
            p.emit(
                "diagnostic",
                server.as_deref(),
                json!({"level": level, "message": message}),
                format!("{level}: {message}"),
            );
        }
        Event::ServerLog {
            server,
            level,
            severity,
            logger,
            data,
        } => {
            let text = match &data {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let level = format!("{level:?}").to_lowercase();
            p.emit(
                "server_log",
                Some(&server),
                json!({"level": level, "severity": severity, "logger": logger, "data": data}),
                format!("{level}: [{}] {text}", logger.as_deref().unwrap_or(&server)),
            );
        }
        Event::Progress {
            server,
            call,
            progress,
            total,
            message,
        } => {
            p.emit(
                "progress",
                Some(&server),
                json!({"call": call.map(|c| c.0), "progress": progress, "total": total, "message": message}),
                format!(
                    "progress {progress}{}{}",
                    total.map_or(String::new(), |t| format!("/{t}")),
                    message.map_or(String::new(), |m| format!(": {m}"))
                ),
            );
        }
        Event::StartupComplete { report } => {
            p.emit(
                "startup_complete",
                None,
                json!({"round": report.round, "tools": report.tools.len(), "errors": report.errors}),
                format!(
                    "round {} complete: {} tools, {} errors",
                    report.round,
                    report.tools.len(),
                    report.errors.len()
                ),
            );
        }
    }
}
