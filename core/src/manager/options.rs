//! The manager's policies: the startup gate, timeouts, naming, the reconnect ladder and
//! health checks. Defaults keep the classic MCP client behaviour where there is one (a 250 ms
//! gate, waiting for servers without a cache entry, `mcp_<server>_<tool>` names); the policies
//! it lacks are opt-in, except reconnecting, which is on.

use crate::names::NamingScheme;
use crate::protocol::{self, ClientFeatures, Root};
use std::collections::BTreeMap;
use std::time::Duration;

/// Policies: how long to wait, what to call tools, when to reconnect and check health.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagerOptions {
    /// Seed for the PRNG (reconnect jitter). Same seed, same behaviour.
    pub seed: u64,
    /// The startup gate: how long after a round starts its report is due (default 250 ms).
    pub gate: Duration,
    /// How long past the gate to wait for pending servers without a cache entry. `None`
    /// waits until they settle, so their tools are in the report (the default).
    pub uncached_wait: Option<Duration>,
    /// How qualified tool names are formed from server and tool names.
    pub naming: NamingScheme,
    /// Default per-call timeout.
    pub call_timeout: Duration,
    /// Timeout of each `tools/list` page and other requests after `initialize`.
    pub request_timeout: Duration,
    /// Variables for `${VAR}` expansion (the shell passes the process environment).
    pub env: BTreeMap<String, String>,
    /// The roots answered to `roots/list` at first (`Input::SetRoots` replaces them); the
    /// `roots` capability is declared when non-empty (or `client_features.roots` is on).
    pub roots: Vec<Root>,
    /// The largest frame read from a server (default 16 MiB); a larger one fails the
    /// connection.
    pub max_frame_len: usize,
    /// The most `tools/list` pages one listing may take (default 1000) before it fails.
    pub max_tool_pages: usize,
    /// Version sent as `clientInfo.version`.
    pub client_version: String,
    /// Reconnect after an unexpected close (on by default).
    pub reconnect: ReconnectPolicy,
    /// Periodic `ping` health checks (off by default).
    pub health: Option<HealthPolicy>,
    /// Let `notifications/progress` for a call push its deadline out by its timeout again,
    /// never past `max_call_time` after the call started. Calls then carry a progress token.
    pub reset_timeout_on_progress: bool,
    /// The hard ceiling on a call's total time when progress resets its timeout.
    pub max_call_time: Duration,
    /// The connect timeout of servers whose config sets no `timeout` (default 30 s). Not part
    /// of any cache key, unlike a config's own `timeout`.
    pub default_connect_timeout: Duration,
    /// The requests of a server's the client takes (sampling, elicitation, roots), and so the
    /// capabilities `initialize` declares (all off by default).
    pub client_features: ClientFeatures,
    /// Who answers a stateless server's `roots/list` input (asked in an
    /// `InputRequiredResult`, so it belongs to one request): the manager from its roots (the
    /// default), or the embedder (`RootsInputs::Embedder`). A server's own `roots/list`
    /// request (the older revisions) is always answered by the manager.
    pub roots_inputs: RootsInputs,
    /// How long a server's sampling or elicitation request waits for the embedder's answer
    /// before the server is answered with a timeout error (default 10 min: a person answers).
    pub peer_request_timeout: Duration,
    /// Most requests of one server's that may wait for the embedder at once (default 16); one
    /// more is answered with an error at once.
    pub max_peer_requests: usize,
    /// How a connection's protocol revision is chosen (the `server/discover` probe is off by
    /// default here: `initialize` at once; the library turns it on).
    pub protocol: super::ProtocolPolicy,
    /// Checks structured results against the `outputSchema` their tool declares (`None`, the
    /// core's default: results are not checked). With one, a result without `isError` from
    /// a tool with an output schema must carry a conforming `structuredContent`, or the call
    /// fails with [`CallError::OutputSchema`](super::CallError::OutputSchema).
    pub output_validator: Option<crate::schema::SharedValidator>,
}

/// Reconnect with backoff: after an unexpected close of a connected server, attempts follow
/// `initial`, ×2 each time, capped at `max`, each with ±`jitter` from the manager's seeded
/// PRNG. More than `burst_limit` unexpected closes within `burst_window` trips a breaker: no
/// more automatic attempts until an explicit `Connect`, `Reload` or `Sync`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReconnectPolicy {
    /// Reconnect at all (on by default).
    pub enabled: bool,
    /// The delay before the first attempt (default 500 ms).
    pub initial: Duration,
    /// The longest delay between attempts (default 5 min).
    pub max: Duration,
    /// Fraction of each delay drawn at random either way (0.2 = ±20%).
    pub jitter: f64,
    /// How many unexpected closes within `burst_window` are tolerated (default 5).
    pub burst_limit: usize,
    /// The window in which unexpected closes are counted (default 30 s).
    pub burst_window: Duration,
    /// Also retry servers that failed before they ever connected (off by default).
    pub retry_startup_failures: bool,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        ReconnectPolicy {
            enabled: true,
            initial: Duration::from_millis(500),
            max: Duration::from_secs(300),
            jitter: 0.2,
            burst_limit: 5,
            burst_window: Duration::from_secs(30),
            retry_startup_failures: false,
        }
    }
}

impl ReconnectPolicy {
    /// Never reconnect by itself: a lost server stays disconnected until the embedder
    /// connects it again.
    pub fn never() -> Self {
        ReconnectPolicy {
            enabled: false,
            ..Default::default()
        }
    }

    /// The un-jittered delay before attempt `n` (1-based): initial × 2^(n-1), capped.
    pub fn base_delay(&self, attempt: u32) -> Duration {
        let factor = 1u64 << attempt.saturating_sub(1).min(30);
        let nanos = (self.initial.as_nanos() as u64).saturating_mul(factor);
        Duration::from_nanos(nanos).min(self.max)
    }
}

/// Health checks: a `ping` every `interval`; `misses` unanswered pings in a row (each given
/// `timeout`) count as a failed connection, which is closed and then reconnected.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthPolicy {
    /// Time between pings on a ready connection (default 30 s).
    pub interval: Duration,
    /// How long each ping may go unanswered (default 10 s).
    pub timeout: Duration,
    /// Unanswered pings in a row that fail the connection (default 2; at least 1).
    pub misses: u32,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        HealthPolicy {
            interval: Duration::from_secs(30),
            timeout: Duration::from_secs(10),
            misses: 2,
        }
    }
}

/// Who answers a stateless server's `roots/list` input (see
/// [`ManagerOptions::roots_inputs`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RootsInputs {
    /// The manager, from its roots (`ManagerOptions::roots`, `Input::SetRoots`).
    #[default]
    Manager,
    /// The embedder: each becomes an `Event::PeerRequest` of kind `Roots`, answered with a
    /// `ListRootsResult` like any input (a gateway passes it to the client whose request
    /// asked, or answers it from the roots it keeps). It also declares the `roots`
    /// capability.
    Embedder,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        ManagerOptions {
            seed: 0,
            gate: Duration::from_millis(250),
            uncached_wait: None,
            naming: NamingScheme::Seed,
            call_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
            env: BTreeMap::new(),
            roots: Vec::new(),
            max_frame_len: protocol::DEFAULT_MAX_FRAME_LEN,
            max_tool_pages: protocol::MAX_TOOL_PAGES,
            client_version: env!("CARGO_PKG_VERSION").to_string(),
            reconnect: ReconnectPolicy::default(),
            health: None,
            reset_timeout_on_progress: false,
            max_call_time: Duration::from_secs(600),
            default_connect_timeout: crate::config::DEFAULT_CONNECT_TIMEOUT,
            client_features: ClientFeatures::default(),
            roots_inputs: RootsInputs::Manager,
            peer_request_timeout: Duration::from_secs(600),
            max_peer_requests: 16,
            protocol: super::ProtocolPolicy::default(),
            output_validator: None,
        }
    }
}
