//! Simulated servers' answers written straight to bytes. Building a `serde_json::Value` for
//! every answer, serialising it and dropping it cost more than anything else a simulated
//! server does; the frames here are written member by member instead, in the very bytes
//! `serde_json` writes for the `Value` the server used to build (compact, object keys in
//! sorted order). Debug builds build that `Value` too and assert the bytes are its bytes.

use super::server::Tag;
use super::World;
use bytes::Bytes;
use serde::Serialize;
use serde_json::{json, Value};
use switchboard_core::manager::ConnId;

/// One JSON object written member by member; the caller names the members in the order
/// `serde_json` writes a `Value`'s (sorted by key).
pub(super) struct Obj<'b> {
    buf: &'b mut Vec<u8>,
    first: bool,
}

impl<'b> Obj<'b> {
    pub(super) fn new(buf: &'b mut Vec<u8>) -> Self {
        buf.push(b'{');
        Obj { buf, first: true }
    }

    /// Start member `k`: what is written next is its value.
    pub(super) fn key(&mut self, k: &str) -> &mut Vec<u8> {
        if !self.first {
            self.buf.push(b',');
        }
        self.first = false;
        write(self.buf, k);
        self.buf.push(b':');
        self.buf
    }

    /// Member `k`, any serialisable value (a string, a number, a `Value`).
    pub(super) fn val(&mut self, k: &str, v: &(impl Serialize + ?Sized)) -> &mut Self {
        let b = self.key(k);
        write(b, v);
        self
    }

    /// Member `k`, already serialised.
    pub(super) fn raw(&mut self, k: &str, v: &[u8]) -> &mut Self {
        self.key(k).extend_from_slice(v);
        self
    }

    pub(super) fn end(self) {
        self.buf.push(b'}');
    }
}

/// `v` as `serde_json` writes it.
pub(super) fn write(buf: &mut Vec<u8>, v: &(impl Serialize + ?Sized)) {
    let _ = serde_json::to_writer(buf, v);
}

/// `{"jsonrpc": "2.0", "id": id, "result": …}` around a result already serialised.
pub(super) fn result_bytes(id: &Value, result: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(result.len() + 48);
    let mut o = Obj::new(&mut frame);
    o.val("id", id).val("jsonrpc", "2.0").raw("result", result);
    o.end();
    frame
}

/// [`result_bytes`]; `value` is the result as a `Value` (built only by debug builds, to
/// check the bytes).
pub(super) fn checked_result(id: &Value, result: &[u8], value: impl FnOnce() -> Value) -> Bytes {
    let frame = result_bytes(id, result);
    debug_assert_eq!(
        frame,
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": value()}))
            .unwrap_or_default()
    );
    Bytes::from(frame)
}

/// `{"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}`.
pub(super) fn error_bytes(id: &Value, code: i64, message: &str) -> Vec<u8> {
    let mut frame = Vec::with_capacity(message.len() + 64);
    let mut o = Obj::new(&mut frame);
    let mut e = Obj::new(o.key("error"));
    e.val("code", &code).val("message", message);
    e.end();
    o.val("id", id).val("jsonrpc", "2.0");
    o.end();
    debug_assert_eq!(
        frame,
        serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        )
        .unwrap_or_default()
    );
    frame
}

/// `{"jsonrpc": "2.0", "method": method}`, with `params._meta` naming stream `stream`.
pub(super) fn notification_bytes(method: &str, stream: Option<u64>) -> Vec<u8> {
    let mut frame = Vec::with_capacity(96);
    let mut o = Obj::new(&mut frame);
    o.val("jsonrpc", "2.0").val("method", method);
    if let Some(n) = stream {
        let mut p = Obj::new(o.key("params"));
        let mut m = Obj::new(p.key("_meta"));
        m.val("io.modelcontextprotocol/subscriptionId", &n);
        m.end();
        p.end();
    }
    o.end();
    frame
}

impl World<'_> {
    /// Answer request `id` with an error.
    pub(super) fn reply_error(
        &mut self,
        conn: ConnId,
        ms: u64,
        id: &Value,
        code: i64,
        message: &str,
        tag: Tag,
    ) {
        let frame = error_bytes(id, code, message);
        self.reply_frame(conn, ms, Bytes::from(frame), tag);
    }
}

impl World<'_> {
    /// A list result of server `i`: the items `items` writes under `key`, the next cursor, and
    /// the cache hints [`World::add_hints`] gives.
    pub(super) fn write_list(
        &self,
        b: &mut Vec<u8>,
        i: usize,
        key: &str,
        next: Option<&str>,
        items: impl FnOnce(&mut Vec<u8>),
    ) {
        let (ttl, scope) = self.hints_of(i);
        let mut o = Obj::new(b);
        if let Some(s) = scope {
            o.val("cacheScope", s);
        }
        if let Some(c) = next {
            o.val("nextCursor", c);
        }
        items(o.key(key));
        if let Some(t) = ttl {
            o.val("ttlMs", &t);
        }
        o.end();
    }
}

/// A JSON array of what `each` writes for every item.
pub(super) fn write_array<T>(b: &mut Vec<u8>, items: &[T], mut each: impl FnMut(&mut Vec<u8>, &T)) {
    b.push(b'[');
    for (k, t) in items.iter().enumerate() {
        if k > 0 {
            b.push(b',');
        }
        each(b, t);
    }
    b.push(b']');
}

impl World<'_> {
    /// [`World::capabilities`], written.
    pub(super) fn write_capabilities(&self, b: &mut Vec<u8>, i: usize, tools: bool) {
        let catalog = self.sc.servers[i].catalog;
        let tasks = self.sc.mix.task_pct > 0;
        let mut o = Obj::new(b);
        if catalog {
            o.raw("completions", b"{}");
        }
        o.raw("logging", b"{}");
        if catalog {
            o.raw("prompts", br#"{"listChanged":true}"#)
                .raw("resources", br#"{"listChanged":true,"subscribe":true}"#);
        }
        if tasks || catalog {
            let mut t = Obj::new(o.key("tasks"));
            if tasks {
                t.raw("cancel", b"{}");
            }
            if catalog {
                t.raw("list", b"{}");
            }
            if tasks {
                t.raw("requests", br#"{"tools":{"call":{}}}"#);
            }
            t.end();
        }
        if tools {
            o.raw("tools", br#"{"listChanged":true}"#);
        }
        o.end();
    }

    /// The result of server `i`'s answer to `initialize` (`modern`: to `server/discover`).
    pub(super) fn write_hello(&self, b: &mut Vec<u8>, i: usize, tools: bool, modern: bool) {
        let mut o = Obj::new(b);
        self.write_capabilities(o.key("capabilities"), i, tools);
        if modern {
            o.val("resultType", "complete");
        } else {
            o.val("protocolVersion", "2025-06-18");
        }
        let mut s = Obj::new(o.key("serverInfo"));
        s.val("name", &self.sc.servers[i].name)
            .val("version", "1.0.0");
        s.end();
        if modern {
            o.raw("supportedVersions", br#"["2026-07-28"]"#);
        }
        o.end();
    }
}
