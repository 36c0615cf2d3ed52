//! Entry points of the cargo-fuzz targets (`fuzz/`). A stable test replays the committed corpus
//! (`fuzz/corpus/<target>/`) through these same functions, so CI needs no nightly.

use crate::invariants::{self, Ctx, Invariant};
use crate::observe::{CallObs, Observer, StepInfo, View};
use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::time::Duration;
use switchboard_core::config::{self, ServerConfig, ServerSpec};
use switchboard_core::manager::{
    CacheKey, CallId, ConnId, Event, Input, Manager, ManagerOptions, Output, RequestId,
    TransportEvent,
};
use switchboard_core::protocol;
use switchboard_core::tool::ToolDef;
use switchboard_core::Instant;

/// Bytes → server config: parse, validate, resolve and hash; none of it may panic, the hash is
/// a pure function of the config, and a config that round-trips through JSON exactly keeps
/// its hash.
///
/// (Fuzzing found that a huge integer literal in an unknown field is parsed as an `f64` that
/// may print back as a slightly different number — serde_json without `float_roundtrip` — so
/// only configs whose round trip is exact must keep their hash. The hash of one text is still
/// stable.)
// TODO: switch to `config::parse_document(path, text)` once it lands on main.
pub fn config_parse(data: &[u8]) {
    let Ok(c) = serde_json::from_slice::<ServerConfig>(data) else {
        return;
    };
    let name = c
        .extra
        .get("name")
        .and_then(|v| v.as_str())
        .unwrap_or("fuzz")
        .to_string();
    let _ = config::validate(&name, &c);
    let env: BTreeMap<String, String> = [("HOME".to_string(), "/home/fuzz".to_string())].into();
    let _ = config::resolve(&name, &c, &env);
    let h = config::config_hash(&c);
    assert_eq!(
        h,
        config::config_hash(&c.clone()),
        "config hash not a pure function"
    );
    assert_eq!(h.len(), 64);
    if let Ok(v) = serde_json::to_vec(&c) {
        if let Ok(back) = serde_json::from_slice::<ServerConfig>(&v) {
            if back == c {
                assert_eq!(
                    h,
                    config::config_hash(&back),
                    "config hash changed across an exact round trip"
                );
            }
        }
    }
}

/// Bytes → one frame through the codec; never panics, and what decodes parses further
/// without panicking. Reading a `tools/list` page while decoding gives what decoding and then
/// parsing the raw result gives.
pub fn frame_decode(data: &[u8]) {
    let raw = protocol::decode(data, 1 << 16);
    if let Ok(protocol::Incoming::Response { result: Ok(v), .. }) = &raw {
        let _ = protocol::parse_initialize_result(v);
        let _ = protocol::parse_list_tools_result(v);
        let _ = protocol::parse_call_tool_result(v);
    }
    let paged = protocol::decode_expecting(data, 1 << 16, &|_| protocol::Expect::ToolsPage);
    match (&paged, &raw) {
        (
            Ok(protocol::Incoming::ToolsPage { id, page }),
            Ok(protocol::Incoming::Response {
                id: raw_id,
                result: Ok(v),
            }),
        ) => {
            assert_eq!(Some(*id), *raw_id, "page read for another id");
            assert_eq!(
                *page,
                protocol::parse_list_tools_result(v),
                "page read while decoding differs from the raw result's"
            );
        }
        (Ok(protocol::Incoming::ToolsPage { .. }), other) => {
            panic!("a page where plain decoding gives {other:?}")
        }
        _ => assert_eq!(paged, raw, "decode_expecting differs from decode"),
    }
}

#[derive(Debug, Arbitrary)]
enum Op {
    Advance(u16),
    Connect(u8),
    Disconnect(u8),
    DisconnectAll,
    Refresh(u8),
    Opened(u8),
    Closed(u8),
    Failed(u8),
    /// A well-formed answer to the `id`-th request on a connection.
    Answer {
        conn: u8,
        id: u8,
        kind: u8,
    },
    RawFrame {
        conn: u8,
        bytes: Vec<u8>,
    },
    Cache {
        server: u8,
        hit: bool,
    },
    Call {
        tool: u8,
        timeout: Option<u16>,
    },
    Cancel(u8),
}

const SERVERS: [&str; 4] = ["alpha", "beta", "s3", "a_b"];

fn answer(id: u8, kind: u8) -> Vec<u8> {
    let result = match kind % 6 {
        0 => serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}}),
        1 => serde_json::json!({"tools": [{"name": "echo"}, {"name": "Echo!"}]}),
        2 => serde_json::json!({"tools": [{"name": "x"}], "nextCursor": "c"}),
        3 => serde_json::json!({"content": [{"type": "text", "text": "hi"}]}),
        4 => serde_json::json!({"protocolVersion": "1999-01-01"}),
        _ => serde_json::json!({}),
    };
    serde_json::to_vec(&serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}))
        .unwrap_or_default()
}

/// An arbitrary sequence of inputs, times and frames → the manager, with the invariants that
/// need no world model checked after every step (status vs registries, names, stale events,
/// open/close bookkeeping, calls exactly once).
pub fn manager_inputs(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(ops) = Vec::<Op>::arbitrary(&mut u) else {
        return;
    };
    let opts = ManagerOptions {
        gate: Duration::from_millis(100),
        uncached_wait: Some(Duration::from_millis(500)),
        call_timeout: Duration::from_millis(800),
        request_timeout: Duration::from_millis(600),
        max_frame_len: 1024,
        client_version: "fuzz".into(),
        ..ManagerOptions::default()
    };
    let names: Vec<String> = SERVERS.iter().map(|s| s.to_string()).collect();
    let mut m = Manager::new(opts, Instant::ZERO);
    let mut obs = Observer {
        index: names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect(),
        names: names.clone(),
        latest_conn: vec![None; names.len()],
        withdrawn: vec![false; names.len()],
        pinged: vec![None; names.len()],
        ..Observer::default()
    };
    let mut view = View::observe(&m, &obs.index, None);
    let mut now = Instant::ZERO;
    let mut next_call = 0u64;
    let mut conns: Vec<ConnId> = Vec::new();
    let pick = |conns: &Vec<ConnId>, k: u8| -> ConnId {
        if conns.is_empty() {
            ConnId(u64::from(k))
        } else {
            conns[usize::from(k) % conns.len()]
        }
    };
    let mut next_request = 0u64;
    for op in ops.into_iter().take(200) {
        let mut step = StepInfo::default();
        next_request += 1;
        let request = RequestId(next_request);
        let input = match op {
            Op::Advance(ms) => {
                now += Duration::from_millis(u64::from(ms));
                step.timer = true;
                None
            }
            Op::Connect(mask) => Some(Input::Connect {
                request,
                servers: names
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0)
                    .map(|(_, n)| ServerSpec::new(n.clone(), ServerConfig::stdio("srv", &[])))
                    .collect(),
            }),
            Op::Disconnect(k) => Some(Input::Disconnect {
                request,
                server: names[usize::from(k) % names.len()].clone(),
            }),
            Op::DisconnectAll => Some(Input::DisconnectAll { request }),
            Op::Refresh(k) => Some(Input::RefreshTools {
                request,
                server: names[usize::from(k) % names.len()].clone(),
            }),
            Op::Opened(k) => Some(transport(pick(&conns, k), TransportEvent::Opened)),
            Op::Closed(k) => Some(transport(
                pick(&conns, k),
                TransportEvent::Closed {
                    reason: "eof".into(),
                },
            )),
            Op::Failed(k) => Some(transport(
                pick(&conns, k),
                TransportEvent::Failed {
                    error: "broken pipe".into(),
                },
            )),
            Op::Answer { conn, id, kind } => Some(transport(
                pick(&conns, conn),
                TransportEvent::Frame(Bytes::from(answer(id, kind))),
            )),
            Op::RawFrame { conn, bytes } => Some(transport(
                pick(&conns, conn),
                TransportEvent::Frame(Bytes::from(bytes)),
            )),
            Op::Cache { server, hit } => {
                let name = names[usize::from(server) % names.len()].clone();
                Some(Input::CacheLoaded {
                    key: CacheKey {
                        server: name.clone(),
                        config_hash: config::config_hash(&ServerConfig::stdio("srv", &[])),
                    },
                    server: name,
                    tools: hit.then(|| vec![ToolDef::named("cached")]),
                    catalog: None,
                })
            }
            Op::Call { tool, timeout } => {
                let tools = m.tools();
                let name = if tools.is_empty() {
                    "mcp_none_tool".to_string()
                } else {
                    tools[usize::from(tool) % tools.len()]
                        .qualified_name
                        .clone()
                };
                next_call += 1;
                let server = m
                    .resolve_tool(&name)
                    .and_then(|(s, _)| obs.index.get(s).copied());
                obs.calls.insert(
                    CallId(next_call),
                    CallObs {
                        server,
                        deferred: false,
                        withdrawn_target: false,
                        progress: tool % 2 == 0,
                        timing: None,
                    },
                );
                Some(Input::CallTool {
                    call: CallId(next_call),
                    tool: name,
                    arguments: None,
                    timeout: timeout.map(|t| Duration::from_millis(u64::from(t))),
                    progress: tool % 2 == 0,
                    meta: None,
                })
            }
            Op::Cancel(k) => Some(Input::CancelCall {
                call: CallId(u64::from(k)),
            }),
        };
        if let Some(Input::Transport { conn, event }) = &input {
            step.stale = !obs.mirror.contains(conn);
            // A stale Opened of an attempt the manager issued is answered with its close.
            if step.stale && matches!(event, TransportEvent::Opened) && conns.contains(conn) {
                step.stale_opened = Some(*conn);
            }
            if matches!(
                event,
                TransportEvent::Closed { .. } | TransportEvent::Failed { .. }
            ) {
                obs.mirror.remove(conn);
            }
        }
        match input {
            Some(i) => m.handle(now, i),
            None => m.handle_timeout(now),
        }
        while let Some(o) = m.poll_output() {
            step.outputs += 1;
            match o {
                Output::OpenTransport { conn, server, .. } => {
                    conns.push(conn);
                    obs.mirror.insert(conn);
                    if let Some(&i) = obs.index.get(&server) {
                        obs.latest_conn[i] = Some(conn);
                    }
                }
                Output::CloseTransport { conn } => {
                    step.closes.push(conn);
                    if !obs.mirror.remove(&conn) && step.stale_opened != Some(conn) {
                        step.output_violations.push((
                            Invariant::EveryOpenIsClosedOnce,
                            format!("bad close of #{}", conn.0),
                        ));
                    }
                }
                Output::Send { conn, frame, .. } => {
                    if !obs.mirror.contains(&conn) {
                        step.output_violations.push((
                            Invariant::EveryOpenIsClosedOnce,
                            format!("send on closed #{}", conn.0),
                        ));
                    }
                    assert!(serde_json::from_slice::<serde_json::Value>(&frame).is_ok());
                }
                Output::Event(Event::StatusChanged { server, status }) => {
                    step.status_events.insert(server, status);
                }
                Output::Event(Event::ToolsChanged { servers }) => {
                    step.tools_changed.extend(servers)
                }
                Output::Event(Event::CallCompleted { call, outcome }) => {
                    match obs.calls.remove(&call) {
                        Some(c) => {
                            obs.calls.insert(call, c);
                            step.completed.push((call, outcome));
                        }
                        None => step.output_violations.push((
                            Invariant::EveryCallCompletesOnce,
                            format!("call {} twice", call.0),
                        )),
                    }
                }
                _ => {}
            }
        }
        let after = View::observe(&m, &obs.index, Some(&view));
        let summaries = invariants::Summaries::new(obs.names.len());
        let ctx = Ctx {
            m: &m,
            obs: &obs,
            before: &view,
            after: &after,
            step: &step,
            now,
            gate: Duration::from_millis(100),
            uncached_wait: None,
            double_underscore: false,
            settled: &[],
            catalog_settled: &[],
            reset_on_progress: false,
            reconnect_off: false,
            health: None,
            max_call_time: Duration::from_secs(600),
            summaries: &summaries,
        };
        for (name, check) in [
            (
                Invariant::StatusAgreesWithRegistries,
                invariants::status_agrees_with_registries as invariants::Check,
            ),
            (
                Invariant::QualifiedNamesAreValid,
                invariants::qualified_names_are_valid,
            ),
            (
                Invariant::StaleEventsChangeNothing,
                invariants::stale_events_change_nothing,
            ),
            (
                Invariant::EveryOpenIsClosedOnce,
                invariants::every_open_is_closed_exactly_once,
            ),
            (
                Invariant::EveryCallCompletesOnce,
                invariants::calls_complete_once_and_correctly,
            ),
        ] {
            if let Err(e) = check(&ctx) {
                panic!("invariant {name} violated: {e}");
            }
        }
        for (c, _) in &step.completed {
            obs.calls.remove(c);
        }
        view = after;
    }
}

fn transport(conn: ConnId, event: TransportEvent) -> Input {
    Input::Transport { conn, event }
}
