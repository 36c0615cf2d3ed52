//! Scenarios are data: the servers and how each of their attempts misbehaves, the tool cache's
//! contents, the embedder's timed actions and the manager's options. Proptest strategies
//! generate them (so a failing scenario shrinks toward a small, calm one), and a bare seed maps
//! to one scenario deterministically through a ChaCha `TestRng` seeded from it.
//!
//! Swarm testing: each seed first picks a [`FaultMix`] (which fault classes are on in this run
//! and how often they strike), so some runs are calm and some are storms.

mod generate;

pub use generate::scenario_strategy;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde::{Deserialize, Serialize};

/// Everything one simulated run needs. Same scenario, same trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    pub options: SimOptions,
    pub mix: FaultMix,
    pub servers: Vec<ServerPlan>,
    /// The embedder's actions, ordered by time. The first one is always a `Connect`.
    pub actions: Vec<Action>,
    /// Seeds the world's own choices at run time (frame jitter, per-call faults, chatter).
    pub world_seed: u64,
}

/// The manager's options, as the scenario sets them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimOptions {
    pub gate_ms: u64,
    pub uncached_wait_ms: Option<u64>,
    pub call_timeout_ms: u64,
    pub request_timeout_ms: u64,
    pub double_underscore: bool,
    pub roots: bool,
    pub max_frame_len: usize,
    /// Periodic health pings: (interval, timeout, misses). `None`: off (the default).
    #[serde(default)]
    pub health: Option<(u64, u64, u32)>,
    /// `reset_timeout_on_progress`: progress for a call pushes its deadline out.
    #[serde(default)]
    pub reset_timeout_on_progress: bool,
    /// `max_call_time` in ms (the ceiling progress can push a call's deadline to).
    #[serde(default = "default_max_call_time")]
    pub max_call_time_ms: u64,
    /// The reconnect policy: on (the default ladder), off (never reconnect by itself), or on and
    /// also retrying servers that failed during startup.
    #[serde(default)]
    pub reconnect: ReconnectMode,
    /// `max_tool_pages` (`None`: the default, far above any simulated listing).
    #[serde(default)]
    pub max_tool_pages: Option<usize>,
    /// Requests of servers to the client (sampling, elicitation): which features the
    /// embedder offers, how servers ask and cancel, how the embedder answers. `None`: off,
    /// and servers send none.
    #[serde(default)]
    pub peer: Option<PeerPlan>,
    /// The manager probes every attempt with `server/discover` (both protocol revisions);
    /// off: `initialize` at once, and every server speaks the legacy revision.
    #[serde(default)]
    pub probe: bool,
    /// `switchboard serve`'s gateway in front of the manager, with simulated downstream
    /// clients. `None`: no gateway, and the world draws nothing for one.
    #[serde(default)]
    pub gateway: Option<GatewayPlan>,
}

/// The serving side of a run: the gateway's options and its downstream clients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GatewayPlan {
    /// `page_size` of the served lists (small, so lists page).
    pub page_size: usize,
    /// `max_in_flight` per session.
    pub max_in_flight: usize,
    /// Serve plain names where they are unique.
    pub plain_names: bool,
    /// The downstream clients; each opens its session at its own time.
    pub clients: Vec<ClientPlan>,
    /// What the clients do, ordered by time.
    pub actions: Vec<DownstreamAction>,
}

/// The protocol era a downstream client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum DownstreamEra {
    /// `initialize`, then requests on the session.
    #[default]
    Legacy,
    /// 2026-07-28: `server/discover`, then every request on an HTTP exchange of its own with
    /// the envelope in `_meta`; changes followed through a `subscriptions/listen` stream;
    /// the servers' requests for input answered by retrying with `inputResponses`.
    Stateless,
}

/// One simulated downstream client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientPlan {
    pub era: DownstreamEra,
    /// When it opens its session.
    pub open_at_ms: u64,
    /// An HTTP-like session: anything before `initialize` closes it.
    pub strict: bool,
    /// It declares sampling.
    pub sampling: bool,
    /// It declares form-mode elicitation.
    pub form: bool,
    /// It declares URL-mode elicitation.
    pub url: bool,
    /// Weights of its answers to forwarded requests: promptly, with an error, never, twice.
    pub answers: [u8; 4],
    /// Its `logging/setLevel`, if it sets one (a stateless client: the `logLevel` of its
    /// requests' `_meta`).
    pub log_level: Option<String>,
    /// It declares roots (a stateless client: answers `roots/list` input requests).
    #[serde(default)]
    pub roots: bool,
    /// A stateless client's weights for an `InputRequiredResult`: retry at once, retry late,
    /// never retry, retry with a `requestState` it changed, retry twice with the same state.
    #[serde(default)]
    pub rounds: [u8; 5],
}

/// One thing a downstream client does, at a virtual time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DownstreamAction {
    pub at_ms: u64,
    /// Which client (modulo the number of clients).
    pub client: usize,
    pub kind: DownstreamKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DownstreamKind {
    /// `tools/call` of the `pick`-th tool of its last listing (or a name it never saw), with
    /// a progress token when `progress`.
    Call {
        pick: usize,
        known: bool,
        progress: bool,
    },
    /// `notifications/cancelled` for its `pick`-th request in flight.
    Cancel(usize),
    /// `resources/read` of the `pick`-th resource it listed.
    Read(usize),
    /// `prompts/get` of the `pick`-th prompt it listed.
    Prompt(usize),
    /// `resources/subscribe` (or, when held, `resources/unsubscribe`) of the `pick`-th
    /// resource it listed.
    Subscribe(usize),
    /// `ping`.
    Ping,
    /// The session ends; the client opens a new one a little later.
    Close,
}

/// Which protocol revision a simulated server speaks, and how it answers the
/// `server/discover` probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SimEra {
    /// Legacy: the probe gets -32601 (method not found).
    #[default]
    Legacy,
    /// Legacy, misleading: the probe gets an unrelated error (-32000, not initialized).
    LegacyUnrelatedError,
    /// Legacy, silent: the probe is never answered (stdio only: the probe times out).
    LegacySilent,
    /// Stateless: a `DiscoverResult`; `initialize` refused with -32022; tool calls answered
    /// with input-required rounds whose state must be echoed.
    Modern,
    /// Stateless, but the first probe of each attempt is refused with -32022 naming the
    /// version it speaks.
    ModernRetry,
}

impl SimEra {
    pub fn is_modern(self) -> bool {
        matches!(self, SimEra::Modern | SimEra::ModernRetry)
    }
}

/// How a run exercises servers' requests to the client. Percentages are per opportunity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerPlan {
    /// The embedder offers sampling.
    pub sampling: bool,
    /// The embedder offers form-mode elicitation.
    pub form: bool,
    /// The embedder offers URL-mode elicitation.
    pub url: bool,
    /// `peer_request_timeout` in ms.
    pub timeout_ms: u64,
    /// `max_peer_requests`.
    pub max_waiting: usize,
    /// Percent of chances (initialized, each call) a server takes to ask something.
    pub ask_pct: u8,
    /// Percent of its requests a server cancels a little later.
    pub cancel_pct: u8,
    /// Weights of the embedder's answers: promptly, decline, with an error, late (past the
    /// timeout), never, twice.
    pub answers: [u8; 6],
    /// Percent of embedder actions followed by a `SetRoots`.
    pub set_roots_pct: u8,
}

/// Which `ReconnectPolicy` a scenario runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ReconnectMode {
    #[default]
    On,
    Off,
    RetryStartup,
}

fn default_max_call_time() -> u64 {
    600_000
}

/// Which fault classes are on in this run, and their rates (percent per opportunity).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultMix {
    /// Weight of a faulty choice against a healthy one (0 = calm run) for attempt plans.
    pub attempt_faults: u32,
    /// Percent of tool calls that misbehave.
    pub call_fault_pct: u8,
    /// Percent of answers followed by a server-initiated message.
    pub chatter_pct: u8,
    /// Percent of answers that come with a garbage, duplicate or unknown-id frame.
    pub frame_fault_pct: u8,
    /// Percent of events for a dead process that the OS delivers anyway (stale events).
    pub stale_pct: u8,
    /// Extra latency per frame, at most this many ms (reorders answers).
    pub jitter_ms: u64,
    /// Percent of tools listed `taskSupport: required` (every server declares task-augmented
    /// `tools/call` when above 0): their calls run as tasks.
    #[serde(default)]
    pub task_pct: u8,
    /// Percent of tools listed with an `outputSchema` (some of which cannot be compiled);
    /// with `call_fault_pct`, some of their results break it.
    #[serde(default)]
    pub schema_pct: u8,
}

/// A simulated MCP server and how it behaves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerPlan {
    pub name: String,
    /// Config that fails validation (no transport opened; an error in the report).
    pub invalid: bool,
    /// Connect timeout in ms (`None`: the default 30 s).
    pub timeout_ms: Option<i64>,
    /// Raw tool names of the first `tools/list`.
    pub tools: Vec<String>,
    /// Raw tool names after a `list_changed` (or a refresh).
    pub alt_tools: Vec<String>,
    pub cache: CachePlan,
    pub cache_latency_ms: u64,
    /// Attempt `k` behaves as `attempts[min(k, len - 1)]`; after the heal, every attempt is
    /// healthy.
    pub attempts: Vec<AttemptPlan>,
    /// Typical latency of a tool call.
    pub call_latency_ms: u64,
    /// Crashes again and again after it is ready (overrides `drop_after_ready_ms`).
    #[serde(default)]
    pub crash_loop: Option<CrashLoop>,
    /// Also offers resources, a resource template and prompts (derived from its tool names),
    /// completion and subscriptions, whose lists change with its tools.
    #[serde(default)]
    pub catalog: bool,
    /// The protocol revision it speaks (only seen when the scenario probes).
    #[serde(default)]
    pub era: SimEra,
    /// The cache hints a stateless server puts on its list pages.
    #[serde(default)]
    pub hints: SimHints,
    /// A stateless server slow to start: its first `server/discover` of an attempt is answered
    /// this much later than planned (past the stdio probe timeout when large).
    #[serde(default)]
    pub slow_discover_ms: u64,
}

/// What a stateless server says of its lists' freshness (`ttlMs`, `cacheScope`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SimHints {
    /// No hints at all (read as stale at once, private).
    #[default]
    Missing,
    /// `ttlMs: 0`.
    Zero,
    /// A TTL that runs out within the run.
    Short { ttl_ms: u64, public: bool },
    /// A TTL far past any run (clipped by the client).
    Huge { public: bool },
}

impl SimHints {
    /// The hint members of a page, and how long the page stays fresh.
    pub fn members(self) -> (Option<u64>, Option<&'static str>) {
        let scope = |public| Some(if public { "public" } else { "private" });
        match self {
            SimHints::Missing => (None, None),
            SimHints::Zero => (Some(0), Some("public")),
            SimHints::Short { ttl_ms, public } => (Some(ttl_ms), scope(public)),
            SimHints::Huge { public } => (Some(u64::MAX / 4), scope(public)),
        }
    }
}

/// A server that exits `after_ready_ms` after every first tools/list answer: for its first
/// `recover_after` crashes (then it stays up), or until the heal (`None`: never recovers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrashLoop {
    pub after_ready_ms: u64,
    pub recover_after: Option<u32>,
}

/// What the tool cache holds for a server when the run starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CachePlan {
    Absent,
    /// An entry for the server's base config with these tools.
    Hit(Vec<String>),
    /// An entry for another config hash (answered as a miss).
    Stale(Vec<String>),
    /// An unreadable entry (answered as a miss).
    Corrupt,
}

/// How one connection attempt goes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptPlan {
    pub spawn: Spawn,
    pub init: Init,
    pub list: List,
    /// The process exits this long after its first tools/list answer.
    pub drop_after_ready_ms: Option<u64>,
    /// The process exits when it receives its first `tools/call`.
    pub drop_on_call: bool,
    /// An oversized frame this long after the transport opened.
    pub oversized_after_ms: Option<u64>,
    /// Stops answering pings this long after it is ready; the transport stays open.
    #[serde(default)]
    pub deaf_after_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Spawn {
    Ok {
        open_ms: u64,
    },
    /// The process cannot be started.
    Fail {
        after_ms: u64,
    },
    /// The transport never finishes opening.
    NeverOpens,
    /// The process exits before the transport is open.
    DropBeforeOpen {
        after_ms: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Init {
    Ok {
        ms: u64,
    },
    /// Answers `initialize` without the tools capability.
    NoTools {
        ms: u64,
    },
    Error {
        ms: u64,
    },
    Hang,
    Unsupported {
        ms: u64,
    },
    /// Exits while `initialize` is outstanding.
    Drop {
        ms: u64,
    },
    /// The server's HTTP front refuses the handshake request's credentials after `ms`: the
    /// transport reports it (`Unauthorized`) and the server never reads the request. `login`:
    /// a person must log in; otherwise the credentials were rejected. Only an HTTP server has
    /// credentials to refuse: a stdio one with this plan answers as `Ok`.
    Refused {
        ms: u64,
        login: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum List {
    /// Answers in `pages` pages (1 = no cursor).
    Ok {
        ms: u64,
        pages: u8,
    },
    /// A JSON-RPC error after `initialize` succeeded (a late failure if past the gate).
    Error {
        ms: u64,
    },
    Hang,
    /// Pages forever with the same cursor.
    RepeatedCursor {
        ms: u64,
    },
    /// A result without a `tools` array.
    Malformed {
        ms: u64,
    },
    /// Exits while `tools/list` is outstanding.
    Drop {
        ms: u64,
    },
}

/// One thing the embedder does, at a virtual time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub at_ms: u64,
    pub kind: ActionKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ActionKind {
    /// Connect these servers (index, config variant: 0 is the base config the cache knows, 1
    /// and 2 change it, 3 disables the server).
    Connect(Vec<(usize, u8)>),
    Reload(Vec<(usize, u8)>),
    Sync(Vec<(usize, u8)>),
    Disconnect(usize),
    DisconnectAll,
    RefreshTools(usize),
    CallTool {
        target: CallTarget,
        pick: usize,
        timeout_ms: Option<u64>,
    },
    /// Cancel the `pick`-th outstanding call (by id order).
    CancelCall(usize),
}

/// Which tool the embedder calls, resolved against the view at the time of the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallTarget {
    Live,
    Deferred,
    Unknown,
    /// A name that was in the view once and is not any more.
    Withdrawn,
}

/// Knobs of the generator.
#[derive(Debug, Clone, Copy)]
pub struct GenParams {
    pub min_servers: usize,
    pub max_servers: usize,
    pub max_actions: usize,
    /// Actions happen in `0..horizon_ms`.
    pub horizon_ms: u64,
}

impl Default for GenParams {
    fn default() -> Self {
        GenParams {
            min_servers: 6,
            max_servers: 10,
            max_actions: 40,
            horizon_ms: 6_000,
        }
    }
}

/// The proptest value tree of the scenario a seed stands for (for shrinking).
pub fn tree_for_seed(seed: u64, p: GenParams) -> Box<dyn ValueTree<Value = Scenario>> {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(b"swtchbrd");
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let config = Config {
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, rng);
    match scenario_strategy(p).new_tree(&mut runner) {
        Ok(t) => Box::new(t),
        // Generation never rejects (no filters), so this is unreachable in practice.
        Err(e) => panic!("scenario generation rejected seed {seed}: {e}"),
    }
}

/// The scenario a seed stands for.
pub fn scenario_for_seed(seed: u64) -> Scenario {
    tree_for_seed(seed, GenParams::default()).current()
}
