//! The manager's errors, typed: why a server's attempt ended ([`ServerError`]), why a call
//! failed ([`CallError`]), why a refresh failed ([`RefreshError`]) and why a request was
//! refused ([`RequestError`]). Embedders match on the kinds; `Display` gives the words a
//! person reads (and the CLI prints), so the wording lives here and nowhere else.

use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::time::Duration;

/// What kind of failure ended a server's attempt (or kept it from starting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[non_exhaustive]
pub enum ServerErrorKind {
    /// Its config is invalid (an unknown transport, an unset `${VAR}`, ...): never started.
    InvalidConfig,
    /// The transport could not be opened or broke (spawn failure, I/O error); the shell's
    /// words are the message.
    TransportFailed,
    /// The transport closed by itself (the process exited, the stream ended).
    Closed,
    /// The attempt did not finish connecting within its connect timeout.
    ConnectTimeout,
    /// The server answered `initialize` with an error or a malformed result.
    InitializeFailed,
    /// The server agreed to a protocol version the client does not speak.
    UnsupportedVersion,
    /// The first `tools/list` failed, timed out or broke the paging rules.
    ListFailed,
    /// The server sent a frame larger than the frame limit.
    FrameTooLarge,
    /// Too many health pings in a row went unanswered.
    HealthCheck,
    /// Automatic reconnects stopped after too many unexpected closes in a short window.
    BreakerTripped,
    /// The transport could not deliver one of our requests (an HTTP POST failed, the answer
    /// was not JSON-RPC); generated locally, never the server's words.
    RequestFailed,
    /// The embedder stopped the server (`Disconnect`, `DisconnectAll`, `Reload`, `Sync`).
    Disconnected,
    /// The server requires authorization and there are no usable credentials: the user has
    /// to log in (`switchboard login SERVER`); nothing retries by itself.
    NeedsLogin,
    /// The server refused the credentials, or authorization failed (a mismatched issuer or
    /// resource, an error from the authorization server).
    Unauthorized,
}

/// Why a server's attempt ended, or why its config is invalid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerError {
    /// What kind of failure it was.
    pub kind: ServerErrorKind,
    /// What went wrong, in words.
    pub message: String,
    /// The last lines the attempt's process wrote to stderr (joined by newlines), when it
    /// wrote any: kept by the core per attempt, bounded, and never another attempt's.
    pub stderr_tail: Option<String>,
}

impl ServerError {
    /// An error of `kind` with no stderr tail.
    pub fn new(kind: ServerErrorKind, message: impl Into<String>) -> Self {
        ServerError {
            kind,
            message: message.into(),
            stderr_tail: None,
        }
    }
}

/// The message, then the stderr tail as `; last stderr lines:` and one line each.
impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(tail) = &self.stderr_tail {
            write!(f, "; last stderr lines:\n{tail}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ServerError {}

/// Why a tool call failed. Every one reads `MCP error: <message>`, a server's JSON-RPC
/// error `MCP error <code>: <message>`; only `Rpc` is the server's own error.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub enum CallError {
    /// The call reached its deadline; `waiting_for` names the server it was still waiting
    /// to connect, when it never went out.
    Timeout {
        /// The call's timeout.
        after: Duration,
        /// The server the call was waiting for, if it was not sent.
        waiting_for: Option<String>,
    },
    /// The name is not in the tool view and never was (or no longer names anything known).
    UnknownTool {
        /// The qualified name called.
        tool: String,
    },
    /// The tool left its server's list (a re-list without it) while the server stays.
    RetiredTool {
        /// The server that offered it.
        server: String,
        /// The tool's name on that server.
        raw: String,
        /// The qualified name it was called as, when it was called after it left the view
        /// (`None`: the call was waiting for the server, which then listed without it).
        called_as: Option<String>,
    },
    /// The tool left the view with its server, which is no longer running.
    WithdrawnTool {
        /// The qualified name called.
        tool: String,
        /// Its server.
        server: String,
    },
    /// The tool's server is known but not connected and not connecting.
    NotConnected {
        /// The server.
        server: String,
        /// Why its last attempt ended, if it has failed.
        reason: Option<ServerError>,
    },
    /// The server answered with a JSON-RPC error.
    Rpc {
        /// The error code.
        code: i64,
        /// The server's message.
        message: String,
        /// The server's extra detail, as sent.
        data: Option<Value>,
    },
    /// The server's answer was not a valid `tools/call` result.
    Protocol(String),
    /// The connection failed under the call, or the transport could not deliver it.
    Transport(ServerError),
    /// The embedder stopped the server while the call was in flight.
    Disconnected {
        /// The server.
        server: String,
    },
    /// An operation named a server that is not known.
    UnknownServer {
        /// The name given.
        server: String,
    },
    /// No server in the view lists this resource (or template); name the server to read
    /// one it does not list.
    UnknownResource {
        /// The URI given.
        uri: String,
    },
    /// More than one server lists this URI: name the server.
    AmbiguousResource {
        /// The URI given.
        uri: String,
        /// The servers that list it, by name.
        servers: Vec<String>,
    },
    /// The name is not in the prompt view (or left its server's list).
    UnknownPrompt {
        /// The qualified name given.
        name: String,
    },
    /// The server did not declare the capability this method needs.
    Unsupported {
        /// The server.
        server: String,
        /// The method it does not offer.
        method: String,
    },
    /// The server asked for input (a multi round-trip request) that the client cannot give:
    /// no handler for that kind of request, or the request was malformed.
    InputUnavailable {
        /// What it asked for (`elicitation/create`, `sampling/createMessage`, ...).
        method: String,
        /// Why it cannot be given.
        reason: String,
    },
    /// The tool declares an `outputSchema` and its result (without `isError`) does not keep
    /// to it: no `structuredContent`, or one that does not conform. Generated locally.
    OutputSchema {
        /// The tool's server.
        server: String,
        /// The tool's name on that server.
        tool: String,
        /// What is wrong with the result.
        problem: OutputProblem,
    },
    /// An operation (a read, a prompt, a completion, ...) reached its deadline.
    OperationTimeout {
        /// The method it sent (or would have sent).
        method: String,
        /// Its timeout.
        after: Duration,
        /// The server it was still waiting to connect, if it never went out.
        waiting_for: Option<String>,
    },
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Timeout {
                after,
                waiting_for: None,
            } => write!(
                f,
                "MCP error: tool call timed out after {} ms",
                after.as_millis()
            ),
            CallError::Timeout {
                after,
                waiting_for: Some(server),
            } => write!(
                f,
                "MCP error: tool call timed out after {} ms waiting for server \"{server}\" to connect",
                after.as_millis()
            ),
            CallError::UnknownTool { tool } => write!(
                f,
                "MCP error: unknown tool \"{tool}\" (not in the current tool view)"
            ),
            CallError::RetiredTool {
                server,
                raw,
                called_as: None,
            } => write!(
                f,
                "MCP error: tool \"{raw}\" is no longer offered by server \"{server}\""
            ),
            CallError::RetiredTool {
                server,
                raw,
                called_as: Some(tool),
            } => write!(
                f,
                "MCP error: tool \"{raw}\" is no longer offered by server \"{server}\" (called as \"{tool}\")"
            ),
            CallError::WithdrawnTool { tool, server } => write!(
                f,
                "MCP error: server \"{server}\" is not connected (tool \"{tool}\" was withdrawn with it)"
            ),
            CallError::NotConnected { server, .. } => {
                write!(f, "MCP error: server \"{server}\" is not connected")
            }
            CallError::Rpc { code, message, .. } => write!(f, "MCP error {code}: {message}"),
            CallError::Protocol(message) => write!(f, "MCP error: {message}"),
            CallError::InputUnavailable { method, reason } => write!(
                f,
                "MCP error: the server asked for input the client cannot give ({method}): {reason}"
            ),
            CallError::Transport(error) => write!(f, "MCP error: {error}"),
            CallError::Disconnected { server } => {
                write!(f, "MCP error: server \"{server}\" was disconnected")
            }
            CallError::UnknownServer { server } => {
                write!(f, "MCP error: no server named \"{server}\"")
            }
            CallError::UnknownResource { uri } => write!(
                f,
                "MCP error: no server lists resource \"{uri}\" (name the server to read it)"
            ),
            CallError::AmbiguousResource { uri, servers } => write!(
                f,
                "MCP error: resource \"{uri}\" is listed by several servers ({}); name one",
                servers.join(", ")
            ),
            CallError::UnknownPrompt { name } => write!(
                f,
                "MCP error: unknown prompt \"{name}\" (not in the current prompt view)"
            ),
            CallError::Unsupported { server, method } => write!(
                f,
                "MCP error: server \"{server}\" does not offer {method}"
            ),
            CallError::OutputSchema {
                server,
                tool,
                problem: OutputProblem::Missing,
            } => write!(
                f,
                "MCP error: tool \"{tool}\" of server \"{server}\" declares an output schema but returned no structured content"
            ),
            CallError::OutputSchema {
                server,
                tool,
                problem: OutputProblem::Mismatch(m),
            } => write!(
                f,
                "MCP error: the structured content returned by tool \"{tool}\" of server \"{server}\" does not match its output schema: {m}"
            ),
            CallError::OperationTimeout {
                method,
                after,
                waiting_for,
            } => {
                write!(f, "MCP error: {method} timed out after {} ms", after.as_millis())?;
                if let Some(server) = waiting_for {
                    write!(f, " waiting for server \"{server}\" to connect")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for CallError {}

/// What is wrong with a result checked against its tool's output schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum OutputProblem {
    /// The result has no `structuredContent`.
    Missing,
    /// Its `structuredContent` does not conform.
    Mismatch(crate::schema::SchemaMismatch),
}

/// Why a `RefreshTools` did not apply a fresh list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum RefreshError {
    /// The server is known but neither connected nor connecting (failed, stopped, or
    /// waiting to reconnect).
    NotConnected {
        /// The server.
        server: String,
        /// Why its last attempt ended, if it has failed.
        reason: Option<ServerError>,
    },
    /// The re-list failed (an error answer, a timeout, a paging fault); the server keeps
    /// its previous list.
    Failed(ServerError),
    /// The connection was lost (or the server stopped, or its first list failed) before the
    /// list arrived.
    Lost(ServerError),
}

impl fmt::Display for RefreshError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefreshError::NotConnected {
                server,
                reason: None,
            } => write!(f, "server \"{server}\" is not connected"),
            RefreshError::NotConnected {
                server,
                reason: Some(reason),
            } => write!(f, "server \"{server}\" is not connected: {reason}"),
            RefreshError::Failed(e) | RefreshError::Lost(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RefreshError {}

/// Why the manager refused an embedder request outright.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum RequestError {
    /// No server of that name is known: never started, or already disconnected.
    UnknownServer(String),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::UnknownServer(server) => write!(f, "no server named \"{server}\""),
        }
    }
}

impl std::error::Error for RequestError {}
