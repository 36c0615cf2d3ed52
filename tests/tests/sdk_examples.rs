//! The TypeScript SDK's own example servers that need a client's features, through the
//! library: `elicitationFormExample` (a form elicitation over Streamable HTTP),
//! `toolWithSampleServer` (sampling over stdio) and `simpleTaskInteractive` (tools that
//! require tasks, which ask for an elicitation and a sampling while they run). Gated on
//! `SWITCHBOARD_PEERS=1`.

use crate::demo_server::peers_enabled;
use crate::http_peers::{sdk_example_path, PeerProcess};
use serde_json::json;
use std::sync::Arc;
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::{Builder, PeerAnswer, PeerFuture, PeerRequest, PeerRequestKind, Switchboard};

/// Accepts every form with `content`; declines anything else.
fn accept_with(content: serde_json::Value) -> impl Fn(PeerRequest) -> PeerFuture {
    move |r: PeerRequest| -> PeerFuture {
        let content = content.as_object().cloned();
        Box::pin(async move {
            match r.kind {
                PeerRequestKind::ElicitForm { .. } => PeerAnswer::Accept { content },
                _ => PeerAnswer::Decline,
            }
        })
    }
}

fn sample(_r: PeerRequest) -> PeerFuture {
    Box::pin(async move {
        PeerAnswer::Result {
            result: json!({"role": "assistant", "model": "test",
                "content": {"type": "text", "text": "words from the embedder"}}),
        }
    })
}

async fn start(spec: ServerSpec, form: serde_json::Value) -> Switchboard {
    let (sb, report) = Builder::servers(vec![spec])
        .no_cache()
        .elicitation_handler(Arc::new(accept_with(form)))
        .sampling_handler(Arc::new(sample))
        .start()
        .await
        .unwrap();
    assert_eq!(report.connected.len(), 1, "{report:?}");
    sb
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn elicitation_form_example_registers_a_user_from_the_embedders_form() {
    if !peers_enabled("elicitation_form_example") {
        return;
    }
    let peer = PeerProcess::sdk_example("elicitationFormExample");
    smol::block_on(async {
        let spec = ServerSpec::new("forms", ServerConfig::http(peer.url("/mcp")));
        let form = json!({"username": "ada", "email": "ada@example.com",
            "password": "correct horse", "newsletter": true});
        let sb = start(spec, form).await;
        let r = sb.call("mcp_forms_register_user", json!({})).await.unwrap();
        let text = r.render_text();
        assert!(
            text.contains("Registration successful") && text.contains("ada"),
            "{text}"
        );
        sb.shutdown().await;
    });
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn tool_with_sample_server_summarizes_through_the_embedders_sampling() {
    if !peers_enabled("tool_with_sample_server") {
        return;
    }
    let script = sdk_example_path("toolWithSampleServer");
    smol::block_on(async {
        let spec = ServerSpec::new(
            "sampler",
            ServerConfig::stdio("node", &[&script.to_string_lossy()]),
        );
        let sb = start(spec, json!({})).await;
        let r = sb
            .call("mcp_sampler_summarize", json!({"text": "a long text"}))
            .await
            .unwrap();
        assert!(
            r.render_text().contains("words from the embedder"),
            "{}",
            r.render_text()
        );
        sb.shutdown().await;
        assert!(sb.live_processes().is_empty());
    });
}

#[test]
#[cfg_attr(
    not(peers),
    ignore = "needs the real peers: SWITCHBOARD_PEERS=1 after ./scripts/install-peers.sh"
)]
fn simple_task_interactive_runs_tools_as_tasks_that_ask_the_embedder() {
    if !peers_enabled("simple_task_interactive") {
        return;
    }
    let peer = PeerProcess::sdk_example("simpleTaskInteractive");
    smol::block_on(async {
        let spec = ServerSpec::new("tasks", ServerConfig::http(peer.url("/mcp")));
        let sb = start(spec, json!({"confirm": true})).await;
        let r = sb
            .call("mcp_tasks_confirm_delete", json!({"filename": "notes.txt"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "Deleted 'notes.txt'", "{r:?}");
        let r = sb
            .call("mcp_tasks_write_haiku", json!({"topic": "rust"}))
            .await
            .unwrap();
        assert!(r.render_text().contains("words from the embedder"), "{r:?}");
        sb.shutdown().await;
    });
}
