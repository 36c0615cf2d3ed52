//! A small scripted driver: feeds inputs to the core at virtual times, plays the server side by
//! hand, and records a human-readable trace (virtual time, input, outputs, status changes).
//! Drives the manager exactly as the shell does: `handle`, drain `poll_output`,
//! `poll_timeout`, `handle_timeout`.
#![allow(dead_code)]

use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;
use switchboard_core::config::{ServerConfig, ServerSpec};
use switchboard_core::manager::{
    CallId, CallOutcome, ConnId, Event, FrameKind, Input, Manager, ManagerOptions, Output,
    RequestId, TransportEvent,
};
use switchboard_core::tool::ToolDef;
use switchboard_core::Instant;

pub struct Script {
    pub m: Manager,
    pub now: Instant,
    pub trace: String,
    /// Every output ever produced, in order.
    pub outputs: Vec<Output>,
    /// Requests we (playing the servers) have seen and not answered, per conn: (id, method).
    pending: BTreeMap<ConnId, Vec<(u64, String)>>,
    /// Conn ids by server name, latest last.
    pub conns: BTreeMap<String, Vec<ConnId>>,
    /// The last request id handed out (requests are numbered 1, 2, ... per script).
    last_request: u64,
}

pub fn opts() -> ManagerOptions {
    ManagerOptions {
        client_version: "test".into(),
        ..ManagerOptions::default()
    }
}

pub fn stdio(name: &str) -> ServerSpec {
    ServerSpec::new(name, ServerConfig::stdio(format!("{name}-server"), &[]))
}

pub fn tools(names: &[&str]) -> Vec<ToolDef> {
    names.iter().map(|n| ToolDef::named(*n)).collect()
}

pub fn tools_json(names: &[&str]) -> Value {
    json!({ "tools": names.iter().map(|n| json!({"name": n, "inputSchema": {"type": "object"}})).collect::<Vec<_>>() })
}

pub fn init_result() -> Value {
    json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {"listChanged": true}},
        "serverInfo": {"name": "scripted", "version": "1.0"}
    })
}

impl Script {
    pub fn new() -> Self {
        Self::with(opts())
    }

    pub fn with(o: ManagerOptions) -> Self {
        Script {
            m: Manager::new(o, Instant::ZERO),
            now: Instant::ZERO,
            trace: String::new(),
            outputs: Vec::new(),
            pending: BTreeMap::new(),
            conns: BTreeMap::new(),
            last_request: 0,
        }
    }

    /// Advance virtual time to `ms`, firing every timer on the way (each at its deadline).
    pub fn advance_to(&mut self, ms: u64) {
        let target = Instant::from_millis(ms);
        while let Some(t) = self.m.poll_timeout() {
            if t > target {
                break;
            }
            self.now = t.max(self.now);
            let reason = self.m.next_timer().map(|(_, r)| r);
            let _ = writeln!(
                self.trace,
                "[{:>6}] timer {:?}",
                fmt_ms(self.now),
                reason.expect("a timer")
            );
            self.m.handle_timeout(self.now);
            self.drain();
        }
        self.now = target.max(self.now);
    }

    /// Feed one input at virtual time `ms` (timers due before it fire first).
    pub fn at(&mut self, ms: u64, input: Input) {
        self.advance_to(ms);
        let _ = writeln!(
            self.trace,
            "[{:>6}] > {}",
            fmt_ms(self.now),
            render_input(&input)
        );
        self.m.handle(self.now, input);
        self.drain();
    }

    fn drain(&mut self) {
        while let Some(o) = self.m.poll_output() {
            let _ = writeln!(self.trace, "           < {}", render_output(&o));
            match &o {
                Output::OpenTransport { conn, server, .. } => {
                    self.conns.entry(server.clone()).or_default().push(*conn);
                }
                // The frame's meta says what a real transport would need to know: no parsing.
                Output::Send { conn, meta, .. } => {
                    if let (FrameKind::Request { id }, Some(m)) = (meta.kind, meta.method) {
                        self.pending
                            .entry(*conn)
                            .or_default()
                            .push((id, m.to_string()));
                    }
                }
                _ => {}
            }
            self.outputs.push(o);
        }
    }

    /// The next request id (1, 2, ...), for an input built by hand.
    pub fn next_request(&mut self) -> RequestId {
        self.last_request += 1;
        RequestId(self.last_request)
    }

    /// `Connect` at `ms` under the next request id.
    pub fn connect(&mut self, ms: u64, servers: Vec<ServerSpec>) -> RequestId {
        let request = self.next_request();
        self.at(ms, Input::Connect { request, servers });
        request
    }

    /// `Reload` at `ms` under the next request id.
    pub fn reload(&mut self, ms: u64, servers: Vec<ServerSpec>) -> RequestId {
        let request = self.next_request();
        self.at(ms, Input::Reload { request, servers });
        request
    }

    /// `Sync` at `ms` under the next request id.
    pub fn sync(&mut self, ms: u64, servers: Vec<ServerSpec>) -> RequestId {
        let request = self.next_request();
        self.at(ms, Input::Sync { request, servers });
        request
    }

    /// `Disconnect` at `ms` under the next request id.
    pub fn disconnect(&mut self, ms: u64, server: &str) -> RequestId {
        let request = self.next_request();
        let server = server.into();
        self.at(ms, Input::Disconnect { request, server });
        request
    }

    /// `DisconnectAll` at `ms` under the next request id.
    pub fn disconnect_all(&mut self, ms: u64) -> RequestId {
        let request = self.next_request();
        self.at(ms, Input::DisconnectAll { request });
        request
    }

    /// `RefreshTools` at `ms` under the next request id.
    pub fn refresh(&mut self, ms: u64, server: &str) -> RequestId {
        let request = self.next_request();
        let server = server.into();
        self.at(ms, Input::RefreshTools { request, server });
        request
    }

    /// Every event the manager produced, in order.
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.outputs.iter().filter_map(|o| match o {
            Output::Event(e) => Some(e),
            _ => None,
        })
    }

    /// The events that name `request` (its completion, and a round's start).
    pub fn completions(&self, request: RequestId) -> Vec<&Event> {
        self.events()
            .filter(|e| match e {
                Event::RoundStarted { request: r, .. }
                | Event::SyncCompleted { request: r }
                | Event::RefreshCompleted { request: r, .. }
                | Event::Disconnected { request: r, .. }
                | Event::RequestFailed { request: r, .. } => *r == request,
                Event::StartupComplete { report } => report.request == Some(request),
                _ => false,
            })
            .collect()
    }

    /// The latest attempt of `server`.
    pub fn conn(&self, server: &str) -> ConnId {
        *self
            .conns
            .get(server)
            .and_then(|v| v.last())
            .unwrap_or_else(|| panic!("no attempt for {server}"))
    }

    pub fn opened(&mut self, ms: u64, server: &str) {
        let conn = self.conn(server);
        self.at(
            ms,
            Input::Transport {
                conn,
                event: TransportEvent::Opened,
            },
        );
    }

    /// Answer the oldest unanswered request of `method` on the server's latest attempt.
    pub fn reply(&mut self, ms: u64, server: &str, method: &str, result: Value) {
        let conn = self.conn(server);
        self.reply_on(ms, conn, method, json!({ "result": result }));
    }

    /// Answer with a JSON-RPC error.
    pub fn reply_error(&mut self, ms: u64, server: &str, method: &str, code: i64, message: &str) {
        let conn = self.conn(server);
        self.reply_on(
            ms,
            conn,
            method,
            json!({ "error": {"code": code, "message": message} }),
        );
    }

    pub fn reply_on(&mut self, ms: u64, conn: ConnId, method: &str, body: Value) {
        let list = self.pending.entry(conn).or_default();
        let pos = list
            .iter()
            .position(|(_, m)| m == method)
            .unwrap_or_else(|| panic!("no pending {method} on {conn:?}"));
        let (id, _) = list.remove(pos);
        let mut msg = json!({"jsonrpc": "2.0", "id": id});
        if let (Some(o), Some(b)) = (msg.as_object_mut(), body.as_object()) {
            for (k, v) in b {
                o.insert(k.clone(), v.clone());
            }
        }
        self.frame_on(ms, conn, msg);
    }

    pub fn frame_on(&mut self, ms: u64, conn: ConnId, msg: Value) {
        self.at(
            ms,
            Input::Transport {
                conn,
                event: TransportEvent::Frame(Bytes::from(msg.to_string())),
            },
        );
    }

    /// Open + initialize + one tools/list page: a healthy server becoming ready at `ms`.
    pub fn ready(&mut self, ms: u64, server: &str, tool_names: &[&str]) {
        self.opened(ms, server);
        self.reply(ms, server, "initialize", init_result());
        self.reply(ms, server, "tools/list", tools_json(tool_names));
    }

    pub fn cache(&mut self, ms: u64, server: &str, cached: Option<&[&str]>) {
        let key = self
            .outputs
            .iter()
            .rev()
            .find_map(|o| match o {
                Output::LoadCache { server: s, key } if s == server => Some(key.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no LoadCache for {server}"));
        self.at(
            ms,
            Input::CacheLoaded {
                server: server.into(),
                key,
                tools: cached.map(tools),
                catalog: None,
            },
        );
    }

    pub fn call(&mut self, ms: u64, call: u64, tool: &str, args: Value) {
        self.at(
            ms,
            Input::CallTool {
                call: CallId(call),
                tool: tool.into(),
                arguments: Some(args),
                timeout: None,
                progress: false,
                meta: None,
            },
        );
    }

    pub fn outcome(&self, call: u64) -> Vec<&CallOutcome> {
        self.outputs
            .iter()
            .filter_map(|o| match o {
                Output::Event(Event::CallCompleted { call: c, outcome }) if c.0 == call => {
                    Some(outcome)
                }
                _ => None,
            })
            .collect()
    }

    pub fn count(&self, f: impl Fn(&Output) -> bool) -> usize {
        self.outputs.iter().filter(|o| f(o)).count()
    }

    pub fn tool_names(&self) -> Vec<String> {
        self.m
            .tools()
            .into_iter()
            .map(|t| {
                if t.deferred {
                    format!("{} (deferred)", t.qualified_name)
                } else {
                    t.qualified_name
                }
            })
            .collect()
    }

    /// The trace plus a final summary of the registries and the view.
    pub fn finish(&self) -> String {
        let mut s = self.trace.clone();
        let _ = writeln!(s, "--- final state");
        let _ = writeln!(s, "connections: {:?}", self.m.connections());
        let _ = writeln!(s, "pending connections: {:?}", self.m.pending_connections());
        let _ = writeln!(s, "pending tool loads: {:?}", self.m.pending_tool_loads());
        let _ = writeln!(s, "open transports: {:?}", self.m.open_conns());
        let _ = writeln!(s, "calls in flight: {:?}", self.m.calls_in_flight());
        let _ = writeln!(s, "tools: {:?}", self.tool_names());
        s
    }
}

fn fmt_ms(t: Instant) -> String {
    format!("{}ms", t.as_millis())
}

fn frame_text(frame: &[u8]) -> String {
    String::from_utf8_lossy(frame).into_owned()
}

pub fn render_input(i: &Input) -> String {
    match i {
        Input::Connect { request, servers } => {
            format!("Connect r{} {:?}", request.0, names(servers))
        }
        Input::Reload { request, servers } => {
            format!("Reload r{} {:?}", request.0, names(servers))
        }
        Input::Sync { request, servers } => format!("Sync r{} {:?}", request.0, names(servers)),
        Input::Disconnect { request, server } => format!("Disconnect r{} {server}", request.0),
        Input::DisconnectAll { request } => format!("DisconnectAll r{}", request.0),
        Input::RefreshTools { request, server } => {
            format!("RefreshTools r{} {server}", request.0)
        }
        Input::Transport { conn, event } => match event {
            TransportEvent::Opened => format!("#{} Opened", conn.0),
            TransportEvent::Frame(f) => format!("#{} Frame {}", conn.0, frame_text(f)),
            TransportEvent::Closed { reason } => format!("#{} Closed {reason:?}", conn.0),
            TransportEvent::Failed { error } => format!("#{} Failed {error:?}", conn.0),
            TransportEvent::Notice { message } => format!("#{} Notice {message:?}", conn.0),
            TransportEvent::Stderr { line } => format!("#{} Stderr {line:?}", conn.0),
            TransportEvent::RequestFailed { id, error } => {
                format!("#{} RequestFailed id={id} {error:?}", conn.0)
            }
            TransportEvent::SessionRenewed => format!("#{} SessionRenewed", conn.0),
            other => format!("#{} {other:?}", conn.0),
        },
        Input::CacheLoaded { server, tools, .. } => match tools {
            Some(t) => format!(
                "CacheLoaded {server} hit {:?}",
                t.iter().map(|t| t.name.as_str()).collect::<Vec<_>>()
            ),
            None => format!("CacheLoaded {server} miss"),
        },
        Input::CallTool {
            call,
            tool,
            arguments,
            timeout,
            progress,
            meta,
        } => format!(
            "CallTool c{} {tool} {} timeout={:?}{}{}",
            call.0,
            arguments.as_ref().map_or("null".into(), |a| a.to_string()),
            timeout,
            if *progress { " progress" } else { "" },
            meta.as_ref().map_or(String::new(), |m| format!(
                " _meta={}",
                serde_json::Value::Object(m.clone())
            ))
        ),
        Input::CancelCall { call } => format!("CancelCall c{}", call.0),
        // The rest render as in the simulator's traces.
        other => switchboard_sim::trace::input(other),
    }
}

fn names(servers: &[ServerSpec]) -> Vec<&str> {
    servers.iter().map(|s| s.name.as_str()).collect()
}

/// Outputs render exactly as in the simulator's traces (one vocabulary for both drivers).
pub fn render_output(o: &Output) -> String {
    switchboard_sim::trace::output(o)
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
