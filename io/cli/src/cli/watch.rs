//! `switchboard watch`: start like `status`, then stay connected and print every status
//! change, tool change, reconnect attempt and diagnostic as it happens, until Ctrl-C or
//! `--for-ms`; then shut down cleanly.
//!
//! Its lines are written by a thread of their own, so a stdout that nobody reads (a paused
//! pager) never holds back the signals or `--for-ms`: the events lag instead (a `lagged` line
//! says how many were missed), and once the watch has stopped its last lines get at most 3 s
//! to be written.
//!
//! The watch subscribes to the switchboard's events the moment `start` returns at the gate
//! (before anything is printed), prints each server's state at the gate, then every event in
//! order (a status change already shown in a `server` line is not repeated). With `--json`,
//! one JSON object per line, each with `time_ms` (since the watch
//! started), `event` and `server` (null when the event concerns no one server):
//! - `{"event": "server", "status", "phase", "tools", "deferred", "error"}`: each server's state
//!   at the gate, one line each, first;
//! - `{"event": "startup_complete", "round", "tools", "errors"}`: a startup round reached its
//!   gate (the first one right after the `server` lines);
//! - `{"event": "status_changed", "status", "attempts"}` (`connected`, `connecting`,
//!   `disconnected`);
//! - `{"event": "reconnect_scheduled", "attempt", "next_attempt_in_ms", "error"}`: the
//!   connection was lost (attempt 1) or reconnect attempt `attempt - 1` failed; attempt
//!   `attempt` starts in `next_attempt_in_ms`;
//! - `{"event": "reconnect_started", "attempt"}`: that attempt's time came (the library
//!   emits no event of its own when an attempt starts: this line is printed when the
//!   scheduled time passes, or just before the event that shows the attempt ran, whichever
//!   comes first; it is dropped if the server is disconnected before its time);
//! - `{"event": "tools_changed", "tools", "deferred"}`: that server's tool count now;
//! - `{"event": "diagnostic", "level", "message"}` (`server` may be null);
//! - `{"event": "stopped", "reason", "processes_left"}` (`reason`: `ctrl-c`, `sigterm` or
//!   `for-ms`), the last line.

use super::interrupt::{self, Interrupt};
use super::{Fatal, Global, Session, Settle};
use futures_lite::future;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};
use switchboard::{Event, RecvError, ServerStatus, Switchboard};

fn status_word(s: ServerStatus) -> &'static str {
    match s {
        ServerStatus::Connected => "connected",
        ServerStatus::Connecting => "connecting",
        _ => "disconnected",
    }
}

/// How many formatted lines wait for the writer thread at most. Past it the watch stops
/// reading events until the output catches up, and its subscription reports what it missed.
const OUTPUT_QUEUE: usize = 256;

/// After the watch stopped, how long its last lines may take to reach stdout. A reader that
/// never reads (a paused pager) cannot hold the process past it.
const OUTPUT_DRAIN: Duration = Duration::from_secs(3);

/// Formats the watch's lines; a thread of its own writes them to stdout, so a stdout that
/// nobody reads never blocks the task that watches for signals and the deadline.
struct Printer {
    json: bool,
    started: Instant,
    /// Lines formatted but not yet handed to the writer (at most a few per event).
    pending: std::collections::VecDeque<String>,
    out: async_channel::Sender<String>,
}

impl Printer {
    /// Starts the writer thread; the receiver of the returned channel closes when it ends.
    fn new(json: bool, started: Instant) -> (Self, async_channel::Receiver<()>) {
        let (out, lines) = async_channel::bounded::<String>(OUTPUT_QUEUE);
        let (done_tx, done) = async_channel::bounded::<()>(1);
        std::thread::Builder::new()
            .name("switchboard-watch-out".into())
            .spawn(move || {
                let _done = done_tx;
                let stdout = std::io::stdout();
                while let Ok(line) = lines.recv_blocking() {
                    let mut out = stdout.lock();
                    if out
                        .write_all(line.as_bytes())
                        .and_then(|()| out.flush())
                        .is_err()
                    {
                        break; // stdout is gone: nothing more can be shown
                    }
                }
            })
            .expect("spawning the watch's output thread");
        let p = Printer {
            json,
            started,
            pending: Default::default(),
            out,
        };
        (p, done)
    }

    fn emit(&mut self, event: &str, server: Option<&str>, fields: Value, human: String) {
        let ms = self.started.elapsed().as_millis() as u64;
        let line = if self.json {
            let mut obj = json!({"time_ms": ms, "event": event, "server": server});
            if let (Some(o), Value::Object(f)) = (obj.as_object_mut(), fields) {
                o.extend(f);
            }
            format!("{obj}\n")
        } else {
            format!(
                "{:>9}  {:<12} {}\n",
                format!("+{:.3}s", ms as f64 / 1000.0),
                super::term::line_safe(server.unwrap_or("-")),
                super::term::terminal_safe(&human)
            )
        };
        self.pending.push_back(line);
    }

    /// Hands the pending lines to the writer, waiting while its queue is full. Cancel-safe:
    /// a line is taken off `pending` only once the writer's queue accepted it.
    async fn flush(&mut self) {
        while let Some(line) = self.pending.front() {
            if self.out.send(line.clone()).await.is_err() {
                self.pending.clear();
                return;
            }
            self.pending.pop_front();
        }
    }

    /// Hands over what is pending and ends the writer; waits for it to write everything, for
    /// at most [`OUTPUT_DRAIN`].
    async fn finish(mut self, done: async_channel::Receiver<()>) {
        let drain = async {
            self.flush().await;
            self.out.close();
            let _ = done.recv().await; // closed when the thread ends
        };
        future::or(drain, async {
            async_io::Timer::after(OUTPUT_DRAIN).await;
        })
        .await;
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

struct Watch<'a> {
    p: Printer,
    sb: &'a Switchboard,
    /// The round `start` returned with (already printed from its report).
    first_round: u64,
    /// The status last printed for each server: a change published just as the watch
    /// subscribed is already in its `server` line, and is not printed twice.
    printed: BTreeMap<String, ServerStatus>,
}

pub(super) async fn run(
    g: &Global,
    interrupt: &Interrupt,
    as_json: bool,
    for_ms: Option<u64>,
) -> Result<u8, Fatal> {
    let started = Instant::now();
    let session = Session::start(g, interrupt, Settle::Gate).await?;
    // From here the watch ends itself on a signal, to print its last line.
    interrupt.take_over();
    let sb = session.sb.clone();
    let (printer, written) = Printer::new(as_json, started);
    let mut w = Watch {
        p: printer,
        sb: &sb,
        first_round: session.report.round,
        printed: BTreeMap::new(),
    };
    for s in sb.servers() {
        w.printed.insert(s.name.clone(), s.status);
        let (tools, deferred) = tool_counts(&sb, &s.name);
        w.p.emit(
            "server",
            Some(&s.name),
            json!({"status": status_word(s.status), "phase": s.phase, "tools": tools,
                   "deferred": deferred, "error": s.last_error.as_ref().map(|e| e.to_string())}),
            format!(
                "{} ({}) with {tools} tools ({deferred} deferred){}",
                status_word(s.status),
                s.phase,
                s.last_error
                    .as_ref()
                    .map(|e| format!(": {}", super::term::first_line(&e.to_string())))
                    .unwrap_or_default()
            ),
        );
    }
    startup_complete(&mut w.p, &session.report);
    let events = session
        .events
        .ok_or_else(|| Fatal::failed("no event subscription".to_string()))?;
    let stop = async { interrupt::name(interrupt.wait().await) };
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
        loop {
            w.p.flush().await;
            match events.recv().await {
                Ok(ev) => w.event(ev),
                Err(RecvError::Lagged { missed }) => w.p.emit(
                    "lagged",
                    None,
                    json!({ "missed": missed }),
                    format!("missed {missed} events (the output did not keep up)"),
                ),
                Err(_) => break,
            }
        }
        "stopped"
    };
    // The output runs on its own thread: a stdout nobody reads cannot hold back the signal
    // or the deadline, only the events (which then lag).
    let reason = future::or(watch, future::or(stop, limit)).await;
    sb.shutdown().await;
    // Every live process below this one, escaped descendants included.
    let left = switchboard::process::descendants().len();
    w.p.emit(
        "stopped",
        None,
        json!({"reason": reason, "processes_left": left}),
        format!("stopped ({reason}); processes left: {left}"),
    );
    w.p.finish(written).await;
    Ok(match reason {
        "ctrl-c" => 130,
        "sigterm" => 143,
        _ => super::EXIT_OK,
    })
}

fn startup_complete(p: &mut Printer, report: &switchboard::StartupReport) {
    let errors: BTreeMap<&str, String> = report
        .errors
        .iter()
        .map(|(server, e)| (server.as_str(), e.to_string()))
        .collect();
    p.emit(
        "startup_complete",
        None,
        json!({"round": report.round, "tools": report.tools.len(), "errors": errors}),
        format!(
            "round {} complete: {} tools, {} errors",
            report.round,
            report.tools.len(),
            report.errors.len()
        ),
    );
}

impl Watch<'_> {
    fn event(&mut self, ev: Event) {
        match ev {
            Event::StatusChanged { server, status } => {
                if self.printed.insert(server.clone(), status) == Some(status) {
                    return;
                }
                let word = status_word(status);
                let attempts = self.sb.server_state(&server).map_or(0, |s| s.attempts);
                self.p.emit(
                    "status_changed",
                    Some(&server),
                    json!({"status": word, "attempts": attempts}),
                    format!("status {word}"),
                );
            }
            Event::ToolsChanged { servers } => {
                for server in servers {
                    let (tools, deferred) = tool_counts(self.sb, &server);
                    self.p.emit(
                        "tools_changed",
                        Some(&server),
                        json!({"tools": tools, "deferred": deferred}),
                        format!("tools changed: {tools} tools ({deferred} deferred)"),
                    );
                }
            }
            Event::ReconnectScheduled {
                server,
                attempt,
                delay,
                error,
            } => {
                let ms = delay.as_millis();
                self.p.emit(
                    "reconnect_scheduled",
                    Some(&server),
                    // With the attempt's stderr tail, whoever ended it (the server or a
                    // health check).
                    json!({"attempt": attempt, "next_attempt_in_ms": ms, "error": error.to_string()}),
                    format!(
                        "reconnect attempt {attempt} in {ms} ms ({})",
                        super::term::first_line(&error.message)
                    ),
                );
            }
            Event::ReconnectStarted { server, attempt } => self.p.emit(
                "reconnect_started",
                Some(&server),
                json!({"attempt": attempt}),
                format!("reconnect attempt {attempt} started"),
            ),
            Event::Diagnostic {
                server,
                level,
                message,
            } => {
                let level = format!("{level:?}").to_lowercase();
                self.p.emit(
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
                let text = switchboard::core::manager::log_text(&data).into_owned();
                let level = format!("{level:?}").to_lowercase();
                self.p.emit(
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
                self.p.emit(
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
            // The first round's event may race the subscription: it was printed already.
            Event::StartupComplete { report } if report.round == self.first_round => {}
            Event::StartupComplete { report } => startup_complete(&mut self.p, &report),
            // Request completions, calls and the rest: the lines above already say it.
            _ => {}
        }
    }
}
