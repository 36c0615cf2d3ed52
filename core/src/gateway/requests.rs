//! Downstream requests: answered from the view at once, or handed to the manager as a call or
//! operation and answered from its completion.

use super::wire::{self, Message};
use super::{id_key, ExchangeId, Gateway, GatewayOutput, Pending, PendingKind, SessionId};
use crate::catalog::{CompletionRef, LogLevel, Operation, OperationOutcome, OperationResult};
use crate::manager::{CallError, CallOutcome, Input};
use bytes::Bytes;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Most list pages [`Gateway::list`] remembers for the current view.
pub(super) const PAGE_MEMO_LIMIT: usize = 256;

/// A request refused before it reached the manager.
struct Refusal {
    code: i64,
    message: String,
}

fn invalid(message: impl Into<String>) -> Refusal {
    Refusal {
        code: wire::INVALID_PARAMS,
        message: message.into(),
    }
}

/// What a request needs from the manager.
enum Forward {
    Tool {
        tool: String,
        arguments: Option<Value>,
        meta: Option<Map<String, Value>>,
    },
    Operation(Operation, PendingKind),
}

impl Gateway {
    /// A session's frame, as [`wire::decode`] read it.
    pub(super) fn frame(
        &mut self,
        session: SessionId,
        exchange: ExchangeId,
        message: Result<Message, wire::Malformed>,
    ) {
        let Some(s) = self.sessions.get(&session) else {
            return;
        };
        let strict_uninitialized = s.strict && !s.initialized;
        let message = match message {
            Ok(m) => m,
            Err(e) => {
                self.counters.malformed += 1;
                let id = e.id.unwrap_or(Value::Null);
                let frame = wire::error(&id, e.code, &e.message, None);
                self.answer(session, exchange, frame);
                return;
            }
        };
        match message {
            Message::Request { id, method, params } => {
                if strict_uninitialized && method != "initialize" && method != "ping" {
                    let frame = wire::error(
                        &id,
                        wire::INVALID_REQUEST,
                        "the session is not initialized: send initialize first",
                        None,
                    );
                    self.answer(session, exchange, frame);
                    self.close(session, true);
                    return;
                }
                self.request(session, exchange, id, &method, params);
            }
            Message::Notification { method, params } => {
                self.outputs
                    .push_back(GatewayOutput::Accepted { session, exchange });
                match method.as_str() {
                    "notifications/cancelled" => {
                        if let Some(id) = params.get("requestId") {
                            self.cancel(session, id);
                        }
                    }
                    // Once initialized, and on every change, its roots are asked for.
                    "notifications/initialized" | "notifications/roots/list_changed" => {
                        self.ask_roots(session)
                    }
                    _ => {}
                }
            }
            Message::Response { id, outcome } => {
                self.outputs
                    .push_back(GatewayOutput::Accepted { session, exchange });
                if !self.roots_response(session, &id, &outcome) {
                    self.peer_response(session, &id, outcome);
                }
            }
        }
    }

    /// The client gave up on request `id`: no answer goes out, and the manager cancels it.
    fn cancel(&mut self, session: SessionId, id: &Value) {
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        let Some(call) = s.in_flight.remove(&id_key(id)) else {
            return;
        };
        if self.pending.remove(&call).is_some() {
            self.counters.cancelled += 1;
            self.outputs
                .push_back(GatewayOutput::Manager(Input::CancelCall { call }));
        }
    }

    pub(super) fn request(
        &mut self,
        session: SessionId,
        exchange: ExchangeId,
        id: Value,
        method: &str,
        params: Value,
    ) {
        let forward = match method {
            "initialize" => {
                let frame = self.initialize(session, &id, &params);
                self.answer(session, exchange, frame);
                return;
            }
            "ping" => {
                self.answer(session, exchange, wire::result(&id, Map::new()));
                return;
            }
            "tools/list" if self.options.tool_search => {
                let frame = super::search::tools_list(&id);
                self.answer(session, exchange, frame);
                return;
            }
            "tools/call"
                if self.options.tool_search
                    && params.get("name").and_then(Value::as_str)
                        == Some(super::search::SEARCH_TOOL) =>
            {
                let frame = self.search_answer(&id, params.get("arguments"));
                self.answer(session, exchange, frame);
                return;
            }
            "tools/call" if self.options.tool_search => match tool_call(&params) {
                Ok(Forward::Tool {
                    tool,
                    arguments,
                    meta,
                }) if tool == super::search::CALL_TOOL => {
                    let inner = arguments.unwrap_or(Value::Null);
                    let mut called = Map::new();
                    if let Some(name) = inner.get("name") {
                        called.insert("name".into(), name.clone());
                    }
                    if let Some(a) = inner.get("arguments") {
                        called.insert("arguments".into(), a.clone());
                    }
                    tool_call(&Value::Object(called)).map(|f| match f {
                        Forward::Tool {
                            tool, arguments, ..
                        } => Forward::Tool {
                            tool,
                            arguments,
                            meta,
                        },
                        other => other,
                    })
                }
                Ok(Forward::Tool { tool, .. }) => Err(invalid(format!(
                    "unknown tool: {tool} (this server offers {} and {})",
                    super::search::SEARCH_TOOL,
                    super::search::CALL_TOOL
                ))),
                other => other,
            },
            "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list" => {
                let frame = self.list(&id, method, &params);
                self.answer(session, exchange, frame);
                return;
            }
            "logging/setLevel" => {
                let frame = match params
                    .get("level")
                    .and_then(Value::as_str)
                    .and_then(LogLevel::parse)
                {
                    Some(level) => {
                        if let Some(s) = self.sessions.get_mut(&session) {
                            s.log_level = Some(level);
                        }
                        wire::result(&id, Map::new())
                    }
                    None => wire::error(&id, wire::INVALID_PARAMS, "unknown log level", None),
                };
                self.answer(session, exchange, frame);
                return;
            }
            "resources/unsubscribe" => {
                let frame = match params.get("uri").and_then(Value::as_str) {
                    Some(uri) => {
                        let held = self
                            .sessions
                            .get_mut(&session)
                            .is_some_and(|s| s.subscriptions.remove(uri));
                        if held {
                            self.release_subscription(uri);
                        }
                        wire::result(&id, Map::new())
                    }
                    None => wire::error(&id, wire::INVALID_PARAMS, "uri must be a string", None),
                };
                self.answer(session, exchange, frame);
                return;
            }
            "resources/subscribe" => match params.get("uri").and_then(Value::as_str) {
                None => Err(invalid("uri must be a string")),
                Some(uri) => {
                    let here = self.sessions.get(&session);
                    let count = here.map_or(0, |s| s.subscriptions.len());
                    if here.is_some_and(|s| s.subscriptions.contains(uri)) {
                        self.answer(session, exchange, wire::result(&id, Map::new()));
                        return;
                    }
                    if count >= self.options.max_subscriptions {
                        Err(Refusal {
                            code: wire::TOO_MANY_REQUESTS,
                            message: format!(
                                "too many subscriptions (limit {})",
                                self.options.max_subscriptions
                            ),
                        })
                    } else if self
                        .sessions
                        .values()
                        .any(|s| s.subscriptions.contains(uri))
                    {
                        // Another session holds it upstream already.
                        if let Some(s) = self.sessions.get_mut(&session) {
                            s.subscriptions.insert(uri.to_string());
                        }
                        self.answer(session, exchange, wire::result(&id, Map::new()));
                        return;
                    } else {
                        Ok(Forward::Operation(
                            Operation::Subscribe {
                                uri: uri.to_string(),
                                server: super::templates::server_for_uri(&self.view, uri),
                            },
                            PendingKind::Subscribe {
                                uri: uri.to_string(),
                            },
                        ))
                    }
                }
            },
            "tools/call" => tool_call(&params),
            "resources/read" => match params.get("uri").and_then(Value::as_str) {
                Some(uri) => Ok(Forward::Operation(
                    Operation::ReadResource {
                        uri: uri.to_string(),
                        server: super::templates::server_for_uri(&self.view, uri),
                    },
                    PendingKind::Operation,
                )),
                None => Err(invalid("uri must be a string")),
            },
            "prompts/get" => prompt_get(&params),
            "completion/complete" => complete(&params),
            _ => Err(Refusal {
                code: wire::METHOD_NOT_FOUND,
                message: format!("method not found: {method}"),
            }),
        };
        match forward {
            Ok(forward) => self.forward(session, exchange, id, &params, forward),
            Err(r) => {
                let frame = wire::error(&id, r.code, &r.message, None);
                self.answer(session, exchange, frame);
            }
        }
    }

    fn forward(
        &mut self,
        session: SessionId,
        exchange: ExchangeId,
        id: Value,
        params: &Value,
        forward: Forward,
    ) {
        let limit = self.options.max_in_flight;
        let next_call = self.next_call;
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        let key = id_key(&id);
        if s.in_flight.contains_key(&key) {
            let frame = wire::error(
                &id,
                wire::INVALID_REQUEST,
                "a request with this id is already in flight",
                None,
            );
            self.answer(session, exchange, frame);
            return;
        }
        if s.in_flight.len() >= limit {
            let frame = wire::error(
                &id,
                wire::TOO_MANY_REQUESTS,
                &format!("too many requests in flight (limit {limit})"),
                None,
            );
            self.answer(session, exchange, frame);
            return;
        }
        let call = super::CallId(next_call);
        self.next_call += 1;
        s.in_flight.insert(key, call);
        let progress = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
            .cloned();
        let (input, kind) = match forward {
            Forward::Tool {
                tool,
                arguments,
                meta,
            } => {
                let tool = super::served::resolve(
                    &tool,
                    &self.names.tools,
                    self.view.tools.iter().map(|t| t.qualified_name.as_str()),
                )
                .to_string();
                let server = self
                    .view
                    .tools
                    .iter()
                    .find(|t| t.qualified_name == tool)
                    .map(|t| t.server.clone());
                (
                    Input::CallTool {
                        call,
                        tool,
                        arguments,
                        timeout: None,
                        progress: progress.is_some(),
                        meta,
                    },
                    PendingKind::Tool { server },
                )
            }
            Forward::Operation(op, kind) => (
                Input::Operation {
                    call,
                    op: self.resolve_prompt(op),
                    timeout: None,
                },
                kind,
            ),
        };
        self.pending.insert(
            call,
            Pending {
                session,
                exchange,
                id,
                progress,
                kind,
            },
        );
        self.counters.forwarded += 1;
        self.outputs.push_back(GatewayOutput::Manager(input));
    }

    /// A prompt named by its served name, as the manager knows it (qualified).
    fn resolve_prompt(&self, op: Operation) -> Operation {
        let qualified = |name: &str| {
            super::served::resolve(
                name,
                &self.names.prompts,
                self.view.prompts.iter().map(|p| p.qualified_name.as_str()),
            )
            .to_string()
        };
        match op {
            Operation::GetPrompt { name, arguments } => Operation::GetPrompt {
                name: qualified(&name),
                arguments,
            },
            Operation::Complete {
                reference: CompletionRef::Prompt { name },
                argument,
                value,
                context,
            } => Operation::Complete {
                reference: CompletionRef::Prompt {
                    name: qualified(&name),
                },
                argument,
                value,
                context,
            },
            other => other,
        }
    }

    fn initialize(&mut self, session: SessionId, id: &Value, params: &Value) -> Bytes {
        let asked = params.get("protocolVersion").and_then(Value::as_str);
        let version = super::DOWNSTREAM_VERSIONS
            .iter()
            .find(|v| Some(**v) == asked)
            .copied()
            .unwrap_or(super::DOWNSTREAM_VERSIONS[0]);
        if let Some(s) = self.sessions.get_mut(&session) {
            s.initialized = true;
            s.version = Some(version.to_string());
            s.caps = super::peer::ClientCaps::from_initialize(params);
            s.roots_capable = super::roots::declares_roots(params);
        }
        // Every capability the gateway can forward: servers arrive after this answer, so
        // what they declare is not known yet; a request no server can take fails on its own.
        let mut result = serde_json::json!({
            "protocolVersion": version,
            "capabilities": {
                "tools": { "listChanged": true },
                "resources": { "subscribe": true, "listChanged": true },
                "prompts": { "listChanged": true },
                "completions": {},
                "logging": {},
            },
            "serverInfo": { "name": self.options.name, "version": self.options.version },
        });
        if let (Some(text), Some(obj)) = (&self.options.instructions, result.as_object_mut()) {
            obj.insert("instructions".into(), Value::String(text.clone()));
        }
        wire::result(id, result)
    }

    pub(super) fn list(&mut self, id: &Value, method: &str, params: &Value) -> Bytes {
        let start = match params.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(Value::String(c)) => match c.parse::<usize>() {
                Ok(n) => n,
                Err(_) => return wire::error(id, wire::INVALID_PARAMS, "invalid cursor", None),
            },
            Some(_) => return wire::error(id, wire::INVALID_PARAMS, "invalid cursor", None),
        };
        let size = self.options.page_size.max(1);
        let (kind, len) = match method {
            "tools/list" => (0, self.view.tools.len()),
            "resources/list" => (1, self.view.resources.len()),
            "resources/templates/list" => (2, self.view.templates.len()),
            _ => (3, self.view.prompts.len()),
        };
        if start > len {
            return wire::error(id, wire::INVALID_PARAMS, "invalid cursor", None);
        }
        let end = (start + size).min(len);
        let next = (end < len).then(|| end.to_string());
        let next = next.as_deref();
        let page = match kind {
            0 => wire::ListPage::Tools(&self.view.tools[start..end], &self.names.tools[start..end]),
            1 => wire::ListPage::Resources(&self.view.resources[start..end]),
            2 => wire::ListPage::Templates(&self.view.templates[start..end]),
            _ => wire::ListPage::Prompts(
                &self.view.prompts[start..end],
                &self.names.prompts[start..end],
            ),
        };
        // A page is a function of the view, its served names, the page size and where it
        // starts; the memo is emptied whenever the view or its names change, so a page served
        // again is the same text under another id.
        let frame = match self.pages.get(&(kind, start)) {
            Some(text) => wire::result_text(id, text),
            None => {
                let text = wire::page_text(page, next);
                let frame = wire::result_text(id, &text);
                if self.pages.len() < PAGE_MEMO_LIMIT {
                    self.pages.insert((kind, start), text);
                }
                frame
            }
        };
        #[cfg(debug_assertions)]
        {
            let fresh = match page {
                wire::ListPage::Tools(t, n) => wire::tools_page(id, t, n, next),
                wire::ListPage::Resources(r) => wire::resources_page(id, r, next),
                wire::ListPage::Templates(t) => wire::templates_page(id, t, next),
                wire::ListPage::Prompts(p, n) => wire::prompts_page(id, p, n, next),
            };
            debug_assert_eq!(
                frame, fresh,
                "a remembered list page is not the page served now"
            );
        }
        frame
    }
}

fn tool_call(params: &Value) -> Result<Forward, Refusal> {
    let tool = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("name must be a string"))?;
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => None,
        Some(a @ Value::Object(_)) => Some(a.clone()),
        Some(_) => return Err(invalid("arguments must be an object")),
    };
    let meta = params
        .get("_meta")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(k, _)| k.as_str() != "progressToken")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Map<String, Value>>()
        })
        .filter(|m| !m.is_empty());
    Ok(Forward::Tool {
        tool: tool.to_string(),
        arguments,
        meta,
    })
}

fn string_map(value: Option<&Value>, what: &str) -> Result<BTreeMap<String, String>, Refusal> {
    match value {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(invalid(format!("{what} must be strings"))),
            })
            .collect(),
        Some(_) => Err(invalid(format!("{what} must be an object"))),
    }
}

fn prompt_get(params: &Value) -> Result<Forward, Refusal> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("name must be a string"))?;
    let arguments = string_map(params.get("arguments"), "arguments")?;
    Ok(Forward::Operation(
        Operation::GetPrompt {
            name: name.to_string(),
            arguments,
        },
        PendingKind::Operation,
    ))
}

fn complete(params: &Value) -> Result<Forward, Refusal> {
    let r = params.get("ref").ok_or_else(|| invalid("ref is missing"))?;
    let reference = match r.get("type").and_then(Value::as_str) {
        Some("ref/prompt") => CompletionRef::Prompt {
            name: r
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("ref.name must be a string"))?
                .to_string(),
        },
        Some("ref/resource") => CompletionRef::Resource {
            uri: r
                .get("uri")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("ref.uri must be a string"))?
                .to_string(),
            server: None,
        },
        _ => return Err(invalid("ref.type must be ref/prompt or ref/resource")),
    };
    let arg = params
        .get("argument")
        .ok_or_else(|| invalid("argument is missing"))?;
    let argument = arg
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("argument.name must be a string"))?;
    let value = arg.get("value").and_then(Value::as_str).unwrap_or("");
    let context = string_map(
        params.get("context").and_then(|c| c.get("arguments")),
        "context arguments",
    )?;
    Ok(Forward::Operation(
        Operation::Complete {
            reference,
            argument: argument.to_string(),
            value: value.to_string(),
            context,
        },
        PendingKind::Operation,
    ))
}

/// The answer to a `tools/call`: the server's result as it sent it; its JSON-RPC error as it
/// sent it; an unknown name as invalid params (or, while project servers await approval, as
/// a tool error saying so); every other failure (a server that failed, is not connected,
/// needs a login, timed out) as a tool error the model can read, naming the server, why and
/// the fix (see `unavailable`). `None` for a cancelled call: the client that cancelled it
/// expects no answer.
pub(super) fn call_answer(
    id: &Value,
    server: Option<&str>,
    outcome: &CallOutcome,
    unavailable: &super::UnavailableServers,
) -> Option<Bytes> {
    Some(match outcome {
        CallOutcome::Ok(r) => wire::tool_result(id, r),
        CallOutcome::Err(CallError::Rpc {
            code,
            message,
            data,
        }) => wire::error(id, *code, message, data.as_ref()),
        CallOutcome::Err(e @ CallError::UnknownTool { tool }) => {
            match super::unavailable::unknown_while_awaiting(tool, unavailable) {
                Some(text) => wire::tool_error(id, &text),
                None => wire::error(id, wire::INVALID_PARAMS, &e.to_string(), None),
            }
        }
        CallOutcome::Err(e) => {
            let reason = match e {
                CallError::NotConnected {
                    reason: Some(r), ..
                } => format!(": {r}"),
                _ => String::new(),
            };
            let (named, error) = super::unavailable::failed_server(e, server);
            let fix = named
                .and_then(|s| super::unavailable::reason_and_fix(s, error, unavailable.get(s)));
            let text = match named {
                Some(server) => format!("the call to server \"{server}\" failed: {e}{reason}"),
                None => format!("{e}{reason}"),
            };
            let text = match fix {
                Some(fix) => format!("{text}. {fix}"),
                None => text,
            };
            wire::tool_error(id, &text)
        }
        CallOutcome::Cancelled => {
            wire::error(id, wire::INTERNAL_ERROR, "the call was cancelled", None)
        }
        #[allow(unreachable_patterns)]
        _ => wire::error(id, wire::INTERNAL_ERROR, "unexpected call outcome", None),
    })
}

/// The answer to an operation: its result, or the server's JSON-RPC error as sent, or an
/// error naming what was not found or why no server could answer.
pub(super) fn operation_answer(id: &Value, outcome: &OperationOutcome) -> Option<Bytes> {
    Some(match outcome {
        OperationOutcome::Ok(OperationResult::Read(r)) => wire::read_result(id, r),
        OperationOutcome::Ok(OperationResult::Prompt(p)) => wire::prompt_result(id, p),
        OperationOutcome::Ok(OperationResult::Completion(c)) => wire::completion_result(id, c),
        OperationOutcome::Ok(_) => wire::result(id, Map::new()),
        OperationOutcome::Err(CallError::Rpc {
            code,
            message,
            data,
        }) => wire::error(id, *code, message, data.as_ref()),
        OperationOutcome::Err(e @ CallError::UnknownResource { uri }) => wire::error(
            id,
            wire::RESOURCE_NOT_FOUND,
            &e.to_string(),
            Some(&serde_json::json!({ "uri": uri })),
        ),
        OperationOutcome::Err(
            e @ (CallError::UnknownPrompt { .. } | CallError::AmbiguousResource { .. }),
        ) => wire::error(id, wire::INVALID_PARAMS, &e.to_string(), None),
        OperationOutcome::Err(e) => wire::error(id, wire::INTERNAL_ERROR, &e.to_string(), None),
        OperationOutcome::Cancelled => {
            wire::error(id, wire::INTERNAL_ERROR, "the request was cancelled", None)
        }
        #[allow(unreachable_patterns)]
        _ => wire::error(id, wire::INTERNAL_ERROR, "unexpected outcome", None),
    })
}
