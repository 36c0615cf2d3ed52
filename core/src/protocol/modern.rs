//! The stateless revision of MCP (2026-07-28): what differs on the wire from the
//! `initialize`-based revisions. No handshake: `server/discover` says what a server speaks and
//! offers, and every request carries the protocol version, the client's capabilities and its
//! identity in `_meta`. Results say whether they are complete (`resultType`); an
//! `InputRequiredResult` asks the client for inputs and is answered by retrying the request
//! with `inputResponses` and the server's `requestState`, echoed as sent.

use super::message::malformed;
use super::{InitializeResult, ProtocolError, RpcError};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

/// The stateless revision's version.
pub const MODERN_VERSION: &str = "2026-07-28";

/// Stateless revisions we speak, preferred first.
pub const MODERN_VERSIONS: [&str; 1] = [MODERN_VERSION];

/// Error codes the stateless revision reserves.
pub mod modern_codes {
    /// An HTTP header disagrees with the request body.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// The server needs a client capability the request did not declare.
    pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
    /// The server does not speak the requested protocol version; `data.supported` lists
    /// those it does.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// `_meta` keys of every stateless request.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The client's capabilities, in `_meta`.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// The client's name and version, in `_meta`.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// The `subscriptions/listen` stream a notification belongs to (the listen request's id).
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// The log level the server may send `notifications/message` at for this request.
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// The first stateless version we speak among `supported`.
pub fn pick_modern(supported: &[String]) -> Option<&'static str> {
    MODERN_VERSIONS
        .into_iter()
        .find(|v| supported.iter().any(|s| s == v))
}

/// The versions an `UnsupportedProtocolVersionError` says the server speaks.
pub fn supported_versions(error: &RpcError) -> Vec<String> {
    error
        .data
        .as_ref()
        .and_then(|d| d.get("supported"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .take(64)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// What a `server/discover` answer says about the server.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeAnswer {
    /// A stateless server: what it offers, under the version we will speak.
    Modern(InitializeResult),
    /// A stateless server that does not speak the version we asked for, but speaks this one.
    Retry(&'static str),
    /// A stateless server that refused the request for another reason of the revision's
    /// (a missing capability, a header mismatch): it cannot be used as configured.
    Refused(RpcError),
    /// Anything else: an older server; it gets `initialize`.
    Legacy,
}

/// Classify the answer to `server/discover`. Only an answer of the stateless revision's own
/// shape (a `DiscoverResult`, or one of its reserved error codes) means a stateless server;
/// every other answer, whatever its code, means an older one.
pub fn classify_probe(answer: Result<&RawValue, &RpcError>, asked: &str) -> ProbeAnswer {
    match answer {
        Ok(raw) => match parse_discover_result(raw) {
            Ok(Some(init)) => ProbeAnswer::Modern(init),
            // A discover answer without a version we speak, or not one at all.
            Ok(None) | Err(_) => ProbeAnswer::Legacy,
        },
        Err(e) if e.code == modern_codes::UNSUPPORTED_PROTOCOL_VERSION => {
            // Even when it names the version we asked for (a server may reject the first
            // request it sees), one more ask with a version it lists is what it wants.
            let _ = asked;
            match pick_modern(&supported_versions(e)) {
                Some(v) => ProbeAnswer::Retry(v),
                None => ProbeAnswer::Legacy,
            }
        }
        Err(e)
            if e.code == modern_codes::MISSING_CLIENT_CAPABILITY
                || e.code == modern_codes::HEADER_MISMATCH =>
        {
            ProbeAnswer::Refused(e.clone())
        }
        Err(_) => ProbeAnswer::Legacy,
    }
}

/// Read a `DiscoverResult`: `Ok(None)` when it is well formed but lists no version we speak.
pub fn parse_discover_result(raw: &RawValue) -> Result<Option<InitializeResult>, ProtocolError> {
    let v: Value =
        serde_json::from_str(raw.get()).map_err(|e| malformed("server/discover", e.to_string()))?;
    let supported: Vec<String> = v
        .get("supportedVersions")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("server/discover", "missing supportedVersions"))?
        .iter()
        .filter_map(Value::as_str)
        .take(64)
        .map(str::to_string)
        .collect();
    let Some(version) = pick_modern(&supported) else {
        return Ok(None);
    };
    // `serverInfo` in the result, or (as some servers send it) in the result's `_meta`.
    let info = v
        .get("serverInfo")
        .or_else(|| v.get("_meta")?.get("io.modelcontextprotocol/serverInfo"));
    // Tasks are an extension in the stateless revision; not used over it.
    Ok(Some(InitializeResult::from_answer(
        version, &v, info, false,
    )))
}

/// What a result says it is (`resultType`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultType {
    /// `complete`, or no `resultType` at all (older servers never send one).
    Complete,
    /// `input_required`: an `InputRequiredResult`.
    InputRequired,
    /// A value this client does not know: the result is invalid.
    Unknown(String),
}

/// Read a result's `resultType` without reading the rest of it.
pub fn result_type(raw: &RawValue) -> ResultType {
    #[derive(Deserialize)]
    struct Peek {
        #[serde(rename = "resultType", default)]
        result_type: Option<Value>,
    }
    match serde_json::from_str::<Peek>(raw.get()) {
        Ok(Peek { result_type }) => super::call_result::classify(result_type),
        Err(_) => ResultType::Complete,
    }
}

/// Most input requests one `InputRequiredResult` may carry.
pub const MAX_INPUT_REQUESTS: usize = 64;

/// One request for input inside an `InputRequiredResult`.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRequest {
    /// The server's key for it; the answer goes under the same key.
    pub key: String,
    /// `elicitation/create`, `sampling/createMessage` or `roots/list`.
    pub method: String,
    /// Its params, as sent.
    pub params: Value,
}

/// An `InputRequiredResult`: the inputs asked for, and the state to echo.
#[derive(Debug, Clone)]
pub struct InputRequired {
    /// The inputs, in key order.
    pub requests: Vec<InputRequest>,
    /// `requestState`, exactly as the server wrote it (never read).
    pub state: Option<Box<RawValue>>,
}

/// Read an `InputRequiredResult`.
pub fn parse_input_required(raw: &RawValue, method: &str) -> Result<InputRequired, ProtocolError> {
    #[derive(Deserialize)]
    struct Wire {
        #[serde(rename = "inputRequests", default)]
        input_requests: Option<Map<String, Value>>,
        #[serde(rename = "requestState", default)]
        request_state: Option<Box<RawValue>>,
    }
    let w: Wire = serde_json::from_str(raw.get()).map_err(|e| malformed(method, e.to_string()))?;
    let map = w.input_requests.unwrap_or_default();
    if map.len() > MAX_INPUT_REQUESTS {
        return Err(malformed(
            method,
            format!(
                "{} input requests (at most {MAX_INPUT_REQUESTS})",
                map.len()
            ),
        ));
    }
    let mut requests = Vec::with_capacity(map.len());
    for (key, v) in map {
        let m = v
            .get("method")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed(method, format!("input request {key:?} has no method")))?;
        requests.push(InputRequest {
            key,
            method: m.to_string(),
            params: v.get("params").cloned().unwrap_or_else(|| json!({})),
        });
    }
    let state = w.request_state.filter(|s| s.get() != "null");
    if requests.is_empty() && state.is_none() {
        return Err(malformed(
            method,
            "an input-required result with neither inputRequests nor requestState",
        ));
    }
    Ok(InputRequired { requests, state })
}

/// The params text of a retry: the original params with `inputResponses` (when any) and the
/// server's `requestState` spliced in byte for byte (when it sent one).
pub fn retry_params_text(
    mut params: Map<String, Value>,
    responses: Option<Map<String, Value>>,
    state: Option<&RawValue>,
) -> String {
    params.remove("inputResponses");
    params.remove("requestState");
    if let Some(r) = responses {
        params.insert("inputResponses".into(), Value::Object(r));
    }
    // Serializing a map of values cannot fail.
    let mut text = serde_json::to_string(&Value::Object(params)).unwrap_or_else(|_| "{}".into());
    if let Some(state) = state {
        // The text ends with the object's closing brace.
        text.pop();
        if text.len() > 1 {
            text.push(',');
        }
        text.push_str("\"requestState\":");
        text.push_str(state.get());
        text.push('}');
    }
    text
}

/// Why a tool's `x-mcp-header` annotations cannot be mirrored into HTTP headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderAnnotationError(pub String);

impl std::fmt::Display for HeaderAnnotationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The `(argument, header name)` pairs a tool's input schema asks to mirror into
/// `Mcp-Param-<name>` headers, or why the definition makes that impossible: a name that is
/// empty, not a header token (ASCII visible characters other than separators), or repeated
/// (case-insensitively), or an annotation on a property that is not a string, integer or
/// boolean.
pub fn header_params(schema: &str) -> Result<Vec<(String, String)>, HeaderAnnotationError> {
    if !schema.contains("x-mcp-header") {
        return Ok(Vec::new());
    }
    let v: Value = serde_json::from_str(schema)
        .map_err(|e| HeaderAnnotationError(format!("the input schema is not JSON: {e}")))?;
    let Some(props) = v.get("properties").and_then(Value::as_object) else {
        return Ok(Vec::new());
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for (arg, prop) in props {
        let Some(h) = prop.get("x-mcp-header") else {
            continue;
        };
        let Some(name) = h.as_str() else {
            return Err(HeaderAnnotationError(format!(
                "x-mcp-header of {arg:?} is not a string"
            )));
        };
        if name.is_empty() {
            return Err(HeaderAnnotationError(format!(
                "x-mcp-header of {arg:?} is empty"
            )));
        }
        if !name.bytes().all(is_token_byte) {
            return Err(HeaderAnnotationError(format!(
                "x-mcp-header {name:?} of {arg:?} is not a valid header name"
            )));
        }
        let ty = prop.get("type").and_then(Value::as_str);
        if !matches!(ty, Some("string" | "integer" | "boolean")) {
            return Err(HeaderAnnotationError(format!(
                "x-mcp-header {name:?} is on {arg:?}, whose type is not string, integer or boolean"
            )));
        }
        if out.iter().any(|(_, n)| n.eq_ignore_ascii_case(name)) {
            return Err(HeaderAnnotationError(format!(
                "x-mcp-header {name:?} is given twice"
            )));
        }
        out.push((arg.clone(), name.to_string()));
    }
    Ok(out)
}

/// A byte of an HTTP token (RFC 9110): visible ASCII other than the separators.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The `Mcp-Param-*` headers of one call: each annotated argument present and not null, its
/// value as text (a string that is not plain visible ASCII without surrounding spaces is sent
/// as `=?base64?…?=`).
pub fn param_header_values(
    pairs: &[(String, String)],
    arguments: Option<&Value>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (arg, name) in pairs {
        let Some(v) = arguments.and_then(|a| a.get(arg)) else {
            continue;
        };
        let text = match v {
            Value::Null => continue,
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => n.to_string(),
            Value::String(s) => encode_header_text(s),
            // Not a primitive: nothing to mirror.
            _ => continue,
        };
        out.push((name.clone(), text));
    }
    out
}

/// A value as header text: as is when it is plain visible ASCII (inner spaces allowed) without
/// surrounding spaces, else `=?base64?<its UTF-8 bytes in base64>?=`.
pub fn header_text(s: &str) -> String {
    encode_header_text(s)
}

fn encode_header_text(s: &str) -> String {
    let plain = s.bytes().all(|b| (0x20..0x7f).contains(&b)) && s.trim() == s;
    if plain {
        s.to_string()
    } else {
        format!("=?base64?{}?=", base64_encode(s.as_bytes()))
    }
}

fn base64_encode(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn probe_answers_are_classified_by_shape_not_by_one_code() {
        let ok = raw(r#"{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}"#);
        assert!(matches!(
            classify_probe(Ok(&ok), MODERN_VERSION),
            ProbeAnswer::Modern(_)
        ));
        let old = raw(r#"{"supportedVersions":["2030-01-01"]}"#);
        assert_eq!(
            classify_probe(Ok(&old), MODERN_VERSION),
            ProbeAnswer::Legacy
        );
        let odd = raw(r#"{}"#);
        assert_eq!(
            classify_probe(Ok(&odd), MODERN_VERSION),
            ProbeAnswer::Legacy
        );
        for code in [-32601, -32600, -32602, -32603, -32000, -1] {
            let e = RpcError {
                code,
                message: "x".into(),
                data: None,
            };
            assert_eq!(classify_probe(Err(&e), MODERN_VERSION), ProbeAnswer::Legacy);
        }
        let e = RpcError {
            code: -32022,
            message: "no".into(),
            data: Some(json!({"supported": ["2026-07-28"]})),
        };
        assert_eq!(
            classify_probe(Err(&e), MODERN_VERSION),
            ProbeAnswer::Retry(MODERN_VERSION)
        );
        let e = RpcError {
            code: -32022,
            message: "no".into(),
            data: Some(json!({"supported": ["2025-11-25"]})),
        };
        assert_eq!(classify_probe(Err(&e), MODERN_VERSION), ProbeAnswer::Legacy);
    }

    #[test]
    fn result_type_defaults_to_complete_and_rejects_unknown() {
        assert_eq!(result_type(&raw(r#"{"content":[]}"#)), ResultType::Complete);
        assert_eq!(
            result_type(&raw(r#"{"resultType":"input_required"}"#)),
            ResultType::InputRequired
        );
        assert_eq!(
            result_type(&raw(r#"{"resultType":"later"}"#)),
            ResultType::Unknown("later".into())
        );
    }

    #[test]
    fn request_state_is_spliced_byte_for_byte() {
        let state = raw(r#""a\u00e9\/b""#);
        let mut p = Map::new();
        p.insert("name".into(), json!("t"));
        let text = retry_params_text(p, Some(Map::new()), Some(&state));
        assert_eq!(
            text,
            r#"{"inputResponses":{},"name":"t","requestState":"a\u00e9\/b"}"#
        );
        let text = retry_params_text(Map::new(), None, Some(&state));
        assert_eq!(text, r#"{"requestState":"a\u00e9\/b"}"#);
        assert_eq!(retry_params_text(Map::new(), None, None), "{}");
    }

    #[test]
    fn header_annotations_are_checked_and_values_encoded() {
        let ok = r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"},"q":{"type":"string"}}}"#;
        let pairs = header_params(ok).unwrap();
        assert_eq!(pairs.len(), 2);
        let args = json!({"region": " x", "n": 42, "q": "no"});
        let values = param_header_values(&pairs, Some(&args));
        assert_eq!(
            values,
            vec![
                ("N".to_string(), "42".to_string()),
                ("Region".to_string(), "=?base64?IHg=?=".to_string())
            ]
        );
        for bad in [
            r#"{"properties":{"a":{"type":"string","x-mcp-header":""}}}"#,
            r#"{"properties":{"a":{"type":"number","x-mcp-header":"A"}}}"#,
            r#"{"properties":{"a":{"type":"object","x-mcp-header":"A"}}}"#,
            r#"{"properties":{"a":{"type":"string","x-mcp-header":"A B"}}}"#,
            r#"{"properties":{"a":{"type":"string","x-mcp-header":"A:B"}}}"#,
            r#"{"properties":{"a":{"type":"string","x-mcp-header":"Région"}}}"#,
            r#"{"properties":{"a":{"type":"string","x-mcp-header":"A"},"b":{"type":"string","x-mcp-header":"a"}}}"#,
        ] {
            assert!(header_params(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn input_required_is_read_and_bounded() {
        let r = raw(
            r#"{"resultType":"input_required","inputRequests":{"k":{"method":"elicitation/create","params":{"message":"m"}}},"requestState":"s"}"#,
        );
        let ir = parse_input_required(&r, "tools/call").unwrap();
        assert_eq!(ir.requests.len(), 1);
        assert_eq!(ir.state.unwrap().get(), r#""s""#);
        let empty = raw(r#"{"resultType":"input_required"}"#);
        assert!(parse_input_required(&empty, "tools/call").is_err());
    }
}
