//! A server of the stateless revision behind plain HTTP status codes: its `400` to an
//! `initialize` it does not speak carries the JSON-RPC error in the body, and that is read as
//! the server's answer (naming the versions it speaks) instead of a reason to fall back to
//! the legacy SSE transport.

use crate::http_edge::{empty, EdgeServer, Reply, Req};
use serde_json::json;
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::Builder;

#[test]
fn a_400_whose_body_refuses_the_version_is_an_answer_not_a_fallback() {
    let server = EdgeServer::start(std::sync::Arc::new(|req: &Req| {
        let msg = req.json();
        let id = msg.get("id").cloned().unwrap_or(json!(null));
        match (req.method.as_str(), req.rpc_method().as_deref()) {
            // The probe goes unanswered by anything readable (an older proxy in front), so the
            // client falls back to `initialize`, which the server refuses in its body.
            ("POST", Some("server/discover")) => Reply::Full {
                status: 400,
                headers: vec![],
                body: b"Bad Request".to_vec(),
            },
            ("POST", Some("initialize")) => Reply::Full {
                status: 400,
                headers: vec![("content-type".into(), "application/json".into())],
                body: serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": -32022, "message": "Unsupported protocol version",
                    "data": {"supported": ["2030-01-01"], "requested": "2025-11-25"}}}))
                .unwrap(),
            },
            _ => empty(405),
        }
    }));
    smol::block_on(async {
        let spec = ServerSpec::new("next", ServerConfig::http(server.url()));
        let (sb, report) = Builder::servers(vec![spec])
            .no_cache()
            .start()
            .await
            .unwrap();
        let error = report.errors.get("next").expect("the server fails");
        assert!(
            error.message.contains("-32022"),
            "the refusal is read from the body: {error:?}"
        );
        sb.shutdown().await;
    });
    // No GET: the transport never took the 400 for the legacy transport's sign.
    assert!(
        server.summary().iter().all(|(m, _)| m != "GET"),
        "{:?}",
        server.summary()
    );
}
