//! Resumable SSE streams over Streamable HTTP, against the hand-rolled server of `http_edge`
//! with handlers that close a stream mid-way: the GET stream exists before the first request,
//! a POST stream that ends before its response is resumed on a GET with `Last-Event-ID` after
//! the server's `retry` delay, a broken GET stream is resumed the same way, resumption gives
//! up after `max_resume_attempts`, and the outgoing frame queue has a limit.

use crate::http_edge::{empty, json_reply, mcp_answer, EdgeServer, Reply, Req};
use async_channel::Sender;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::HttpOptions;
use switchboard::{Builder, CallError, Error, Event, ServerErrorKind, ServerStatus};

fn spec(name: &str, url: String) -> ServerSpec {
    ServerSpec::new(name, ServerConfig::http(url))
}

fn stream(pieces: Vec<String>, hang: bool) -> Reply {
    Reply::Stream {
        headers: vec![],
        pieces: pieces.into_iter().map(String::into_bytes).collect(),
        hang,
    }
}

/// What the resuming server keeps.
#[derive(Default)]
struct Resuming {
    /// GET requests seen so far.
    gets: usize,
    /// The answer of the `tools/call` whose stream was closed, for the GET that resumes it.
    pending: Option<Value>,
    /// How often the GET stream is closed after its priming event, before it stays open.
    get_closes: usize,
    /// Sent on the GET stream that resumes the listening one.
    on_resumed_get: Option<Value>,
    /// Every resumed POST stream only sends a new id and closes again (never the answer).
    never_answer: bool,
    /// Held-open streams, so they can be written to later.
    held: Vec<Sender<Vec<u8>>>,
}

/// A server in the style of the 2025-11-25 resumability rules: every SSE stream starts with a
/// priming event (an id and empty data) and a `retry`; `tools/call` answers on an SSE stream
/// that it closes before the response, which is delivered on the GET that resumes it
/// (`Last-Event-ID: p-<n>`). The listening GET (no `Last-Event-ID`) is held open; it gets
/// the pending answer if there is one, as such servers do.
fn resuming_server(state: Arc<Mutex<Resuming>>, retry_ms: u64) -> EdgeServer {
    EdgeServer::start(Arc::new(move |req: &Req| {
        let mut st = state.lock().unwrap();
        let sid = vec![("mcp-session-id".to_string(), "s1".to_string())];
        match req.method.as_str() {
            "GET" => {
                st.gets += 1;
                let n = st.gets;
                let prime = format!("id: g-{n}\nretry: {retry_ms}\ndata: \n\n");
                match req.header("last-event-id") {
                    Some(id) if id.starts_with("p-") => {
                        if st.never_answer {
                            return stream(vec![format!("id: p-r{n}\ndata: \n\n")], false);
                        }
                        let answer = st.pending.take().unwrap_or(Value::Null);
                        return stream(vec![prime, format!("id: p-a\ndata: {answer}\n\n")], false);
                    }
                    Some(_) => {
                        // The listening GET, resumed.
                        let mut pieces = vec![prime];
                        if let Some(note) = st.on_resumed_get.take() {
                            pieces.push(format!("id: g-{n}b\ndata: {note}\n\n"));
                        }
                        return stream(pieces, true);
                    }
                    None => {}
                }
                if st.get_closes > 0 {
                    st.get_closes -= 1;
                    return stream(vec![prime], false);
                }
                let mut pieces = vec![prime];
                if let Some(answer) = st.pending.take() {
                    pieces.push(format!("data: {answer}\n\n"));
                }
                let (tx, rx) = async_channel::unbounded();
                for p in pieces {
                    let _ = tx.try_send(p.into_bytes());
                }
                st.held.push(tx);
                return Reply::Channel { headers: sid, rx };
            }
            "DELETE" => return empty(200),
            _ => {}
        }
        let msg = req.json();
        let Some(answer) = mcp_answer(&msg) else {
            return empty(202);
        };
        if msg["method"] == "tools/call" {
            st.pending = Some(answer);
            let id = format!("p-{}", msg["id"]);
            return stream(
                vec![format!("id: {id}\nretry: {retry_ms}\ndata: \n\n")],
                false,
            );
        }
        json_reply(200, sid, &answer)
    }))
}

#[test]
fn the_get_stream_is_open_before_the_first_request_and_a_closed_call_stream_is_resumed() {
    let state = Arc::new(Mutex::new(Resuming::default()));
    let server = resuming_server(state.clone(), 300);
    smol::block_on(async {
        let (sb, _) = Builder::servers(vec![spec("edge", server.url())])
            .no_cache()
            .start()
            .await
            .unwrap();
        let r = sb
            .call("mcp_edge_echo", json!({"text": "resumed"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "resumed");
        let reqs = server.requests();
        let order: Vec<(String, String)> = server.summary();
        // The listening GET reached the server before tools/list: a message the server sends
        // about any request has a stream to come on.
        let get = order.iter().position(|(m, _)| m == "GET").unwrap();
        let list = order.iter().position(|(_, r)| r == "tools/list").unwrap();
        assert!(get < list, "{order:?}");
        // The call's stream closed after its priming event; the answer came on the GET that
        // resumed it, with that stream's last id, after the server's retry delay.
        let call = reqs
            .iter()
            .find(|r| r.rpc_method().as_deref() == Some("tools/call"))
            .unwrap();
        let call_id = call.json()["id"].clone();
        let resume = reqs
            .iter()
            .find(|r| r.method == "GET" && r.header("last-event-id").is_some())
            .expect("a GET with Last-Event-ID");
        assert_eq!(
            resume.header("last-event-id"),
            Some(format!("p-{call_id}").as_str())
        );
        assert_eq!(resume.header("mcp-session-id"), Some("s1"));
        let waited = resume.at - call.at;
        assert!(
            waited >= Duration::from_millis(300),
            "honoured retry: 300, waited {waited:?}"
        );
        sb.shutdown().await;
    });
}

#[test]
fn a_get_stream_closed_by_the_server_is_resumed_with_its_last_event_id() {
    let state = Arc::new(Mutex::new(Resuming {
        get_closes: 1,
        on_resumed_get: Some(json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "after the resume"}})),
        ..Default::default()
    }));
    let server = resuming_server(state.clone(), 200);
    smol::block_on(async {
        let (sb, _) = Builder::servers(vec![spec("edge", server.url())])
            .no_cache()
            .start()
            .await
            .unwrap();
        let events = sb.events();
        let log = async {
            loop {
                if let Ok(Event::ServerLog { server, data, .. }) = events.recv().await {
                    if server == "edge" && data == json!("after the resume") {
                        return;
                    }
                }
            }
        };
        let deadline = async {
            async_io::Timer::after(Duration::from_secs(10)).await;
            panic!("no log from the resumed GET stream: {:?}", server.summary());
        };
        futures_lite::future::or(log, deadline).await;
        let gets: Vec<Req> = server
            .requests()
            .into_iter()
            .filter(|r| r.method == "GET")
            .collect();
        assert_eq!(gets.len(), 2, "{:?}", server.summary());
        assert_eq!(gets[0].header("last-event-id"), None);
        assert_eq!(gets[1].header("last-event-id"), Some("g-1"));
        assert!(gets[1].at - gets[0].at >= Duration::from_millis(200));
        assert_eq!(sb.status("edge"), ServerStatus::Connected);
        sb.shutdown().await;
    });
}

#[test]
fn resuming_a_call_stream_gives_up_after_max_resume_attempts_and_fails_that_call_only() {
    let state = Arc::new(Mutex::new(Resuming {
        never_answer: true,
        ..Default::default()
    }));
    let server = resuming_server(state.clone(), 10);
    smol::block_on(async {
        let (sb, _) = Builder::servers(vec![spec("edge", server.url())])
            .no_cache()
            .http_options(HttpOptions {
                max_resume_attempts: 3,
                ..HttpOptions::default()
            })
            .start()
            .await
            .unwrap();
        let r = sb.call("mcp_edge_echo", json!({"text": "lost"})).await;
        assert!(
            matches!(&r, Err(Error::Call(CallError::Transport(e)))
                if e.kind == ServerErrorKind::RequestFailed
                    && e.message.contains("gave up resuming it after 3 attempts")),
            "{r:?}"
        );
        let resumes: Vec<String> = server
            .requests()
            .iter()
            .filter_map(|r| r.header("last-event-id").map(str::to_string))
            .collect();
        // Each resume sends the id the previous stream ended with.
        assert_eq!(resumes.len(), 3, "{resumes:?}");
        assert!(resumes[0].starts_with("p-"), "{resumes:?}");
        assert!(resumes[1].starts_with("p-r"), "{resumes:?}");
        assert_ne!(resumes[1], resumes[2]);
        assert_eq!(sb.status("edge"), ServerStatus::Connected);
        sb.shutdown().await;
    });
}

#[test]
fn a_frame_larger_than_the_write_queue_fails_that_server_with_the_limit() {
    let state = Arc::new(Mutex::new(Resuming::default()));
    let server = resuming_server(state.clone(), 10);
    let other = resuming_server(Arc::new(Mutex::new(Resuming::default())), 10);
    smol::block_on(async {
        let (sb, _) =
            Builder::servers(vec![spec("edge", server.url()), spec("other", other.url())])
                .no_cache()
                .http_options(HttpOptions {
                    max_write_queue: 4096,
                    ..HttpOptions::default()
                })
                .start()
                .await
                .unwrap();
        let r = sb
            .call("mcp_edge_echo", json!({"text": "x".repeat(8192)}))
            .await;
        assert!(
            matches!(&r, Err(Error::Call(CallError::Transport(e)))
                if e.message.contains("not taking frames") && e.message.contains("4 KiB")),
            "{r:?}"
        );
        let r = sb
            .call("mcp_other_echo", json!({"text": "still here"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "still here");
        sb.shutdown().await;
    });
}
