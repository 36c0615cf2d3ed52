//! Clear tool errors: a call that fails because its server is not serving — it failed,
//! waits for the user's approval, or needs a login — is answered with a tool error
//! (`isError: true`) naming the server, the reason and what fixes it.
//!
//! A tool error rather than a JSON-RPC error: MCP clients (Claude Desktop, Cursor, VS Code,
//! Claude Code) hand a tool result's text to the model, which can then tell the user what
//! to run, while a JSON-RPC error is shown, if at all, as a bare "tool failed". JSON-RPC
//! errors stay for what the protocol says is the caller's mistake (malformed params) and for
//! the server's own JSON-RPC errors, passed on as sent.
//!
//! The shell tells the gateway which configured servers serve nothing and why
//! ([`GatewayInput::Unavailable`](super::GatewayInput)): the project servers discovery left
//! awaiting approval (the manager never sees them), and the servers whose last attempt
//! failed, with the manager's typed error. The fix is chosen from the error's kind, never
//! from its words.

use crate::manager::{CallError, ServerError, ServerErrorKind};
use std::collections::BTreeMap;

/// Why a configured server serves nothing now.
#[derive(Debug, Clone, PartialEq)]
pub enum Unavailable {
    /// A project server that nothing has approved yet: it is not started until the user
    /// approves it.
    AwaitingApproval,
    /// Its last attempt failed with this error (a login it needs among them).
    Failed(ServerError),
}

/// The servers that serve nothing, by name.
pub type UnavailableServers = BTreeMap<String, Unavailable>;

/// Why `server` cannot serve and what fixes it, from the error of the call (when it carries
/// one of the server's) or else what the shell said of the server.
pub(super) fn reason_and_fix(
    server: &str,
    error: Option<&ServerError>,
    known: Option<&Unavailable>,
) -> Option<String> {
    // The call's own error is in its text already; one the shell told of is not.
    let told = error.is_none();
    let error = match (error, known) {
        (_, Some(Unavailable::AwaitingApproval)) => {
            return Some(format!(
                "server \"{server}\" is a project server awaiting approval; to fix: run \
                 `switchboard trust {server}` in the project (it starts once approved), then \
                 call again"
            ))
        }
        (Some(e), _) => e,
        (None, Some(Unavailable::Failed(e))) => e,
        (None, None) => return None,
    };
    let why = if told {
        format!(" ({})", error.message)
    } else {
        String::new()
    };
    Some(match error.kind {
        ServerErrorKind::NeedsLogin | ServerErrorKind::Unauthorized => format!(
            "server \"{server}\" needs you to log in; to fix: run `switchboard login {server}`, \
             then call again"
        ),
        ServerErrorKind::InvalidConfig => format!(
            "server \"{server}\" has an invalid configuration{why}; to fix: correct its entry \
             in the config file (`switchboard status` names the file)"
        ),
        ServerErrorKind::Disconnected => return None,
        ServerErrorKind::BreakerTripped => format!(
            "server \"{server}\" kept crashing and is no longer restarted{why}; to fix: see \
             `switchboard status`, then restart `switchboard serve`"
        ),
        _ => format!(
            "server \"{server}\" failed{why}; to fix: see `switchboard status` for its error \
             and stderr"
        ),
    })
}

/// The server a failed call names, and the server error it carries, if any.
pub(super) fn failed_server<'a>(
    e: &'a CallError,
    pending_server: Option<&'a str>,
) -> (Option<&'a str>, Option<&'a ServerError>) {
    match e {
        CallError::NotConnected { server, reason } => (Some(server.as_str()), reason.as_ref()),
        CallError::WithdrawnTool { server, .. } => (Some(server.as_str()), None),
        CallError::Timeout {
            waiting_for: Some(server),
            ..
        } => (Some(server.as_str()), None),
        CallError::Transport(err) => (pending_server, Some(err)),
        _ => (pending_server, None),
    }
}

/// The text of an unknown tool's tool error while project servers await approval (their
/// tools cannot be in the view, so the tool may well be one of theirs).
pub(super) fn unknown_while_awaiting(
    tool: &str,
    unavailable: &UnavailableServers,
) -> Option<String> {
    let awaiting: Vec<&str> = unavailable
        .iter()
        .filter(|(_, u)| **u == Unavailable::AwaitingApproval)
        .map(|(name, _)| name.as_str())
        .collect();
    if awaiting.is_empty() {
        return None;
    }
    Some(format!(
        "unknown tool \"{tool}\"; project servers awaiting approval serve no tools until they \
         are approved: {}; to fix: run `switchboard trust` in the project, then list the \
         tools again",
        awaiting.join(", ")
    ))
}
