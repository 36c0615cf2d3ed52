//! A Server-Sent Events parser that interprets an event stream the way browsers do, and
//! is fed arbitrary chunks of bytes (an event, a line, even a CRLF pair may be split anywhere).
//!
//! - Lines end with CRLF, LF or CR; a CR at the end of one chunk followed by an LF at the start
//!   of the next is one line end, not two.
//! - A leading UTF-8 byte order mark is skipped; lines are decoded as UTF-8 with replacement.
//! - `:` starts a comment; `field: value` loses one space after the colon; a line without a
//!   colon is a field with an empty value; unknown fields are ignored.
//! - `data` lines are joined with `\n`; an empty line dispatches. An event without any `data`
//!   line is not dispatched, but it still commits its `id`. (The 2025-11-25 "priming" event, an
//!   id and an empty `data`, is dispatched with empty data; callers skip it.)
//! - `id` containing NUL is ignored; `retry` is honoured only when it is all ASCII digits.
//! - An event (its pending line plus its data so far) larger than `max_event_len` is an error:
//!   the caller drops the stream. Memory stays bounded by `max_event_len` plus one chunk.

use std::time::Duration;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field, or `"message"` when the event had none.
    pub event: String,
    /// The `data` lines, joined with newlines.
    pub data: String,
    /// The last event id in force when this event was dispatched (what a resume sends as
    /// `Last-Event-ID`).
    pub id: Option<String>,
}

/// The stream broke the size limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTooLarge {
    /// The limit, in bytes.
    pub limit: usize,
}

impl std::fmt::Display for EventTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "an SSE event is larger than {}",
            crate::http::human_size(self.limit)
        )
    }
}

/// An incremental `text/event-stream` parser, bounded in memory.
#[derive(Debug)]
pub struct SseParser {
    max_event_len: usize,
    /// Bytes of the line being read (no line terminator).
    line: Vec<u8>,
    /// The previous chunk ended with CR: a leading LF in the next chunk belongs to it.
    after_cr: bool,
    /// Still at the very start of the stream (a BOM may follow).
    at_start: bool,
    data: String,
    event_type: String,
    id_buffer: Option<String>,
    last_event_id: Option<String>,
    retry: Option<Duration>,
}

impl SseParser {
    /// A parser that fails once one event grows past `max_event_len` bytes.
    pub fn new(max_event_len: usize) -> Self {
        SseParser {
            max_event_len,
            line: Vec::new(),
            after_cr: false,
            at_start: true,
            data: String::new(),
            event_type: String::new(),
            id_buffer: None,
            last_event_id: None,
            retry: None,
        }
    }

    /// The id a reconnect should send as `Last-Event-ID`.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_event_id.as_deref()
    }

    /// The reconnection delay the server asked for.
    pub fn retry(&self) -> Option<Duration> {
        self.retry
    }

    /// Feeds one chunk; dispatched events are appended to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), EventTooLarge> {
        if self.at_start {
            // The BOM may itself be split; hold back a prefix of it until we know.
            const BOM: &[u8] = b"\xEF\xBB\xBF";
            self.line.extend_from_slice(chunk);
            if self.line.len() < BOM.len() && BOM.starts_with(&self.line) {
                return Ok(());
            }
            self.at_start = false;
            let held = std::mem::take(&mut self.line);
            let rest = held.strip_prefix(BOM).unwrap_or(&held);
            return self.feed_lines(rest, out);
        }
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        self.feed_lines(chunk, out)
    }

    fn feed_lines(
        &mut self,
        mut chunk: &[u8],
        out: &mut Vec<SseEvent>,
    ) -> Result<(), EventTooLarge> {
        while let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.check_len(end)?;
            let mut line = std::mem::take(&mut self.line);
            line.extend_from_slice(&chunk[..end]);
            let terminator = chunk[end];
            chunk = &chunk[end + 1..];
            if terminator == b'\r' {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            self.process_line(&line, out);
            line.clear();
            self.line = line; // keep the allocation
        }
        self.check_len(chunk.len())?;
        self.line.extend_from_slice(chunk);
        Ok(())
    }

    fn check_len(&self, more: usize) -> Result<(), EventTooLarge> {
        if self.line.len() + more + self.data.len() > self.max_event_len {
            return Err(EventTooLarge {
                limit: self.max_event_len,
            });
        }
        Ok(())
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return; // comment (servers use them as keep-alives)
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => {
                self.data.push_str(&String::from_utf8_lossy(value));
                self.data.push('\n');
            }
            b"event" => self.event_type = String::from_utf8_lossy(value).into_owned(),
            b"id" if !value.contains(&0) => {
                self.id_buffer = Some(String::from_utf8_lossy(value).into_owned());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // All digits: only an overflow can fail, and then the value is ignored.
                if let Ok(ms) = String::from_utf8_lossy(value).parse::<u64>() {
                    self.retry = Some(Duration::from_millis(ms));
                }
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        // The last event id is committed even when nothing is dispatched: an id-only event
        // still moves the point a resumed stream starts from.
        if self.id_buffer.is_some() {
            self.last_event_id = self.id_buffer.clone().filter(|id| !id.is_empty());
        }
        let event_type = std::mem::take(&mut self.event_type);
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the trailing "\n"
        out.push(SseEvent {
            event: if event_type.is_empty() {
                "message".to_string()
            } else {
                event_type
            },
            data,
            id: self.last_event_id.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_chunks(chunks: &[&[u8]]) -> (Vec<SseEvent>, SseParser) {
        let mut p = SseParser::new(1 << 20);
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut out).unwrap();
        }
        (out, p)
    }

    fn ev(event: &str, data: &str, id: Option<&str>) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: id.map(Into::into),
        }
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        let (out, _) = parse_chunks(&[b"data: a\ndata:b\ndata:  c\n\n"]);
        assert_eq!(out, vec![ev("message", "a\nb\n c", None)]);
    }

    #[test]
    fn comments_unknown_fields_and_events_without_data_are_not_dispatched() {
        let (out, _) = parse_chunks(&[b": keep-alive\nfoo: bar\n\nevent: x\n\ndata\n\n"]);
        // "data" without a colon is a data line with an empty value: one event, empty data.
        assert_eq!(out, vec![ev("message", "", None)]);
    }

    #[test]
    fn event_type_and_id_apply_and_id_persists() {
        let (out, p) = parse_chunks(&[b"event: endpoint\nid: 7\ndata: /m?s=1\n\ndata: x\n\n"]);
        assert_eq!(
            out,
            vec![
                ev("endpoint", "/m?s=1", Some("7")),
                ev("message", "x", Some("7"))
            ]
        );
        assert_eq!(p.last_event_id(), Some("7"));
    }

    #[test]
    fn a_priming_event_commits_its_id() {
        // It is dispatched (its data buffer is "\n"), with empty data, which callers skip.
        let (out, p) = parse_chunks(&[b"id: prime-1\ndata:\n\n"]);
        assert_eq!(out, vec![ev("message", "", Some("prime-1"))]);
        assert_eq!(p.last_event_id(), Some("prime-1"));
        let (out, p) = parse_chunks(&[b"id: prime-2\n\n"]);
        assert!(out.is_empty(), "no data line: nothing dispatched, {out:?}");
        assert_eq!(p.last_event_id(), Some("prime-2"));
        let (_, p) = parse_chunks(&[b"id: 1\n\nid\n\n"]);
        assert_eq!(p.last_event_id(), None, "an empty id resets it");
        let (_, p) = parse_chunks(&[b"id: a\0b\n\n"]);
        assert_eq!(p.last_event_id(), None, "an id with NUL is ignored");
    }

    #[test]
    fn retry_takes_only_digits() {
        let (_, p) = parse_chunks(&[b"retry: 1500\n\n"]);
        assert_eq!(p.retry(), Some(Duration::from_millis(1500)));
        let (_, p) = parse_chunks(&[b"retry: 1500\nretry: 2s\nretry: -1\n\n"]);
        assert_eq!(p.retry(), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn crlf_cr_and_lf_line_ends_and_bom() {
        let (out, _) = parse_chunks(&[b"\xEF\xBB\xBFdata: a\r\n\r\ndata: b\r\rdata: c\n\n"]);
        assert_eq!(
            out,
            vec![
                ev("message", "a", None),
                ev("message", "b", None),
                ev("message", "c", None)
            ]
        );
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let stream: &[u8] = b"\xEF\xBB\xBF: hi\r\nretry: 250\r\nevent: message\r\nid: e1\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\ndata: two\rid: e2\r\r:c\ndata: three\n\n";
        let (whole, p) = parse_chunks(&[stream]);
        assert_eq!(
            whole,
            vec![
                ev("message", "{\"a\":\n1}", Some("e1")),
                ev("message", "two", Some("e2")),
                ev("message", "three", Some("e2")),
            ]
        );
        assert_eq!(p.retry(), Some(Duration::from_millis(250)));
        for i in 0..=stream.len() {
            for j in i..=stream.len() {
                let (out, p2) = parse_chunks(&[&stream[..i], &stream[i..j], &stream[j..]]);
                assert_eq!(out, whole, "split at {i} and {j}");
                assert_eq!(p2.last_event_id(), Some("e2"));
            }
        }
        // One byte at a time.
        let singles: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(parse_chunks(&singles).0, whole);
    }

    #[test]
    fn an_oversized_event_is_an_error_even_when_it_arrives_in_small_pieces() {
        let mut p = SseParser::new(64);
        let mut out = Vec::new();
        let mut failed = false;
        for _ in 0..100 {
            if p.feed(b"data: 0123456789\n", &mut out).is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed);
        assert!(out.is_empty());
        let mut p = SseParser::new(64);
        let long = vec![b'x'; 100];
        assert_eq!(p.feed(&long, &mut out), Err(EventTooLarge { limit: 64 }));
        // Events under the limit keep flowing.
        let mut p = SseParser::new(64);
        for _ in 0..100 {
            p.feed(b"data: 0123456789\n\n", &mut out).unwrap();
        }
        assert_eq!(out.len(), 100);
    }
}
