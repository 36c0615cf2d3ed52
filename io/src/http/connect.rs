//! Opening one connection: DNS, TCP (`TCP_NODELAY` on), a `CONNECT` tunnel when a proxy
//! stands between, TLS for `https`, and hyper's HTTP/1.1 handshake. Running out of file
//! descriptors is reported apart from every other failure, so the client can treat it as
//! local back-pressure rather than the server's fault.

use super::client::{Conn, HttpError, Io, Origin};
use super::proxy::Proxy;
use crate::rt::Spawner;
use async_io::Async;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use hyper::client::conn::http1;
use smol_hyper::rt::FuturesIo;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};

/// The largest proxy answer to a `CONNECT` read.
const MAX_TUNNEL_ANSWER: usize = 8 * 1024;

/// Why one connection attempt failed.
pub(super) enum Connect {
    /// The process (or the system) is out of file descriptors: worth waiting for.
    NoDescriptor(std::io::Error),
    Failed(HttpError),
}

impl From<HttpError> for Connect {
    fn from(e: HttpError) -> Self {
        Connect::Failed(e)
    }
}

/// `EMFILE` or `ENFILE`: no descriptor left, in this process or in the system.
pub(super) fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// A connection that serves `origin`, through `proxy` when one is given.
pub(super) async fn connect(
    origin: &Origin,
    proxy: Option<&Proxy>,
    spawner: &Spawner,
) -> Result<Conn, Connect> {
    let tcp = match proxy {
        None => tcp_connect(origin, "").await?,
        Some(p) => tcp_connect(&p.origin, "proxy ").await?,
    };
    let _ = tcp.get_ref().set_nodelay(true);
    let tcp = match proxy {
        Some(p) if origin.https => tunnel(tcp, origin, p).await?,
        _ => tcp,
    };
    let tcp = QuickAck(tcp);
    let io: Box<dyn Io> = if origin.https {
        let name = futures_rustls::rustls::pki_types::ServerName::try_from(origin.host.clone())
            .map_err(|e| {
                HttpError::Connect(format!(
                    "TLS: \"{}\" is not a valid server name: {e}",
                    origin.host
                ))
            })?;
        let tls = futures_rustls::TlsConnector::from(super::tls::config())
            .connect(name, tcp)
            .await
            .map_err(|e| {
                HttpError::Connect(format!(
                    "TLS handshake with {} failed: {}",
                    hostport(origin),
                    io_reason(&e)
                ))
            })?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let (sender, connection) = http1::handshake(FuturesIo::new(io)).await.map_err(|e| {
        HttpError::Connect(format!(
            "HTTP handshake with {} failed: {}",
            hostport(origin),
            describe_hyper(&e)
        ))
    })?;
    let task = spawner.spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(target: "switchboard::http", "connection ended: {e}");
        }
    });
    Ok(Conn { sender, task })
}

/// DNS and TCP to `origin`; `what` prefixes its name in errors (`"proxy "`).
async fn tcp_connect(origin: &Origin, what: &str) -> Result<Async<TcpStream>, Connect> {
    let host = origin.host.clone();
    let port = origin.port;
    let addrs: Vec<SocketAddr> = blocking::unblock(move || {
        (host.as_str(), port)
            .to_socket_addrs()
            .map(|a| a.collect::<Vec<_>>())
    })
    .await
    .map_err(|e| {
        if out_of_descriptors(&e) {
            return Connect::NoDescriptor(e);
        }
        Connect::Failed(HttpError::Connect(format!(
            "DNS lookup for {what}\"{}\" failed: {}",
            origin.host,
            io_reason(&e)
        )))
    })?;
    let mut last = None;
    for addr in &addrs {
        match Async::<TcpStream>::connect(*addr).await {
            Ok(s) => return Ok(s),
            Err(e) if out_of_descriptors(&e) => return Err(Connect::NoDescriptor(e)),
            Err(e) => last = Some((addr, e)),
        }
    }
    let Some((addr, e)) = last else {
        return Err(HttpError::Connect(format!(
            "DNS lookup for {what}\"{}\" found no address",
            origin.host
        ))
        .into());
    };
    Err(Connect::Failed(HttpError::Connect(
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            format!("connection refused by {what}{} ({addr})", hostport(origin))
        } else {
            format!(
                "cannot connect to {what}{} ({addr}): {}",
                hostport(origin),
                io_reason(&e)
            )
        },
    )))
}

/// Asks `proxy` for a tunnel to `origin` (`CONNECT`, written in one piece) and returns the
/// stream once the proxy said yes.
async fn tunnel(
    mut tcp: Async<TcpStream>,
    origin: &Origin,
    proxy: &Proxy,
) -> Result<Async<TcpStream>, Connect> {
    let target = hostport(origin);
    let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(auth) = proxy.authorization() {
        head.push_str("Proxy-Authorization: ");
        head.push_str(auth);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    let broke = |e: std::io::Error| {
        Connect::Failed(HttpError::Connect(format!(
            "proxy {proxy} broke off the tunnel to {target}: {}",
            io_reason(&e)
        )))
    };
    tcp.write_all(head.as_bytes()).await.map_err(broke)?;
    tcp.flush().await.map_err(broke)?;
    // The proxy says nothing more before the TLS handshake starts, so reading up to the end of
    // its head never takes bytes of the tunnel.
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        if answer.len() >= MAX_TUNNEL_ANSWER {
            return Err(HttpError::Connect(format!(
                "proxy {proxy} answered the tunnel to {target} with more than {MAX_TUNNEL_ANSWER} bytes of head"
            ))
            .into());
        }
        match tcp.read(&mut byte).await {
            Ok(0) => {
                return Err(HttpError::Connect(format!(
                    "proxy {proxy} closed the connection instead of a tunnel to {target}"
                ))
                .into())
            }
            Ok(_) => answer.push(byte[0]),
            Err(e) => return Err(broke(e)),
        }
    }
    let text = String::from_utf8_lossy(&answer);
    let status_line = text.lines().next().unwrap_or("");
    let status: Option<u16> = status_line.split(' ').nth(1).and_then(|s| s.parse().ok());
    match status {
        Some(200..=299) => Ok(tcp),
        Some(code) => {
            let reason: String = status_line
                .splitn(3, ' ')
                .nth(2)
                .unwrap_or("")
                .chars()
                .filter(|c| !c.is_control())
                .take(100)
                .collect();
            let hint = if code == 407 {
                if proxy.authorization().is_some() {
                    " (the proxy refused its credentials)"
                } else {
                    " (the proxy needs credentials: http://user:password@host:port)"
                }
            } else {
                ""
            };
            Err(HttpError::Connect(format!(
                "proxy {proxy} refused the tunnel to {target}: HTTP {code} {reason}{hint}"
            ))
            .into())
        }
        None => Err(HttpError::Connect(format!(
            "proxy {proxy} gave no HTTP answer to the tunnel request for {target}"
        ))
        .into()),
    }
}

/// A socket that acknowledges what it received at once (Linux's `TCP_QUICKACK`, which the
/// kernel clears again by itself, so it is set after every read). A server with Nagle's
/// algorithm on that writes an answer in two pieces holds the second back until the first is
/// acknowledged; with delayed ACKs that is ~40 ms per call. `TCP_NODELAY` fixes the other
/// direction (our requests); this fixes theirs.
struct QuickAck(Async<TcpStream>);

impl futures_lite::AsyncRead for QuickAck {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let polled = std::pin::Pin::new(&mut self.0).poll_read(cx, buf);
        if let std::task::Poll::Ready(Ok(n)) = polled {
            if n > 0 {
                quick_ack(self.0.get_ref());
            }
        }
        polled
    }
}

impl futures_lite::AsyncWrite for QuickAck {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_close(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_close(cx)
    }
}

#[cfg(target_os = "linux")]
fn quick_ack(socket: &TcpStream) {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: a valid socket descriptor and a c_int option value of the right size; a failure
    // only means the ACK is delayed as usual.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_QUICKACK,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn quick_ack(_socket: &TcpStream) {}

pub(super) fn hostport(origin: &Origin) -> String {
    if origin.host.contains(':') {
        format!("[{}]:{}", origin.host, origin.port)
    } else {
        format!("{}:{}", origin.host, origin.port)
    }
}

/// An io error in words, with the inner error when there is one (rustls puts its reason there).
pub(super) fn io_reason(e: &std::io::Error) -> String {
    match e.get_ref() {
        Some(inner) => inner.to_string(),
        None => e.to_string(),
    }
}

/// hyper's error with its causes ("connection error: Connection reset by peer").
pub(super) fn describe_hyper(e: &hyper::Error) -> String {
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}
