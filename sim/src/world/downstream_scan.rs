//! Reading a frame the gateway wrote in one pass over its bytes, picking out only what
//! [`Written`] holds and skipping (but checking) everything else: a `serde_json::Value` would
//! build every object of the frame only for most of it to be dropped unread.
//!
//! The scan either reads the frame exactly as the `Value` lookups of [`Written::of_value`]
//! would, or gives up (`None`): on anything it does not read the way `serde_json` does — not
//! JSON, a key or a wanted string with an escape, a number it would have to convert, a
//! nesting deeper than `serde_json` allows —, and the frame is then read through a `Value`.
//! A key written twice counts as `serde_json`'s map keeps it: the last one.

use super::downstream_wire::Written;
use bytes::Bytes;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Deeper than this, the scan gives up (`serde_json` refuses nesting past 128).
const MAX_DEPTH: usize = 100;

struct Scan<'a> {
    /// The frame (valid UTF-8: every position next to an ASCII byte is a char boundary).
    text: &'a str,
    b: &'a [u8],
    i: usize,
}

/// The scan, or why it gave up (nothing to say: the caller reads the frame another way).
type R<T> = Option<T>;

impl<'a> Scan<'a> {
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.i) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    fn peek(&mut self) -> R<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> R<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string without escapes, borrowed (the opening quote is next); gives up on escapes.
    fn plain_str(&mut self) -> R<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        loop {
            let c = *self.b.get(self.i)?;
            match c {
                b'"' => {
                    let s = self.text.get(start..self.i)?;
                    self.i += 1;
                    return Some(s);
                }
                b'\\' => return None,
                0..=0x1f => return None,
                _ => self.i += 1,
            }
        }
    }

    /// Skip a string (the opening quote is next), checking its escapes.
    fn skip_str(&mut self) -> R<()> {
        self.eat(b'"')?;
        loop {
            let c = *self.b.get(self.i)?;
            self.i += 1;
            match c {
                b'"' => return Some(()),
                b'\\' => match *self.b.get(self.i)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                    // A `\u` escape: lone surrogates are `serde_json`'s to judge.
                    _ => return None,
                },
                0..=0x1f => return None,
                _ => {}
            }
        }
    }

    /// Skip a number, checking its grammar; the text of it.
    fn number(&mut self) -> R<&'a str> {
        let start = self.i;
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        let digits = |s: &mut Self| {
            let from = s.i;
            while s.b.get(s.i).is_some_and(u8::is_ascii_digit) {
                s.i += 1;
            }
            s.i - from
        };
        let first = *self.b.get(self.i)?;
        let n = digits(self);
        if n == 0 || (first == b'0' && n > 1) {
            return None;
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            if digits(self) == 0 {
                return None;
            }
        }
        // An exponent may put a number out of `serde_json`'s range (which refuses it), and a
        // long one may too.
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) || self.i - start > 300 {
            return None;
        }
        self.text.get(start..self.i)
    }

    fn literal(&mut self, word: &[u8]) -> R<()> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// Skip any value, checking it.
    fn skip(&mut self, depth: usize) -> R<()> {
        match self.peek()? {
            b'"' => self.skip_str(),
            b'{' => self.object(depth, |s, _, d| s.skip(d)),
            b'[' => self.array(depth, |s, _, d| s.skip(d)),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(|_| ()),
        }
    }

    /// An object (next): `member` reads each value, told its key.
    fn object(
        &mut self,
        depth: usize,
        mut member: impl FnMut(&mut Self, &'a str, usize) -> R<()>,
    ) -> R<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key = self.plain_str()?;
            self.eat(b':')?;
            member(self, key, depth + 1)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An array (next): `element` reads each value, told its index.
    fn array(
        &mut self,
        depth: usize,
        mut element: impl FnMut(&mut Self, usize, usize) -> R<()>,
    ) -> R<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        let mut k = 0;
        loop {
            element(self, k, depth + 1)?;
            k += 1;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A value read as `Value::as_str` reads it: a string (without escapes), or `None` for
    /// anything else (skipped).
    fn str_or_skip(&mut self, depth: usize) -> R<Option<String>> {
        if self.peek()? == b'"' {
            self.plain_str().map(|s| Some(s.to_string()))
        } else {
            self.skip(depth).map(|()| None)
        }
    }

    /// A value as a `Value` (for the few small ones kept whole).
    fn value(&mut self, depth: usize) -> R<Value> {
        self.ws();
        let start = self.i;
        self.skip(depth)?;
        serde_json::from_slice(&self.b[start..self.i]).ok()
    }

    /// A value read as `Value::as_i64` reads it: an integer; `None` for anything else
    /// (skipped). Gives up on a number that is not a plain integer `serde_json` would read
    /// as one.
    fn int_or_skip(&mut self, depth: usize) -> R<Option<i64>> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => {
                let text = self.number()?;
                // `serde_json` reads `-0` as a float.
                if text.contains('.') || text == "-0" {
                    return None;
                }
                text.parse::<i64>().ok().map(Some)
            }
            _ => self.skip(depth).map(|()| None),
        }
    }
}

/// What results read before say, by their bytes: the gateway serves the same page (or the
/// same answer) to many clients and again, under other ids. Bounded: emptied when full.
#[derive(Debug, Default)]
pub(super) struct Results {
    read: BTreeMap<Bytes, Written>,
}

/// How many results [`Results`] keeps at most.
const MAX_RESULTS: usize = 512;

/// The scan of a whole frame (see the module's words). A `result` that ends the frame and
/// was read before is taken from `seen` (debug builds scan it anyway and compare).
pub(super) fn scan(frame: &Bytes, seen: &mut Results) -> Option<Written> {
    let text = std::str::from_utf8(frame).ok()?;
    let mut s = Scan {
        text,
        b: text.as_bytes(),
        i: 0,
    };
    let mut w = Written::empty(frame.clone());
    if s.peek()? == b'{' {
        s.object(0, |s, key, d| match key {
            "id" => s.value(d).map(|v| w.id = Some(v)),
            "method" => s.str_or_skip(d).map(|m| w.method = m),
            "error" => {
                w.error = true;
                w.code = None;
                if s.peek()? == b'{' {
                    s.object(d, |s, key, d| match key {
                        "code" => s.int_or_skip(d).map(|c| w.code = c),
                        _ => s.skip(d),
                    })
                } else {
                    s.skip(d)
                }
            }
            "result" => {
                w.clear_result();
                if s.peek()? != b'{' {
                    return s.skip(d);
                }
                // The result's bytes when it ends the frame (`}` is all that follows).
                let start = s.i;
                let last = s.b.len().checked_sub(1)?;
                let tail = (s.b[last] == b'}' && last > start).then(|| frame.slice(start..last));
                let known = tail.as_ref().and_then(|t| seen.read.get(t));
                if let Some(known) = known.filter(|_| !cfg!(debug_assertions)) {
                    w.result_from(known);
                    s.i = last;
                    return Some(());
                }
                result(s, d, &mut w)?;
                if let Some(known) = known {
                    let mut again = w.clone();
                    again.result_from(known);
                    assert_eq!(again, w, "a result read before reads the same again");
                }
                if let Some(tail) = tail.filter(|_| s.i == last) {
                    if seen.read.len() >= MAX_RESULTS {
                        seen.read.clear();
                    }
                    seen.read.insert(tail, w.clone());
                }
                Some(())
            }
            "params" => {
                w.url = false;
                w.requested_schema = Value::Null;
                if s.peek()? == b'{' {
                    s.object(d, |s, key, d| match key {
                        "mode" => s
                            .str_or_skip(d)
                            .map(|m| w.url = m.as_deref() == Some("url")),
                        "requestedSchema" => s.value(d).map(|v| w.requested_schema = v),
                        _ => s.skip(d),
                    })
                } else {
                    s.skip(d)
                }
            }
            _ => s.skip(d),
        })?;
    } else {
        s.skip(0)?;
    }
    s.ws();
    (s.i == s.b.len()).then_some(w)
}

/// The members of a result object.
fn result(s: &mut Scan<'_>, depth: usize, w: &mut Written) -> R<()> {
    s.object(depth, |s, key, d| match key {
        "isError" => {
            w.is_error = false;
            if s.peek()? == b't' {
                s.literal(b"true").map(|()| w.is_error = true)
            } else {
                s.skip(d)
            }
        }
        "content" => {
            w.text = None;
            // `/content/0/text`: an array's first element, or an object's member "0".
            let text = |s: &mut Scan<'_>, d: usize, out: &mut Option<String>| {
                *out = None;
                if s.peek()? == b'{' {
                    s.object(d, |s, key, d| match key {
                        "text" => s.str_or_skip(d).map(|t| *out = t),
                        _ => s.skip(d),
                    })
                } else {
                    s.skip(d)
                }
            };
            match s.peek()? {
                b'[' => s.array(d, |s, k, d| {
                    if k == 0 {
                        text(s, d, &mut w.text)
                    } else {
                        s.skip(d)
                    }
                }),
                b'{' => s.object(d, |s, key, d| {
                    if key == "0" {
                        text(s, d, &mut w.text)
                    } else {
                        s.skip(d)
                    }
                }),
                _ => s.skip(d),
            }
        }
        "resultType" => s.str_or_skip(d).map(|t| w.result_type = t),
        "requestState" => s.str_or_skip(d).map(|t| w.request_state = t),
        "nextCursor" => {
            w.more = true;
            s.str_or_skip(d).map(|c| w.cursor = c)
        }
        "tools" => items(s, d, 0, w),
        "resources" => items(s, d, 1, w),
        "resourceTemplates" => items(s, d, 2, w),
        "prompts" => items(s, d, 3, w),
        "inputRequests" => s.value(d).map(|v| {
            w.input_requests = match v {
                Value::Object(m) => Some(m),
                _ => None::<Map<String, Value>>,
            }
        }),
        _ => s.skip(d),
    })
}

/// A list's items (kind `k`): each one's key when it is an object with a string there.
fn items(s: &mut Scan<'_>, depth: usize, k: usize, w: &mut Written) -> R<()> {
    w.items[k] = None;
    if s.peek()? != b'[' {
        return s.skip(depth);
    }
    let name = crate::invariants::gateway::LIST_FIELDS[k].1;
    let mut all = Vec::new();
    s.array(depth, |s, _, d| {
        let mut key = None;
        if s.peek()? == b'{' {
            s.object(d, |s, field, d| {
                if field == name {
                    s.str_or_skip(d).map(|v| key = v)
                } else {
                    s.skip(d)
                }
            })?;
        } else {
            s.skip(d)?;
        }
        all.push(key);
        Some(())
    })?;
    w.items[k] = Some(all);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the scan reads, and what the `Value` lookups read (`None`: not JSON).
    fn both(text: &str) -> (Option<Written>, Option<Written>) {
        let frame = Bytes::from(text.to_string());
        let reference = serde_json::from_slice::<Value>(&frame)
            .ok()
            .map(|v| Written::of_value(&v, frame.clone()));
        (scan(&frame, &mut Results::default()), reference)
    }

    #[test]
    fn the_scan_reads_what_the_value_lookups_read_or_gives_up() {
        let frames = [
            r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"a","inputSchema":{"type":"object","properties":{"x":[1,2.5,-3,true,null]}}},{"name":7},"x",{"title":"t"}],"nextCursor":"c1"}}"#,
            r#"{"id":"s","result":{"resources":[{"uri":"sim://a"}],"resourceTemplates":{"x":1},"prompts":[],"nextCursor":null}}"#,
            r#"{"id":null,"error":{"code":-32602,"message":"bad"}}"#,
            r#"{"id":1,"error":{"code":18446744073709551615}}"#,
            r#"{"id":1,"error":{"code":-0}}"#,
            r#"{"id":1,"error":{"code":1.0}}"#,
            r#"{"id":1,"error":{"code":1e3}}"#,
            r#"{"id":1,"error":"x"}"#,
            r#"{"id":1,"error":{"code":5},"error":{"message":"m"}}"#,
            r#"{"id":1,"result":{"isError":true,"content":[{"type":"text","text":"the call"},{"text":"b"}]}}"#,
            r#"{"id":1,"result":{"isError":1,"content":{"0":{"text":"zero"},"1":{}}}}"#,
            r#"{"id":1,"result":{"content":[],"resultType":"input_required","requestState":"abc","inputRequests":{"b":{"method":"roots/list"},"a":{"method":"elicitation/create","params":{"mode":"url"}}}}}"#,
            r#"{"id":1,"result":{"resultType":"complete"},"result":{"nextCursor":"n"}}"#,
            r#"{"jsonrpc":"2.0","method":"elicitation/create","id":"p1","params":{"mode":"url","requestedSchema":{"type":"object"}}}"#,
            r#"{"method":"sampling/createMessage","id":2,"params":{"mode":["url"]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
            r#"{"method":5,"id":[1,{"a":2}]}"#,
            r#"{"method":"a\"b","id":1}"#,
            r#"{"m\u0065thod":"x"}"#,
            r#"{"id":1,"result":{"tools":[{"name":"caf\u00e9"}]}}"#,
            r#"{"id":1,"result":{"tools":[{"name":"café"}]}}"#,
            r#" [1, {"id": 2}] "#,
            r#""just a string""#,
            r#"{"id":1} x"#,
            r#"{"id":1,}"#,
            r#"{"id":01}"#,
            r#"{"id":1,"x":1e400}"#,
            r#"{"id":1,"x":"\ud800"}"#,
            r#"{"id":1,"x":tru}"#,
            r#"{"id":1,"x":"a	b"}"#,
            "{\"id\":1,\n \"result\" : { \"prompts\" : [ { \"name\" : \"p\" } ] } }\n",
            r#"{}"#,
            r#""#,
        ];
        for text in frames {
            let (scanned, reference) = both(text);
            if let Some(w) = &scanned {
                assert_eq!(Some(w), reference.as_ref(), "{text}");
            }
            // A frame is read the same in the end, scanned or not.
            let frame = Bytes::from(text.to_string());
            assert_eq!(
                Written::read(&frame, &mut Results::default()),
                reference,
                "{text}"
            );
        }
        // The scan reads frames like those the gateway writes itself; it gives up on numbers
        // it would have to convert.
        for (k, text) in frames[..17].iter().enumerate() {
            assert_eq!(both(text).0.is_some(), !(3..=6).contains(&k), "{text}");
        }
        // A result read before is read the same under another id (and is kept only when it
        // ends the frame).
        let mut seen = Results::default();
        let first = r#"{"id":1,"result":{"tools":[{"name":"a"}],"nextCursor":"c"}}"#;
        let again = r#"{"id":2,"result":{"tools":[{"name":"a"}],"nextCursor":"c"}}"#;
        let not_last = r#"{"id":3,"result":{"tools":[{"name":"a"}],"nextCursor":"c"},"x":1}"#;
        for text in [first, again, not_last, again] {
            let frame = Bytes::from(text.to_string());
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(
                scan(&frame, &mut seen),
                Some(Written::of_value(&v, frame.clone())),
                "{text}"
            );
        }
        assert_eq!(seen.read.len(), 1);
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(both(&deep).0, None);
    }
}
