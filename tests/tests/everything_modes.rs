//! The whole client surface against the reference server, `server-everything`, over each of
//! its three transports (stdio, Streamable HTTP, legacy SSE), through the library with every
//! handler installed: all 17 tools listed, its resources, templates and prompts listed, and
//! each feature used — elicitation, sampling and roots answered by the embedder, a resource
//! read, a prompt fetched, a completion, a subscription, and a long-running tool's progress
//! reaching its caller. Gated on `SWITCHBOARD_PEERS=1`.

use crate::demo_server::peers_enabled;
use crate::http_peers::PeerProcess;
use crate::support::repo_root;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use switchboard::core::config::{ServerConfig, ServerSpec, TransportKind};
use switchboard::{
    Builder, CallOptions, PeerAnswer, PeerFuture, PeerRequest, PeerRequestKind, Root,
};

/// The 17 tools server-everything offers a client that answers elicitation, sampling and roots.
const TOOLS: [&str; 17] = [
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-roots-list",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "simulate-research-query",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-elicitation-request",
    "trigger-long-running-operation",
    "trigger-sampling-request",
    "trigger-url-elicitation",
];

fn elicit(r: PeerRequest) -> PeerFuture {
    Box::pin(async move {
        match r.kind {
            PeerRequestKind::ElicitForm { .. } => {
                let mut content = serde_json::Map::new();
                content.insert("name".into(), "Ada".into());
                PeerAnswer::Accept {
                    content: Some(content),
                }
            }
            _ => PeerAnswer::Decline,
        }
    })
}

fn sample(_r: PeerRequest) -> PeerFuture {
    Box::pin(async move {
        PeerAnswer::Result {
            result: json!({"role": "assistant", "model": "test",
                "content": {"type": "text", "text": "sampled by the embedder"}}),
        }
    })
}

fn exercise(spec: ServerSpec) {
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![spec])
            .no_cache()
            .elicitation_handler(Arc::new(elicit))
            .sampling_handler(Arc::new(sample))
            .roots(vec![Root {
                uri: "file:///project".into(),
                name: Some("project".into()),
            }])
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["everything"], "{report:?}");
        let mut tools: Vec<String> = sb.tools().iter().map(|t| t.def.name.clone()).collect();
        tools.sort();
        assert_eq!(tools, TOOLS, "the tool view");
        assert_eq!(sb.resources().len(), 7, "{:?}", sb.resources());
        assert_eq!(sb.resource_templates().len(), 2);
        assert_eq!(sb.prompts().len(), 4, "{:?}", sb.prompts());

        let text = |r: switchboard::ToolResult| r.render_text();
        let r = sb
            .call("mcp_everything_trigger_elicitation_request", json!({}))
            .await
            .unwrap();
        assert!(text(r.clone()).contains("Ada"), "{}", text(r));
        let r = sb
            .call(
                "mcp_everything_trigger_sampling_request",
                json!({"prompt": "p", "maxTokens": 5}),
            )
            .await
            .unwrap();
        assert!(
            text(r.clone()).contains("sampled by the embedder"),
            "{}",
            text(r)
        );
        let r = sb
            .call("mcp_everything_get_roots_list", json!({}))
            .await
            .unwrap();
        assert!(text(r.clone()).contains("file:///project"), "{}", text(r));

        // A long-running operation reports progress to the call that asked for it.
        let mut call = sb.call_with(
            "mcp_everything_trigger_long_running_operation",
            json!({"duration": 1, "steps": 4}),
            CallOptions {
                progress: true,
                ..Default::default()
            },
        );
        let progress = call.progress().cloned().expect("progress was asked for");
        let result = (&mut call).await.unwrap();
        assert!(!result.is_error, "{result:?}");
        let mut updates = 0;
        while progress.try_recv().is_ok() {
            updates += 1;
        }
        assert!(updates >= 1, "no progress reached the caller");

        let uri = sb.resources()[0].def.uri.clone();
        let read = sb.read_resource(&uri, None).await.unwrap();
        assert!(format!("{read:?}").contains(&uri), "{read:?}");
        let mut args = BTreeMap::new();
        args.insert("city".to_string(), "Lisbon".to_string());
        let prompt = sb
            .get_prompt("mcp_everything_args_prompt", args)
            .await
            .unwrap();
        assert!(format!("{prompt:?}").contains("Lisbon"), "{prompt:?}");
        sb.subscribe(&uri, None).await.unwrap();
        sb.unsubscribe(&uri, None).await.unwrap();
        sb.shutdown().await;
        assert!(sb.live_processes().is_empty());
    });
}

#[test]
fn the_whole_surface_over_stdio() {
    if !peers_enabled("the_whole_surface_over_stdio") {
        return;
    }
    let entry = repo_root()
        .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    exercise(ServerSpec::new(
        "everything",
        ServerConfig::stdio("node", &[&entry.to_string_lossy(), "stdio"]),
    ));
}

#[test]
fn the_whole_surface_over_streamable_http() {
    if !peers_enabled("the_whole_surface_over_streamable_http") {
        return;
    }
    let peer = PeerProcess::everything("streamableHttp");
    exercise(ServerSpec::new(
        "everything",
        ServerConfig::http(peer.url("/mcp")),
    ));
}

#[test]
fn the_whole_surface_over_legacy_sse() {
    if !peers_enabled("the_whole_surface_over_legacy_sse") {
        return;
    }
    let peer = PeerProcess::everything("sse");
    let mut config = ServerConfig::http(peer.url("/sse"));
    config.kind = Some(TransportKind::Sse.as_str().to_string());
    exercise(ServerSpec::new("everything", config));
}
