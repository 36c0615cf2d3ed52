//! The library's queues are bounded by construction: a subscriber that does not read misses
//! events (and is told how many), a server that does not read its stdin fails instead of
//! queueing without end, and a call's progress reaches its handle. Each bound is checked
//! with a stable quantity (counts, queued bytes), never with timing.

use crate::support::demo_server_bin;
use bytes::Bytes;
use serde_json::json;
use switchboard::__test::stdio::{ProcessRegistry, StdioCommand, StdioOptions, StdioTransport};
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::{Builder, CallOptions, Event, QueueOptions, RecvError};

fn demo(name: &str, args: &[&str]) -> ServerSpec {
    let bin = demo_server_bin();
    let mut all = vec!["--name", name];
    all.extend_from_slice(args);
    ServerSpec::new(name, ServerConfig::stdio(bin.to_string_lossy(), &all))
}

/// Everything queued for a subscriber, without waiting: (events, missed).
fn drain(events: &switchboard::Events) -> (Vec<Event>, u64) {
    let (mut got, mut missed) = (Vec::new(), 0);
    while let Ok(item) = events.try_recv() {
        match item {
            Ok(e) => got.push(e),
            Err(RecvError::Lagged { missed: n }) => missed += n,
            Err(e) => panic!("{e}"),
        }
    }
    (got, missed)
}

#[test]
fn a_subscriber_that_does_not_read_misses_events_and_is_told_how_many() {
    smol::block_on(async {
        let (sb, _) = Builder::servers(vec![demo("d", &[])])
            .no_cache()
            .queue_options(QueueOptions {
                events: 4,
                ..QueueOptions::default()
            })
            .start()
            .await
            .unwrap();
        let slow = sb.events();
        let all = sb.events();
        let mut seen = 0;
        for i in 0..20 {
            sb.call("mcp_d_echo", json!({ "text": format!("{i}") }))
                .await
                .unwrap();
            // `all` keeps up; `slow` is never read until the end.
            seen += drain(&all).0.len();
        }
        assert!(slow.len() <= 4, "the queue holds at most its bound");
        let (got, missed) = drain(&slow);
        assert!(missed > 0, "20 calls are more than 4 events");
        assert_eq!(
            got.len() as u64 + missed,
            seen as u64,
            "every event is accounted for"
        );
        sb.shutdown().await;
    });
}

#[test]
fn a_server_that_does_not_read_its_stdin_fails_past_the_write_limit() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        let opts = StdioOptions {
            max_write_queue: 256 * 1024,
            ..StdioOptions::default()
        };
        let (tx, _rx) = smol::channel::unbounded();
        // Never reads stdin: the pipe fills, then the queue.
        let cmd = StdioCommand::new("sh", ["-c", "exec sleep 1000"]);
        let t = StdioTransport::spawn("deaf", cmd, &opts, &registry, (), tx).unwrap();
        let frame = Bytes::from(vec![b'x'; 10 * 1024]);
        let mut error = None;
        for _ in 0..1000 {
            if let Err(e) = t.send(frame.clone()) {
                error = Some(e);
                break;
            }
            assert!(t.queued_bytes() <= opts.max_write_queue);
        }
        let error = error.expect("the queue is bounded");
        assert!(error.contains("is not reading its stdin"), "{error}");
        assert!(t.queued_bytes() <= opts.max_write_queue);
        t.close().await;
        assert!(registry.is_empty());
    });
}

#[test]
fn a_call_with_progress_hands_its_progress_to_its_handle() {
    smol::block_on(async {
        let (sb, _) = Builder::servers(vec![demo("p", &["--progress-every-ms", "50"])])
            .no_cache()
            .start()
            .await
            .unwrap();
        let options = CallOptions {
            progress: true,
            ..CallOptions::default()
        };
        let call = sb.call_with("mcp_p_sleep", json!({"ms": 400}), options);
        let progress = call.progress().unwrap().clone();
        let id = call.id();
        let r = call.await.unwrap();
        assert_eq!(r.render_text(), "slept 400ms");
        let mut n = 0;
        while progress.try_recv().is_ok() {
            n += 1;
        }
        assert!(n > 0, "call {id:?} got no progress");
        // Without asking, no progress channel at all.
        let plain = sb.call_with("mcp_p_sleep", json!({"ms": 1}), CallOptions::default());
        assert!(plain.progress().is_none());
        plain.await.unwrap();
        sb.shutdown().await;
    });
}
