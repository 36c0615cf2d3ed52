//! `mcp-demo-server`: a small, standalone stdio MCP server used by the integration tests, the
//! demo and the benchmarks. It runs as its own binary (`mcp-demo-server`) and as the hidden
//! `switchboard __demo-server` subcommand, so `cargo run -- demo` (which builds only the
//! `switchboard` binary) needs nothing else; both call [`run`].
//!
//! It is deliberately independent of `switchboard-core`: it is a second implementation of the
//! protocol (newline-delimited JSON-RPC 2.0 over stdin/stdout, MCP 2025-11-25), so it checks our
//! client instead of agreeing with it by construction. Logs go to stderr only. Every fault the
//! client must survive (slow, failing, hanging, crashing, stalling, noisy, oversized, stubborn,
//! leaking a grandchild, changing its tool list) is a command-line flag; see `--help`.
//!
//! Concurrency: the main thread reads stdin and answers instant requests inline; `sleep`, every
//! `tools/call` under `--call-delay-ms` and every delayed answer run on their own thread, so a
//! long `sleep` never blocks `echo` or `ping`. Writes to stdout go through one buffered writer
//! behind a mutex, one line per message. Answers written by the reader thread are flushed once
//! no further request is already buffered on stdin (so a burst of pipelined requests costs one
//! `write` for all the answers); answers from other threads are flushed at once.

use std::cell::Cell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufWriter, Write};
use std::os::fd::AsFd;
use std::process;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Map, Value};

mod catalog;
mod flags;
use flags::{parse_flags, Flags};

const SUPPORTED_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
const LATEST_VERSION: &str = "2025-11-25";

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;

/// The size of the single line `--oversized-frame` sends: just over 16 MiB.
const OVERSIZED_BYTES: usize = 16 * 1024 * 1024 + 4096;

/// One in-flight `tools/call`: cancelled by `notifications/cancelled`.
#[derive(Default)]
struct CallSlot {
    cancelled: Mutex<bool>,
    wake: Condvar,
}

impl CallSlot {
    fn cancel(&self) {
        *lock(&self.cancelled) = true;
        self.wake.notify_all();
    }

    fn is_cancelled(&self) -> bool {
        *lock(&self.cancelled)
    }

    /// Sleep for `duration` unless cancelled first; returns false if cancelled.
    fn sleep(&self, duration: Duration) -> bool {
        // A huge `ms` from the client must not overflow: it just means "until cancelled".
        let deadline = Instant::now().checked_add(duration);
        let mut cancelled = lock(&self.cancelled);
        loop {
            if *cancelled {
                return false;
            }
            cancelled = match deadline {
                None => self
                    .wake
                    .wait(cancelled)
                    .unwrap_or_else(|poisoned| poisoned.into_inner()),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return true;
                    }
                    match self.wake.wait_timeout(cancelled, deadline - now) {
                        Ok((guard, _)) => guard,
                        Err(poisoned) => poisoned.into_inner().0,
                    }
                }
            };
        }
    }
}

thread_local! {
    /// Set on the stdin reader thread: its answers are flushed by the read loop, once no
    /// further request is buffered (see the module docs).
    static DEFER_FLUSH: Cell<bool> = const { Cell::new(false) };
}

/// One incoming JSON-RPC message, parsed without building a map of the whole object.
#[derive(Deserialize)]
struct Incoming {
    /// `Some(Value::Null)` for `"id": null` (present), `None` when absent.
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(default)]
    jsonrpc: Option<Value>,
    #[serde(default)]
    method: Option<Value>,
    #[serde(default)]
    params: Option<Value>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Incoming {
    /// The same fields from an already parsed object (the slow path: duplicate keys).
    fn from_object(mut object: Map<String, Value>) -> Self {
        Incoming {
            id: object.remove("id"),
            jsonrpc: object.remove("jsonrpc"),
            method: object.remove("method"),
            params: object.remove("params").filter(|p| !p.is_null()),
        }
    }
}

#[derive(Serialize)]
struct Response<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: &'a Value,
}

struct Server {
    flags: Flags,
    name: String,
    /// A duplicate of fd 1, buffered (std's `Stdout` flushes at every newline).
    out: Mutex<BufWriter<File>>,
    /// Every tool but `late_tool`, built once.
    base_tools: Vec<Value>,
    stalled: AtomicBool,
    initialized: AtomicBool,
    late_tool_added: AtomicBool,
    /// In-flight calls by request id (the id's JSON text, so 1 and "1" differ).
    calls: Mutex<HashMap<String, Arc<CallSlot>>>,
    /// What the `stats` tool (`--stats-tool`) reports.
    stats: Mutex<Stats>,
}

/// Counters reported by the `stats` tool.
#[derive(Default)]
struct Stats {
    /// `requestId`s of every `notifications/cancelled` received, in order.
    cancelled: Vec<Value>,
    /// Those that named a call still in flight (and stopped it).
    cancelled_in_flight: usize,
    /// `notifications/progress` sent.
    progress_sent: usize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Server {
    fn log(&self, message: &str) {
        eprintln!("[{}] {message}", self.name);
    }

    /// Write one message as one line. Nothing is written once stalled.
    fn send(&self, message: &impl Serialize) {
        self.write(|out| {
            serde_json::to_writer(&mut *out, message).map_err(std::io::Error::from)?;
            out.write_all(b"\n")
        });
    }

    fn send_raw(&self, line: &str) {
        self.write(|out| out.write_all(line.as_bytes()));
    }

    fn write(&self, line: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>) {
        if self.stalled.load(Ordering::SeqCst) {
            return;
        }
        let mut out = lock(&self.out);
        let garbage = if self.flags.garbage_stdout {
            "this line is not JSON-RPC (--garbage-stdout)\n"
        } else {
            ""
        };
        let mut written = out
            .write_all(garbage.as_bytes())
            .and_then(|()| line(&mut out));
        if !DEFER_FLUSH.with(Cell::get) {
            written = written.and_then(|()| out.flush());
        }
        if written.is_err() {
            drop(out);
            self.stdout_closed();
        }
    }

    /// Writes out what the reader thread's answers left in the buffer.
    fn flush(&self) {
        if lock(&self.out).flush().is_err() {
            self.stdout_closed();
        }
    }

    fn stdout_closed(&self) -> ! {
        // The client closed our stdout: nobody is left to answer.
        self.log("stdout closed; exiting");
        process::exit(0);
    }

    fn respond(&self, id: &Value, result: Value) {
        self.send(&Response {
            jsonrpc: "2.0",
            id,
            result: &result,
        });
    }

    fn respond_error(&self, id: &Value, code: i64, message: &str) {
        self.send(&json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code, "message": message},
        }));
    }

    fn notify(&self, method: &str, params: Option<Value>) {
        let mut message = json!({"jsonrpc": "2.0", "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        self.send(&message);
    }

    /// Every tool, in listing order.
    fn tools(&self) -> Vec<Value> {
        let mut tools = self.base_tools.clone();
        if self.late_tool_added.load(Ordering::SeqCst) {
            tools.push(json!({
                "name": "late_tool",
                "description": "Added after start (--list-changed-after-ms): echoes `text` back.",
                "inputSchema": text_schema(),
            }));
            if let Some(removed) = &self.flags.remove_on_change {
                tools.retain(|t| t["name"] != removed.as_str());
            }
        }
        if self.flags.stats_tool {
            tools.push(json!({
                "name": "stats",
                "description": "What this server received so far (--stats-tool), as JSON text.",
                "inputSchema": {"type": "object", "additionalProperties": false},
            }));
        }
        tools
    }

    /// Whether `tools()` lists `name` (without building the list).
    fn is_known(&self, name: &str) -> bool {
        let changed = self.late_tool_added.load(Ordering::SeqCst);
        if changed && self.flags.remove_on_change.as_deref() == Some(name) {
            return false;
        }
        match name {
            "echo" | "add" | "sleep" => true,
            "late_tool" => changed,
            "stats" => self.flags.stats_tool,
            _ => name
                .strip_prefix("tool_")
                .filter(|n| !n.starts_with('+') && (n.len() == 1 || !n.starts_with('0')))
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|i| i < self.flags.tools),
        }
    }
}

fn text_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"text": {"type": "string", "description": "Text to echo back"}},
        "required": ["text"],
        "additionalProperties": false,
    })
}

/// Every tool but `late_tool`.
fn base_tools(generated: usize) -> Vec<Value> {
    let text_schema = text_schema();
    let mut tools = vec![
        json!({
            "name": "echo",
            "description": "Echo the given text back as text content.",
            "inputSchema": text_schema,
        }),
        json!({
            "name": "add",
            "description": "Add two numbers; returns the sum as text and as structuredContent.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "a": {"type": "number", "description": "First addend"},
                    "b": {"type": "number", "description": "Second addend"},
                },
                "required": ["a", "b"],
                "additionalProperties": false,
            },
            "outputSchema": {
                "type": "object",
                "properties": {"sum": {"type": "number"}},
                "required": ["sum"],
            },
            "title": "Add",
            "annotations": {"readOnlyHint": true, "idempotentHint": true},
            "icons": [{"src": "data:image/svg+xml,%3Csvg/%3E", "mimeType": "image/svg+xml"}],
            "_meta": {"dev.switchboard.demo/kind": "arithmetic"},
            "execution": {"taskSupport": "forbidden"},
        }),
        json!({
            "name": "sleep",
            "description": "Sleep for `ms` milliseconds, then answer \"slept <ms>ms\". \
                            Cancellable with notifications/cancelled.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "ms": {"type": "integer", "minimum": 0, "description": "Milliseconds"},
                },
                "required": ["ms"],
                "additionalProperties": false,
            },
        }),
    ];
    for i in 0..generated {
        tools.push(json!({
            "name": format!("tool_{i}"),
            "description": format!("Generated tool number {i}: echoes `text` back."),
            "inputSchema": text_schema,
        }));
    }
    tools
}

impl Server {
    fn handle_line(self: &Arc<Self>, line: &[u8]) {
        let message = match serde_json::from_slice::<Incoming>(line) {
            Ok(message) => message,
            // Not JSON, not an object, or an object serde's derive refuses (a duplicate key):
            // parse it as a plain value to tell which.
            Err(_) => match serde_json::from_slice::<Value>(line) {
                Err(err) => {
                    self.log(&format!("parse error: {err}"));
                    self.respond_error(&Value::Null, PARSE_ERROR, &format!("Parse error: {err}"));
                    return;
                }
                Ok(Value::Object(object)) => Incoming::from_object(object),
                Ok(_) => {
                    // Batches were removed from MCP in 2025-06-18; anything not an object is
                    // invalid.
                    self.respond_error(
                        &Value::Null,
                        INVALID_REQUEST,
                        "Invalid Request: not an object",
                    );
                    return;
                }
            },
        };
        let Incoming {
            id,
            jsonrpc,
            method,
            params,
        } = message;
        if jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
            self.respond_error(
                &id.unwrap_or(Value::Null),
                INVALID_REQUEST,
                "Invalid Request: jsonrpc must be \"2.0\"",
            );
            return;
        }
        let params = params.unwrap_or(Value::Null);
        match (method.as_ref().and_then(Value::as_str), id) {
            (Some(method), Some(id)) => self.handle_request(method, id, params),
            (Some(method), None) => self.handle_notification(method, &params),
            // A response to something we never asked; nothing to do.
            (None, _) => {}
        }
    }

    fn handle_notification(self: &Arc<Self>, method: &str, params: &Value) {
        match method {
            "notifications/initialized" => {
                if self.initialized.swap(true, Ordering::SeqCst) {
                    return;
                }
                if let Some(ms) = self.flags.list_changed_after_ms {
                    let server = Arc::clone(self);
                    thread::spawn(move || {
                        thread::sleep(Duration::from_millis(ms));
                        server.late_tool_added.store(true, Ordering::SeqCst);
                        server.log("added late_tool; sending notifications/tools/list_changed");
                        server.notify("notifications/tools/list_changed", None);
                    });
                }
            }
            "notifications/cancelled" => {
                let Some(request_id) = params.get("requestId") else {
                    return;
                };
                let slot = lock(&self.calls).get(&request_id.to_string()).cloned();
                let mut stats = lock(&self.stats);
                stats.cancelled.push(request_id.clone());
                if let Some(slot) = slot {
                    stats.cancelled_in_flight += 1;
                    self.log(&format!("request {request_id} cancelled"));
                    slot.cancel();
                }
            }
            _ => {}
        }
    }

    fn handle_request(self: &Arc<Self>, method: &str, id: Value, params: Value) {
        match method {
            "initialize" => self.initialize(id, &params),
            "ping" => self.respond(&id, json!({})),
            "tools/list" => self.tools_list(id, &params),
            "tools/call" => self.tools_call(id, params),
            _ if self.handle_catalog(method, &id, &params) => {}
            _ => self.respond_error(
                &id,
                METHOD_NOT_FOUND,
                &format!("Method not found: {method}"),
            ),
        }
    }

    /// Run `answer` now, or on its own thread after `delay_ms` so the reader keeps going.
    fn after(self: &Arc<Self>, delay_ms: u64, answer: impl FnOnce(&Server) + Send + 'static) {
        if delay_ms == 0 {
            answer(self);
        } else {
            let server = Arc::clone(self);
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(delay_ms));
                answer(&server);
            });
        }
    }

    fn initialize(self: &Arc<Self>, id: Value, params: &Value) {
        if self.flags.hang_init {
            self.log("--hang-init: not answering initialize");
            return;
        }
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        let version = match requested {
            Some(v) if SUPPORTED_VERSIONS.contains(&v) => v.to_string(),
            _ => LATEST_VERSION.to_string(),
        };
        self.after(self.flags.init_delay_ms, move |server| {
            if server.flags.fail_init {
                server.respond_error(&id, INTERNAL_ERROR, "initialize failed (--fail-init)");
                return;
            }
            if let Some(path) = &server.flags.fail_init_once {
                // create_new: of several starts racing, exactly one fails.
                if std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(path)
                    .is_ok()
                {
                    server.respond_error(
                        &id,
                        INTERNAL_ERROR,
                        "initialize failed (--fail-init-once: first start)",
                    );
                    return;
                }
            }
            let mut capabilities = json!({"tools": {"listChanged": true}});
            if server.flags.catalog {
                if let (Some(c), Value::Object(more)) =
                    (capabilities.as_object_mut(), catalog::capabilities())
                {
                    c.extend(more);
                }
            }
            server.respond(
                &id,
                json!({
                    "protocolVersion": version,
                    "capabilities": capabilities,
                    "serverInfo": {"name": server.name, "version": env!("CARGO_PKG_VERSION")},
                    "instructions": "A demo server for Switchboard's tests: echo, add, sleep.",
                }),
            );
        });
    }

    fn tools_list(self: &Arc<Self>, id: Value, params: &Value) {
        if !self.initialized.load(Ordering::SeqCst) {
            // A checking peer: the client must send notifications/initialized first.
            self.respond_error(
                &id,
                INVALID_REQUEST,
                "tools/list before notifications/initialized",
            );
            return;
        }
        let cursor = params.get("cursor").cloned();
        self.after(self.flags.list_delay_ms, move |server| {
            if server.flags.fail_list {
                server.respond_error(&id, INTERNAL_ERROR, "tools/list failed (--fail-list)");
                return;
            }
            if server.flags.oversized_frame {
                let padding = "x".repeat(OVERSIZED_BYTES);
                let tool = json!({
                    "name": "huge",
                    "description": padding,
                    "inputSchema": {"type": "object"},
                });
                server.respond(&id, json!({"tools": [tool]}));
                return;
            }
            let tools = server.tools();
            let start = match cursor {
                None | Some(Value::Null) => 0,
                Some(cursor) => match cursor.as_str().and_then(decode_cursor) {
                    Some(start) if start <= tools.len() => start,
                    _ => {
                        server.respond_error(
                            &id,
                            INVALID_PARAMS,
                            &format!("Invalid cursor: {cursor}"),
                        );
                        return;
                    }
                },
            };
            let end = match server.flags.page_size {
                Some(size) => (start + size).min(tools.len()),
                None => tools.len(),
            };
            let mut result = json!({"tools": tools[start..end]});
            if end < tools.len() {
                result["nextCursor"] = Value::String(encode_cursor(end));
            }
            server.respond(&id, result);
            if let Some(ms) = server.flags.crash_after_list_ms {
                // The answer is buffered until no further request waits on stdin: write it
                // out now, so the crash always comes after the list, as the flag promises.
                server.flush();
                thread::spawn(move || {
                    thread::sleep(Duration::from_millis(ms));
                    eprintln!("crashing on purpose (--crash-after-list-ms {ms})");
                    process::exit(1);
                });
            }
        });
    }

    fn tools_call(self: &Arc<Self>, id: Value, params: Value) {
        if !self.initialized.load(Ordering::SeqCst) {
            self.respond_error(
                &id,
                INVALID_REQUEST,
                "tools/call before notifications/initialized",
            );
            return;
        }
        let slot = Arc::new(CallSlot::default());
        let instant = self.flags.call_delay_ms == 0
            && params.get("name").and_then(Value::as_str) != Some("sleep");
        if instant {
            // Nothing to wait for: answer inline. A thread per call would cost more than the
            // call itself and cap every client's measured throughput.
            match self.run_tool(&params, &slot) {
                None => {}
                Some(Ok(result)) => self.respond(&id, result),
                Some(Err((code, message))) => self.respond_error(&id, code, &message),
            }
            return;
        }
        let key = id.to_string();
        lock(&self.calls).insert(key.clone(), Arc::clone(&slot));
        let server = Arc::clone(self);
        thread::spawn(move || {
            let outcome = if slot.sleep(Duration::from_millis(server.flags.call_delay_ms)) {
                server.run_tool(&params, &slot)
            } else {
                None
            };
            lock(&server.calls).remove(&key);
            // Per the cancellation utility, a cancelled request gets no response at all.
            match outcome {
                _ if slot.is_cancelled() => {}
                None => {}
                Some(Ok(result)) => server.respond(&id, result),
                Some(Err((code, message))) => server.respond_error(&id, code, &message),
            }
        });
    }

    /// `None` when cancelled; `Err` is a JSON-RPC (protocol) error; tool failures are results.
    fn run_tool(&self, params: &Value, slot: &CallSlot) -> Option<Result<Value, (i64, String)>> {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Some(Err((
                INVALID_PARAMS,
                "tools/call needs a string `name`".into(),
            )));
        };
        let empty = Map::new();
        let args = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(args)) => args,
            Some(_) => {
                return Some(Err((
                    INVALID_PARAMS,
                    "`arguments` must be an object".into(),
                )));
            }
        };
        if !self.is_known(name) {
            return Some(Err((INVALID_PARAMS, format!("Unknown tool: {name}"))));
        }
        let result = match name {
            "add" => match (
                args.get("a").and_then(Value::as_f64),
                args.get("b").and_then(Value::as_f64),
            ) {
                (Some(a), Some(b)) => {
                    let sum = match (
                        args.get("a").and_then(Value::as_i64),
                        args.get("b").and_then(Value::as_i64),
                    ) {
                        (Some(a), Some(b)) => a.checked_add(b).map(Value::from),
                        _ => None,
                    }
                    .unwrap_or_else(|| json!(a + b));
                    let text = sum.to_string();
                    match self.flags.bad_output {
                        None => json!({
                            "content": [{"type": "text", "text": text}],
                            "structuredContent": {"sum": sum},
                        }),
                        Some(flags::BadOutput::Mismatch) => json!({
                            "content": [{"type": "text", "text": text}],
                            "structuredContent": {"sum": text},
                        }),
                        Some(flags::BadOutput::Missing) => text_result(&text),
                    }
                }
                _ => tool_error("add needs numbers `a` and `b`"),
            },
            "sleep" => match args.get("ms").and_then(Value::as_u64) {
                Some(ms) => {
                    let token = params
                        .get("_meta")
                        .and_then(|m| m.get("progressToken"))
                        .cloned();
                    if !self.sleep_with_progress(ms, token, slot) {
                        return None;
                    }
                    text_result(&format!("slept {ms}ms"))
                }
                None => tool_error("sleep needs a non-negative integer `ms`"),
            },
            "stats" => {
                let stats = lock(&self.stats);
                text_result(
                    &json!({
                        "cancelled": stats.cancelled,
                        "cancelled_in_flight": stats.cancelled_in_flight,
                        "progress_sent": stats.progress_sent,
                    })
                    .to_string(),
                )
            }
            // echo, tool_N and late_tool all echo.
            _ => match args.get("text").and_then(Value::as_str) {
                Some(text) => text_result(text),
                None => tool_error(&format!("{name} needs a string `text`")),
            },
        };
        Some(Ok(result))
    }

    /// `sleep`'s wait: `ms` in one piece, or, with `--progress-every-ms` and a progress token,
    /// in steps with a `notifications/progress` after each. False if cancelled.
    fn sleep_with_progress(&self, ms: u64, token: Option<Value>, slot: &CallSlot) -> bool {
        let (Some(every), Some(token)) = (self.flags.progress_every_ms, token) else {
            return slot.sleep(Duration::from_millis(ms));
        };
        let mut left = ms;
        let mut step = 0u64;
        while left > 0 {
            let now = left.min(every);
            if !slot.sleep(Duration::from_millis(now)) {
                return false;
            }
            left -= now;
            step += 1;
            if left > 0 {
                lock(&self.stats).progress_sent += 1;
                self.notify(
                    "notifications/progress",
                    Some(json!({
                        "progressToken": token,
                        "progress": step,
                        "total": ms.div_ceil(every),
                    })),
                );
            }
        }
        true
    }
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

fn tool_error(message: &str) -> Value {
    json!({"content": [{"type": "text", "text": message}], "isError": true})
}

/// Cursors are opaque to clients; ours carry the offset, disguised so nobody relies on it.
fn encode_cursor(offset: usize) -> String {
    format!("demo-cursor-{:x}", offset ^ 0x5eed)
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    let hex = cursor.strip_prefix("demo-cursor-")?;
    usize::from_str_radix(hex, 16).ok().map(|v| v ^ 0x5eed)
}

#[cfg(unix)]
fn ignore_sigterm() {
    // SAFETY: installing SIG_IGN for SIGTERM touches no Rust state.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
    }
}

#[cfg(not(unix))]
fn ignore_sigterm() {}

/// Run the server with these arguments (without the program name) until stdin closes; never
/// returns (it ends the process).
pub fn run(args: impl IntoIterator<Item = String>) -> ! {
    let flags = match parse_flags(args) {
        Ok(flags) => flags,
        Err(err) => {
            eprintln!("mcp-demo-server: {err}");
            process::exit(2);
        }
    };
    let name = flags
        .name
        .clone()
        .unwrap_or_else(|| "mcp-demo-server".to_string());
    let stdout = match std::io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => File::from(fd),
        Err(err) => {
            eprintln!("mcp-demo-server: cannot use stdout: {err}");
            process::exit(1);
        }
    };
    let server = Arc::new(Server {
        base_tools: base_tools(flags.tools),
        flags: flags.clone(),
        name,
        out: Mutex::new(BufWriter::with_capacity(64 * 1024, stdout)),
        stalled: AtomicBool::new(false),
        initialized: AtomicBool::new(false),
        late_tool_added: AtomicBool::new(false),
        calls: Mutex::new(HashMap::new()),
        stats: Mutex::new(Stats::default()),
    });

    if flags.ignore_sigterm {
        ignore_sigterm();
        server.log("ignoring SIGTERM");
    }
    // Kept alive (never waited for) so the grandchild outlives us unless the group is killed.
    let _grandchild = if flags.spawn_grandchild {
        match process::Command::new("sleep")
            .arg("3600")
            .stdin(process::Stdio::null())
            .stdout(process::Stdio::null())
            .stderr(process::Stdio::null())
            .spawn()
        {
            Ok(child) => {
                server.log(&format!("grandchild pid={}", child.id()));
                Some(child)
            }
            Err(err) => {
                server.log(&format!("could not spawn grandchild: {err}"));
                process::exit(1);
            }
        }
    } else {
        None
    };
    if let Some(ms) = flags.crash_after_ms {
        let server = Arc::clone(&server);
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(ms));
            server.log(&format!("crashing on purpose (--crash-after-ms {ms})"));
            process::exit(1);
        });
    }
    if let Some(ms) = flags.stall_after_ms {
        let server = Arc::clone(&server);
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(ms));
            server.log(&format!("stalling on purpose (--stall-after-ms {ms})"));
            server.stalled.store(true, Ordering::SeqCst);
        });
    }
    if flags.garbage_stdout {
        server.send_raw("mcp-demo-server starting up (--garbage-stdout)\n");
    }
    for i in 0..flags.garbage_lines {
        server.send_raw(&format!("not JSON-RPC, line {i} (--garbage-lines)\n"));
    }

    // A duplicate of fd 0 in a `BufReader` of our own: its `buffer()` tells whether another
    // request is already here (std's `StdinLock` does not say).
    let mut input = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => std::io::BufReader::with_capacity(64 * 1024, File::from(fd)),
        Err(err) => {
            eprintln!("mcp-demo-server: cannot use stdin: {err}");
            process::exit(1);
        }
    };
    let mut line = Vec::new();
    DEFER_FLUSH.with(|d| d.set(true));
    loop {
        if !input.buffer().contains(&b'\n') {
            // The next read may block: what was answered so far goes out first.
            server.flush();
        }
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(err) => {
                server.log(&format!("stdin read error: {err}"));
                break;
            }
        }
        if server.stalled.load(Ordering::SeqCst) {
            continue;
        }
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            continue;
        }
        server.handle_line(trimmed);
    }
    if server.stalled.load(Ordering::SeqCst) {
        server.log("stdin closed while stalled; hanging until killed");
        loop {
            thread::park();
        }
    }
    server.flush();
    server.log("stdin closed; exiting");
    process::exit(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_parse_both_value_forms() {
        let flags = parse_flags(args(&["--tools", "3", "--page-size=2", "--fail-list"])).unwrap();
        assert_eq!(flags.tools, 3);
        assert_eq!(flags.page_size, Some(2));
        assert!(flags.fail_list);
        assert!(parse_flags(args(&["--bogus"])).is_err());
        assert!(parse_flags(args(&["--tools"])).is_err());
        assert!(parse_flags(args(&["--fail-init=1"])).is_err());
    }

    #[test]
    fn cursors_round_trip() {
        for offset in [0, 1, 2, 1000] {
            assert_eq!(decode_cursor(&encode_cursor(offset)), Some(offset));
        }
        assert_eq!(decode_cursor("nope"), None);
    }
}
