//! The HTTP transports against real servers on loopback: the reference TypeScript
//! `server-everything` in `streamableHttp` and `sse` modes, and the Python SDK's FastMCP server
//! in streamable-http mode. Gated on `SWITCHBOARD_PEERS=1` (scripts/test.sh sets it after
//! scripts/install-peers.sh); every server runs in its own process group, killed on drop.

use crate::peers::everything_tools;
use crate::support::repo_root;
use serde_json::json;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use switchboard::core::config::{ServerConfig, ServerSpec, TransportKind};
use switchboard::{Builder, Error, ServerStatus};

/// Real peers: only with `SWITCHBOARD_PEERS=1`; then a missing peer is a failure.
pub fn peers_enabled(test: &str) -> bool {
    if std::env::var("SWITCHBOARD_PEERS").as_deref() == Ok("1") {
        return true;
    }
    eprintln!("{test}: skipped (set SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh)");
    false
}

/// A port that was free a moment ago (bind 127.0.0.1:0, read it, release it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// A server process in its own group; dropping it SIGKILLs the group and reaps it.
pub struct PeerProcess {
    child: Child,
    pub port: u16,
}

impl PeerProcess {
    pub fn spawn(mut cmd: Command, port: u16) -> PeerProcess {
        use std::os::unix::process::CommandExt;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start the peer server");
        let peer = PeerProcess { child, port };
        // Ready when the port accepts connections (bounded).
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the peer server did not listen on port {port} within 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        peer
    }

    /// `@modelcontextprotocol/server-everything` in `mode` (`streamableHttp` or `sse`).
    pub fn everything(mode: &str) -> PeerProcess {
        let port = free_port();
        let script = repo_root()
            .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        let mut cmd = Command::new("node");
        cmd.arg(script).arg(mode).env("PORT", port.to_string());
        PeerProcess::spawn(cmd, port)
    }

    /// One of the TypeScript SDK's example servers
    /// (`@modelcontextprotocol/sdk/dist/esm/examples/server/<name>.js`) over HTTP, on `PORT`.
    pub fn sdk_example(name: &str) -> PeerProcess {
        let port = free_port();
        let mut cmd = Command::new("node");
        cmd.arg(sdk_example_path(name))
            .env("PORT", port.to_string());
        PeerProcess::spawn(cmd, port)
    }

    /// The TypeScript SDK's `simpleStreamableHttp --oauth`: the MCP server on `port` (path
    /// /mcp, `http://localhost:PORT/mcp` is its resource) and its demo authorization server
    /// on the second port returned.
    pub fn sdk_oauth_example() -> (PeerProcess, u16) {
        let (port, auth_port) = (free_port(), free_port());
        let mut cmd = Command::new("node");
        cmd.arg(sdk_example_path("simpleStreamableHttp"))
            .arg("--oauth")
            .env("MCP_PORT", port.to_string())
            .env("MCP_AUTH_PORT", auth_port.to_string());
        let peer = PeerProcess::spawn(cmd, port);
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", auth_port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the authorization server did not listen on port {auth_port} within 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        (peer, auth_port)
    }

    /// tests/peers/fastmcp_server.py over streamable HTTP (path /mcp).
    pub fn fastmcp() -> PeerProcess {
        let port = free_port();
        let peers = repo_root().join("tests/peers");
        let mut cmd = Command::new(peers.join(".venv/bin/python"));
        cmd.arg(peers.join("fastmcp_server.py"))
            .args(["--transport", "streamable-http", "--port"])
            .arg(port.to_string());
        PeerProcess::spawn(cmd, port)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        let pgid = self.child.id() as i32;
        // SAFETY: kill(2) on our own child's process group.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// The path of one of the TypeScript SDK's example servers.
pub fn sdk_example_path(name: &str) -> std::path::PathBuf {
    repo_root().join(format!(
        "tests/peers/node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server/{name}.js"
    ))
}

fn sse_spec(name: &str, url: String) -> ServerSpec {
    let mut config = ServerConfig::http(url);
    config.kind = Some(TransportKind::Sse.as_str().to_string());
    ServerSpec::new(name, config)
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn streamable_http_against_server_everything_lists_calls_and_cancels() {
    if !peers_enabled("streamable_http_against_server_everything") {
        return;
    }
    let peer = PeerProcess::everything("streamableHttp");
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![ServerSpec::new(
            "ev",
            ServerConfig::http(peer.url("/mcp")),
        )])
        .no_cache()
        .start()
        .await
        .unwrap();
        assert_eq!(report.connected, vec!["ev"], "{report:?}");
        let names: Vec<String> = sb
            .tools()
            .iter()
            .map(|t| t.qualified_name.clone())
            .collect();
        assert_eq!(
            names,
            everything_tools("ev"),
            "the same tools as over stdio"
        );
        let r = sb
            .call("mcp_ev_echo", json!({"message": "hello over http"}))
            .await
            .unwrap();
        assert!(r.render_text().contains("hello over http"), "{r:?}");

        // A long call that times out is cancelled; the connection keeps working.
        let started = Instant::now();
        let slow = sb
            .call_with_timeout(
                "mcp_ev_trigger_long_running_operation",
                json!({"duration": 30, "steps": 30}),
                Some(Duration::from_millis(700)),
            )
            .await;
        assert!(matches!(slow, Err(Error::Call(_))), "{slow:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let r = sb
            .call("mcp_ev_echo", json!({"message": "still here"}))
            .await
            .unwrap();
        assert!(r.render_text().contains("still here"), "{r:?}");
        assert_eq!(sb.status("ev"), ServerStatus::Connected);
        sb.shutdown().await;
    });
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn legacy_sse_against_server_everything_lists_and_calls() {
    if !peers_enabled("legacy_sse_against_server_everything") {
        return;
    }
    let peer = PeerProcess::everything("sse");
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![sse_spec("old", peer.url("/sse"))])
            .no_cache()
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["old"], "{report:?}");
        let names: Vec<String> = sb
            .tools()
            .iter()
            .map(|t| t.qualified_name.clone())
            .collect();
        assert_eq!(
            names,
            everything_tools("old"),
            "the same tools as over stdio"
        );
        let r = sb
            .call("mcp_old_echo", json!({"message": "hello over sse"}))
            .await
            .unwrap();
        assert!(r.render_text().contains("hello over sse"), "{r:?}");
        // Concurrent calls all come back on the one stream.
        let calls: Vec<_> = (0..8)
            .map(|i| {
                let sb = sb.clone();
                smol::spawn(async move {
                    sb.call("mcp_old_echo", json!({"message": format!("m{i}")}))
                        .await
                        .unwrap()
                        .render_text()
                })
            })
            .collect();
        for (i, call) in calls.into_iter().enumerate() {
            let text = call.await;
            assert!(text.contains(&format!("m{i}")), "{text}");
        }

        // Cancel a long-running call by dropping its future. The TypeScript SDK sends no
        // response to a request it was told is cancelled; without the cancellation, the
        // answer would come back for a call the client forgot, and the core would report
        // it ("ignored a response to an unknown or already answered request id").
        let events = sb.events();
        let op = json!({"duration": 2, "steps": 2});
        let mut first = Box::pin(sb.call("mcp_old_trigger_long_running_operation", op.clone()));
        assert!(futures_lite::future::poll_once(&mut first).await.is_none());
        // The request is out once a later call came back.
        let r = sb
            .call("mcp_old_echo", json!({"message": "behind it"}))
            .await
            .unwrap();
        assert!(r.render_text().contains("behind it"), "{r:?}");
        drop(first);
        // The same operation started after it ends after it: by then the first one's
        // answer, had it been sent, would have arrived (one SSE stream, in order).
        let r = sb
            .call("mcp_old_trigger_long_running_operation", op)
            .await
            .unwrap();
        assert!(r.render_text().contains("completed"), "{r:?}");
        // One more round trip, so every event of the turns before it has been published.
        sb.call("mcp_old_echo", json!({"message": "flush"}))
            .await
            .unwrap();
        while let Ok(e) = events.try_recv() {
            assert!(
                !matches!(&e, Ok(switchboard::Event::Diagnostic { message, .. })
                    if message.contains("unknown or already answered")),
                "the cancelled call was answered anyway: {e:?}"
            );
        }
        assert_eq!(sb.status("old"), ServerStatus::Connected);
        sb.shutdown().await;
    });
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn streamable_http_against_fastmcp_calls_and_cancels() {
    if !peers_enabled("streamable_http_against_fastmcp") {
        return;
    }
    let peer = PeerProcess::fastmcp();
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![ServerSpec::new(
            "py",
            ServerConfig::http(peer.url("/mcp")),
        )])
        .no_cache()
        .start()
        .await
        .unwrap();
        assert_eq!(report.connected, vec!["py"], "{report:?}");
        let mut names: Vec<String> = sb
            .tools()
            .iter()
            .map(|t| t.qualified_name.clone())
            .collect();
        names.sort();
        assert_eq!(names, ["mcp_py_add", "mcp_py_echo", "mcp_py_slow"]);
        let r = sb
            .call("mcp_py_add", json!({"a": 2, "b": 40}))
            .await
            .unwrap();
        assert!(r.render_text().starts_with("42"), "{r:?}");
        let slow = sb
            .call_with_timeout(
                "mcp_py_slow",
                json!({"ms": 20000}),
                Some(Duration::from_millis(500)),
            )
            .await;
        assert!(matches!(slow, Err(Error::Call(_))), "{slow:?}");
        let r = sb
            .call("mcp_py_echo", json!({"text": "after"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "after");
        sb.shutdown().await;
    });
}
