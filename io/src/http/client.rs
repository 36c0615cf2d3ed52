//! A small HTTP/1.1 client: hyper's connection-level client (`hyper::client::conn::http1`)
//! over smol's `Async<TcpStream>`, rustls for `https`, and a per-origin pool of idle
//! keep-alive connections.
//!
//! Each transport owns one [`HttpClient`], so closing a transport closes every socket it
//! opened: an idle connection lives in the pool, a busy one inside the [`Body`] (or the request
//! future) that uses it, and each connection's driver task is owned by the connection, so
//! dropping it cancels the task and closes the socket. Nothing here is tokio-bound; hyper's
//! http1 client needs no executor or timer from us (we spawn its connection future on smol).
//!
//! A connection goes back to the pool only once its response body was read to the end, so a
//! long SSE body never blocks another request: that request gets another connection.

use super::connect::{connect, describe_hyper, Connect};
use super::proxy::Proxies;
use super::redirect::{self, Hop};
use crate::rt::Spawner;
use async_executor::Task;
use bytes::Bytes;
use futures_lite::{future, AsyncRead, AsyncWrite};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_io::Timer;
use async_lock::{Semaphore, SemaphoreGuardArc};

/// What went wrong, sorted by what the caller does about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// No connection could be made (DNS, refused, TLS, connect timeout): the server is
    /// unreachable.
    Connect(String),
    /// The exchange broke after the connection was made (reset, malformed response).
    Transfer(String),
    /// A body or event is larger than the limit.
    TooLarge(String),
    /// This process could not make the connection for a reason of its own (no file
    /// descriptor left): the request fails, the server is not to blame.
    Local(String),
    /// The server redirected the request somewhere this client does not follow (another
    /// origin, a downgrade to plain http, too many hops); the message names the `Location`.
    Redirect(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Connect(m)
            | HttpError::Transfer(m)
            | HttpError::TooLarge(m)
            | HttpError::Local(m)
            | HttpError::Redirect(m) => f.write_str(m),
        }
    }
}

/// Scheme, host and port: what a pooled connection can serve.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    /// `https` (TLS) rather than `http`.
    pub https: bool,
    /// Host name or IP address.
    pub host: String,
    /// Port (the scheme's default when the URL has none).
    pub port: u16,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}:{}", self.host, self.port)
    }
}

/// A validated absolute `http`/`https` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// Where to connect.
    pub origin: Origin,
    /// The `Host` header value (the authority as written, without userinfo).
    pub authority: String,
    /// Origin-form request target (`/path?query`).
    pub path_and_query: String,
}

impl Url {
    /// Parses an absolute `http`/`https` URL; the error names the URL and what is wrong.
    pub fn parse(s: &str) -> Result<Url, String> {
        let uri: Uri = s.parse().map_err(|e| format!("invalid URL \"{s}\": {e}"))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            Some(other) => {
                return Err(format!(
                    "invalid URL \"{s}\": scheme \"{other}\" is not http or https"
                ))
            }
            None => return Err(format!("invalid URL \"{s}\": it is not absolute")),
        };
        let authority = uri
            .authority()
            .ok_or_else(|| format!("invalid URL \"{s}\": no host"))?;
        if authority.as_str().contains('@') {
            return Err(format!(
                "invalid URL \"{s}\": credentials in the URL are not supported (use headers)"
            ));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("invalid URL \"{s}\": no host"));
        }
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let path_and_query = uri
            .path_and_query()
            .map(|p| p.as_str())
            .filter(|p| !p.is_empty())
            .unwrap_or("/")
            .to_string();
        Ok(Url {
            origin: Origin {
                https,
                host: host.to_string(),
                port,
            },
            authority: authority.as_str().to_string(),
            path_and_query,
        })
    }

    /// Resolves `reference` (absolute URL, absolute path or relative path) against `self`.
    pub fn join(&self, reference: &str) -> Result<Url, String> {
        if reference.starts_with("http://") || reference.starts_with("https://") {
            return Url::parse(reference);
        }
        if reference.starts_with("//") {
            let scheme = if self.origin.https { "https:" } else { "http:" };
            return Url::parse(&format!("{scheme}{reference}"));
        }
        let path_and_query = if reference.starts_with('/') {
            reference.to_string()
        } else {
            let path = self.path_and_query.split(['?', '#']).next().unwrap_or("/");
            let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
            format!("{dir}{reference}")
        };
        let mut url = self.clone();
        url.path_and_query = path_and_query;
        // Validate it as a request target.
        url.path_and_query
            .parse::<http::uri::PathAndQuery>()
            .map_err(|e| format!("invalid URL reference \"{reference}\": {e}"))?;
        Ok(url)
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.origin.https { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.authority, self.path_and_query)
    }
}

pub(super) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// One keep-alive connection: the request half and the task driving the socket.
pub(super) struct Conn {
    pub(super) sender: http1::SendRequest<Full<Bytes>>,
    /// Dropping it cancels the task, which closes the socket.
    pub(super) task: Task<()>,
}

/// A response whose body is still to be read.
pub struct Response {
    /// The status code.
    pub status: StatusCode,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body, read as it arrives.
    pub body: Body,
}

/// A response body. Reading it to the end returns its connection to the pool; dropping it
/// before the end closes the connection.
pub struct Body {
    incoming: Incoming,
    conn: Option<(Conn, Arc<Pool>, Origin)>,
    /// The connection's place among the client's busy connections, given back with it.
    permit: Option<SemaphoreGuardArc>,
}

impl Body {
    /// The next chunk of data, `None` at the end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, HttpError> {
        loop {
            match self.incoming.frame().await {
                None => {
                    self.release();
                    return Ok(None);
                }
                Some(Err(e)) => return Err(HttpError::Transfer(describe_hyper(&e))),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        if !data.is_empty() {
                            return Ok(Some(data));
                        }
                    }
                }
            }
        }
    }

    /// The whole body, failing once it grows past `limit` bytes.
    pub async fn read_to_end(&mut self, limit: usize) -> Result<Bytes, HttpError> {
        let mut buf = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            if buf.len() + chunk.len() > limit {
                return Err(HttpError::TooLarge(format!(
                    "the response body is larger than {}",
                    super::human_size(limit)
                )));
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(buf))
    }

    /// Up to `limit` bytes of the body (for error messages), waiting at most `wait`.
    pub async fn read_prefix(&mut self, limit: usize, wait: Duration) -> Bytes {
        let mut buf = Vec::new();
        let read = async {
            while buf.len() < limit {
                match self.chunk().await {
                    Ok(Some(c)) => buf.extend_from_slice(&c),
                    _ => break,
                }
            }
        };
        future::or(read, async {
            Timer::after(wait).await;
        })
        .await;
        buf.truncate(limit);
        Bytes::from(buf)
    }

    fn release(&mut self) {
        if let Some((conn, pool, origin)) = self.conn.take() {
            pool.put(origin, conn);
        }
        self.permit = None;
    }
}

struct Pool {
    idle: Mutex<BTreeMap<Origin, Vec<Conn>>>,
    max_idle_per_origin: usize,
}

impl Pool {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Origin, Vec<Conn>>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take(&self, origin: &Origin) -> Option<Conn> {
        let mut idle = self.lock();
        let list = idle.get_mut(origin)?;
        while let Some(conn) = list.pop() {
            if !conn.sender.is_closed() && conn.sender.is_ready() {
                return Some(conn);
            }
        }
        None
    }

    fn put(&self, origin: Origin, conn: Conn) {
        if conn.sender.is_closed() {
            return;
        }
        let mut idle = self.lock();
        let list = idle.entry(origin).or_default();
        if list.len() < self.max_idle_per_origin {
            list.push(conn);
        }
    }

    fn drain(&self) -> Vec<Conn> {
        std::mem::take(&mut *self.lock())
            .into_values()
            .flatten()
            .collect()
    }
}

/// The HTTP client of one transport.
pub struct HttpClient {
    pool: Arc<Pool>,
    /// Busy connections (a request sent, its body not yet read to the end), at most: past
    /// it a request waits for one to come free instead of opening yet another socket.
    busy: Arc<Semaphore>,
    connect_timeout: Duration,
    spawner: Spawner,
    /// The proxies to go through (from the environment by default).
    proxies: Arc<Proxies>,
}

impl HttpClient {
    /// A client with its own connection pool: connects time out after `connect_timeout`, at
    /// most `max_idle_per_origin` idle connections are kept per origin, and at most
    /// `max_busy` connections are busy at once (at least [`MIN_BUSY`]).
    pub fn new(connect_timeout: Duration, max_idle_per_origin: usize, max_busy: usize) -> Self {
        HttpClient {
            pool: Arc::new(Pool {
                idle: Mutex::new(BTreeMap::new()),
                max_idle_per_origin,
            }),
            busy: Arc::new(Semaphore::new(max_busy.max(MIN_BUSY))),
            connect_timeout,
            spawner: Spawner::default(),
            proxies: Arc::new(Proxies::from_env()),
        }
    }

    /// Go through these proxies instead of those the environment names.
    pub fn with_proxies(mut self, proxies: Proxies) -> Self {
        self.proxies = Arc::new(proxies);
        self
    }

    /// Run the connections' tasks on `spawner` (default: the library's own executor thread).
    pub(crate) fn with_spawner(mut self, spawner: Spawner) -> Self {
        self.spawner = spawner;
        self
    }

    /// Sends one request and returns once the response head arrived, following the redirects
    /// that stay on the server's origin (the `redirect` module). `headers` go out as given
    /// (the caller sets everything but `Host`).
    pub async fn request(
        &self,
        method: Method,
        url: &Url,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<Response, HttpError> {
        let mut method = method;
        let mut url = url.clone();
        let mut body = body;
        let mut hops = 0;
        loop {
            let mut resp = self
                .send_once(method.clone(), &url, headers, body.clone())
                .await?;
            let location = resp
                .headers
                .get(http::header::LOCATION)
                .and_then(|v| v.to_str().ok());
            match redirect::next_hop(&method, resp.status, location, &url, hops) {
                Hop::NotARedirect => return Ok(resp),
                Hop::Refused(why) => return Err(HttpError::Redirect(why)),
                Hop::Follow(next_method, next) => {
                    tracing::debug!(target: "switchboard::http", from = %url, to = %next, status = resp.status.as_u16(), "following a redirect");
                    // Read the (small) redirect body so its connection can be reused; its busy
                    // place is given back before the next hop takes one.
                    let _ = resp
                        .body
                        .read_prefix(REDIRECT_BODY_LIMIT, REDIRECT_BODY_WAIT)
                        .await;
                    drop(resp);
                    if next_method != method {
                        body = Bytes::new();
                    }
                    method = next_method;
                    url = next;
                    hops += 1;
                }
            }
        }
    }

    /// One request, no redirect followed.
    async fn send_once(
        &self,
        method: Method,
        url: &Url,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<Response, HttpError> {
        // A plain-http server behind a proxy gets requests in absolute form, with the proxy's
        // credentials; an https one is reached through a tunnel and sees origin form.
        let via_proxy = self
            .proxies
            .for_origin(&url.origin)
            .filter(|_| !url.origin.https);
        let target = match via_proxy {
            Some(_) => url.to_string(),
            None => url.path_and_query.clone(),
        };
        let build = || -> Result<Request<Full<Bytes>>, HttpError> {
            let mut req = Request::builder()
                .method(method.clone())
                .uri(target.as_str())
                .header(http::header::HOST, url.authority.as_str());
            if let Some(auth) = via_proxy.and_then(|p| p.authorization()) {
                req = req.header(http::header::PROXY_AUTHORIZATION, auth);
            }
            for (name, value) in headers {
                req = req.header(name, value);
            }
            req.body(Full::new(body.clone()))
                .map_err(|e| HttpError::Transfer(format!("cannot build the request: {e}")))
        };
        // Waits while every allowed connection is busy: thousands of concurrent requests queue
        // here instead of opening thousands of sockets.
        let permit = self.busy.acquire_arc().await;
        // A pooled connection may have been closed by the server while idle (a server's
        // keep-alive timeout, often 5 s, can expire just as the request is written, before
        // this side has seen the close). If hyper hands the request back unsent, or the
        // reused connection died before any answer came, retry it once on a fresh connection,
        // as browsers do: the server closed that connection before it answered anything on it.
        if let Some(mut conn) = self.pool.take(&url.origin) {
            match conn.sender.try_send_request(build()?).await {
                Ok(resp) => return Ok(self.response(resp, conn, url, permit)),
                Err(mut e) => {
                    let unsent = e.take_message().is_some();
                    if !unsent && !closed_under_us(e.error()) {
                        return Err(HttpError::Transfer(describe_hyper(e.error())));
                    }
                    tracing::debug!(target: "switchboard::http", origin = %url.origin, "pooled connection was closed ({}); retrying on a new one", describe_hyper(e.error()));
                }
            }
        }
        let mut conn = self.connect(&url.origin).await?;
        match conn.sender.send_request(build()?).await {
            Ok(resp) => Ok(self.response(resp, conn, url, permit)),
            Err(e) => Err(HttpError::Transfer(describe_hyper(&e))),
        }
    }

    fn response(
        &self,
        resp: hyper::Response<Incoming>,
        conn: Conn,
        url: &Url,
        permit: SemaphoreGuardArc,
    ) -> Response {
        let (parts, incoming) = resp.into_parts();
        let mut body = Body {
            incoming,
            conn: Some((conn, self.pool.clone(), url.origin.clone())),
            permit: Some(permit),
        };
        if hyper::body::Body::is_end_stream(&body.incoming) {
            body.release();
        }
        Response {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }

    /// Closes every idle connection and waits until their tasks are gone. Busy connections
    /// belong to their bodies and close when those are dropped.
    pub async fn close_idle(&self) {
        for conn in self.pool.drain() {
            drop(conn.sender);
            conn.task.cancel().await;
        }
    }

    async fn connect(&self, origin: &Origin) -> Result<Conn, HttpError> {
        let limit = self.connect_timeout;
        // Set while the attempt waits for a free file descriptor, so a timeout says so.
        let out_of_fds = std::sync::atomic::AtomicBool::new(false);
        let attempt = async {
            let mut pause = FD_RETRY_FIRST;
            loop {
                match connect(origin, self.proxies.for_origin(origin), &self.spawner).await {
                    Err(Connect::NoDescriptor(e)) => {
                        // Local back-pressure, not the server's failure: wait for one of this
                        // process's descriptors to be closed, then try again.
                        out_of_fds.store(true, std::sync::atomic::Ordering::Relaxed);
                        tracing::debug!(target: "switchboard::http", origin = %origin, "no file descriptor for a new connection ({e}); waiting {pause:?}");
                        Timer::after(pause).await;
                        pause = (pause * 2).min(FD_RETRY_MAX);
                    }
                    Err(Connect::Failed(e)) => return Some(Err(e)),
                    Ok(conn) => return Some(Ok(conn)),
                }
            }
        };
        let timeout = async {
            Timer::after(limit).await;
            None
        };
        match future::or(attempt, timeout).await {
            Some(r) => r,
            None if out_of_fds.load(std::sync::atomic::Ordering::Relaxed) => {
                Err(HttpError::Local(format!(
                    "no connection to {}:{} for {} s: this process has no file descriptor left \
                     (too many open files)",
                    origin.host,
                    origin.port,
                    limit.as_secs_f64()
                )))
            }
            None => Err(HttpError::Connect(format!(
                "connecting to {}:{} timed out after {} s",
                origin.host,
                origin.port,
                limit.as_secs_f64()
            ))),
        }
    }
}

/// Whether a request on a reused connection failed because the connection was gone (closed,
/// reset or cut before an answer began), rather than for anything about the request itself.
fn closed_under_us(e: &hyper::Error) -> bool {
    if e.is_incomplete_message() || e.is_closed() || e.is_canceled() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::UnexpectedEof
            );
        }
        source = inner.source();
    }
    false
}

/// The most of a redirect's body read (so its connection can be reused), and how long for.
const REDIRECT_BODY_LIMIT: usize = 64 * 1024;
const REDIRECT_BODY_WAIT: Duration = Duration::from_secs(2);

/// Busy connections allowed at least: an open GET stream and a streamed answer each keep one,
/// and the requests that answer them need another.
pub const MIN_BUSY: usize = 4;

/// The first wait for a file descriptor after `EMFILE`/`ENFILE`; it doubles up to
/// [`FD_RETRY_MAX`].
const FD_RETRY_FIRST: Duration = Duration::from_millis(10);
const FD_RETRY_MAX: Duration = Duration::from_millis(250);

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// Reads one request (head and `content-length` body) from `s`; `false` at end of stream.
    fn read_request(s: &mut std::net::TcpStream) -> bool {
        let mut buf = Vec::new();
        let mut byte = [0u8; 1];
        while !buf.ends_with(b"\r\n\r\n") {
            match s.read(&mut byte) {
                Ok(1) => buf.push(byte[0]),
                _ => return false,
            }
        }
        let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
        let len = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        s.read_exact(&mut body).is_ok()
    }

    fn answer(s: &mut std::net::TcpStream, text: &str) {
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{text}",
            text.len()
        );
        s.write_all(reply.as_bytes()).unwrap();
    }

    /// A server whose keep-alive timeout expires just as the next request is written closes
    /// the reused connection without answering; the request goes again on a new connection
    /// (the server never answered anything on the old one) and the caller sees one answer.
    #[test]
    fn a_reused_connection_closed_before_it_answered_is_retried_on_a_new_one() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut first, _) = listener.accept().unwrap();
            assert!(read_request(&mut first));
            answer(&mut first, "one");
            // The second request arrives on the kept connection; the server closes it unanswered.
            assert!(read_request(&mut first));
            drop(first);
            let (mut second, _) = listener.accept().unwrap();
            assert!(read_request(&mut second));
            answer(&mut second, "two");
        });
        let client = HttpClient::new(Duration::from_secs(5), 4, 4).with_proxies(Proxies::none());
        let url = Url::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap();
        let headers = [(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )];
        smol::block_on(async {
            for expected in ["one", "two"] {
                // The first connection is idle and ready in the pool before the second request,
                // so that request is the one written on it.
                while expected == "two"
                    && !(client.pool.lock().get(&url.origin))
                        .is_some_and(|idle| idle.iter().any(|c| c.sender.is_ready()))
                {
                    smol::future::yield_now().await;
                }
                let mut resp = client
                    .request(Method::POST, &url, &headers, Bytes::from_static(b"{}"))
                    .await
                    .expect("an answer");
                assert_eq!(resp.status, http::StatusCode::OK);
                let body = resp.body.read_to_end(1024).await.unwrap();
                assert_eq!(&body[..], expected.as_bytes());
            }
        });
        server.join().unwrap();
    }

    #[test]
    fn urls_parse_and_join() {
        let u = Url::parse("http://127.0.0.1:3001/sse").unwrap();
        assert_eq!(u.origin.port, 3001);
        assert_eq!(u.path_and_query, "/sse");
        assert_eq!(
            u.join("/message?sessionId=1").unwrap().to_string(),
            "http://127.0.0.1:3001/message?sessionId=1"
        );
        assert_eq!(u.join("message?x").unwrap().path_and_query, "/message?x");
        let deep = Url::parse("https://h/a/b/sse?q=1").unwrap();
        assert_eq!(deep.origin.port, 443);
        assert_eq!(deep.join("m").unwrap().path_and_query, "/a/b/m");
        assert_eq!(deep.join("http://other:1/x").unwrap().origin.host, "other");
        assert_eq!(Url::parse("http://h").unwrap().path_and_query, "/");
        assert_eq!(Url::parse("http://[::1]:8/").unwrap().origin.host, "::1");
        assert!(Url::parse("ftp://h/").is_err());
        assert!(Url::parse("/relative").is_err());
        assert!(Url::parse("http://user:pw@h/").is_err());
    }
}
