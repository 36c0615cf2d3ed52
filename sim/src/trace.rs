//! Human-readable trace lines: virtual time, inputs, outputs, checks. Only virtual time and
//! ordered collections appear, so the same scenario gives a byte-identical trace.

use crate::scenario::Scenario;
use switchboard_core::catalog::{Catalog, OperationOutcome, OperationResult};
use switchboard_core::config::ServerSpec;
use switchboard_core::manager::{CallOutcome, Event, Input, Output, TransportEvent};

const MAX_FRAME_SHOWN: usize = 400;

fn frame_text(frame: &[u8]) -> String {
    if frame.len() > MAX_FRAME_SHOWN {
        return format!("<{} bytes>", frame.len());
    }
    String::from_utf8_lossy(frame).into_owned()
}

/// A value as one line of JSON.
fn json_text(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn names(servers: &[ServerSpec]) -> String {
    let v: Vec<String> = servers
        .iter()
        .map(|s| {
            if s.config.args.is_empty() && s.config.headers.is_empty() {
                s.name.clone()
            } else {
                format!("{}(changed)", s.name)
            }
        })
        .collect();
    format!("{v:?}")
}

/// One-line summary of a scenario (printed before a run, VOPR style).
pub fn summary(sc: &Scenario) -> String {
    let mut s = format!(
        "{} servers, {} actions, gate {}ms, uncached wait {:?}, call timeout {}ms, request timeout {}ms, faults {:?}",
        sc.servers.len(),
        sc.actions.len(),
        sc.options.gate_ms,
        sc.options.uncached_wait_ms,
        sc.options.call_timeout_ms,
        sc.options.request_timeout_ms,
        sc.mix
    );
    if sc.options.reconnect != crate::scenario::ReconnectMode::On {
        s.push_str(&format!(", reconnect {:?}", sc.options.reconnect));
    }
    s
}

pub fn input(i: &Input) -> String {
    match i {
        Input::Connect { request, servers } => {
            format!("Connect r{} {}", request.0, names(servers))
        }
        Input::Reload { request, servers } => format!("Reload r{} {}", request.0, names(servers)),
        Input::Sync { request, servers } => format!("Sync r{} {}", request.0, names(servers)),
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
            timeout,
            ..
        } => format!("CallTool c{} {tool} timeout={timeout:?}", call.0),
        Input::CancelCall { call } => format!("CancelCall c{}", call.0),
        Input::AnswerPeerRequest { request, answer } => {
            format!("AnswerPeerRequest p{} {}", request.0, json_text(answer))
        }
        Input::SetRoots { roots } => format!(
            "SetRoots {:?}",
            roots.iter().map(|r| r.uri.as_str()).collect::<Vec<_>>()
        ),
        Input::Operation { call, op, timeout } => {
            format!("Operation c{} {op:?} timeout={timeout:?}", call.0)
        }
        other => format!("{other:?}"),
    }
}

pub fn output(o: &Output) -> String {
    match o {
        Output::OpenTransport { conn, server, .. } => format!("OpenTransport #{} {server}", conn.0),
        Output::Send { conn, frame, .. } => format!("Send #{} {}", conn.0, frame_text(frame)),
        Output::CloseTransport { conn } => format!("CloseTransport #{}", conn.0),
        Output::LoadCache { server, .. } => format!("LoadCache {server}"),
        Output::StoreCache {
            server,
            tools,
            catalog,
            ..
        } => format!(
            "StoreCache {server} {:?}{}",
            tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            catalog_text(catalog)
        ),
        Output::Event(Event::StartupComplete { report: r }) => format!(
            "StartupComplete round={} elapsed={:?} tools={:?} errors={:?} connected={:?} deferred={:?} pending={:?} skipped={:?}{}",
            r.round,
            r.elapsed,
            r.tools
                .iter()
                .map(|t| if t.deferred { format!("{}*", t.qualified_name) } else { t.qualified_name.clone() })
                .collect::<Vec<_>>(),
            r.errors
                .iter()
                .map(|(k, e)| (k, e.to_string()))
                .collect::<std::collections::BTreeMap<_, _>>(),
            r.connected,
            r.deferred,
            r.pending,
            r.skipped,
            if r.disconnected.is_empty() {
                String::new()
            } else {
                format!(" disconnected={:?}", r.disconnected)
            }
        ),
        Output::Event(Event::ToolsChanged { servers }) => format!("ToolsChanged {servers:?}"),
        Output::Event(Event::StatusChanged { server, status }) => format!("StatusChanged {server} {status:?}"),
        Output::Event(Event::CallCompleted { call, outcome }) => match outcome {
            CallOutcome::Ok(r) => format!("CallCompleted c{} ok {:?}", call.0, r.render_text()),
            CallOutcome::Err(e) => format!("CallCompleted c{} err {:?}", call.0, e.to_string()),
            CallOutcome::Cancelled => format!("CallCompleted c{} cancelled", call.0),
            _ => format!("CallCompleted c{} {outcome:?}", call.0),
        },
        Output::Event(Event::Diagnostic {
            server,
            level,
            message,
        }) => format!(
            "Diagnostic {level:?} {}: {message}",
            server.as_deref().unwrap_or("-")
        ),
        Output::Event(Event::ReconnectScheduled {
            server,
            attempt,
            delay,
            error,
        }) => format!("ReconnectScheduled {server} attempt={attempt} in={delay:?}: {error}"),
        Output::Event(Event::ReconnectStarted { server, attempt }) => {
            format!("ReconnectStarted {server} attempt={attempt}")
        }
        Output::Event(Event::Progress {
            server,
            call,
            progress,
            total,
            message,
        }) => format!(
            "Progress {server} {} {progress}/{} {}",
            call.map_or("-".to_string(), |c| format!("c{}", c.0)),
            total.map_or("?".to_string(), |t| t.to_string()),
            message.as_deref().unwrap_or("")
        )
        .trim_end()
        .to_string(),
        Output::Event(Event::ServerLog {
            server,
            level,
            severity,
            logger,
            data,
        }) => format!(
            "ServerLog {level:?} {server} [{}] {severity}: {}",
            logger.as_deref().unwrap_or("-"),
            match data {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            }
        ),
        Output::Event(Event::RoundStarted { request, round }) => {
            format!("RoundStarted r{} round={round}", request.0)
        }
        Output::Event(Event::SyncCompleted { request }) => format!("SyncCompleted r{}", request.0),
        Output::Event(Event::RefreshCompleted {
            request,
            server,
            result,
        }) => match result {
            Ok(()) => format!("RefreshCompleted r{} {server} ok", request.0),
            Err(e) => format!("RefreshCompleted r{} {server} err {e:?}", request.0),
        },
        Output::Event(Event::Disconnected { request, closed }) => format!(
            "Disconnected r{} closed={:?}",
            request.0,
            closed.iter().map(|c| c.0).collect::<Vec<_>>()
        ),
        Output::Event(Event::RequestFailed { request, error }) => {
            format!("RequestFailed r{}: {error}", request.0)
        }
        Output::Event(Event::SessionRenewed { server }) => format!("SessionRenewed {server}"),
        Output::Event(Event::PeerRequest {
            server,
            request,
            kind,
            ..
        }) => format!("PeerRequest {server} p{} {}", request.0, json_text(kind)),
        Output::Event(Event::PeerRequestWithdrawn {
            server,
            request,
            reason,
        }) => format!("PeerRequestWithdrawn {server} p{} {reason:?}", request.0),
        Output::Event(Event::ElicitationComplete {
            server,
            elicitation_id,
        }) => format!("ElicitationComplete {server} {elicitation_id:?}"),
        Output::Event(Event::ResourcesChanged { servers }) => {
            format!("ResourcesChanged {servers:?}")
        }
        Output::Event(Event::PromptsChanged { servers }) => format!("PromptsChanged {servers:?}"),
        Output::Event(Event::ResourceUpdated { server, uri }) => {
            format!("ResourceUpdated {server} {uri}")
        }
        Output::Event(Event::OperationCompleted { call, outcome }) => match outcome {
            OperationOutcome::Ok(r) => format!("OperationCompleted c{} ok {}", call.0, result_text(r)),
            OperationOutcome::Err(e) => {
                format!("OperationCompleted c{} err {:?}", call.0, e.to_string())
            }
            OperationOutcome::Cancelled => format!("OperationCompleted c{} cancelled", call.0),
            _ => format!("OperationCompleted c{} {outcome:?}", call.0),
        },
        other => format!("{other:?}"),
    }
}

/// A stored catalog, when there is one: its resources, templates and prompts by name.
fn catalog_text(c: &Catalog) -> String {
    if c == &Catalog::default() {
        return String::new();
    }
    format!(
        " resources={:?} templates={:?} prompts={:?}",
        c.resources
            .iter()
            .map(|r| r.uri.as_str())
            .collect::<Vec<_>>(),
        c.templates
            .iter()
            .map(|t| t.uri_template.as_str())
            .collect::<Vec<_>>(),
        c.prompts
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
    )
}

/// An operation's result in a few words.
fn result_text(r: &OperationResult) -> String {
    match r {
        OperationResult::Read(r) => format!("read {} from {}", r.contents.len(), r.server),
        OperationResult::Prompt(p) => format!("prompt of {} from {}", p.messages.len(), p.server),
        OperationResult::Completion(c) => format!("{:?} from {}", c.values, c.server),
        OperationResult::Done { server } => format!("done by {server}"),
        other => format!("{other:?}"),
    }
}
