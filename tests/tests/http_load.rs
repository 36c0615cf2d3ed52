//! The HTTP transport under load: thousands of concurrent calls share a bounded number of
//! connections (they queue for one instead of opening a socket each), and every call
//! succeeds. The bound is asserted by the stable quantity — connections the server accepted —
//! never by timing.

use crate::http_edge::{empty, json_reply, mcp_answer, EdgeServer, Req};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::{Builder, HttpOptions};

/// A stateless Streamable HTTP server: every POST answered with JSON, GET refused (405).
fn stateless_server() -> EdgeServer {
    EdgeServer::start(Arc::new(|req: &Req| {
        if req.method != "POST" {
            return empty(405);
        }
        match mcp_answer(&req.json()) {
            Some(answer) => json_reply(200, vec![], &answer),
            None => empty(202),
        }
    }))
}

#[test]
fn two_thousand_concurrent_calls_share_a_bounded_set_of_connections() {
    const CALLS: usize = 2000;
    const BUSY: usize = 16;
    let server = stateless_server();
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![ServerSpec::new(
            "load",
            ServerConfig::http(server.url()),
        )])
        .no_cache()
        .http_options(HttpOptions {
            max_busy_connections: BUSY,
            ..HttpOptions::default()
        })
        .start()
        .await
        .unwrap();
        assert_eq!(report.connected, vec!["load"], "{report:?}");
        let sb = Arc::new(sb);
        let calls: Vec<_> = (0..CALLS)
            .map(|i| {
                let sb = sb.clone();
                smol::spawn(async move {
                    sb.call("mcp_load_echo", json!({ "text": format!("call {i}") }))
                        .await
                        .map(|r| r.render_text())
                })
            })
            .collect();
        let mut ok = 0;
        for (i, call) in calls.into_iter().enumerate() {
            assert_eq!(call.await, Ok(format!("call {i}")));
            ok += 1;
        }
        assert_eq!(ok, CALLS);
        // Busy connections never exceed the bound; idle ones are reused, not reopened.
        let accepted = server.accepted.load(Ordering::SeqCst);
        assert!(
            accepted <= BUSY,
            "{accepted} connections for {CALLS} calls, bound {BUSY}"
        );
        Arc::try_unwrap(sb).ok().unwrap().shutdown().await;
    });
}
