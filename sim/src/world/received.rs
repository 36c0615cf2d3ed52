//! What a simulated server reads of a frame the manager wrote to it. A server acts on a few
//! members only (the method, the id, some params and `_meta` entries), so instead of building
//! a `serde_json::Value` of the whole frame (every object a map, every key and string a fresh
//! allocation) it picks those members out as the text of their values, borrowed from the
//! frame, and reads one further only when it is asked for. Lookups mean what `Value`'s do: an
//! absent member and a member of a value that is not an object are both `None`, a `null`
//! member is present, and when a key repeats the last one counts. Debug builds also parse the
//! whole frame as a `Value` and assert that every member read here equals the `Value`'s.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// A member's value as the frame wrote it.
pub(super) type Raw<'a> = &'a RawValue;

/// The members of a JSON object that `keys` names.
struct Pick<'k, const N: usize>(&'k [&'k str; N]);

impl<'de, const N: usize> Visitor<'de> for Pick<'_, N> {
    type Value = [Option<Raw<'de>>; N];

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = [None; N];
        while let Some(key) = map.next_key::<Text<'de>>()? {
            match self.0.iter().position(|k| *k == key.0) {
                Some(at) => out[at] = Some(map.next_value::<Raw<'de>>()?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

/// A visitor's answer to a value that is not an object: it has no members (`Value::get` finds
/// none either).
macro_rules! no_members {
    ($empty:expr) => {
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($empty)
        }
    };
}

/// The `params._meta` members [`META`] names, whatever `_meta` is.
struct MetaSeed;

impl<'de> DeserializeSeed<'de> for MetaSeed {
    type Value = [Option<Raw<'de>>; 5];

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MetaSeed {
    type Value = [Option<Raw<'de>>; 5];

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Pick(&META).visit_map(map)
    }

    no_members!([None; 5]);
}

/// The params members [`PARAMS`] names (`_meta` read by [`MetaSeed`] in the same pass),
/// whatever `params` is: the members, whether `_meta` is there, and its members.
struct ParamsSeed;

type ParamsOut<'de> = ([Option<Raw<'de>>; 12], bool, [Option<Raw<'de>>; 5]);

impl<'de> DeserializeSeed<'de> for ParamsSeed {
    type Value = ParamsOut<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ParamsSeed {
    type Value = ParamsOut<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut out, mut has_meta, mut meta) = ([None; 12], false, [None; 5]);
        while let Some(key) = map.next_key::<Text<'de>>()? {
            if key.0 == PARAMS[0] {
                has_meta = true;
                meta = map.next_value_seed(MetaSeed)?;
                continue;
            }
            match PARAMS.iter().position(|k| *k == key.0) {
                Some(at) => out[at] = Some(map.next_value::<Raw<'de>>()?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((out, has_meta, meta))
    }

    no_members!(([None; 12], false, [None; 5]));
}

/// A frame's `method` and `id` as written, and its params read by [`ParamsSeed`]: one pass.
struct TopVisitor;

type TopOut<'de> = (Option<Raw<'de>>, Option<Raw<'de>>, ParamsOut<'de>);

impl<'de> Visitor<'de> for TopVisitor {
    type Value = TopOut<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut method, mut id, mut params) = (None, None, ([None; 12], false, [None; 5]));
        while let Some(key) = map.next_key::<Text<'de>>()? {
            match key.0.as_ref() {
                "method" => method = Some(map.next_value::<Raw<'de>>()?),
                "id" => id = Some(map.next_value::<Raw<'de>>()?),
                "params" => params = map.next_value_seed(ParamsSeed)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((method, id, params))
    }
}

/// A JSON string, borrowed from the frame unless it holds an escape.
struct Text<'a>(Cow<'a, str>);

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Owned(s.to_string())))
    }
}

impl<'de> serde::Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(TextVisitor)
    }
}

/// The members `keys` names of the object `text` (the whole text must be that object).
fn pick<'a, const N: usize>(
    text: &'a str,
    keys: &[&str; N],
) -> Result<[Option<Raw<'a>>; N], serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let out = de.deserialize_map(Pick(keys))?;
    de.end()?;
    Ok(out)
}

/// The members `keys` names of `raw`, all `None` when it is not an object.
fn members<'a, const N: usize>(raw: Option<Raw<'a>>, keys: &[&str; N]) -> [Option<Raw<'a>>; N] {
    raw.and_then(|r| pick(r.get(), keys).ok())
        .unwrap_or([None; N])
}

/// Member `key` of `raw` (`Value::get`).
pub(super) fn get<'a>(raw: Option<Raw<'a>>, key: &str) -> Option<Raw<'a>> {
    let [v] = members(raw, &[key]);
    v
}

/// The string `raw` holds (`Value::as_str`).
pub(super) fn str_of(raw: Option<Raw<'_>>) -> Option<Cow<'_, str>> {
    let raw = raw?;
    let mut de = serde_json::Deserializer::from_str(raw.get());
    let s = de.deserialize_str(TextVisitor).ok().map(|t| t.0);
    debug_assert_eq!(s.as_deref(), value_of(raw).as_str());
    s
}

/// The unsigned integer `raw` holds (`Value::as_u64`).
pub(super) fn u64_of(raw: Option<Raw<'_>>) -> Option<u64> {
    let raw = raw?;
    let n = serde_json::from_str::<u64>(raw.get()).ok();
    debug_assert_eq!(n, value_of(raw).as_u64());
    n
}

/// `raw` is `true`.
pub(super) fn is_true(raw: Option<Raw<'_>>) -> bool {
    let t = raw.is_some_and(|r| r.get() == "true");
    debug_assert_eq!(t, raw.map(value_of) == Some(Value::Bool(true)));
    t
}

/// `raw` is a JSON object (`Value::is_object`).
pub(super) fn is_object(raw: Option<Raw<'_>>) -> bool {
    raw.is_some_and(|r| r.get().starts_with('{'))
}

/// `raw` is a JSON array (`Value::is_array`).
pub(super) fn is_array(raw: Option<Raw<'_>>) -> bool {
    raw.is_some_and(|r| r.get().starts_with('['))
}

/// `raw` as a `Value`.
pub(super) fn value_of(raw: Raw<'_>) -> Value {
    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
}

const PARAMS: [&str; 12] = [
    "_meta",
    "capabilities",
    "cursor",
    "name",
    "task",
    "taskId",
    "requestState",
    "inputResponses",
    "notifications",
    "uri",
    "requestId",
    "reason",
];

const META: [&str; 5] = [
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/logLevel",
    "progressToken",
];

/// The params members a simulated server reads.
#[derive(Debug, Clone, Copy)]
pub(super) struct Params<'a> {
    /// It has `_meta` (of any type).
    pub(super) has_meta: bool,
    pub(super) capabilities: Option<Raw<'a>>,
    pub(super) cursor: Option<Raw<'a>>,
    pub(super) name: Option<Raw<'a>>,
    pub(super) task: Option<Raw<'a>>,
    pub(super) task_id: Option<Raw<'a>>,
    pub(super) request_state: Option<Raw<'a>>,
    pub(super) input_responses: Option<Raw<'a>>,
    pub(super) notifications: Option<Raw<'a>>,
    pub(super) uri: Option<Raw<'a>>,
    pub(super) request_id: Option<Raw<'a>>,
    pub(super) reason: Option<Raw<'a>>,
}

/// The `params._meta` members a simulated server reads.
#[derive(Debug, Clone, Copy)]
pub(super) struct Meta<'a> {
    pub(super) protocol_version: Option<Raw<'a>>,
    pub(super) client_capabilities: Option<Raw<'a>>,
    pub(super) client_info: Option<Raw<'a>>,
    pub(super) log_level: Option<Raw<'a>>,
    pub(super) progress_token: Option<Raw<'a>>,
}

/// A frame a simulated server received, read as far as it acts on it.
#[derive(Debug)]
pub(super) struct Received<'a> {
    /// The whole frame.
    pub(super) text: &'a str,
    /// `method`, when it is a string.
    pub(super) method: Option<Cow<'a, str>>,
    /// `id` (present even when `null`).
    pub(super) id: Option<Value>,
    pub(super) params: Params<'a>,
    pub(super) meta: Meta<'a>,
}

impl<'a> Received<'a> {
    /// Read `frame`; `Err` is why it is not JSON (`serde_json`'s words, as a `Value` parse
    /// gives them).
    pub(super) fn read(frame: &'a [u8]) -> Result<Self, String> {
        let not_json = || {
            serde_json::from_slice::<Value>(frame)
                .err()
                .map_or_else(String::new, |e| e.to_string())
        };
        let text = std::str::from_utf8(frame).map_err(|_| not_json())?;
        let top = {
            let mut de = serde_json::Deserializer::from_str(text);
            de.deserialize_map(TopVisitor)
                .and_then(|t| de.end().map(|()| t))
        };
        let (method, id, (params, has_meta, meta)) = match top {
            Ok(top) => top,
            // JSON, but not an object: it has none of the members.
            Err(_) if serde_json::from_str::<IgnoredAny>(text).is_ok() => {
                (None, None, ([None; 12], false, [None; 5]))
            }
            Err(_) => return Err(not_json()),
        };
        let [_, capabilities, cursor, name, task, task_id, request_state, input_responses, notifications, uri, request_id, reason] =
            params;
        let [protocol_version, client_capabilities, client_info, log_level, progress_token] = meta;
        let r = Received {
            text,
            method: str_of(method),
            id: id.map(value_of),
            params: Params {
                has_meta,
                capabilities,
                cursor,
                name,
                task,
                task_id,
                request_state,
                input_responses,
                notifications,
                uri,
                request_id,
                reason,
            },
            meta: Meta {
                protocol_version,
                client_capabilities,
                client_info,
                log_level,
                progress_token,
            },
        };
        #[cfg(debug_assertions)]
        r.agrees(frame);
        Ok(r)
    }

    /// `method`.
    pub(super) fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }

    /// The whole frame as a `Value` (for the words of a violation, and the rarer frames).
    pub(super) fn value(&self) -> Value {
        serde_json::from_str(self.text).unwrap_or(Value::Null)
    }

    /// Every member read here is the one a `Value` of the whole frame has.
    #[cfg(debug_assertions)]
    fn agrees(&self, frame: &[u8]) {
        use crate::json::At;
        let v: Value = serde_json::from_slice(frame).expect("read here, so a Value reads it too");
        assert_eq!(self.method(), v.get("method").and_then(Value::as_str));
        assert_eq!(self.id.as_ref(), v.get("id"));
        let p = &self.params;
        assert_eq!(p.has_meta, v.at("/params/_meta").is_some());
        let params = [
            None,
            p.capabilities,
            p.cursor,
            p.name,
            p.task,
            p.task_id,
            p.request_state,
            p.input_responses,
            p.notifications,
            p.uri,
            p.request_id,
            p.reason,
        ];
        for (raw, key) in params.into_iter().zip(PARAMS).skip(1) {
            let want = v.get("params").and_then(|p| p.get(key));
            assert_eq!(raw.map(value_of).as_ref(), want, "params.{key}");
        }
        let m = &self.meta;
        let meta = [
            m.protocol_version,
            m.client_capabilities,
            m.client_info,
            m.log_level,
            m.progress_token,
        ];
        for (raw, key) in meta.into_iter().zip(META) {
            let want = v.at("/params/_meta").and_then(|m| m.get(key));
            assert_eq!(raw.map(value_of).as_ref(), want, "params._meta.{key}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::At;

    #[test]
    fn reads_what_a_value_reads() {
        let frames = [
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"p1"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"x","params":{"cursor":null}}"#,
            r#"{"method":"a","method":"b\u0041","params":[1,2]}"#,
            r#"{"method":7,"params":{"_meta":{"progressToken":5,"io.modelcontextprotocol/logLevel":"debug"},"name":"t\"q"}}"#,
            r#"{"params":{"_meta":"x","notifications":{"toolsListChanged":true}}}"#,
            r#"[{"jsonrpc":"2.0"}]"#,
            r#"12"#,
        ];
        for f in frames {
            let r = Received::read(f.as_bytes()).expect(f);
            let v: Value = serde_json::from_str(f).unwrap();
            assert_eq!(r.value(), v);
            assert_eq!(r.method(), v.get("method").and_then(Value::as_str), "{f}");
            assert_eq!(
                u64_of(r.meta.progress_token),
                v.at("/params/_meta/progressToken").and_then(Value::as_u64)
            );
            assert_eq!(
                is_true(get(r.params.notifications, "toolsListChanged")),
                v.at("/params/notifications/toolsListChanged") == Some(&Value::Bool(true))
            );
        }
        for bad in ["{\"id\":", "{\"a\":1} x", "{\"a\":tru}", "\u{1}"] {
            let want = serde_json::from_str::<Value>(bad).unwrap_err().to_string();
            assert_eq!(Received::read(bad.as_bytes()).unwrap_err(), want, "{bad}");
        }
        let not_utf8 = b"{\"id\":\"\xff\"}";
        assert!(Received::read(not_utf8).is_err());
    }
}
