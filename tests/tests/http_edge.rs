//! The HTTP transports against a hand-rolled HTTP/1.1 server on loopback that misbehaves on
//! purpose: session expiry, SSE split at every byte, resumption with `retry` and
//! `Last-Event-ID`, 401 with a challenge, a body that never ends, 405 to GET, a 400 that
//! triggers the legacy fallback, an oversized event, an unreachable server; DNS and TLS
//! failures named as such.

use async_channel::{Receiver, Sender};
use async_io::{Async, Timer};
use futures_lite::{future, AsyncReadExt, AsyncWriteExt};
use serde_json::{json, Value};
use smol::Task;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::core::manager::Level;
use switchboard::HttpOptions;
use switchboard::{Builder, CallError, Error, Event, ServerErrorKind, ServerStatus};

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: String,
    pub path: String,
    /// Lower-cased names.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl Req {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn rpc_method(&self) -> Option<String> {
        self.json()["method"].as_str().map(str::to_string)
    }
}

pub enum Reply {
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// `Connection: close`, no length: each piece is written (and flushed) on its own; then the
    /// connection is closed, or held open until the client closes it (`hang`).
    Stream {
        headers: Vec<(String, String)>,
        pieces: Vec<Vec<u8>>,
        hang: bool,
    },
    /// Like `Stream`, with pieces arriving on a channel until it closes.
    Channel {
        headers: Vec<(String, String)>,
        rx: Receiver<Vec<u8>>,
    },
}

pub type Handler = Arc<dyn Fn(&Req) -> Reply + Send + Sync>;

/// The server: an accept loop and one task per connection, all dropped with it.
pub struct EdgeServer {
    pub port: u16,
    pub log: Arc<Mutex<Vec<Req>>>,
    /// Held-open (`hang`) responses whose client closed the connection.
    pub hung_closed: Arc<AtomicUsize>,
    /// Connections accepted so far.
    pub accepted: Arc<AtomicUsize>,
    /// The most connections open at once so far (a connection counts until the server has
    /// read its end).
    pub open_peak: Arc<AtomicUsize>,
    _accept: Task<()>,
    _conns: Arc<Mutex<Vec<Task<()>>>>,
}

impl EdgeServer {
    pub fn start(handler: Handler) -> EdgeServer {
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).expect("bind");
        let port = listener.get_ref().local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let hung_closed = Arc::new(AtomicUsize::new(0));
        let conns: Arc<Mutex<Vec<Task<()>>>> = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(AtomicUsize::new(0));
        let open_peak = Arc::new(AtomicUsize::new(0));
        let accept = {
            let (log, hung_closed, conns) = (log.clone(), hung_closed.clone(), conns.clone());
            let (accepted, open_peak) = (accepted.clone(), open_peak.clone());
            let open = Arc::new(AtomicUsize::new(0));
            smol::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let now = open.fetch_add(1, Ordering::SeqCst) + 1;
                    open_peak.fetch_max(now, Ordering::SeqCst);
                    let _ = stream.get_ref().set_nodelay(true);
                    let served = serve(stream, handler.clone(), log.clone(), hung_closed.clone());
                    let open = open.clone();
                    let task = smol::spawn(async move {
                        served.await;
                        open.fetch_sub(1, Ordering::SeqCst);
                    });
                    let mut c = conns.lock().unwrap();
                    c.retain(|t| !t.is_finished());
                    c.push(task);
                }
            })
        };
        EdgeServer {
            port,
            log,
            hung_closed,
            accepted,
            open_peak,
            _accept: accept,
            _conns: conns,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn requests(&self) -> Vec<Req> {
        self.log.lock().unwrap().clone()
    }

    /// (HTTP method, JSON-RPC method or "-") of every request, in order.
    pub fn summary(&self) -> Vec<(String, String)> {
        self.requests()
            .iter()
            .map(|r| {
                (
                    r.method.clone(),
                    r.rpc_method().unwrap_or_else(|| "-".into()),
                )
            })
            .collect()
    }
}

async fn serve(
    mut stream: Async<TcpStream>,
    handler: Handler,
    log: Arc<Mutex<Vec<Req>>>,
    hung_closed: Arc<AtomicUsize>,
) {
    let mut buf = Vec::new();
    loop {
        // Request head.
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            // A TLS ClientHello (record type 0x16) on this plain-HTTP port: answer as plain
            // servers do, with a 400, and close.
            if buf.first() == Some(&0x16) {
                let _ = stream
                    .write_all(b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n")
                    .await;
                return;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        buf.drain(..head_end + 4);
        let mut lines = head.split("\r\n");
        let mut first = lines.next().unwrap_or("").split(' ');
        let method = first.next().unwrap_or("").to_string();
        let path = first.next().unwrap_or("").to_string();
        let headers: BTreeMap<String, String> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let len: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < len {
            let mut chunk = [0u8; 65536];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Vec<u8> = buf.drain(..len).collect();
        let req = Req {
            method,
            path,
            headers,
            body,
            at: Instant::now(),
        };
        log.lock().unwrap().push(req.clone());
        match handler(&req) {
            Reply::Full {
                status,
                headers,
                body,
            } => {
                let mut out = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n", body.len());
                for (k, v) in headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                let mut bytes = out.into_bytes();
                bytes.extend_from_slice(&body);
                if stream.write_all(&bytes).await.is_err() {
                    return;
                }
            }
            Reply::Stream {
                headers,
                pieces,
                hang,
            } => {
                if write_stream_head(&mut stream, &headers).await.is_err() {
                    return;
                }
                for p in pieces {
                    if stream.write_all(&p).await.is_err() || stream.flush().await.is_err() {
                        return;
                    }
                    // Let the client read each piece on its own.
                    Timer::after(Duration::from_micros(200)).await;
                }
                if hang {
                    let mut sink = [0u8; 1024];
                    loop {
                        match stream.read(&mut sink).await {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {}
                        }
                    }
                    hung_closed.fetch_add(1, Ordering::SeqCst);
                }
                return;
            }
            Reply::Channel { headers, rx } => {
                if write_stream_head(&mut stream, &headers).await.is_err() {
                    return;
                }
                while let Ok(p) = rx.recv().await {
                    if stream.write_all(&p).await.is_err() || stream.flush().await.is_err() {
                        return;
                    }
                }
                return;
            }
        }
    }
}

async fn write_stream_head(
    stream: &mut Async<TcpStream>,
    headers: &[(String, String)],
) -> std::io::Result<()> {
    let mut out =
        "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: text/event-stream\r\n".to_string();
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    stream.write_all(out.as_bytes()).await?;
    stream.flush().await
}

pub(crate) fn json_reply(status: u16, headers: Vec<(String, String)>, v: &Value) -> Reply {
    let mut headers = headers;
    headers.push(("content-type".into(), "application/json".into()));
    Reply::Full {
        status,
        headers,
        body: v.to_string().into_bytes(),
    }
}

pub(crate) fn empty(status: u16) -> Reply {
    Reply::Full {
        status,
        headers: vec![],
        body: vec![],
    }
}

/// A minimal MCP server's answer to `msg` (`None` for notifications and responses).
pub fn mcp_answer(msg: &Value) -> Option<Value> {
    let id = msg.get("id")?.clone();
    let method = msg["method"].as_str()?;
    let result = match method {
        "initialize" => json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "edge", "version": "0"}
        }),
        "tools/list" => json!({"tools": [{
            "name": "echo",
            "description": "Echo the text",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}
        }]}),
        "tools/call" => json!({"content": [{"type": "text",
            "text": msg["params"]["arguments"]["text"].as_str().unwrap_or("")}]}),
        "ping" => json!({}),
        _ => {
            return Some(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"}}))
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn sse_event(v: &Value) -> Vec<u8> {
    format!("event: message\ndata: {v}\n\n").into_bytes()
}

/// State of the Streamable HTTP edge server.
#[derive(Default)]
pub struct Streamable {
    next_session: usize,
    valid: BTreeSet<String>,
    /// The answer a resumed stream (`Last-Event-ID: r-1`) delivers.
    resume_answer: Option<Value>,
    /// Size of the `big` event.
    big: usize,
}

/// A Streamable HTTP server with sessions. `tools/call` of `echo` with text `hang`, `big`,
/// `resume` or `split` misbehaves accordingly; GET without `Last-Event-ID` is 405.
fn streamable_server(state: Arc<Mutex<Streamable>>) -> EdgeServer {
    EdgeServer::start(streamable_handler(state))
}

/// The answers of a Streamable HTTP server with the state in `state`.
pub fn streamable_handler(state: Arc<Mutex<Streamable>>) -> Handler {
    Arc::new(move |req: &Req| {
        let mut st = state.lock().unwrap();
        match req.method.as_str() {
            "GET" => {
                if req.header("last-event-id") == Some("r-1") {
                    let answer = st.resume_answer.take().unwrap_or(Value::Null);
                    return Reply::Stream {
                        headers: vec![],
                        pieces: vec![format!("id: r-2\ndata: {answer}\n\n").into_bytes()],
                        hang: false,
                    };
                }
                return empty(405);
            }
            "DELETE" => {
                if let Some(s) = req.header("mcp-session-id") {
                    st.valid.remove(s);
                }
                return empty(200);
            }
            _ => {}
        }
        let msg = req.json();
        if msg["method"] == "initialize" {
            st.next_session += 1;
            let sid = format!("s{}", st.next_session);
            st.valid.insert(sid.clone());
            return json_reply(
                200,
                vec![("mcp-session-id".into(), sid)],
                &mcp_answer(&msg).unwrap(),
            );
        }
        match req.header("mcp-session-id") {
            Some(s) if st.valid.contains(s) => {}
            Some(_) => return empty(404),
            None => return empty(400),
        }
        let Some(answer) = mcp_answer(&msg) else {
            return empty(202);
        };
        match msg["params"]["arguments"]["text"].as_str() {
            Some("hang") => Reply::Stream {
                headers: vec![],
                pieces: vec![b": working on it\n\n".to_vec()],
                hang: true,
            },
            Some("big") => {
                let text = "x".repeat(st.big);
                let v = json!({"jsonrpc": "2.0", "id": msg["id"],
                    "result": {"content": [{"type": "text", "text": text}]}});
                Reply::Stream {
                    headers: vec![],
                    pieces: vec![sse_event(&v)],
                    hang: false,
                }
            }
            Some("resume") => {
                st.resume_answer = Some(answer);
                Reply::Stream {
                    headers: vec![],
                    pieces: vec![b"id: r-1\ndata:\n\n".to_vec(), b"retry: 300\n\n".to_vec()],
                    hang: false,
                }
            }
            Some("split") => {
                // A log notification first, a comment, CRLF line ends, and the response's JSON
                // spread over two data lines; then every byte goes out on its own.
                let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "data": "before the answer"}});
                let a = answer.to_string();
                let (left, right) = a.split_at(a.find(",").unwrap() + 1);
                let stream = format!(
                    ": hello\r\nevent: message\r\ndata: {note}\r\n\r\nid: 5\r\ndata: {left}\r\ndata: {right}\r\n\r\n"
                );
                Reply::Stream {
                    headers: vec![],
                    pieces: stream.into_bytes().into_iter().map(|b| vec![b]).collect(),
                    hang: false,
                }
            }
            _ => json_reply(200, vec![], &answer),
        }
    })
}

fn spec(name: &str, url: String) -> ServerSpec {
    ServerSpec::new(name, ServerConfig::http(url))
}

async fn start(specs: Vec<ServerSpec>) -> (switchboard::Switchboard, switchboard::StartupReport) {
    Builder::servers(specs).no_cache().start().await.unwrap()
}

/// Polls `f` every 20 ms for up to 5 s.
async fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        Timer::after(Duration::from_millis(20)).await;
    }
}

#[test]
fn session_expiry_starts_a_new_session_once_and_the_call_succeeds() {
    let state = Arc::new(Mutex::new(Streamable::default()));
    let server = streamable_server(state.clone());
    smol::block_on(async {
        let (sb, report) = start(vec![spec("edge", server.url())]).await;
        assert_eq!(report.connected, vec!["edge"], "{report:?}");
        // Every request after initialize (itself after the refused probe of the stateless
        // revision) carried the session and the negotiated version.
        for r in server
            .requests()
            .iter()
            .filter(|r| r.method == "POST")
            .skip(2)
        {
            assert_eq!(r.header("mcp-session-id"), Some("s1"), "{r:?}");
            assert_eq!(
                r.header("mcp-protocol-version"),
                Some("2025-11-25"),
                "{r:?}"
            );
        }
        // Every POST (initialize included) declares its JSON body and accepts both answers.
        let posts: Vec<Req> = server
            .requests()
            .into_iter()
            .filter(|r| r.method == "POST")
            .collect();
        assert!(posts.len() >= 3, "{posts:?}");
        for r in &posts {
            assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
            assert_eq!(
                r.header("accept"),
                Some("application/json, text/event-stream"),
                "{r:?}"
            );
        }
        state.lock().unwrap().valid.clear(); // the server forgets every session
        let before = server.requests().len();
        let r = sb
            .call("mcp_edge_echo", json!({"text": "again"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "again");
        let post = |m: &str| ("POST".to_string(), m.to_string());
        let posts = || -> Vec<(String, String)> {
            server.summary()[before..]
                .iter()
                .filter(|(m, _)| m == "POST")
                .cloned()
                .collect()
        };
        // The transport reported the renewal, so the core re-lists the tools (the new
        // session may offer others); that list races the retried call.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !posts().contains(&post("tools/list")) && Instant::now() < deadline {
            Timer::after(Duration::from_millis(10)).await;
        }
        let mut after = posts();
        assert_eq!(
            after[..3],
            [
                post("tools/call"),
                post("initialize"),
                post("notifications/initialized"),
            ]
        );
        after[3..].sort();
        assert_eq!(after[3..], [post("tools/call"), post("tools/list")]);
        let reqs = server.requests();
        let init = reqs[before..]
            .iter()
            .find(|r| r.rpc_method().as_deref() == Some("initialize"))
            .unwrap();
        assert_eq!(
            init.header("mcp-session-id"),
            None,
            "a new session starts without an id"
        );
        // The last POST (the retried call); the listening GET runs on its own task.
        let last_post = reqs.iter().rev().find(|r| r.method == "POST").unwrap();
        assert_eq!(last_post.header("mcp-session-id"), Some("s2"));
        sb.shutdown().await;
        // Close ends the session with DELETE.
        let delete = server.requests().into_iter().find(|r| r.method == "DELETE");
        assert_eq!(
            delete
                .and_then(|d| d.header("mcp-session-id").map(String::from))
                .as_deref(),
            Some("s2")
        );
    });
}

#[test]
fn an_sse_answer_split_at_every_byte_arrives_whole_with_the_notification_before_it() {
    let server = streamable_server(Arc::new(Mutex::new(Streamable::default())));
    smol::block_on(async {
        let (sb, _) = start(vec![]).await;
        let events = sb.events();
        let report = sb.connect(vec![spec("edge", server.url())]).await.unwrap();
        assert_eq!(report.connected, vec!["edge"]);
        let r = sb
            .call("mcp_edge_echo", json!({"text": "split"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "split");
        let mut saw_note = false;
        while let Ok(ev) = events.try_recv() {
            // A server's log message reaches `events()` as a typed ServerLog.
            if let Ok(Event::ServerLog { server, data, .. }) = ev {
                saw_note |= server == "edge" && data == "before the answer";
            }
        }
        assert!(
            saw_note,
            "the notification sent before the response was passed on"
        );
        sb.shutdown().await;
    });
}

#[test]
fn a_broken_response_stream_is_resumed_with_last_event_id_after_the_retry_delay() {
    let server = streamable_server(Arc::new(Mutex::new(Streamable::default())));
    smol::block_on(async {
        let (sb, _) = start(vec![spec("edge", server.url())]).await;
        let r = sb
            .call("mcp_edge_echo", json!({"text": "resume"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "resume");
        let reqs = server.requests();
        let call = reqs
            .iter()
            .rev()
            .find(|r| r.rpc_method().as_deref() == Some("tools/call"))
            .unwrap();
        let resume = reqs
            .iter()
            .find(|r| r.method == "GET" && r.header("last-event-id").is_some())
            .expect("a GET with Last-Event-ID");
        assert_eq!(resume.header("last-event-id"), Some("r-1"));
        assert_eq!(resume.header("mcp-session-id"), Some("s1"));
        let waited = resume.at - call.at;
        assert!(
            waited >= Duration::from_millis(300),
            "honoured retry: 300, waited {waited:?}"
        );
        // The listening GET got 405 and was not retried. It is sent by its own task once
        // `notifications/initialized` is accepted: wait until it has reached the server.
        let listens = || {
            server
                .requests()
                .iter()
                .filter(|r| r.method == "GET" && r.header("last-event-id").is_none())
                .count()
        };
        eventually("the listening GET reached the server", || listens() >= 1).await;
        assert_eq!(listens(), 1, "{:?}", server.summary());
        sb.shutdown().await;
    });
}

#[test]
fn unauthorized_without_credentials_needs_login_and_never_waits() {
    let server = EdgeServer::start(Arc::new(|_req: &Req| Reply::Full {
        status: 401,
        headers: vec![(
            "www-authenticate".into(),
            r#"Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource""#
                .into(),
        )],
        body: b"missing bearer token".to_vec(),
    }));
    smol::block_on(async {
        let (sb, report) = start(vec![spec("auth", server.url())]).await;
        let err = report.errors.get("auth").cloned().expect("auth failed");
        // No browser was offered (no authorization handler): the typed answer, at once,
        // and no request beyond the refused one.
        assert_eq!(err.kind, switchboard::ServerErrorKind::NeedsLogin, "{err}");
        assert!(err.to_string().contains("switchboard login auth"), "{err}");
        assert!(
            server.requests().iter().all(|r| r.method == "POST"),
            "{:?}",
            server.summary()
        );
        sb.shutdown().await;
    });
}

#[test]
fn configured_headers_are_sent_on_every_request() {
    let server = streamable_server(Arc::new(Mutex::new(Streamable::default())));
    smol::block_on(async {
        let mut s = spec("edge", server.url());
        s.config.headers = BTreeMap::from([("X-Api-Key".to_string(), "k1".to_string())]);
        let (sb, report) = start(vec![s]).await;
        assert_eq!(report.connected, vec!["edge"], "{report:?}");
        sb.shutdown().await;
        let reqs = server.requests();
        assert!(reqs.len() >= 4);
        assert!(reqs.iter().all(|r| r.header("x-api-key") == Some("k1")));
    });
}

#[test]
fn a_response_stream_that_never_ends_is_aborted_on_timeout_and_on_shutdown() {
    let server = streamable_server(Arc::new(Mutex::new(Streamable::default())));
    smol::block_on(async {
        let (sb, _) = start(vec![spec("edge", server.url())]).await;
        let started = Instant::now();
        let r = sb
            .call_with_timeout(
                "mcp_edge_echo",
                json!({"text": "hang"}),
                Some(Duration::from_millis(400)),
            )
            .await;
        assert!(
            matches!(&r, Err(Error::Call(CallError::Timeout { .. }))),
            "{r:?}"
        );
        // Far below the 60 s default call timeout; generous for a loaded machine.
        assert!(started.elapsed() < Duration::from_secs(10));
        // notifications/cancelled went out and the hanging POST was aborted.
        eventually("the hung POST is closed", || {
            server.hung_closed.load(Ordering::SeqCst) == 1
        })
        .await;
        // The cancel notification is its own POST, racing the abort above.
        eventually("notifications/cancelled reached the server", || {
            server
                .summary()
                .contains(&("POST".into(), "notifications/cancelled".into()))
        })
        .await;
        let r = sb
            .call("mcp_edge_echo", json!({"text": "fine"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "fine");

        // A call still hanging at shutdown: shutdown aborts it promptly.
        let sb2 = sb.clone();
        let pending = smol::spawn(async move {
            sb2.call_with_timeout(
                "mcp_edge_echo",
                json!({"text": "hang"}),
                Some(Duration::from_secs(60)),
            )
            .await
        });
        eventually("the second hang started", || {
            server
                .summary()
                .iter()
                .filter(|(_, m)| m == "tools/call")
                .count()
                == 3
        })
        .await;
        let t = Instant::now();
        sb.shutdown().await;
        // Does not wait for the call's 60 s timeout (bound generous for a loaded machine).
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert!(pending.await.is_err());
        eventually("the second hung POST is closed", || {
            server.hung_closed.load(Ordering::SeqCst) == 2
        })
        .await;
    });
}

#[test]
fn an_oversized_event_fails_that_call_only() {
    let state = Arc::new(Mutex::new(Streamable {
        big: 200 * 1024,
        ..Default::default()
    }));
    let server = streamable_server(state);
    smol::block_on(async {
        let (sb, _) = Builder::servers(vec![spec("edge", server.url())])
            .no_cache()
            .http_options(HttpOptions {
                max_message_len: 64 * 1024,
                ..HttpOptions::default()
            })
            .start()
            .await
            .unwrap();
        let r = sb.call("mcp_edge_echo", json!({"text": "big"})).await;
        assert!(
            // Generated by the transport: a transport error, never a server's JSON-RPC error.
            matches!(&r, Err(Error::Call(CallError::Transport(e)))
                if e.kind == ServerErrorKind::RequestFailed && e.message.contains("larger than 64 KiB")),
            "{r:?}"
        );
        let r = sb
            .call("mcp_edge_echo", json!({"text": "small"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "small");
        assert_eq!(sb.status("edge"), ServerStatus::Connected);
        sb.shutdown().await;
    });
}

#[test]
fn a_400_to_the_first_post_falls_back_to_legacy_sse_and_says_so() {
    let stream: Arc<Mutex<Option<Sender<Vec<u8>>>>> = Arc::new(Mutex::new(None));
    let server = {
        let stream = stream.clone();
        EdgeServer::start(Arc::new(move |req: &Req| {
            match (req.method.as_str(), req.path.as_str()) {
                ("POST", "/mcp") => Reply::Full {
                    status: 400,
                    headers: vec![],
                    body: b"Bad Request: No valid session ID provided".to_vec(),
                },
                ("GET", "/mcp") => {
                    let (tx, rx) = async_channel::unbounded();
                    tx.try_send(b"event: endpoint\ndata: /messages?sessionId=L1\n\n".to_vec())
                        .unwrap();
                    *stream.lock().unwrap() = Some(tx);
                    Reply::Channel {
                        headers: vec![],
                        rx,
                    }
                }
                ("POST", "/messages?sessionId=L1") => {
                    if let Some(answer) = mcp_answer(&req.json()) {
                        if let Some(tx) = stream.lock().unwrap().as_ref() {
                            let _ = tx.try_send(sse_event(&answer));
                        }
                    }
                    Reply::Full {
                        status: 202,
                        headers: vec![],
                        body: b"Accepted".to_vec(),
                    }
                }
                _ => empty(404),
            }
        }))
    };
    smol::block_on(async {
        let (sb, _) = start(vec![]).await;
        let events = sb.events();
        let report = sb.connect(vec![spec("old", server.url())]).await.unwrap();
        assert_eq!(report.connected, vec!["old"], "{report:?}");
        let r = sb
            .call("mcp_old_echo", json!({"text": "legacy"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "legacy");
        let mut note = None;
        while let Ok(ev) = events.try_recv() {
            // The transport's own note, relayed by the core as a warning of that server.
            if let Ok(Event::Diagnostic {
                server: Some(server),
                level: Level::Warn,
                message,
            }) = ev
            {
                if message.contains("falling back") {
                    note = Some((server, message));
                }
            }
        }
        let (who, message) = note.expect("a log event about the fallback");
        assert_eq!(who, "old");
        assert!(message.contains("HTTP 400"), "{message}");
        sb.shutdown().await;
        let summary = server.summary();
        // The probe of the stateless revision first: refused (HTTP 400), so `initialize`
        // follows, whose own 400 makes the transport fall back to legacy SSE.
        assert_eq!(
            summary[0],
            ("POST".to_string(), "server/discover".to_string())
        );
        assert_eq!(summary[1], ("POST".to_string(), "initialize".to_string()));
        assert_eq!(summary[2], ("GET".to_string(), "-".to_string()));
        assert_eq!(summary[3], ("POST".to_string(), "initialize".to_string()));
    });
}

#[test]
fn an_unreachable_server_is_named_as_connection_refused() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    smol::block_on(async {
        let (sb, report) = start(vec![
            spec("gone", format!("http://127.0.0.1:{port}/mcp")),
            spec("bad", "not a url".into()),
        ])
        .await;
        let err = |n: &str| {
            report
                .errors
                .get(n)
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(
            err("gone").contains("connection refused by 127.0.0.1:"),
            "{}",
            err("gone")
        );
        assert!(!err("bad").is_empty());
        sb.shutdown().await;
    });
}

#[test]
fn a_name_that_never_resolves_is_named_as_a_dns_failure() {
    smol::block_on(async {
        // `.invalid` never resolves (RFC 6761), with or without a network.
        let (sb, report) = start(vec![spec(
            "nowhere",
            "http://nonexistent.invalid/mcp".into(),
        )])
        .await;
        let err = report
            .errors
            .get("nowhere")
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("DNS lookup"), "{report:?}");
        assert!(err.contains("nonexistent.invalid"), "{err}");
        assert_eq!(sb.status("nowhere"), ServerStatus::Disconnected);
        sb.shutdown().await;
    });
}

#[test]
fn https_to_a_plain_http_server_is_named_as_a_tls_failure() {
    let server = streamable_server(Arc::new(Mutex::new(Streamable::default())));
    smol::block_on(async {
        let url = format!("https://127.0.0.1:{}/mcp", server.port);
        let (sb, report) = start(vec![spec("plain", url)]).await;
        let err = report
            .errors
            .get("plain")
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("TLS handshake"), "{report:?}");
        assert!(err.contains(&format!("127.0.0.1:{}", server.port)), "{err}");
        // Nothing reached the MCP layer: the handshake failed before any request.
        assert!(server.requests().is_empty(), "{:?}", server.summary());
        sb.shutdown().await;
    });
}

#[test]
fn legacy_sse_waits_for_the_endpoint_and_closes_when_the_stream_ends() {
    let stream: Arc<Mutex<Option<Sender<Vec<u8>>>>> = Arc::new(Mutex::new(None));
    let server = {
        let stream = stream.clone();
        EdgeServer::start(Arc::new(move |req: &Req| {
            match (req.method.as_str(), req.path.as_str()) {
                ("GET", "/sse") => {
                    let (tx, rx) = async_channel::unbounded();
                    tx.try_send(b": hi\n\nevent: endpoint\ndata: msg?s=1\n\n".to_vec())
                        .unwrap();
                    *stream.lock().unwrap() = Some(tx);
                    Reply::Channel {
                        headers: vec![],
                        rx,
                    }
                }
                ("POST", "/msg?s=1") => {
                    if let Some(answer) = mcp_answer(&req.json()) {
                        if let Some(tx) = stream.lock().unwrap().as_ref() {
                            let _ = tx.try_send(sse_event(&answer));
                        }
                    }
                    empty(202)
                }
                _ => empty(404),
            }
        }))
    };
    smol::block_on(async {
        let mut s = spec("old", format!("http://127.0.0.1:{}/sse", server.port));
        s.config.kind = Some("sse".into());
        let (sb, report) = start(vec![s]).await;
        assert_eq!(report.connected, vec!["old"], "{report:?}");
        let r = sb.call("mcp_old_echo", json!({"text": "x"})).await.unwrap();
        assert_eq!(r.render_text(), "x");
        // The server ends the stream: the transport reports it closed.
        let events = sb.events();
        stream.lock().unwrap().take();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut saw_close = false;
        while Instant::now() < deadline && !saw_close {
            let ev = future::or(async { events.recv().await.ok() }, async {
                Timer::after(Duration::from_millis(100)).await;
                None
            })
            .await;
            if let Some(Event::StatusChanged { server, status }) = ev {
                saw_close |= server == "old" && status != ServerStatus::Connected;
            }
        }
        assert!(saw_close, "the end of the SSE stream is a close");
        sb.shutdown().await;
    });
}

#[test]
fn the_connect_timeout_closes_a_hanging_initialize() {
    let server = EdgeServer::start(Arc::new(|_req: &Req| Reply::Stream {
        headers: vec![],
        pieces: vec![b": thinking\n\n".to_vec()],
        hang: true,
    }));
    smol::block_on(async {
        let mut s = spec("slow", server.url());
        s.config.timeout_ms = Some(500);
        let started = Instant::now();
        let (sb, report) = start(vec![s]).await;
        assert_eq!(
            report.errors.get("slow").map(|e| (e.kind, e.to_string())),
            Some((
                ServerErrorKind::ConnectTimeout,
                "connect timed out after 500 ms".to_string()
            ))
        );
        // Far below the 30 s default connect timeout; generous for a loaded machine.
        assert!(started.elapsed() < Duration::from_secs(10));
        // The core's CloseTransport aborted the POST that was waiting for the answer.
        eventually("the hanging initialize is closed", || {
            server.hung_closed.load(Ordering::SeqCst) == 1
        })
        .await;
        sb.shutdown().await;
    });
}
