//! Frames on the pipes: queued frames written to stdin one per line, stdout split into frames
//! (see "Framing decisions" in the `stdio` module documentation), and stderr passed on line by
//! line (the core keeps the attempt's last lines for its errors). This is the hot path of
//! every stdio call.

use super::StdioEvent;
use crate::proc::{ChildStderr, ChildStdin, ChildStdout};
use async_channel::{Receiver, Sender};
use async_io::Async;
use bytes::Bytes;
use futures_lite::{future, AsyncReadExt, AsyncWriteExt};
use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Read chunk size for stdout; also the unit of work between yields. Each live server keeps
/// one, so it is kept small (a larger frame just takes several reads).
const CHUNK: usize = 16 * 1024;
/// Read chunk size for stderr (diagnostics only; lines are cut at `MAX_STDERR_LINE`).
const STDERR_CHUNK: usize = 4 * 1024;
/// Frames the stdout reader delivers before it yields to other tasks.
const FRAMES_PER_TURN: usize = 256;
/// Short reads the stdout reader makes before it yields (see the reader's loop).
const READS_PER_TURN: usize = 16;
/// Longest stderr line kept (the rest of the line is dropped).
const MAX_STDERR_LINE: usize = 4096;
/// Longest preview of a garbage stdout line in logs and errors.
const GARBAGE_PREVIEW: usize = 200;

/// Largest batch buffer the writer keeps between batches; a bigger one (a huge frame) is
/// released after its write.
const WRITE_BUF_KEEP: usize = 64 * 1024;

/// Writes queued frames to the server's stdin, one per line. Ends (closing stdin) when the
/// queue's sender is gone, on a write error, or when cancelled by the supervisor.
///
/// Everything queued when the writer wakes goes out in one `write`: the frames are copied
/// into one buffer, newlines included, so a burst the driver queued in one turn costs one
/// syscall (and one server wake-up), and a lone frame costs exactly one as well. `queued`
/// counts the bytes still waiting (the write queue's limit is checked against it).
pub(super) async fn write_frames(
    server: String,
    mut stdin: ChildStdin,
    frames: Receiver<Bytes>,
    queued: Arc<AtomicUsize>,
) {
    let mut batch: Vec<u8> = Vec::new();
    while let Ok(frame) = frames.recv().await {
        batch.extend_from_slice(&frame);
        batch.push(b'\n');
        while let Ok(frame) = frames.try_recv() {
            batch.extend_from_slice(&frame);
            batch.push(b'\n');
        }
        queued.fetch_sub(batch.len(), Ordering::AcqRel);
        if let Err(e) = stdin.write_all(&batch).await {
            // Usually EPIPE: the server exited; the stdout reader reports that.
            tracing::debug!(target: "switchboard::server", server = %server, error = %e, "writing to the server's stdin failed");
            frames.close();
            return;
        }
        batch.clear();
        if batch.capacity() > WRITE_BUF_KEEP {
            batch = Vec::new();
        }
    }
}

/// Reads stderr line by line into `tracing` and [`StdioEvent::Stderr`] events (waiting when
/// the events channel is full: back-pressure at the pipe). Ends at EOF, or when nobody
/// listens to events any more.
pub(super) async fn read_stderr<T: Clone, M: From<(T, StdioEvent)>>(
    server: String,
    mut stderr: ChildStderr,
    tag: T,
    events: Sender<M>,
) {
    let mut chunk = vec![0u8; STDERR_CHUNK];
    let mut line: Vec<u8> = Vec::new();
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let mut rest = &chunk[..n];
        while !rest.is_empty() {
            let (piece, newline) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..i], true),
                None => (rest, false),
            };
            let room = MAX_STDERR_LINE.saturating_sub(line.len());
            line.extend_from_slice(&piece[..piece.len().min(room)]);
            if newline {
                if let Some(event) = stderr_event(&server, &tag, &mut line) {
                    if events.send(event).await.is_err() {
                        return;
                    }
                }
                rest = &rest[piece.len() + 1..];
            } else {
                rest = &[];
            }
        }
        future::yield_now().await;
    }
    if let Some(event) = stderr_event(&server, &tag, &mut line) {
        let _ = events.send(event).await;
    }
}

/// The event for one stderr line (none for a blank one); clears `line`.
fn stderr_event<T: Clone, M: From<(T, StdioEvent)>>(
    server: &str,
    tag: &T,
    line: &mut Vec<u8>,
) -> Option<M> {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end();
    let event = (!text.is_empty()).then(|| {
        tracing::debug!(target: "switchboard::server", server = %server, "{text}");
        M::from((
            tag.clone(),
            StdioEvent::Stderr {
                line: text.to_string(),
            },
        ))
    });
    line.clear();
    event
}

pub(super) struct StdoutReader {
    pub(super) server: String,
    pub(super) max_frame_len: usize,
    pub(super) max_garbage_lines: usize,
}

/// Why the stdout reader stopped.
pub(super) enum StdoutEnd {
    Eof,
    Failed(String),
    /// Nobody listens to events any more.
    EventsGone,
}

/// Splits stdout into frames and sends them. Memory is bounded by `max_frame_len` + `CHUNK`.
pub(super) async fn read_stdout<T: Clone, M: From<(T, StdioEvent)>>(
    cfg: StdoutReader,
    stdout: ChildStdout,
    tag: T,
    events: Sender<M>,
) -> StdoutEnd {
    // Our own registration of the pipe, for `readable()`: after a short read the pipe is
    // (almost always) empty, so the reader waits for readiness instead of paying a `read`
    // that would only say EAGAIN. Once per answer in a sequential exchange.
    let stdout = match OwnedFd::try_from(stdout).and_then(|fd| Async::new(File::from(fd))) {
        Ok(stdout) => stdout,
        Err(e) => return StdoutEnd::Failed(format!("reading the server's stdout failed: {e}")),
    };
    let mut drained = false;
    let mut chunk = vec![0u8; CHUNK];
    let mut line: Vec<u8> = Vec::new();
    let mut garbage_run = 0usize;
    let mut frames_this_turn = 0usize;
    let mut reads_this_turn = 0usize;
    let too_long = || {
        StdoutEnd::Failed(format!(
            "stdout frame exceeds the {} limit (more than {} bytes without a newline)",
            crate::units::human_size(cfg.max_frame_len),
            cfg.max_frame_len
        ))
    };
    loop {
        if drained {
            if let Err(e) = stdout.readable().await {
                return StdoutEnd::Failed(format!("reading the server's stdout failed: {e}"));
            }
        }
        let n = match stdout.read_with(|f| (&*f).read(&mut chunk)).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return StdoutEnd::Failed(format!("reading the server's stdout failed: {e}")),
        };
        drained = n < chunk.len();
        let mut rest = &chunk[..n];
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            if line.len() + i > cfg.max_frame_len {
                return too_long();
            }
            let whole = if line.is_empty() {
                Bytes::copy_from_slice(&rest[..i])
            } else {
                line.extend_from_slice(&rest[..i]);
                Bytes::from(std::mem::take(&mut line))
            };
            rest = &rest[i + 1..];
            match classify_line(&cfg, whole, &mut garbage_run) {
                Line::Skip => {}
                Line::Frame(frame) => {
                    if events
                        .send(M::from((tag.clone(), StdioEvent::Frame(frame))))
                        .await
                        .is_err()
                    {
                        return StdoutEnd::EventsGone;
                    }
                    frames_this_turn += 1;
                    if frames_this_turn == FRAMES_PER_TURN {
                        frames_this_turn = 0;
                        future::yield_now().await;
                    }
                }
                Line::End(end) => return end,
            }
        }
        if line.len() + rest.len() > cfg.max_frame_len {
            return too_long();
        }
        line.extend_from_slice(rest);
        // At most one full chunk (and FRAMES_PER_TURN frames) of work per turn: a chatty
        // server must not starve other tasks. After a short read the wait for readiness is
        // the turn's end already; yielding there too would only reschedule the task once
        // more per answer (and, on a multi-threaded executor, wake another thread for it).
        // (Readiness can be there at once when another thread ran the reactor meanwhile,
        // so short reads are bounded per turn too.)
        reads_this_turn += 1;
        if !drained || reads_this_turn == READS_PER_TURN {
            frames_this_turn = 0;
            reads_this_turn = 0;
            future::yield_now().await;
        }
    }
    if !line.is_empty() {
        match classify_line(&cfg, Bytes::from(line), &mut garbage_run) {
            Line::Skip => {}
            Line::Frame(frame) => {
                if events
                    .send(M::from((tag, StdioEvent::Frame(frame))))
                    .await
                    .is_err()
                {
                    return StdoutEnd::EventsGone;
                }
            }
            Line::End(end) => return end,
        }
    }
    StdoutEnd::Eof
}

enum Line {
    Skip,
    Frame(Bytes),
    End(StdoutEnd),
}

/// Classifies one stdout line (see "Framing decisions" in the module documentation).
fn classify_line(cfg: &StdoutReader, mut line: Bytes, garbage_run: &mut usize) -> Line {
    if line.last() == Some(&b'\r') {
        line.truncate(line.len() - 1);
    }
    let Some(first) = line.iter().find(|b| !b.is_ascii_whitespace()) else {
        return Line::Skip; // empty line
    };
    // A JSON-RPC message is an object: a line that starts with `{` and ends with `}` goes to
    // the core as it is (the core parses it anyway and reports a malformed one), so the hot
    // path parses each frame once. Anything else is checked fully: log lines like
    // `[INFO] ready` must not reach the core.
    let last = line.iter().rev().find(|b| !b.is_ascii_whitespace());
    let is_json = match (first, last) {
        (b'{', Some(b'}')) => true,
        (b'{' | b'[', _) => serde_json::from_slice::<serde::de::IgnoredAny>(&line).is_ok(),
        _ => false,
    };
    if is_json {
        *garbage_run = 0;
        return Line::Frame(line);
    }
    *garbage_run += 1;
    let preview = preview(&line);
    tracing::warn!(target: "switchboard::server", server = %cfg.server, line = %preview, "dropping a non-JSON line from the server's stdout");
    if *garbage_run >= cfg.max_garbage_lines {
        return Line::End(StdoutEnd::Failed(format!(
            "server writes non-MCP output to stdout ({} non-JSON lines in a row; the last: {preview:?})",
            *garbage_run
        )));
    }
    Line::Skip
}

fn preview(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    match text.char_indices().nth(GARBAGE_PREVIEW) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}
