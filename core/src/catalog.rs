//! Resources, resource templates and prompts as servers announce them, as the views expose
//! them, and the results of reading a resource, getting a prompt and completing an argument.
//!
//! Definitions keep the members the client shows typed, and pass the rest along as JSON
//! (`annotations`, `icons`, `_meta`), never inspected by the core.

use crate::tool::RawJson;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A resource as a server lists it (`resources/list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceDef {
    /// The resource's URI: its identity on that server.
    pub uri: String,
    /// Its programmatic name.
    pub name: String,
    /// A name for people, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its MIME type, if given.
    #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its size in bytes, if the server knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Annotations (audience, priority, ...), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<RawJson>,
}

/// A resource template as a server lists it (`resources/templates/list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceTemplateDef {
    /// The RFC 6570 URI template.
    #[serde(rename = "uriTemplate")]
    pub uri_template: String,
    /// Its programmatic name.
    pub name: String,
    /// A name for people, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The MIME type of the resources it makes, if given.
    #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Annotations, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<RawJson>,
}

/// One argument a prompt takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptArgument {
    /// The argument's name.
    pub name: String,
    /// A name for people, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is for, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// It must be given.
    #[serde(default)]
    pub required: bool,
}

/// A prompt as a server lists it (`prompts/list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptDef {
    /// The prompt's name on its server.
    pub name: String,
    /// A name for people, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it does, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The arguments it takes.
    #[serde(default)]
    pub arguments: Vec<PromptArgument>,
}

/// A resource in the view, with the server that lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resource {
    /// The server that lists it.
    pub server: String,
    /// The resource as listed.
    #[serde(flatten)]
    pub def: ResourceDef,
    /// It comes from the cache: its server is still connecting, and a read waits for it.
    pub deferred: bool,
}

/// A resource template in the view, with its server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceTemplate {
    /// The server that lists it.
    pub server: String,
    /// The template as listed.
    #[serde(flatten)]
    pub def: ResourceTemplateDef,
    /// It comes from the cache.
    pub deferred: bool,
}

/// A prompt in the view, under its qualified name (the same naming rules as tools, in a
/// name table of its own).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prompt {
    /// The name to get it by.
    pub qualified_name: String,
    /// The server that lists it.
    pub server: String,
    /// The prompt as listed (its `name` is the raw name on its server).
    #[serde(flatten)]
    pub def: PromptDef,
    /// It comes from the cache: a get waits for its server.
    pub deferred: bool,
}

/// What a server lists besides tools, as the tool cache keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    /// Its resources.
    #[serde(default)]
    pub resources: Vec<ResourceDef>,
    /// Its resource templates.
    #[serde(default)]
    pub templates: Vec<ResourceTemplateDef>,
    /// Its prompts.
    #[serde(default)]
    pub prompts: Vec<PromptDef>,
    /// How the server was reached (its protocol revision), so a warm start skips the probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake: Option<crate::manager::Handshake>,
    /// How long a stateless server's lists stay fresh, from their `ttlMs` and `cacheScope`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freshness: Option<crate::manager::Freshness>,
}

/// One item of a resource's contents (`resources/read`): text or base64 `blob`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceContent {
    /// The URI of this item.
    pub uri: String,
    /// Its MIME type, if given.
    #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its text, for a text resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Its bytes, base64-encoded, for a binary resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// A `resources/read` result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadResult {
    /// The server that answered.
    pub server: String,
    /// The contents, as sent.
    pub contents: Vec<ResourceContent>,
}

/// One message of a prompt (`prompts/get`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// Its content block (text, image, audio, resource link, embedded resource), as sent.
    pub content: Value,
}

/// A `prompts/get` result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptResult {
    /// The server that answered.
    pub server: String,
    /// The prompt's description, if the server gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its messages.
    pub messages: Vec<PromptMessage>,
}

/// A `completion/complete` result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Completion {
    /// The server that answered.
    pub server: String,
    /// Suggested values (at most 100, as the protocol allows).
    pub values: Vec<String>,
    /// How many values there are in all, if the server knows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// There are more values than these.
    #[serde(rename = "hasMore")]
    pub has_more: bool,
}

/// What an argument completion is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum CompletionRef {
    /// A prompt's argument, the prompt by its qualified name.
    Prompt {
        /// The prompt's qualified name, as the view lists it.
        name: String,
    },
    /// A resource template's variable.
    Resource {
        /// The template (or URI) as its server lists it.
        uri: String,
        /// The server, when more than one lists the template.
        server: Option<String>,
    },
}

/// A log level a server is asked to send from (`logging/setLevel`), least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LogLevel {
    /// `debug`.
    Debug,
    /// `info`.
    Info,
    /// `notice`.
    Notice,
    /// `warning`.
    Warning,
    /// `error`.
    Error,
    /// `critical`.
    Critical,
    /// `alert`.
    Alert,
    /// `emergency`.
    Emergency,
}

impl LogLevel {
    /// Every level, least severe first.
    pub const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    /// Its name in the protocol.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }

    /// The level named `name` (as the protocol spells it).
    pub fn parse(name: &str) -> Option<LogLevel> {
        LogLevel::ALL.into_iter().find(|l| l.as_str() == name)
    }
}

/// A request about a server's resources, prompts, completions or logging, made with a
/// [`CallId`](crate::manager::CallId) like a tool call and completed exactly once with
/// `Event::OperationCompleted`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Operation {
    /// `resources/read`. Without `server`, the one server that lists `uri`; a URI listed by
    /// several servers is ambiguous.
    ReadResource {
        /// The resource's URI.
        uri: String,
        /// The server to read it from.
        server: Option<String>,
    },
    /// `prompts/get` by qualified name.
    GetPrompt {
        /// The prompt's qualified name.
        name: String,
        /// Its arguments (names to string values).
        arguments: BTreeMap<String, String>,
    },
    /// `completion/complete` for one argument.
    Complete {
        /// What the argument belongs to.
        reference: CompletionRef,
        /// The argument's name.
        argument: String,
        /// What was typed so far.
        value: String,
        /// Values of the arguments already chosen.
        context: BTreeMap<String, String>,
    },
    /// `resources/subscribe`: the server then sends `notifications/resources/updated`.
    Subscribe {
        /// The resource's URI.
        uri: String,
        /// The server, as for a read.
        server: Option<String>,
    },
    /// `resources/unsubscribe`.
    Unsubscribe {
        /// The resource's URI.
        uri: String,
        /// The server, as for a read.
        server: Option<String>,
    },
    /// `logging/setLevel`.
    SetLogLevel {
        /// The server.
        server: String,
        /// The least severe level it should send.
        level: LogLevel,
    },
    /// `tasks/list`: one page of the server's tasks (the tasks utility).
    ListTasks {
        /// The server.
        server: String,
        /// The page after the one whose `next_cursor` this is; `None` for the first.
        cursor: Option<String>,
    },
}

impl Operation {
    /// The MCP method it sends.
    pub fn method(&self) -> &'static str {
        match self {
            Operation::ReadResource { .. } => "resources/read",
            Operation::GetPrompt { .. } => "prompts/get",
            Operation::Complete { .. } => "completion/complete",
            Operation::Subscribe { .. } => "resources/subscribe",
            Operation::Unsubscribe { .. } => "resources/unsubscribe",
            Operation::SetLogLevel { .. } => "logging/setLevel",
            Operation::ListTasks { .. } => "tasks/list",
        }
    }
}

/// What an operation gave back.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
#[non_exhaustive]
pub enum OperationResult {
    /// A resource's contents.
    Read(ReadResult),
    /// A prompt's messages.
    Prompt(PromptResult),
    /// Completion values.
    Completion(Completion),
    /// One page of a server's tasks.
    Tasks(TaskPage),
    /// A subscribe, unsubscribe or log-level request the server accepted (on `server`).
    Done {
        /// The server that accepted it.
        server: String,
    },
}

/// One page of `tasks/list`: each task as the server gave it (`taskId`, `status`, ...), kept
/// as raw JSON, and the cursor of the next page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskPage {
    /// The server that listed them.
    pub server: String,
    /// The tasks, byte for byte.
    pub tasks: Vec<crate::tool::RawJson>,
    /// Ask with this cursor for the next page; `None` on the last.
    pub next_cursor: Option<String>,
}

/// How an operation ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub enum OperationOutcome {
    /// The server answered.
    Ok(OperationResult),
    /// It failed: the server's error, a timeout, an unknown or ambiguous target, a lost
    /// connection, a capability the server did not declare.
    Err(crate::manager::CallError),
    /// The embedder cancelled it.
    Cancelled,
}
