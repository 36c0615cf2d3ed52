//! What a run can find wrong: the typed name of every promise the simulator checks, and the
//! violation of one. It sits below both the world and the invariants, so either can name an
//! invariant without importing the other.

use serde::Serialize;
use switchboard_core::Instant;

/// Every promise the simulator checks. The safety invariants hold after every step (checked in
/// this order); the liveness ones once the faults are healed; the last two about the run itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Invariant {
    /// 1: `status()` agrees with the registries, and every change is announced.
    StatusAgreesWithRegistries,
    /// 2: exposed tools belong to live servers, and a change of them is announced.
    ExposedToolsBelongToLiveServers,
    /// 3: qualified names are valid, unique, sorted, and independent of arrival order.
    QualifiedNamesAreValid,
    /// 4: `StartupComplete` comes once per round, on time, listing every member.
    StartupCompleteOncePerRound,
    /// 5: a stale transport event changes nothing.
    StaleEventsChangeNothing,
    /// 6: every `OpenTransport` is closed exactly once.
    EveryOpenIsClosedOnce,
    /// 7: one server's failure is isolated from the others.
    FailuresAreIsolated,
    /// 8: every call completes exactly once, and correctly.
    EveryCallCompletesOnce,
    /// 9: a late failure is logged once.
    LateFailuresLoggedOnce,
    /// 10: a disconnect withdraws exactly that server's tools.
    DisconnectWithdrawsByIdentity,
    /// 11: the client speaks valid JSON-RPC.
    ClientSpeaksValidJsonRpc,
    /// 12: no reconnect follows an explicit disconnect.
    NoReconnectAfterExplicitDisconnect,
    /// 13: backoff delays follow the ladder.
    BackoffFollowsTheLadder,
    /// 14: the breaker trips exactly past the burst limit.
    BreakerTripsPastTheLimit,
    /// 15: a sync leaves unchanged servers alone.
    SyncKeepsUnchangedServers,
    /// 16: a settled `list_changed` shows the current tools.
    ListChangedSettlesToCurrentTools,
    /// 17: call timeouts honour their deadlines.
    CallTimeoutsHonourDeadlines,
    /// 18: `server_state()` agrees with `status()` and the registries.
    ServerStateIsCoherent,
    /// 19: peer input is accounted for (rejected frames counted, log levels kept).
    PeerInputIsAccountedFor,
    /// 20: health pings keep coming while a server is connected.
    HealthPingsKeepComing,
    /// 21: every embedder request completes exactly once, with an event of its kind.
    EveryRequestCompletesOnce,
    /// 22: a round's report names the request that opened it.
    RoundReportReachesItsRequest,
    /// 23: a refresh is answered by a list fetched after it was asked (or the connecting
    /// server's first list), and only a server not connected is refused.
    RefreshReportsItsOwnResult,
    /// 24: an error's stderr tail holds only lines of the attempt it is about.
    StderrTailsBelongToTheirAttempt,
    /// 25: every sampling or elicitation request of a server's is answered on the wire at
    /// most once, and (after the heal) at least once while its connection lives.
    PeerRequestsAnsweredOnce,
    /// 26: a declared capability always has a handler (its requests reach the embedder), and
    /// an undeclared one is refused.
    DeclaredCapabilitiesHaveHandlers,
    /// 27: nothing is sent to a server for a request it cancelled.
    NothingSentForCancelledRequests,
    /// 28: once nothing of a connected server's resources, templates and prompts is in
    /// flight, the views show what its lists last said.
    CatalogSettlesToServerLists,
    /// 29: every operation completes exactly once, and the manager's operations in flight
    /// are the embedder's.
    EveryOperationCompletesOnce,
    /// `Manager::options()` returns the options the manager was built with.
    OptionsEchoed,
    /// The run ends within its step budget.
    NoRunaway,
    /// Handling a deadline moves `poll_timeout` past it.
    NoBusyLoop,
    /// After the heal, no work is left pending and every call and round ends.
    WorkFinishes,
    /// After the heal, every valid server comes back with its tools and serves a call.
    HealedServersServe,
    /// The final `DisconnectAll` leaves no process, registry entry or timer behind.
    TeardownLeavesNothing,
    /// Startup failures are retried only when the policy says so.
    StartupRetriesFollowPolicy,
    /// Two runs of one scenario give the same trace.
    Determinism,
    /// A task is polled no more often than the core's floor, and never after its result was
    /// asked for.
    TaskPollsAreBounded,
    /// 30: a connection's protocol revision is decided once per attempt and only from the
    /// probe's answer: a stateless server that answered `server/discover` never gets
    /// `initialize`, a legacy one never gets a stateless request.
    EraDecidedFromProbe,
    /// 31: every request of a stateless connection (the probe included) carries the `_meta`
    /// protocol version, client capabilities and client info.
    StatelessRequestsCarryMeta,
    /// 32: a retry after an input-required result echoes the server's `requestState` byte
    /// for byte, with the inputs asked for.
    RequestStateEchoed,
    /// 33: a result that breaks its tool's output schema never completes a call `Ok`, and
    /// an output-schema error answers only such a result.
    OutputSchemaHonoured,
    /// 34: a stateless server's `subscriptions/listen` stream that closed is asked again
    /// (within the re-listen ladder's longest delay) while the server stays connected.
    ListenStreamsResent,
    /// 35: a stateless server's lists are reused without asking for them only while its
    /// `ttlMs` says they are fresh: a connection that became ready without a `tools/list`
    /// did so before the last list that server delivered, plus its TTL, ran out.
    ListsReusedOnlyWhileFresh,
    /// 36: a downstream session's list equals the core's view unless a `list_changed` told
    /// it of a change since the list was served.
    DownstreamViewIsAnnounced,
    /// 37: every downstream request is answered once, on its own exchange; every server
    /// request handed to the gateway is answered once, by the client it was forwarded to or
    /// refused, unless withdrawn first.
    ForwardedRequestsAnsweredOnce,
    /// 38: a downstream request cancelled (or left by its session) is cancelled in the
    /// manager and never answered.
    DownstreamCancelReachesUpstream,
    /// 39: no downstream request waits past its call's deadline.
    DownstreamRequestsBounded,
    /// 40: a frame whose credentials the server refused ends its attempt (the core closes
    /// the transport) exactly when a person must log in, when it was the handshake or when it
    /// was no request; a refused step-up fails that request alone and the connection goes on.
    RefusalsDecidedByTheCore,
    /// 41: an input asked of a stateless downstream client is answered once, by a retry
    /// of its call's current round; a `requestState` the gateway never issued gets -32602.
    InputRoundsHonoured,
}

impl Invariant {
    /// The safety invariants, in the order they are checked after a step.
    pub const SAFETY: [Invariant; 32] = [
        Invariant::StatusAgreesWithRegistries,
        Invariant::ExposedToolsBelongToLiveServers,
        Invariant::QualifiedNamesAreValid,
        Invariant::StartupCompleteOncePerRound,
        Invariant::StaleEventsChangeNothing,
        Invariant::EveryOpenIsClosedOnce,
        Invariant::FailuresAreIsolated,
        Invariant::EveryCallCompletesOnce,
        Invariant::LateFailuresLoggedOnce,
        Invariant::DisconnectWithdrawsByIdentity,
        Invariant::ClientSpeaksValidJsonRpc,
        Invariant::NoReconnectAfterExplicitDisconnect,
        Invariant::BackoffFollowsTheLadder,
        Invariant::BreakerTripsPastTheLimit,
        Invariant::SyncKeepsUnchangedServers,
        Invariant::ListChangedSettlesToCurrentTools,
        Invariant::CallTimeoutsHonourDeadlines,
        Invariant::ServerStateIsCoherent,
        Invariant::PeerInputIsAccountedFor,
        Invariant::HealthPingsKeepComing,
        Invariant::TaskPollsAreBounded,
        Invariant::PeerRequestsAnsweredOnce,
        Invariant::DeclaredCapabilitiesHaveHandlers,
        Invariant::NothingSentForCancelledRequests,
        Invariant::CatalogSettlesToServerLists,
        Invariant::EveryOperationCompletesOnce,
        Invariant::EraDecidedFromProbe,
        Invariant::StatelessRequestsCarryMeta,
        Invariant::RequestStateEchoed,
        Invariant::ListenStreamsResent,
        Invariant::ListsReusedOnlyWhileFresh,
        Invariant::RefusalsDecidedByTheCore,
    ];

    /// How a violation names it in reports and traces (the liveness ones share one word, as
    /// replay logs have always shown them).
    pub fn label(self) -> &'static str {
        match self {
            Invariant::StatusAgreesWithRegistries => "1 status agrees with registries",
            Invariant::ExposedToolsBelongToLiveServers => "2 exposed tools belong to live servers",
            Invariant::QualifiedNamesAreValid => "3 qualified names are valid, unique and sorted",
            Invariant::StartupCompleteOncePerRound => {
                "4 startup complete once per round and on time"
            }
            Invariant::StaleEventsChangeNothing => "5 stale events change nothing",
            Invariant::EveryOpenIsClosedOnce => "6 every open is closed exactly once",
            Invariant::FailuresAreIsolated => "7 one server's failure is isolated",
            Invariant::EveryCallCompletesOnce => "8 calls complete exactly once and correctly",
            Invariant::LateFailuresLoggedOnce => "9 late failures are logged once",
            Invariant::DisconnectWithdrawsByIdentity => {
                "10 disconnect withdraws exactly that server's tools"
            }
            Invariant::ClientSpeaksValidJsonRpc => "11 the client speaks valid JSON-RPC",
            Invariant::NoReconnectAfterExplicitDisconnect => {
                "12 no reconnect after an explicit disconnect"
            }
            Invariant::BackoffFollowsTheLadder => "13 backoff delays follow the ladder",
            Invariant::BreakerTripsPastTheLimit => {
                "14 the breaker trips exactly past the burst limit"
            }
            Invariant::SyncKeepsUnchangedServers => "15 sync leaves unchanged servers alone",
            Invariant::ListChangedSettlesToCurrentTools => {
                "16 settled list_changed shows the current tools"
            }
            Invariant::CallTimeoutsHonourDeadlines => "17 call timeouts honour their deadlines",
            Invariant::ServerStateIsCoherent => {
                "18 server_state agrees with status and the registries"
            }
            Invariant::PeerInputIsAccountedFor => {
                "19 peer input is accounted for (rejected frames counted, log levels kept)"
            }
            Invariant::HealthPingsKeepComing => {
                "20 health pings keep coming while a server is connected"
            }
            Invariant::EveryRequestCompletesOnce => "21 every request completes exactly once",
            Invariant::RoundReportReachesItsRequest => {
                "22 a round's report reaches the request that opened it"
            }
            Invariant::RefreshReportsItsOwnResult => "23 a refresh reports its own result",
            Invariant::StderrTailsBelongToTheirAttempt => {
                "24 stderr tails belong to the attempt that wrote them"
            }
            Invariant::PeerRequestsAnsweredOnce => {
                "25 every server request to the client is answered exactly once"
            }
            Invariant::DeclaredCapabilitiesHaveHandlers => {
                "26 a declared capability always has a handler"
            }
            Invariant::NothingSentForCancelledRequests => {
                "27 nothing is sent for a request the server cancelled"
            }
            Invariant::CatalogSettlesToServerLists => {
                "28 settled resources, templates and prompts show the server's lists"
            }
            Invariant::EveryOperationCompletesOnce => "29 every operation completes exactly once",
            Invariant::OptionsEchoed => "options",
            Invariant::NoRunaway
            | Invariant::NoBusyLoop
            | Invariant::WorkFinishes
            | Invariant::HealedServersServe
            | Invariant::TeardownLeavesNothing
            | Invariant::StartupRetriesFollowPolicy => "liveness",
            Invariant::Determinism => "determinism",
            Invariant::TaskPollsAreBounded => "25 task polls are bounded",
            Invariant::EraDecidedFromProbe => {
                "30 the protocol revision is decided once, from the probe's answer"
            }
            Invariant::StatelessRequestsCarryMeta => {
                "31 every stateless request carries the protocol _meta"
            }
            Invariant::RequestStateEchoed => "32 requestState is echoed byte for byte",
            Invariant::OutputSchemaHonoured => {
                "33 results keep to their tool's output schema or fail the call"
            }
            Invariant::ListenStreamsResent => {
                "34 a closed subscriptions stream is asked again while connected"
            }
            Invariant::ListsReusedOnlyWhileFresh => {
                "35 lists are reused without listing only while their ttlMs lasts"
            }
            Invariant::DownstreamViewIsAnnounced => {
                "36 a downstream list is the core's view unless a list_changed announced a change"
            }
            Invariant::ForwardedRequestsAnsweredOnce => {
                "37 every forwarded request is answered exactly once, on the right side"
            }
            Invariant::DownstreamCancelReachesUpstream => {
                "38 a cancelled downstream call cancels its upstream call"
            }
            Invariant::DownstreamRequestsBounded => {
                "39 no downstream request waits past its timeout"
            }
            Invariant::RefusalsDecidedByTheCore => {
                "40 a refused frame ends its attempt exactly when a login is needed, it was the handshake or no request"
            }
            Invariant::InputRoundsHonoured => {
                "41 a stateless client's input is answered once, by its round's retry"
            }
        }
    }
}

impl std::fmt::Display for Invariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// A broken promise: which invariant, what was seen, and when (virtual time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: Invariant,
    pub detail: String,
    pub at: Instant,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invariant {} violated at {}ms: {}",
            self.invariant,
            self.at.as_millis(),
            self.detail
        )
    }
}
