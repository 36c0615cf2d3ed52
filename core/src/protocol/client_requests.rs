//! What a server may ask of the client beyond `ping` and `roots/list`: `sampling/createMessage`
//! and `elicitation/create` (form and URL mode). Here are the client capabilities that say
//! which of them we take, the parsing of their params into what an embedder needs to answer
//! them, the encoding of the answers, and the filling of an elicitation form's defaults from
//! its requested schema.

use super::{codes, encode_error, encode_result, PeerRequestId, Root};
use bytes::Bytes;
use serde::Serialize;
use serde_json::{json, Map, Value};

/// The JSON-RPC error code of a request of the server's that we stopped waiting an answer
/// for (the embedder did not answer in time).
pub const REQUEST_TIMEOUT: i64 = -32001;

/// The error code of a sampling request the user (or the embedder) rejected.
pub const USER_REJECTED: i64 = -1;

/// Which requests of a server's the client takes, and so which capabilities `initialize`
/// declares. All off by default: a client declares only what it can answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ClientFeatures {
    /// `sampling/createMessage` (declares `sampling: {}`).
    pub sampling: bool,
    /// `elicitation/create` in form mode (declares `elicitation.form`).
    pub elicitation_form: bool,
    /// `elicitation/create` in URL mode (declares `elicitation.url`).
    pub elicitation_url: bool,
    /// `roots/list`, with `notifications/roots/list_changed` when the roots change (declares
    /// `roots: {listChanged: true}`). Also declared whenever the manager starts with roots.
    pub roots: bool,
}

impl ClientFeatures {
    /// Elicitation in either mode.
    pub fn elicitation(&self) -> bool {
        self.elicitation_form || self.elicitation_url
    }
}

/// The `capabilities` object `initialize` (and every stateless request's `_meta`) sends for
/// these features: exactly those that are on.
pub fn client_capabilities(features: &ClientFeatures) -> super::ClientCapabilities {
    super::ClientCapabilities(*features)
}

/// What a server asks the embedder for, with the essentials parsed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PeerRequestKind {
    /// `sampling/createMessage`: the params as sent (messages, model preferences, system
    /// prompt, max tokens...); the answer is a `CreateMessageResult`.
    Sampling {
        /// The request's params, as sent.
        params: Value,
    },
    /// `elicitation/create` in form mode: ask the user for data shaped by a flat schema.
    ElicitForm {
        /// Why the server asks, for the user.
        message: String,
        /// The requested schema (an object schema of primitive properties), as sent.
        requested_schema: Value,
    },
    /// `elicitation/create` in URL mode: ask the user to open a URL out of band.
    ElicitUrl {
        /// Why the server asks, for the user.
        message: String,
        /// The URL to open.
        url: String,
        /// The server's id for this elicitation (named again by its completion notice).
        elicitation_id: String,
    },
    /// `roots/list` asked as an input of a stateless server's request, handed to the embedder
    /// only when the manager was told to (`ManagerOptions::roots_inputs`); the answer is a
    /// `ListRootsResult` (`{"roots": [...]}`). A server's own `roots/list` request, and
    /// every roots input otherwise, is answered by the manager from its roots.
    Roots,
}

impl PeerRequestKind {
    /// Whether it is an elicitation (either mode).
    pub fn is_elicitation(&self) -> bool {
        matches!(
            self,
            PeerRequestKind::ElicitForm { .. } | PeerRequestKind::ElicitUrl { .. }
        )
    }

    /// The method the server asked with.
    pub fn method(&self) -> &'static str {
        match self {
            PeerRequestKind::Sampling { .. } => "sampling/createMessage",
            PeerRequestKind::ElicitForm { .. } | PeerRequestKind::ElicitUrl { .. } => {
                "elicitation/create"
            }
            PeerRequestKind::Roots => "roots/list",
        }
    }
}

/// Why a request of the server's cannot be taken, so it is answered with an error at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The JSON-RPC error code.
    pub code: i64,
    /// The error message.
    pub message: String,
    /// The client does not take this kind of request at all (the feature is off).
    pub off: bool,
}

fn refuse(code: i64, message: impl Into<String>, off: bool) -> Refusal {
    Refusal {
        code,
        message: message.into(),
        off,
    }
}

/// Most bytes of an elicitation's message, URL or id we accept.
pub const MAX_ELICIT_TEXT: usize = 64 * 1024;

/// Read a `sampling/createMessage` or `elicitation/create` request, given the features on.
/// `Ok(None)`: not one of these methods (the caller answers `ping`, `roots/list`, or -32601).
pub fn parse_client_request(
    method: &str,
    params: &Value,
    features: &ClientFeatures,
) -> Result<Option<PeerRequestKind>, Refusal> {
    match method {
        "sampling/createMessage" => {
            if !features.sampling {
                return Err(refuse(
                    codes::METHOD_NOT_FOUND,
                    "Method not found: sampling/createMessage",
                    true,
                ));
            }
            if !params.get("messages").is_some_and(Value::is_array) {
                return Err(refuse(
                    codes::INVALID_PARAMS,
                    "sampling/createMessage needs a \"messages\" array",
                    false,
                ));
            }
            Ok(Some(PeerRequestKind::Sampling {
                params: params.clone(),
            }))
        }
        "elicitation/create" => {
            if !features.elicitation() {
                return Err(refuse(
                    codes::METHOD_NOT_FOUND,
                    "Method not found: elicitation/create",
                    true,
                ));
            }
            parse_elicitation(params, features).map(Some)
        }
        _ => Ok(None),
    }
}

fn text<'a>(params: &'a Value, key: &str) -> Result<&'a str, Refusal> {
    let s = params.get(key).and_then(Value::as_str).ok_or_else(|| {
        refuse(
            codes::INVALID_PARAMS,
            format!("elicitation/create needs a string \"{key}\""),
            false,
        )
    })?;
    if s.len() > MAX_ELICIT_TEXT {
        return Err(refuse(
            codes::INVALID_PARAMS,
            format!("elicitation/create \"{key}\" is longer than {MAX_ELICIT_TEXT} bytes"),
            false,
        ));
    }
    Ok(s)
}

fn parse_elicitation(params: &Value, f: &ClientFeatures) -> Result<PeerRequestKind, Refusal> {
    // A request without a mode is form mode.
    let mode = match params.get("mode") {
        None | Some(Value::Null) => "form",
        Some(Value::String(m)) => m.as_str(),
        Some(_) => {
            return Err(refuse(
                codes::INVALID_PARAMS,
                "elicitation/create \"mode\" is not a string",
                false,
            ))
        }
    };
    let message = text(params, "message")?.to_string();
    match mode {
        "form" if f.elicitation_form => {
            let schema = params
                .get("requestedSchema")
                .cloned()
                .unwrap_or(Value::Null);
            if !schema.is_object() {
                return Err(refuse(
                    codes::INVALID_PARAMS,
                    "elicitation/create in form mode needs a \"requestedSchema\" object",
                    false,
                ));
            }
            Ok(PeerRequestKind::ElicitForm {
                message,
                requested_schema: schema,
            })
        }
        "url" if f.elicitation_url => Ok(PeerRequestKind::ElicitUrl {
            message,
            url: text(params, "url")?.to_string(),
            elicitation_id: text(params, "elicitationId")?.to_string(),
        }),
        "form" | "url" => Err(refuse(
            codes::INVALID_PARAMS,
            format!("elicitation/create in {mode} mode is not offered by this client"),
            true,
        )),
        other => Err(refuse(
            codes::INVALID_PARAMS,
            format!("elicitation/create has an unknown mode \"{other}\""),
            false,
        )),
    }
}

/// How the embedder answers a request of the server's.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PeerAnswer {
    /// A result, sent as is (a sampling request's `CreateMessageResult`).
    Result {
        /// The result object.
        result: Value,
    },
    /// An elicitation accepted: the user's data for a form (`None` for URL mode, or a form
    /// with nothing to send).
    Accept {
        /// The submitted data, an object matching the requested schema.
        content: Option<Map<String, Value>>,
    },
    /// The user declined (elicitation), or rejected the request (sampling).
    Decline,
    /// The user dismissed it without choosing (elicitation), or rejected it (sampling).
    Cancel,
    /// The embedder could not handle it: an error for the server.
    Error {
        /// The JSON-RPC error code.
        code: i64,
        /// The message.
        message: String,
    },
}

/// How an answer reads to the server, for one kind of request: the frame, and whether it
/// was a decline or cancel (`Declined`), an error (`Failed`) or a result (`Answered`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerClass {
    /// A result or an accepted elicitation.
    Answered,
    /// A declined or cancelled elicitation, or a rejected sampling request.
    Declined,
    /// An error answer (the embedder's, or an answer that does not fit the request).
    Failed,
}

/// The response frame for `answer` to request `id` of this `kind`.
pub fn encode_peer_answer(
    id: &PeerRequestId,
    kind: &PeerRequestKind,
    answer: &PeerAnswer,
) -> (Bytes, AnswerClass) {
    let (result, class) = peer_answer_result(kind, answer);
    let frame = match result {
        Ok(v) => encode_result(id, v),
        Err((code, message)) => encode_error(id, code, &message),
    };
    (frame, class)
}

/// The embedder's answer as the result it stands for (or the error `(code, message)` it
/// stands for), and how it answered: the body of the response on the wire, and the value
/// a multi round-trip retry carries in `inputResponses`.
pub fn peer_answer_result(
    kind: &PeerRequestKind,
    answer: &PeerAnswer,
) -> (Result<Value, (i64, String)>, AnswerClass) {
    let elicit = kind.is_elicitation();
    match answer {
        PeerAnswer::Result { result } if result.is_object() => {
            (Ok(result.clone()), AnswerClass::Answered)
        }
        PeerAnswer::Result { .. } => (
            Err((
                codes::INTERNAL_ERROR,
                "the client's answer was not a JSON object".into(),
            )),
            AnswerClass::Failed,
        ),
        PeerAnswer::Accept { content } if elicit => {
            let mut r = Map::new();
            r.insert("action".into(), json!("accept"));
            if let Some(c) = content {
                if !matches!(kind, PeerRequestKind::ElicitUrl { .. }) {
                    r.insert("content".into(), Value::Object(c.clone()));
                }
            }
            (Ok(Value::Object(r)), AnswerClass::Answered)
        }
        PeerAnswer::Decline | PeerAnswer::Cancel if elicit => {
            let action = if *answer == PeerAnswer::Decline {
                "decline"
            } else {
                "cancel"
            };
            (Ok(json!({ "action": action })), AnswerClass::Declined)
        }
        PeerAnswer::Decline | PeerAnswer::Cancel if *kind == PeerRequestKind::Roots => (
            Err((
                USER_REJECTED,
                "the client declined to list its roots".into(),
            )),
            AnswerClass::Declined,
        ),
        PeerAnswer::Decline | PeerAnswer::Cancel => (
            Err((USER_REJECTED, "User rejected sampling request".into())),
            AnswerClass::Declined,
        ),
        PeerAnswer::Accept { .. } => (
            Err((
                codes::INTERNAL_ERROR,
                match kind {
                    PeerRequestKind::Roots => {
                        "the client answered a roots request with an elicitation action".into()
                    }
                    _ => "the client answered a sampling request with an elicitation action".into(),
                },
            )),
            AnswerClass::Failed,
        ),
        PeerAnswer::Error { code, message } => (Err((*code, message.clone())), AnswerClass::Failed),
    }
}

/// The `roots/list` result for these roots.
pub fn roots_result(roots: &[Root]) -> Value {
    let list: Vec<Value> = roots
        .iter()
        .map(|r| match &r.name {
            Some(n) => json!({"uri": r.uri, "name": n}),
            None => json!({"uri": r.uri}),
        })
        .collect();
    json!({ "roots": list })
}

/// The content of an elicitation form accepted with its defaults: every property of the
/// requested schema that has a `default` of its own type (a string, a number, an integer, a
/// boolean, an enum member, or an array of strings for a multi-select), by name. Properties
/// without a usable default are left out.
pub fn form_defaults(requested_schema: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(props) = requested_schema
        .get("properties")
        .and_then(Value::as_object)
    else {
        return out;
    };
    for (name, prop) in props {
        if let Some(v) = property_default(prop) {
            out.insert(name.clone(), v);
        }
    }
    out
}

/// The allowed values of a string enum property (`enum`, or `oneOf`/`anyOf` of `const`s).
pub fn enum_values(prop: &Value) -> Option<Vec<&str>> {
    if let Some(list) = prop.get("enum").and_then(Value::as_array) {
        return Some(list.iter().filter_map(Value::as_str).collect());
    }
    let list = prop
        .get("oneOf")
        .or_else(|| prop.get("anyOf"))
        .and_then(Value::as_array)?;
    Some(
        list.iter()
            .filter_map(|o| o.get("const").and_then(Value::as_str))
            .collect(),
    )
}

/// One property's default, if it has one of the property's own type.
pub fn property_default(prop: &Value) -> Option<Value> {
    let default = prop.get("default")?;
    match prop.get("type").and_then(Value::as_str)? {
        "string" => {
            let s = default.as_str()?;
            match enum_values(prop) {
                Some(allowed) if !allowed.contains(&s) => None,
                _ => Some(default.clone()),
            }
        }
        "integer" => (default.is_i64() || default.is_u64()).then(|| default.clone()),
        "number" => default.is_number().then(|| default.clone()),
        "boolean" => default.is_boolean().then(|| default.clone()),
        "array" => {
            let items = default.as_array()?;
            let allowed = prop.get("items").and_then(enum_values);
            let ok = items.iter().all(|i| {
                i.as_str()
                    .is_some_and(|s| allowed.as_ref().is_none_or(|a| a.contains(&s)))
            });
            ok.then(|| default.clone())
        }
        _ => None,
    }
}
