//! The invariants: the promises the manager keeps, checked after every step of a run (safety)
//! and once the faults are healed (liveness).
//!
//! The simulator does not re-decide what the manager should have done: it observes the
//! manager's outputs and public getters (recorded in [`crate::observe`]) and checks them. Each
//! safety invariant is one function named by its [`Invariant`]; so is each check made on the
//! output stream while a step is drained ([`outputs`]), reported under the invariant it breaks.
//! This module reads the world only through those observations: the world calls it, never the
//! other way round.

mod catalog;
pub mod gateway;
mod lifecycle;
pub mod liveness;
pub mod outputs;
mod peer;
mod policy;
mod registry;
pub mod tasks;

pub use crate::verdict::{Invariant, Violation};
pub use lifecycle::{
    calls_complete_once_and_correctly, client_speaks_valid_json_rpc,
    disconnect_withdraws_by_identity, every_open_is_closed_exactly_once, failures_are_isolated,
    late_failures_logged_once, stale_events_change_nothing, startup_complete_once_and_on_time,
};
pub use peer::{
    declared_capabilities_have_handlers, nothing_sent_for_cancelled_requests,
    peer_requests_answered_once,
};
pub use policy::{
    backoff_follows_the_ladder, breaker_trips_exactly_past_the_limit,
    call_timeouts_honour_deadlines, health_pings_keep_coming, ladder_ok,
    list_changed_settles_to_current_tools, no_reconnect_after_explicit_disconnect,
    rejected_frames_are_counted, sync_keeps_unchanged_servers, touched, update_policy,
    PolicyCounts,
};
pub use registry::{
    exposed_tools_belong_to_live_servers, qualified_names_are_valid, server_state_is_coherent,
    status_agrees_with_registries,
};

use crate::observe::{Observer, StepInfo, View};
use std::sync::Arc;
use std::time::Duration;
use switchboard_core::manager::{ConnId, Manager, ServerSummary};
use switchboard_core::Instant;

/// Everything a safety check reads: the manager, the observations, and the step's two views.
pub struct Ctx<'a> {
    pub m: &'a Manager,
    pub obs: &'a Observer,
    pub before: &'a View,
    pub after: &'a View,
    pub step: &'a StepInfo,
    pub now: Instant,
    pub gate: Duration,
    pub uncached_wait: Option<Duration>,
    pub double_underscore: bool,
    /// Servers whose tool listing settled, with the tools they offer now (`None`: their set
    /// changed and was announced since the last complete listing, and no re-list is under way).
    pub settled: &'a [(usize, Option<&'a [String]>)],
    /// Servers whose resources, templates and prompts settled (connected, nothing of them in
    /// flight), with what their lists last told the manager, per kind.
    pub catalog_settled: &'a [SettledCatalog<'a>],
    pub reset_on_progress: bool,
    /// The scenario switched automatic reconnects off (`ReconnectPolicy::never()`).
    pub reconnect_off: bool,
    /// Health pings: (interval, timeout), when on.
    pub health: Option<(Duration, Duration)>,
    pub max_call_time: Duration,
    /// The step's server summaries, read once each.
    pub summaries: &'a Summaries,
}

/// A server whose resources, templates and prompts settled, with what its lists last told the
/// manager.
#[derive(Debug, Clone, Copy)]
pub struct SettledCatalog<'a> {
    /// The server, by index.
    pub server: usize,
    /// The attempt whose lists these are.
    pub attempt: ConnId,
    /// Changes whenever `applied` is written (within one attempt).
    pub lists_gen: u64,
    /// Resource URIs, template URIs and prompt names, as listed.
    pub applied: &'a [Vec<String>; 3],
}

pub type Check = fn(&Ctx) -> Result<(), String>;

/// Every safety invariant with its check, in the order they are checked.
pub const SAFETY: [(Invariant, Check); 32] = [
    (
        Invariant::StatusAgreesWithRegistries,
        status_agrees_with_registries,
    ),
    (
        Invariant::ExposedToolsBelongToLiveServers,
        exposed_tools_belong_to_live_servers,
    ),
    (Invariant::QualifiedNamesAreValid, qualified_names_are_valid),
    (
        Invariant::StartupCompleteOncePerRound,
        startup_complete_once_and_on_time,
    ),
    (
        Invariant::StaleEventsChangeNothing,
        stale_events_change_nothing,
    ),
    (
        Invariant::EveryOpenIsClosedOnce,
        every_open_is_closed_exactly_once,
    ),
    (Invariant::FailuresAreIsolated, failures_are_isolated),
    (
        Invariant::EveryCallCompletesOnce,
        calls_complete_once_and_correctly,
    ),
    (Invariant::LateFailuresLoggedOnce, late_failures_logged_once),
    (
        Invariant::DisconnectWithdrawsByIdentity,
        disconnect_withdraws_by_identity,
    ),
    (
        Invariant::ClientSpeaksValidJsonRpc,
        client_speaks_valid_json_rpc,
    ),
    (
        Invariant::NoReconnectAfterExplicitDisconnect,
        no_reconnect_after_explicit_disconnect,
    ),
    (
        Invariant::BackoffFollowsTheLadder,
        backoff_follows_the_ladder,
    ),
    (
        Invariant::BreakerTripsPastTheLimit,
        breaker_trips_exactly_past_the_limit,
    ),
    (
        Invariant::SyncKeepsUnchangedServers,
        sync_keeps_unchanged_servers,
    ),
    (
        Invariant::ListChangedSettlesToCurrentTools,
        list_changed_settles_to_current_tools,
    ),
    (
        Invariant::CallTimeoutsHonourDeadlines,
        call_timeouts_honour_deadlines,
    ),
    (Invariant::ServerStateIsCoherent, server_state_is_coherent),
    (
        Invariant::PeerInputIsAccountedFor,
        rejected_frames_are_counted,
    ),
    (Invariant::HealthPingsKeepComing, health_pings_keep_coming),
    (
        Invariant::TaskPollsAreBounded,
        tasks::task_polls_are_bounded,
    ),
    (
        Invariant::PeerRequestsAnsweredOnce,
        peer_requests_answered_once,
    ),
    (
        Invariant::DeclaredCapabilitiesHaveHandlers,
        declared_capabilities_have_handlers,
    ),
    (
        Invariant::NothingSentForCancelledRequests,
        nothing_sent_for_cancelled_requests,
    ),
    (
        Invariant::CatalogSettlesToServerLists,
        catalog::catalog_settles_to_server_lists,
    ),
    (
        Invariant::EveryOperationCompletesOnce,
        catalog::operations_complete_once,
    ),
    (Invariant::EraDecidedFromProbe, era_decided_from_probe),
    (
        Invariant::StatelessRequestsCarryMeta,
        stateless_requests_carry_meta,
    ),
    (Invariant::RequestStateEchoed, request_state_echoed),
    (Invariant::ListenStreamsResent, listen_streams_resent),
    (
        Invariant::ListsReusedOnlyWhileFresh,
        lists_reused_only_while_fresh,
    ),
    (
        Invariant::RefusalsDecidedByTheCore,
        lifecycle::refusals_decided_by_the_core,
    ),
];

/// 30: what the simulated servers saw of the revision (checked as frames reached them).
fn era_decided_from_probe(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, Invariant::EraDecidedFromProbe)
}

/// 31: every stateless request carried the protocol `_meta`.
fn stateless_requests_carry_meta(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, Invariant::StatelessRequestsCarryMeta)
}

/// 32: every retry echoed the `requestState` it was given.
fn request_state_echoed(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, Invariant::RequestStateEchoed)
}

/// 34: no subscriptions stream stays closed while its server is connected.
fn listen_streams_resent(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, Invariant::ListenStreamsResent)
}

/// 35: lists reused without listing only while the server's hint says they are fresh.
fn lists_reused_only_while_fresh(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, Invariant::ListsReusedOnlyWhileFresh)
}

/// Run every safety check on one step; the first broken invariant, with what was seen.
pub fn check_step(ctx: &Ctx) -> Result<(), (Invariant, String)> {
    for (name, check) in SAFETY {
        check(ctx).map_err(|d| (name, d))?;
    }
    Ok(())
}

/// The first violation of `name` spotted while the step's outputs were drained.
fn output_violation(ctx: &Ctx, name: Invariant) -> Result<(), String> {
    match ctx.step.output_violations.iter().find(|(n, _)| *n == name) {
        Some((_, d)) => Err(d.clone()),
        None => Ok(()),
    }
}

/// `server_summary(name)`: the lifecycle fields of `server_state(name)`, computed by the same
/// code, read without copying the config, error and capabilities the invariants do not read.
/// Builds with debug assertions read `server_state(name)` too and assert it names `name` and
/// agrees field by field.
pub fn summary(m: &Manager, name: &str) -> Option<ServerSummary> {
    let s = m.server_summary(name);
    #[cfg(debug_assertions)]
    {
        let full = m.server_state(name);
        debug_assert_eq!(
            full.map(|f| {
                debug_assert_eq!(f.name, name, "server_state names another server");
                f.summary()
            }),
            s,
            "server_summary disagrees with server_state"
        );
    }
    s
}

/// `summary` of each scenario server (by index), read at most once per step: the manager does
/// not move while a step's checks and the policy bookkeeping after them read it, so a second
/// read would give the same value (builds with debug assertions read it again and compare).
#[derive(Debug, Default)]
pub struct Summaries(Vec<std::cell::OnceCell<Option<ServerSummary>>>);

impl Summaries {
    /// An empty memo for `n` servers.
    pub fn new(n: usize) -> Self {
        Summaries((0..n).map(|_| std::cell::OnceCell::new()).collect())
    }

    /// Empty the memo for `n` servers, keeping its allocation: the same as `new(n)`.
    pub fn reset(&mut self, n: usize) {
        self.0.clear();
        self.0.resize_with(n, std::cell::OnceCell::new);
    }

    /// `summary(m, name)` of server `i` (whose name is `name`).
    pub fn get(&self, m: &Manager, i: usize, name: &str) -> Option<ServerSummary> {
        let s = *self.0[i].get_or_init(|| summary(m, name));
        debug_assert_eq!(
            s,
            summary(m, name),
            "a server's summary moved within a step"
        );
        s
    }
}

/// How many verified views a run remembers.
pub const NAMES_VERIFIED_KEPT: usize = 32;

/// Whether the view's triples are none of those already checked against a fresh `NameTable`.
pub fn names_need_fresh_check(obs: &Observer, view: &View) -> bool {
    verified_as(obs, view).is_none()
}

/// Which remembered verified list has the view's triples, if any: the very list first (most
/// steps keep it; the newest is looked at first), then one with the same triples.
pub fn verified_as(obs: &Observer, view: &View) -> Option<usize> {
    let kept = &obs.names_verified;
    if let Some(k) = kept.iter().rposition(|v| Arc::ptr_eq(v, &view.tools)) {
        return Some(k);
    }
    kept.iter().rposition(|v| {
        v.len() == view.tools.len()
            && v.iter()
                .zip(view.tools.iter())
                .all(|(a, b)| a.qualified == b.qualified && a.server == b.server && a.raw == b.raw)
    })
}
