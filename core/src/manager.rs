//! The lifecycle state machine (filled in by the core issue).
use crate::config::{ServerSpec, TransportConfig};
use crate::names::NamingScheme;
use crate::time::Instant;
use crate::tool::{Tool, ToolDef, ToolResult};
use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ConnId(pub u64);
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct CallId(pub u64);

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct CacheKey {
    pub server: String,
    pub config_hash: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum TransportEvent {
    Opened,
    Frame(Bytes),
    Closed { reason: String },
    Failed { error: String },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Input {
    Connect {
        servers: Vec<ServerSpec>,
    },
    Reload {
        servers: Vec<ServerSpec>,
    },
    Sync {
        servers: Vec<ServerSpec>,
    },
    Disconnect {
        server: String,
    },
    DisconnectAll,
    RefreshTools {
        server: String,
    },
    Transport {
        conn: ConnId,
        event: TransportEvent,
    },
    CacheLoaded {
        server: String,
        key: CacheKey,
        tools: Option<Vec<ToolDef>>,
    },
    CallTool {
        call: CallId,
        tool: String,
        arguments: Option<Value>,
        timeout: Option<Duration>,
    },
    CancelCall {
        call: CallId,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ServerStatus {
    Connected,
    Connecting,
    Disconnected,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StartupReport {
    pub tools: Vec<Tool>,
    pub errors: BTreeMap<String, String>,
    pub connected: Vec<String>,
    pub deferred: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum CallOutcome {
    Ok(ToolResult),
    Err(String),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerState {
    pub name: String,
    pub status: ServerStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[must_use]
pub enum Output {
    OpenTransport {
        conn: ConnId,
        server: String,
        config: TransportConfig,
    },
    Send {
        conn: ConnId,
        frame: Bytes,
    },
    CloseTransport {
        conn: ConnId,
    },
    LoadCache {
        server: String,
        key: CacheKey,
    },
    StoreCache {
        server: String,
        key: CacheKey,
        tools: Vec<ToolDef>,
    },
    StartupComplete(StartupReport),
    ToolsChanged {
        servers: Vec<String>,
    },
    StatusChanged {
        server: String,
        status: ServerStatus,
    },
    CallCompleted {
        call: CallId,
        outcome: CallOutcome,
    },
    Diagnostic {
        server: Option<String>,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ManagerOptions {
    pub seed: u64,
    pub gate: Duration,
    pub naming: NamingScheme,
}

pub struct Manager {
    _now: Instant,
}
