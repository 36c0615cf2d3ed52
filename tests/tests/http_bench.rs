//! Call latency and throughput over Streamable HTTP (FastMCP and server-everything on
//! loopback) beside stdio: every HTTP row has its stdio twin, the same peer program in stdio
//! mode (and `mcp-demo-server` as the stdio baseline). Sequential calls, then 64 concurrent
//! callers.
//! Ignored by default; the command and figures are in BENCHMARKS.md (`## HTTP`):
//!
//! ```sh
//! ./scripts/install-peers.sh
//! cargo build --release -p switchboard-cli --bins
//! SWITCHBOARD_PEERS=1 cargo test --release -p switchboard-tests --test all http_bench -- --ignored --nocapture --test-threads=1
//! ```

use crate::http_peers::{peers_enabled, PeerProcess};
use crate::support::{demo_server_bin, repo_root};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::{Builder, Switchboard};

const SEQUENTIAL: usize = 300;
const CONCURRENCY: usize = 64;
const PER_CALLER: usize = 10;

fn arguments(arg: &str, i: usize) -> Value {
    json!({ arg: format!("m{i}") })
}

async fn measure(label: &str, spec: ServerSpec, tool: &str, arg: &'static str) {
    let (sb, report) = Builder::servers(vec![spec])
        .no_cache()
        .start()
        .await
        .unwrap();
    assert_eq!(report.connected.len(), 1, "{report:?}");
    // Warm up (connections, JIT of the peer).
    for i in 0..20 {
        sb.call(tool, arguments(arg, i)).await.unwrap();
    }
    let mut lat = Vec::with_capacity(SEQUENTIAL);
    let t = Instant::now();
    for i in 0..SEQUENTIAL {
        let s = Instant::now();
        sb.call(tool, arguments(arg, i)).await.unwrap();
        lat.push(s.elapsed());
    }
    let seq_total = t.elapsed();
    lat.sort();
    let p = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)];

    let t = Instant::now();
    let tasks: Vec<_> = (0..CONCURRENCY)
        .map(|c| {
            let sb: Switchboard = sb.clone();
            let tool = tool.to_string();
            smol::spawn(async move {
                for i in 0..PER_CALLER {
                    sb.call(&tool, arguments(arg, c * 1000 + i)).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await;
    }
    let conc_total = t.elapsed();
    let conc_calls = CONCURRENCY * PER_CALLER;
    println!(
        "| {label} | {:.0} | {:.2} ms | {:.2} ms | {:.2} ms | {:.0} |",
        SEQUENTIAL as f64 / seq_total.as_secs_f64(),
        ms(p(0.5)),
        ms(p(0.99)),
        ms(seq_total / SEQUENTIAL as u32),
        conc_calls as f64 / conc_total.as_secs_f64(),
    );
    sb.shutdown().await;
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[test]
#[ignore = "benchmark: run by hand, see BENCHMARKS.md"]
fn http_bench_sequential_and_concurrent_calls() {
    if !peers_enabled("http_bench") {
        return;
    }
    println!(
        "| transport and peer | sequential calls/s | p50 | p99 | mean | {CONCURRENCY}-way concurrent calls/s |"
    );
    println!("|---|---|---|---|---|---|");
    smol::block_on(async {
        let bin = demo_server_bin();
        measure(
            "stdio, mcp-demo-server (Rust)",
            ServerSpec::new("demo", ServerConfig::stdio(bin.to_string_lossy(), &[])),
            "mcp_demo_echo",
            "text",
        )
        .await;
        let peers = repo_root().join("tests/peers");
        let python = peers.join(".venv/bin/python");
        let fastmcp = peers.join("fastmcp_server.py");
        measure(
            "stdio, FastMCP (Python SDK)",
            ServerSpec::new(
                "py",
                ServerConfig::stdio(python.to_string_lossy(), &[&fastmcp.to_string_lossy()]),
            ),
            "mcp_py_echo",
            "text",
        )
        .await;
        let py = PeerProcess::fastmcp();
        measure(
            "Streamable HTTP, FastMCP (Python SDK)",
            ServerSpec::new("py", ServerConfig::http(py.url("/mcp"))),
            "mcp_py_echo",
            "text",
        )
        .await;
        drop(py);
        let everything =
            peers.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        measure(
            "stdio, server-everything (TypeScript SDK)",
            ServerSpec::new(
                "ev",
                ServerConfig::stdio("node", &[&everything.to_string_lossy(), "stdio"]),
            ),
            "mcp_ev_echo",
            "message",
        )
        .await;
        let ev = PeerProcess::everything("streamableHttp");
        measure(
            "Streamable HTTP, server-everything (TypeScript SDK)",
            ServerSpec::new("ev", ServerConfig::http(ev.url("/mcp"))),
            "mcp_ev_echo",
            "message",
        )
        .await;
        drop(ev);
        let ev = PeerProcess::everything("sse");
        measure(
            "legacy SSE, server-everything (TypeScript SDK)",
            {
                let mut c = ServerConfig::http(ev.url("/sse"));
                c.kind = Some("sse".into());
                ServerSpec::new("ev", c)
            },
            "mcp_ev_echo",
            "message",
        )
        .await;
    });
}
