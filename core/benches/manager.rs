//! Criterion benchmarks of the sans-IO core, driven exactly as the shell drives it (`handle`,
//! drain `poll_output`), with this file playing every server through real JSON-RPC frames.
//!
//! - `startup_round`: 100 servers x 50 tools, `Manager::new` to `StartupComplete`.
//! - `call_routing`: one connected server, `CallTool` -> `tools/call` -> response ->
//!   `CallCompleted`.
//! - `tools_changed/{10,100}`: N connected servers x 50 tools; one sends `list_changed`, is
//!   re-listed with a changed list, until `ToolsChanged`.
//!
//! Server-side work (building response frames, specs, call inputs) happens outside the timed
//! sections wherever possible; ids are read from the frames the manager sends, not assumed.
//!
//! Run: `cargo bench -p switchboard-core --bench manager`
//!
//! Instruction counts (load-independent): with `STARTUP_ROUNDS=N` (or `CALLS=N`) in the
//! environment the binary plays N startup rounds (N routed calls) outside criterion and exits;
//! under callgrind, count only those with `--toggle-collect='*measured_round*'`
//! (`'*measured_calls*'`); see BENCHMARKS.md.

use bytes::Bytes;
use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::hint::black_box;
use std::time::{Duration, Instant as StdInstant};
use switchboard_core::config::{ServerConfig, ServerSpec};
use switchboard_core::manager::{
    CallId, CallOutcome, ConnId, Event, Input, Manager, ManagerOptions, Output, RequestId,
    StartupReport, TransportEvent,
};
use switchboard_core::{protocol, Instant};

const TOOLS_PER_SERVER: usize = 50;
const NOW: Instant = Instant::ZERO;

fn opts() -> ManagerOptions {
    ManagerOptions {
        client_version: "bench".into(),
        ..ManagerOptions::default()
    }
}

fn server_name(i: usize) -> String {
    format!("srv{i:03}")
}

fn specs(n: usize) -> Vec<ServerSpec> {
    (0..n)
        .map(|i| {
            let name = server_name(i);
            ServerSpec::new(
                name.clone(),
                ServerConfig::stdio(format!("{name}-server"), &["--stdio"]),
            )
        })
        .collect()
}

/// A realistic tool definition: description plus an input schema of a few properties.
fn tool_json(name: &str) -> Value {
    json!({
        "name": name,
        "description": format!("{name}: reads entries under a path and returns them as text, optionally recursing into subdirectories and limiting the number of results."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Absolute path to read"},
                "recursive": {"type": "boolean", "description": "Recurse into subdirectories", "default": false},
                "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Maximum number of entries"},
                "mode": {"type": "string", "enum": ["text", "json", "tree"]}
            },
            "required": ["path"],
            "additionalProperties": false
        }
    })
}

/// `tools/list` result with 50 tools; `variant` renames the last one (a "changed" list).
fn tools_result(variant: u64) -> Value {
    let tools: Vec<Value> = (0..TOOLS_PER_SERVER)
        .map(|j| {
            if j == TOOLS_PER_SERVER - 1 && variant % 2 == 1 {
                tool_json(&format!("tool_{j}_v{variant}"))
            } else {
                tool_json(&format!("tool_{j}"))
            }
        })
        .collect();
    json!({ "tools": tools })
}

fn init_result() -> Value {
    json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {"listChanged": true}},
        "serverInfo": {"name": "bench-server", "version": "1.0.0"}
    })
}

fn response(id: u64, result: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result})).unwrap())
}

/// The benchmark measures wall time; the core itself never reads a clock (clippy.toml bans
/// `Instant::now` for that reason, so the one use here is allowed explicitly).
#[allow(clippy::disallowed_methods)]
fn wall_clock() -> StdInstant {
    StdInstant::now()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The request id of a frame the manager sent (`None` for notifications). A cheap scan, not a
/// JSON parse, so the driver adds little to the measured time.
fn frame_id(frame: &[u8]) -> Option<u64> {
    let at = find(frame, b"\"id\":")? + 5;
    let digits = frame[at..].iter().take_while(|b| b.is_ascii_digit());
    let mut id = 0u64;
    let mut any = false;
    for d in digits {
        id = id * 10 + u64::from(d - b'0');
        any = true;
    }
    any.then_some(id)
}

fn frame_method(frame: &[u8]) -> &[u8] {
    let Some(at) = find(frame, b"\"method\":\"") else {
        return b"";
    };
    let rest = &frame[at + 10..];
    let end = rest.iter().position(|&b| b == b'"').unwrap_or(rest.len());
    &rest[..end]
}

/// Pre-built answers, indexed by request id (ids are per connection and deterministic, but we
/// read them from the frames and index rather than assume).
struct Answers {
    init: Vec<Bytes>,
    list: Vec<Bytes>,
}

impl Answers {
    fn new(variant: u64) -> Self {
        let (init, tools) = (init_result(), tools_result(variant));
        Answers {
            init: (0..4).map(|id| response(id, &init)).collect(),
            list: (0..4).map(|id| response(id, &tools)).collect(),
        }
    }
}

/// Play every server and the cache until the queue runs dry; returns the `StartupComplete`
/// reports seen (handed back so the embedder's drop of them stays out of the timed section).
fn pump(m: &mut Manager, answers: &Answers, queue: &mut VecDeque<Input>) -> Vec<StartupReport> {
    let mut completes = Vec::new();
    loop {
        while let Some(out) = m.poll_output() {
            match out {
                Output::OpenTransport { conn, .. } => queue.push_back(Input::Transport {
                    conn,
                    event: TransportEvent::Opened,
                }),
                Output::LoadCache { server, key } => queue.push_back(Input::CacheLoaded {
                    server,
                    key,
                    tools: None,
                    catalog: None,
                }),
                Output::Send { conn, frame, .. } => {
                    let Some(id) = frame_id(&frame) else {
                        continue; // notifications/initialized
                    };
                    let table = match frame_method(&frame) {
                        b"initialize" => &answers.init,
                        b"tools/list" => &answers.list,
                        other => panic!("unexpected request {}", String::from_utf8_lossy(other)),
                    };
                    queue.push_back(Input::Transport {
                        conn,
                        event: TransportEvent::Frame(table[id as usize].clone()),
                    });
                }
                Output::Event(Event::StartupComplete { report }) => {
                    assert_eq!(
                        report.connected.len() * TOOLS_PER_SERVER,
                        report.tools.len()
                    );
                    completes.push(report);
                }
                other => {
                    let _ = black_box(other);
                }
            }
        }
        let Some(input) = queue.pop_front() else {
            return completes;
        };
        m.handle(NOW, input);
    }
}

/// A manager with `n` servers connected (50 tools each), through a full startup round.
fn connected(n: usize, answers: &Answers) -> Manager {
    let mut m = Manager::new(opts(), NOW);
    m.handle(
        NOW,
        Input::Connect {
            request: RequestId(1),
            servers: specs(n),
        },
    );
    let completes = pump(&mut m, answers, &mut VecDeque::new());
    assert_eq!(completes.len(), 1);
    assert_eq!(m.connections().len(), n);
    assert_eq!(m.tool_count(), n * TOOLS_PER_SERVER);
    m
}

const STARTUP_SERVERS: usize = 100;

/// One timed startup round: what `startup_round/100x50` measures. Never inlined, so callgrind
/// can count just this function and its callees.
#[inline(never)]
fn measured_round(
    servers: Vec<ServerSpec>,
    answers: &Answers,
    queue: &mut VecDeque<Input>,
) -> (Manager, Vec<StartupReport>) {
    let mut m = Manager::new(opts(), NOW);
    m.handle(
        NOW,
        Input::Connect {
            request: RequestId(1),
            servers,
        },
    );
    let completes = pump(&mut m, answers, queue);
    assert_eq!(completes.len(), 1);
    (m, completes) // dropped outside the timed section
}

fn startup_round(c: &mut Criterion) {
    let answers = Answers::new(0);
    let all = specs(STARTUP_SERVERS);
    let mut g = c.benchmark_group("startup_round");
    g.sample_size(20).measurement_time(Duration::from_secs(6));
    g.bench_function("100x50", |b| {
        b.iter_batched(
            || (all.clone(), VecDeque::with_capacity(4 * STARTUP_SERVERS)),
            |(servers, mut queue)| measured_round(servers, &answers, &mut queue),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// `STARTUP_ROUNDS=N` / `CALLS=N`: N startup rounds / N routed calls without criterion (for
/// callgrind), then exit.
#[allow(clippy::disallowed_methods)]
fn count_from_env(var: &str) -> Option<u64> {
    std::env::var(var).ok()?.parse().ok()
}

fn conn_of(m: &Manager, server: &str) -> ConnId {
    m.server_state(server).and_then(|s| s.conn).unwrap()
}

/// The timed part of `call_routing`: each call goes in, its `tools/call` frame comes out, the
/// server's answer goes in, `CallCompleted` comes out. Never inlined (callgrind, see `main`).
#[inline(never)]
fn measured_calls(m: &mut Manager, conn: ConnId, calls: Vec<Input>, replies: &[Bytes], base: u64) {
    for (call, reply_slot) in calls.into_iter().zip(0..) {
        m.handle(NOW, call);
        let mut id = None;
        while let Some(out) = m.poll_output() {
            match out {
                Output::Send { frame, .. } => id = frame_id(&frame),
                other => panic!("unexpected {other:?}"),
            }
        }
        let id = id.expect("a tools/call frame");
        debug_assert_eq!(id, base + reply_slot);
        let frame = replies[(id - base) as usize].clone();
        m.handle(
            NOW,
            Input::Transport {
                conn,
                event: TransportEvent::Frame(frame),
            },
        );
        match m.poll_output() {
            Some(Output::Event(Event::CallCompleted {
                outcome: CallOutcome::Ok(r),
                ..
            })) => {
                black_box(r);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// One connected server, the qualified name of its `tool_7`, the call's arguments and the
/// server's answer (what `call_routing` sends and gets).
fn call_setup(answers: &Answers) -> (Manager, ConnId, String, Value, Value) {
    let m = connected(1, answers);
    let conn = conn_of(&m, "srv000");
    let tool = m
        .tools()
        .into_iter()
        .find(|t| t.def.name == "tool_7")
        .unwrap()
        .qualified_name;
    let args = json!({"path": "/tmp/project", "limit": 10});
    let result = json!({"content": [{"type": "text", "text": "3 entries: a, b, c"}]});
    (m, conn, tool, args, result)
}

fn call_routing(c: &mut Criterion) {
    const CHUNK: u64 = 10_000;
    let answers = Answers::new(0);
    let mut g = c.benchmark_group("call_routing");
    g.sample_size(20)
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(1));
    g.bench_function("small_args", |b| {
        let (mut m, conn, tool, args, result) = call_setup(&answers);
        // Request ids 0 and 1 went to initialize and tools/list.
        let mut next_req = 2u64;
        let mut next_call = 0u64;
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(CHUNK);
                left -= n;
                // Server side, built outside the timed section: the calls and their answers.
                let calls: Vec<Input> = (0..n)
                    .map(|k| Input::CallTool {
                        call: CallId(next_call + k),
                        tool: tool.clone(),
                        arguments: Some(args.clone()),
                        timeout: None,
                        progress: false,
                        meta: None,
                    })
                    .collect();
                let base = next_req;
                let replies: Vec<Bytes> = (0..n).map(|k| response(base + k, &result)).collect();
                next_call += n;
                next_req += n;
                let start = wall_clock();
                measured_calls(&mut m, conn, calls, &replies, base);
                total += start.elapsed();
                drop(replies);
            }
            total
        })
    });
    g.finish();
}

fn tools_changed(c: &mut Criterion) {
    const CHUNK: u64 = 500;
    let answers = Answers::new(0);
    let notification =
        Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#);
    // Two alternating lists so every re-list really changes the server's slice.
    let lists = [tools_result(0), tools_result(1)];
    let mut g = c.benchmark_group("tools_changed");
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    for n in [10usize, 100] {
        let mut m = connected(n, &answers);
        let server = server_name(0);
        let conn = conn_of(&m, &server);
        let mut next_req = 2u64;
        let mut flip = 1usize;
        g.bench_function(format!("{n}x50"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let k = left.min(CHUNK);
                    left -= k;
                    let base = next_req;
                    let replies: Vec<Bytes> = (0..k)
                        .map(|i| response(base + i, &lists[(flip + i as usize) % 2]))
                        .collect();
                    next_req += k;
                    flip += k as usize;
                    let start = wall_clock();
                    for _ in 0..k {
                        m.handle(
                            NOW,
                            Input::Transport {
                                conn,
                                event: TransportEvent::Frame(notification.clone()),
                            },
                        );
                        let mut id = None;
                        while let Some(out) = m.poll_output() {
                            match out {
                                Output::Send { frame, .. } => id = frame_id(&frame),
                                other => panic!("unexpected {other:?}"),
                            }
                        }
                        let id = id.expect("a tools/list frame");
                        m.handle(
                            NOW,
                            Input::Transport {
                                conn,
                                event: TransportEvent::Frame(replies[(id - base) as usize].clone()),
                            },
                        );
                        let mut changed = false;
                        while let Some(out) = m.poll_output() {
                            match out {
                                Output::Event(Event::ToolsChanged { servers }) => {
                                    changed = servers == [server.as_str()];
                                }
                                other => {
                                    let _ = black_box(other);
                                }
                            }
                        }
                        assert!(changed, "no ToolsChanged for {server}");
                    }
                    total += start.elapsed();
                    drop(replies);
                }
                total
            })
        });
        assert_eq!(m.tool_count(), n * TOOLS_PER_SERVER);
    }
    g.finish();
}

/// Reference points, not goals, for one server's `tools/list` answer (50 tools, 28.8 KB):
/// - `parse_tools_list_frame_50`: serde_json alone parsing it into a `Value` (what the codec
///   did before schemas stayed raw; 100x this bounded `startup_round` from below);
/// - `decode_tools_list_frame_50`: what the codec does now, `decode_expecting` reading the
///   page straight from the frame (100x this is the JSON part of `startup_round`).
fn reference_parse(c: &mut Criterion) {
    let f = response(1, &tools_result(0));
    let mut g = c.benchmark_group("reference");
    g.sample_size(20)
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Bytes(f.len() as u64));
    g.bench_function("parse_tools_list_frame_50", |b| {
        b.iter(|| serde_json::from_slice::<Value>(black_box(&f)).unwrap())
    });
    g.bench_function("decode_tools_list_frame_50", |b| {
        b.iter(|| {
            protocol::decode_expecting(black_box(&f), usize::MAX, &|_| protocol::Expect::ToolsPage)
                .unwrap()
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    startup_round,
    call_routing,
    tools_changed,
    reference_parse
);

fn main() {
    if let Some(rounds) = count_from_env("STARTUP_ROUNDS") {
        let answers = Answers::new(0);
        let all = specs(STARTUP_SERVERS);
        for _ in 0..rounds {
            let mut queue = VecDeque::with_capacity(4 * STARTUP_SERVERS);
            black_box(measured_round(all.clone(), &answers, &mut queue));
        }
        return;
    }
    if let Some(n) = count_from_env("CALLS") {
        let (mut m, conn, tool, args, result) = call_setup(&Answers::new(0));
        let calls: Vec<Input> = (0..n)
            .map(|k| Input::CallTool {
                call: CallId(k),
                tool: tool.clone(),
                arguments: Some(args.clone()),
                timeout: None,
                progress: false,
                meta: None,
            })
            .collect();
        let replies: Vec<Bytes> = (0..n).map(|k| response(2 + k, &result)).collect();
        measured_calls(&mut m, conn, calls, &replies, 2);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
