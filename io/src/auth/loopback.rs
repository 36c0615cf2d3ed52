//! Sending the user to the authorization server: the embedder's hook
//! ([`AuthorizationHandler`]) and the built-in one for a person at a terminal
//! ([`LoopbackAuthorizer`]), which listens on `http://127.0.0.1:PORT/callback` (RFC 8252),
//! prints the URL, opens it with `$BROWSER` (else `xdg-open` / `open`) and returns the query of
//! the redirect. `state` is checked by the flow in the core, not here.

use async_io::{Async, Timer};
use futures_lite::future::{self, Boxed};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::time::Duration;

/// The embedder's part of an interactive authorization.
pub trait AuthorizationHandler: Send + Sync {
    /// Prepares one authorization for `server` (`port`: the config's fixed redirect port):
    /// typically binds the redirect listener. The session names the redirect URI, which is
    /// registered with the authorization server before the user is sent there.
    fn begin(
        &self,
        server: &str,
        port: Option<u16>,
    ) -> Boxed<Result<Box<dyn AuthorizationSession>, String>>;
}

/// One prepared authorization.
pub trait AuthorizationSession: Send {
    /// Where the authorization server sends the user back.
    fn redirect_uri(&self) -> String;
    /// Sends the user to `url` and returns the query string of the redirect (without `?`).
    fn authorize(self: Box<Self>, url: String) -> Boxed<Result<String, String>>;
}

/// The terminal user's authorizer: a loopback listener and the system browser.
#[derive(Debug, Clone)]
pub struct LoopbackAuthorizer {
    /// Open a browser (else only print the URL).
    pub open_browser: bool,
    /// How long to wait for the redirect.
    pub timeout: Duration,
}

impl Default for LoopbackAuthorizer {
    fn default() -> Self {
        LoopbackAuthorizer {
            open_browser: true,
            timeout: Duration::from_secs(300),
        }
    }
}

/// The largest redirect request read.
const MAX_REQUEST: usize = 16 * 1024;

impl AuthorizationHandler for LoopbackAuthorizer {
    fn begin(
        &self,
        server: &str,
        port: Option<u16>,
    ) -> Boxed<Result<Box<dyn AuthorizationSession>, String>> {
        let me = self.clone();
        let server = server.to_string();
        Box::pin(async move {
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port.unwrap_or(0)));
            let listener = TcpListener::bind(addr).and_then(Async::new).map_err(|e| {
                format!("cannot listen on {addr} for the authorization redirect: {e}")
            })?;
            let port = listener
                .get_ref()
                .local_addr()
                .map_err(|e| e.to_string())?
                .port();
            Ok(Box::new(Loopback {
                me,
                server,
                listener,
                port,
            }) as Box<dyn AuthorizationSession>)
        })
    }
}

struct Loopback {
    me: LoopbackAuthorizer,
    server: String,
    listener: Async<TcpListener>,
    port: u16,
}

impl AuthorizationSession for Loopback {
    fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    fn authorize(self: Box<Self>, url: String) -> Boxed<Result<String, String>> {
        Box::pin(async move {
            eprintln!(
                "To authorize switchboard for \"{}\", open this URL in a browser:\n\n  {url}\n",
                self.server
            );
            if self.me.open_browser {
                if let Err(e) = open_browser(&url) {
                    eprintln!("(could not open a browser: {e})");
                }
            }
            let timeout = self.me.timeout;
            future::or(self.wait_for_redirect(), async move {
                Timer::after(timeout).await;
                Err(format!(
                    "no authorization redirect within {} s",
                    timeout.as_secs()
                ))
            })
            .await
        })
    }
}

impl Loopback {
    async fn wait_for_redirect(&self) -> Result<String, String> {
        loop {
            let (mut stream, _) = self.listener.accept().await.map_err(|e| e.to_string())?;
            let mut buf = Vec::new();
            let mut chunk = [0u8; 2048];
            // Only the request line matters; stop at the end of the head or the limit.
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_REQUEST {
                match future::or(stream.read(&mut chunk), async {
                    Timer::after(Duration::from_secs(10)).await;
                    Ok(0)
                })
                .await
                {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let head = String::from_utf8_lossy(&buf);
            let target = head
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("GET "))
                .and_then(|l| l.split(' ').next())
                .unwrap_or("");
            let (path, query) = target.split_once('?').unwrap_or((target, ""));
            if path != "/callback" {
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
                continue;
            }
            let page = "<!doctype html><title>switchboard</title><p>Authorization received. You can close this tab.</p>";
            let _ = stream
                .write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                        page.len()
                    )
                    .as_bytes(),
                )
                .await;
            let _ = stream.flush().await;
            return Ok(query.to_string());
        }
    }
}

/// Opens `url` with `$BROWSER` when set (the first of its `:`-separated commands, as
/// xdg-open and Python's webbrowser read it), else the platform's opener. Never waits for it.
fn open_browser(url: &str) -> std::io::Result<()> {
    let program = std::env::var("BROWSER")
        .ok()
        .and_then(|b| b.split(':').next().map(str::trim).map(str::to_string))
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| {
            if cfg!(target_os = "macos") {
                "open".into()
            } else {
                "xdg-open".into()
            }
        });
    let mut child = std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()?;
    // Reaped in the background so it leaves no zombie.
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(())
}
