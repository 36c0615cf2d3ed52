//! A server with Nagle's algorithm on, which writes an answer's head and body in two writes
//! (`tests/scripts/mcp_http_server.py --nagle`): a client that sends its request in two
//! pieces, or leaves Nagle on itself, stalls on delayed ACKs (~40 ms a call). The test checks
//! the stable quantity — every request arrived in one piece; the benchmark (ignored, figures
//! in BENCHMARKS.md) compares sequential calls/s with Nagle on and off:
//!
//! ```sh
//! cargo test -p switchboard-tests --test all http_nagle -- --ignored --nocapture --test-threads=1
//! ```

use crate::support::repo_root;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Instant;
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::Builder;

struct PyServer {
    child: Child,
    port: u16,
}

impl PyServer {
    fn start(args: &[&str]) -> PyServer {
        let mut child = Command::new("python3")
            .arg(repo_root().join("tests/scripts/mcp_http_server.py"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the server prints its port");
        PyServer { child, port }
    }

    fn spec(&self) -> ServerSpec {
        ServerSpec::new(
            "py",
            ServerConfig::http(format!("http://127.0.0.1:{}/mcp", self.port)),
        )
    }
}

impl Drop for PyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn every_request_reaches_a_nagle_server_in_one_piece() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let server = PyServer::start(&["--nagle", "--log", log.to_str().unwrap()]);
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![server.spec()])
            .no_cache()
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["py"], "{report:?}");
        for i in 0..20 {
            let text = format!("call {i} {}", "x".repeat(i * 100));
            let out = sb
                .call("mcp_py_echo", json!({ "text": text.clone() }))
                .await
                .map(|r| r.render_text());
            assert_eq!(out, Ok(text));
        }
        sb.shutdown().await;
    });
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let calls = lines.iter().filter(|l| l.contains("tools/call")).count();
    assert_eq!(calls, 20, "{lines:?}");
    let split: Vec<&String> = lines.iter().filter(|l| l.ends_with(" split")).collect();
    assert!(split.is_empty(), "requests written in pieces: {split:?}");
}

#[test]
#[ignore = "benchmark: run by hand, figures in BENCHMARKS.md"]
fn bench_sequential_calls_with_nagle_on_and_off() {
    const CALLS: usize = 300;
    for (label, args) in [
        ("TCP_NODELAY server", &[][..]),
        ("Nagle server", &["--nagle"][..]),
    ] {
        let server = PyServer::start(args);
        smol::block_on(async {
            let (sb, report) = Builder::servers(vec![server.spec()])
                .no_cache()
                .start()
                .await
                .unwrap();
            assert_eq!(report.connected, vec!["py"], "{report:?}");
            for i in 0..20 {
                sb.call("mcp_py_echo", json!({ "text": format!("w{i}") }))
                    .await
                    .unwrap();
            }
            let t = Instant::now();
            for i in 0..CALLS {
                sb.call("mcp_py_echo", json!({ "text": format!("m{i}") }))
                    .await
                    .unwrap();
            }
            let secs = t.elapsed().as_secs_f64();
            println!(
                "{label}: {CALLS} sequential calls in {secs:.3} s = {:.0} calls/s",
                CALLS as f64 / secs
            );
            sb.shutdown().await;
        });
    }
}
