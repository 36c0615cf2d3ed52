//! `switchboard serve` past one machine: two instances behind a load balancer that keeps no
//! sticky sessions (here a loopback proxy that hands each new connection to the other
//! instance in turn) serve a client of the stateless revision (2026-07-28): it lists, calls,
//! and completes a multi round-trip call whose retry lands on the other instance, which
//! runs the call again there with the answer the sealed `requestState` carries. A state
//! sealed under another key is refused.

use crate::http_peers::{free_port, peers_enabled};
use crate::support::{repo_root, switchboard_bin, DemoServer};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const V: &str = "2026-07-28";

/// A round-robin TCP proxy: connection `n` goes to `backends[n % 2]`. Stops with the test.
struct Proxy {
    port: u16,
    stop: Arc<AtomicBool>,
    /// Connections handed to each backend.
    counts: Arc<[AtomicUsize; 2]>,
}

impl Proxy {
    fn start(backends: [u16; 2]) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let counts: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let (stop2, counts2) = (stop.clone(), counts.clone());
        std::thread::spawn(move || {
            let mut next = 0usize;
            while !stop2.load(Ordering::Relaxed) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let which = next % 2;
                next += 1;
                counts2[which].fetch_add(1, Ordering::Relaxed);
                let Ok(backend) = TcpStream::connect(("127.0.0.1", backends[which])) else {
                    continue;
                };
                client.set_nonblocking(false).unwrap();
                pipe(client.try_clone().unwrap(), backend.try_clone().unwrap());
                pipe(backend, client);
            }
        });
        Proxy { port, stop, counts }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copy `from` to `to` until `from` ends, then end `to`'s writing side.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}

/// One stateless request on a connection of its own: the HTTP status and the JSON answer
/// (the last JSON-RPC response when the answer is an SSE stream).
fn request(port: u16, id: u64, method: &str, params: Value) -> (u16, Value) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": { "elicitation": {} },
        "io.modelcontextprotocol/clientInfo": { "name": "scaling-test", "version": "1" },
    });
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_string);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {V}\r\nMcp-Method: {method}\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(name) = name {
        req.push_str(&format!("Mcp-Name: {name}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&body);
    stream.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    assert!(
        !head.to_ascii_lowercase().contains("mcp-session-id"),
        "a stateless answer names no session: {head}"
    );
    let answer = rest
        .lines()
        .rev()
        .map(|l| l.strip_prefix("data: ").unwrap_or(l))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("id") == Some(&json!(id)))
        .unwrap_or_else(|| panic!("no answer to {method} in {text:?}"));
    (status, answer)
}

/// `switchboard serve --http` on a free port in front of the conformance fixture, with the
/// state key in `key_file`.
fn instance(config: &std::path::Path, key_file: &std::path::Path) -> (DemoServer, u16) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let s = DemoServer::spawn_program(
        &switchboard_bin(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--no-project-config",
            "--no-cache",
            "serve",
            "--http",
            &addr,
            "--plain-names",
            "--state-key-file",
            key_file.to_str().unwrap(),
        ],
        &[],
    );
    s.wait_stderr("serving http://", WAIT);
    (s, port)
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn two_instances_behind_a_round_robin_serve_a_stateless_client_without_sticky_sessions() {
    if !peers_enabled("serve_scaling") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let node = repo_root().join("tests/peers/node_modules/node/bin/node");
    let fixture = repo_root().join("tests/peers/conformance_fixture.mjs");
    let config = dir.path().join("mcp.json");
    let upstream = json!({ "command": node, "args": [fixture, "--legacy"] });
    std::fs::write(
        &config,
        json!({ "mcpServers": { "fixture": upstream } }).to_string(),
    )
    .unwrap();
    let key_file = dir.path().join("state.key");
    std::fs::write(&key_file, "a secret both instances share, 32 bytes or more").unwrap();
    let (a, port_a) = instance(&config, &key_file);
    let (b, port_b) = instance(&config, &key_file);
    let proxy = Proxy::start([port_a, port_b]);
    let port = proxy.port;

    // Lists and calls, each on whichever instance the proxy picks.
    let (status, list) = request(port, 1, "tools/list", json!({}));
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["result"]["resultType"], "complete");
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"test_input_required_result_elicitation"),
        "{names:?}"
    );
    let (_, call) = request(
        port,
        2,
        "tools/call",
        json!({"name": "test_simple_text", "arguments": {}}),
    );
    assert_eq!(
        call["result"]["content"][0]["text"],
        "This is a simple text response for testing."
    );
    assert_eq!(call["result"]["resultType"], "complete");

    // A multi round-trip call: the first round on one instance, the retry on the other.
    let (status, first) = request(
        port,
        3,
        "tools/call",
        json!({"name": "test_input_required_result_elicitation", "arguments": {}}),
    );
    assert_eq!(status, 200, "{first}");
    let r = &first["result"];
    assert_eq!(r["resultType"], "input_required", "{first}");
    let (key, input) = r["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(input["method"], "elicitation/create");
    let state = r["requestState"].clone();
    let (status, done) = request(
        port,
        4,
        "tools/call",
        json!({
            "name": "test_input_required_result_elicitation", "arguments": {},
            "requestState": state,
            "inputResponses": { key: { "action": "accept", "content": { "name": "Ada" } } }
        }),
    );
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "Hello, Ada!",
        "{done}"
    );
    let counts: Vec<usize> = proxy
        .counts
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    assert_eq!(
        counts,
        vec![2, 2],
        "requests alternated between the instances"
    );

    // A state with one byte changed opens on neither instance.
    let mut forged = state.as_str().unwrap().to_string();
    forged.insert(3, ' ');
    let (_, refused) = request(
        port,
        5,
        "tools/call",
        json!({
            "name": "test_input_required_result_elicitation", "arguments": {},
            "requestState": forged,
            "inputResponses": { key: { "action": "accept", "content": { "name": "Eve" } } }
        }),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    drop(proxy);
    drop(a);
    drop(b);
}
