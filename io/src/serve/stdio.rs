//! `serve` over stdio: one session, newline-delimited JSON-RPC on stdin and stdout (the
//! client spawned us). Nothing but protocol frames is ever written to stdout.

use super::{Sink, MAX_DOWNSTREAM_FRAME};
use crate::Switchboard;
use async_channel::Sender;
use futures_lite::future;
use futures_lite::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader,
};
use switchboard_core::gateway::{
    ExchangeId, GatewayInput, GatewayOptions, GatewayOutput, SessionId,
};

/// The one stdio session and its one exchange.
const SESSION: SessionId = SessionId(0);
const EXCHANGE: ExchangeId = ExchangeId(0);

/// Serve every server of `sb` as one MCP server on this process's stdin and stdout, until
/// stdin ends (or a frame is over [`MAX_DOWNSTREAM_FRAME`]: that is the end of the stream).
/// The switchboard keeps running; shutting it down is the caller's. With `peers` (installed
/// on the switchboard's builder), the servers' sampling and elicitation requests are
/// forwarded to the client.
pub async fn serve_stdio(
    sb: &Switchboard,
    options: GatewayOptions,
    peers: Option<super::PeerForwarder>,
) -> std::io::Result<()> {
    let stdin = blocking::Unblock::new(std::io::stdin());
    let stdout = blocking::Unblock::new(std::io::stdout());
    serve_streams(sb, options, peers, stdin, stdout).await
}

/// [`serve_stdio`] over any pair of byte streams.
pub(crate) async fn serve_streams(
    sb: &Switchboard,
    options: GatewayOptions,
    peers: Option<super::PeerForwarder>,
    input: impl AsyncRead + Unpin,
    output: impl AsyncWrite + Unpin,
) -> std::io::Result<()> {
    let (tx, rx) = async_channel::bounded(64);
    let mut sink = StreamSink {
        out: output,
        error: None,
    };
    let (read, ()) = future::zip(
        read_frames(input, tx),
        super::run(sb, options, peers, rx, &mut sink),
    )
    .await;
    match sink.error {
        Some(e) => Err(e),
        None => read,
    }
}

async fn read_frames(
    input: impl AsyncRead + Unpin,
    tx: Sender<GatewayInput>,
) -> std::io::Result<()> {
    let _ = tx
        .send(GatewayInput::Opened {
            session: SESSION,
            strict: false,
        })
        .await;
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    let result = loop {
        line.clear();
        match read_line(&mut reader, &mut line).await {
            Ok(false) => break Ok(()),
            Ok(true) => {}
            Err(e) => break Err(e),
        }
        let frame = line.trim_ascii();
        if frame.is_empty() {
            continue;
        }
        let input = GatewayInput::Frame {
            session: SESSION,
            exchange: EXCHANGE,
            frame: bytes::Bytes::copy_from_slice(frame),
        };
        if tx.send(input).await.is_err() {
            break Ok(());
        }
    };
    let _ = tx.send(GatewayInput::Closed { session: SESSION }).await;
    result
}

/// One line into `line` (with its newline); `false` at the end of the stream. A line over
/// the limit is an error.
async fn read_line(
    reader: &mut BufReader<impl AsyncRead + Unpin>,
    line: &mut Vec<u8>,
) -> std::io::Result<bool> {
    let limit = MAX_DOWNSTREAM_FRAME as u64 + 1;
    let n = reader.take(limit).read_until(b'\n', line).await?;
    if n as u64 >= limit && line.last() != Some(&b'\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "a message on stdin is over {} MiB",
                MAX_DOWNSTREAM_FRAME >> 20
            ),
        ));
    }
    Ok(n > 0)
}

struct StreamSink<W> {
    out: W,
    error: Option<std::io::Error>,
}

impl<W: AsyncWrite + Unpin> Sink for StreamSink<W> {
    async fn deliver(&mut self, out: GatewayOutput) {
        let GatewayOutput::Send { frame, .. } = out else {
            return;
        };
        if self.error.is_some() {
            return;
        }
        let written = async {
            self.out.write_all(&frame).await?;
            self.out.write_all(b"\n").await?;
            self.out.flush().await
        }
        .await;
        if let Err(e) = written {
            self.error = Some(e);
        }
    }
}
