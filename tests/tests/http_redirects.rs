//! Redirects on the HTTP transports: followed while they stay on the server's origin (the
//! common `/mcp` → `/mcp/`), with the method, body and headers kept; refused, with the
//! `Location` named, when they lead to another origin or go on too long — and then nothing is
//! sent to the other origin.

use crate::http_edge::{empty, json_reply, mcp_answer, EdgeServer, Reply, Req};
use std::collections::BTreeMap;
use std::sync::Arc;
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::Builder;

fn redirect(status: u16, location: &str) -> Reply {
    Reply::Full {
        status,
        headers: vec![("location".into(), location.into())],
        body: b"moved".to_vec(),
    }
}

/// A stateless server at `/mcp/`; `/mcp` answers every method with `status` to `/mcp/`.
fn trailing_slash_server(status: u16) -> EdgeServer {
    EdgeServer::start(Arc::new(move |req: &Req| {
        if req.path == "/mcp" {
            return redirect(status, "/mcp/");
        }
        if req.method != "POST" {
            return empty(405);
        }
        match mcp_answer(&req.json()) {
            Some(answer) => json_reply(200, vec![], &answer),
            None => empty(202),
        }
    }))
}

fn spec_with_key(url: String) -> ServerSpec {
    let mut spec = ServerSpec::new("moved", ServerConfig::http(url));
    spec.config.headers = BTreeMap::from([("X-Api-Key".to_string(), "k1".to_string())]);
    spec
}

#[test]
fn a_same_origin_redirect_is_followed_with_method_body_and_headers() {
    for status in [307, 308, 301, 302] {
        let server = trailing_slash_server(status);
        smol::block_on(async {
            let (sb, report) = Builder::servers(vec![spec_with_key(server.url())])
                .no_cache()
                .start()
                .await
                .unwrap();
            assert_eq!(report.connected, vec!["moved"], "{status}: {report:?}");
            let out = sb
                .call("mcp_moved_echo", serde_json::json!({"text": "hi"}))
                .await
                .map(|r| r.render_text());
            assert_eq!(out, Ok("hi".to_string()), "{status}");
            sb.shutdown().await;
        });
        let reqs = server.requests();
        let redirected: Vec<&Req> = reqs.iter().filter(|r| r.path == "/mcp").collect();
        let served: Vec<&Req> = reqs.iter().filter(|r| r.path == "/mcp/").collect();
        // Every request went to /mcp first, then again, the same, to /mcp/.
        assert_eq!(
            redirected.len(),
            served.len(),
            "{status}: {:?}",
            server.summary()
        );
        for (a, b) in redirected.iter().zip(&served) {
            assert_eq!((&a.method, &a.body), (&b.method, &b.body), "{status}");
            assert_eq!(b.header("x-api-key"), Some("k1"), "{status}");
        }
        assert!(
            served
                .iter()
                .any(|r| r.rpc_method().as_deref() == Some("tools/call")),
            "{status}: {:?}",
            server.summary()
        );
    }
}

#[test]
fn a_redirect_to_another_origin_is_refused_naming_the_location() {
    let elsewhere = trailing_slash_server(307);
    let target = format!("http://127.0.0.1:{}/mcp/", elsewhere.port);
    let location = target.clone();
    let server = EdgeServer::start(Arc::new(move |_req: &Req| redirect(302, &location)));
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![spec_with_key(server.url())])
            .no_cache()
            .start()
            .await
            .unwrap();
        let err = report
            .errors
            .get("moved")
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains(&target) && err.contains("another origin"),
            "{err}"
        );
        sb.shutdown().await;
    });
    // Nothing — no header, no message — reached the other origin.
    assert!(elsewhere.requests().is_empty(), "{:?}", elsewhere.summary());
}

#[test]
fn a_redirect_loop_stops_after_five_hops_naming_the_location() {
    let server = EdgeServer::start(Arc::new(|req: &Req| {
        let n: usize = req.path.trim_start_matches("/mcp").parse().unwrap_or(0);
        redirect(307, &format!("/mcp{}", n + 1))
    }));
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![spec_with_key(server.url())])
            .no_cache()
            .start()
            .await
            .unwrap();
        let err = report
            .errors
            .get("moved")
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("more than 5 redirects") && err.contains("/mcp6"),
            "{err}"
        );
        sb.shutdown().await;
    });
    // Each message went out at most six times: the first request and five redirected ones.
    let mut per_message: BTreeMap<String, usize> = BTreeMap::new();
    for r in server.requests() {
        *per_message
            .entry(format!("{} {:?}", r.method, r.rpc_method()))
            .or_default() += 1;
    }
    assert!(!per_message.is_empty());
    assert!(per_message.values().all(|&n| n == 6), "{per_message:?}");
}
