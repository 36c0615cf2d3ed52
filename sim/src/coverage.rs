//! "Sometimes" assertions: how often each fault and each interesting path was reached. An
//! exploration of many seeds that never reached one of them proves nothing about it, so
//! `explore` fails when a long run leaves one at zero.

use serde::Serialize;
use std::collections::BTreeMap;
use switchboard_core::manager::Counters;

macro_rules! coverage {
    ($($name:ident: $doc:literal,)*) => {
        /// Per-run (and summed) counts of faults injected and paths reached.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct Coverage {
            $(#[doc = $doc] pub $name: u64,)*
            /// The manager's own counters, summed, by their serialized names.
            pub core: BTreeMap<&'static str, u64>,
        }

        impl Coverage {
            /// Every counter with its name and meaning, sim counters first, then `core.*`.
            pub fn entries(&self) -> Vec<(String, u64, &'static str)> {
                let mut v = vec![$((stringify!($name).to_string(), self.$name, $doc),)*];
                v.extend(
                    self.core
                        .iter()
                        .map(|(k, n)| (format!("core.{k}"), *n, "the manager's counter")),
                );
                v
            }

            pub fn add(&mut self, o: &Coverage) {
                $(self.$name += o.$name;)*
                // Both read from the same `Counters`, the names are the same (the same static
                // strings): add them pairwise, without a lookup each.
                let same = |a: &&str, b: &&str| std::ptr::eq(*a, *b) || a == b;
                if self.core.len() == o.core.len()
                    && self.core.keys().zip(o.core.keys()).all(|(a, b)| same(a, b))
                {
                    for (v, n) in self.core.values_mut().zip(o.core.values()) {
                        *v += n;
                    }
                } else {
                    for (k, n) in &o.core {
                        *self.core.entry(k).or_default() += n;
                    }
                }
            }
        }
    };
}

coverage! {
    cache_entries_fresh: "the cache handed back a stateless server's lists with time left on their ttlMs",
    cache_entries_foreign: "the cache handed back a private entry written under other credentials",
    list_pages_hinted: "a stateless server put ttlMs and cacheScope on a list page",
    fresh_reuses_checked: "a connection ready without listing was checked against the server's ttlMs",
    slow_discovers_sent: "a stateless server answered its first server/discover past the probe timeout",
    initialize_refused_before_discover: "a stateless server refused initialize before answering the probe sent before it",
    schema_results_conforming: "a tool with an output schema returned conforming structured content",
    schema_results_broken: "a tool with an output schema returned a result that breaks it",
    duplicate_tools_listed: "a server listed one tool name twice",
    unreadable_answers_sent: "a server answered a call with a frame that is not UTF-8 (its id still readable)",
    schema_errors_seen: "a call failed because its result broke its tool's output schema",
    catalog_operation_faults: "a resources, prompts or completion request failed or went unanswered",
    catalog_updates_sent: "a server sent resources/updated after a subscription",
    catalog_list_errors: "a resources, templates or prompts list answered with an error",
    catalog_list_hangs: "a resources, templates or prompts list never answered",
    catalog_lists_paged: "a resources, templates or prompts list answered in two pages",
    catalog_changes_sent: "a server's resources and prompts changed, announced by list_changed",
    catalog_settled_checks: "a server's settled catalog was compared with its lists",
    operations_issued: "the embedder read, got a prompt, completed or subscribed",
    deferred_operations_issued: "an operation aimed at a deferred server's resource or prompt",
    ambiguous_reads: "a read of a URI several servers list, refused as ambiguous",
    manager_outputs: "outputs the manager emitted (commands, frames and events; a step is one input or timer)",
    spawn_failures: "a process could not be started",
    opens_never_completed: "a transport never finished opening",
    drops_before_open: "a process exited before its transport opened",
    init_errors: "initialize answered with an error",
    init_hangs: "initialize never answered",
    init_slow_past_gate: "initialize answered after the gate",
    init_unsupported: "initialize answered an unsupported protocol version",
    init_without_tools: "a server without the tools capability",
    drops_during_init: "a process exited with initialize outstanding",
    list_errors_after_init: "tools/list failed after initialize succeeded",
    list_hangs: "tools/list never answered",
    list_paged: "tools/list answered in several pages",
    list_repeated_cursor: "tools/list repeated a cursor",
    list_page_limit_hit: "a listing offered more pages than max_tool_pages allows",
    stale_cache_answers: "a cache answer arrived that the manager no longer waited for",
    foreign_progress_sent: "a server sent progress for another server's call",
    list_malformed: "tools/list answered without a tools array",
    drops_during_list: "a process exited with tools/list outstanding",
    drops_during_call: "a process exited on a tools/call",
    drops_after_ready: "a process exited after it was ready",
    garbage_frames: "a frame that is not JSON",
    oversized_frames: "a frame over the size limit",
    duplicate_responses: "a response sent twice",
    unknown_id_responses: "a response to an id never issued",
    batch_frames: "a JSON-RPC batch",
    slow_calls: "a tool call slower than its timeout",
    failing_calls: "a tool call answered with a JSON-RPC error",
    error_result_calls: "a tool call answered with isError",
    unanswered_calls: "a tool call never answered",
    cache_hits: "the cache answered with tools",
    cache_stale: "the cache held an entry for another config",
    cache_corrupt: "the cache held an unreadable entry",
    cache_slower_than_gate: "the cache answered after the gate",
    stale_events_delivered: "an event for a dead attempt was delivered",
    peer_requests_sent: "a server sent the client a request",
    peer_answers_checked: "the client's answer to a server request was checked",
    list_changed_sent: "a server sent tools/list_changed",
    progress_sent: "a server sent a progress notification",
    log_messages_sent: "a server sent a log message",
    deferred_tools_served: "a StartupComplete carried deferred tools",
    deferred_calls: "a call went to a deferred tool",
    deferred_call_succeeded: "a call to a deferred tool later succeeded",
    late_failures_after_gate: "a server failed after the gate (logged once)",
    connections_lost: "a ready server's connection was lost",
    cancel_notifications_received: "a server received notifications/cancelled",
    call_timeout_with_cancel: "a sent call timed out and the server was told",
    calls_ok: "a tool call succeeded",
    calls_unknown_tool: "a call named a tool not in the view",
    calls_withdrawn_tool: "a call named a tool that was withdrawn",
    reloads: "the embedder reloaded",
    syncs: "the embedder synced",
    disconnects_while_pending: "a server was disconnected while connecting",
    disconnect_alls: "the embedder disconnected everything",
    refreshes: "the embedder refreshed a server's tools",
    cancels: "the embedder cancelled a call in flight",
    rounds_reported: "a StartupComplete was emitted",
    rounds_with_pending: "a StartupComplete left uncached servers pending",
    suffixed_names: "a qualified name needed a uniqueness suffix",
    refresh_faults: "a tools/list refresh failed, hung or paged",
    reconnected_after_heal: "a server came back up with exactly its tools after the heal",
    runs_healed: "a run reached the liveness phase",
    crash_loop_crashes: "a crash-looping server crashed again after it was ready",
    pings_unanswered: "a server left a health ping unanswered (transport kept open)",
    list_changed_storms: "a burst of several list_changed notifications",
    list_changed_during_list: "the tool set changed while a tools/list was under way",
    list_changed_while_listing: "list_changed reached a connected server's manager mid-listing (coalesced)",
    list_settled_checks: "a settled server's view was compared with its current tools",
    slow_calls_with_progress: "a slow call reported progress",
    calls_timed_out_after_progress: "a call timed out at a progress-extended deadline",
    calls_capped_by_max_call_time: "a call's progress-extended deadline hit max_call_time",
    backoff_delays_checked: "a reconnect delay was checked against the ladder",
    breaker_trips_checked: "the sim's close count said trip, and the breaker tripped",
    syncs_restart_and_keep: "a Sync restarted a server whose config changed and kept an unchanged one connected",
    syncs_restart_stopped: "a Sync started a stopped server it listed with an unchanged config",
    stale_opens_closed: "a transport opened after its attempt was abandoned or had ended, and was closed",
    progress_events: "a Progress event reached the embedder for one of its calls",
    server_logs: "a server's log message reached the embedder as a ServerLog",
    reconnect_events_scheduled: "a ReconnectScheduled output announced an attempt on the ladder",
    reconnect_events_started: "a ReconnectStarted output started the attempt announced, when due",
    http_session_expired_recovered: "an HTTP session expired (404) and the transport's new session answered the call late",
    http_session_expired_failed: "an HTTP session expired (404), no new session could be started, and the transport failed",
    http_calls_refused: "an HTTP server refused a call's credentials (a step-up not granted): the transport reported it, the core failed that call alone",
    http_logins_lapsed: "an HTTP server refused a call until a person logs in: the transport reported it, the core ended the attempt",
    http_handshakes_refused: "an HTTP server rejected the credentials of an attempt's handshake: the transport reported it, the core ended the attempt",
    http_handshakes_need_login: "an HTTP server refused an attempt's handshake until a person logs in: the transport reported it, the core ended the attempt",
    http_notifications_refused: "an HTTP server refused the credentials of a notification the client sent: the transport reported it without an id, the core ended the attempt",
    http_session_failed_then_reopened: "a server whose HTTP session could not be renewed was opened again (reconnect or embedder)",
    round_reports_matched: "a StartupComplete named the request that opened its round",
    syncs_without_round: "a Sync that started nothing completed with SyncCompleted",
    requests_refused: "a request for an unknown server completed with RequestFailed",
    refreshes_answered_by_their_list: "a refresh of a connected server was answered by a list asked after it",
    refreshes_answered_by_first_list: "a refresh of a connecting server was answered by its first list",
    refreshes_refused_not_connected: "a refresh of a server not connected was refused at once",
    refreshes_lost: "a refresh was answered by the loss of its connection",
    stderr_tails_checked: "an error carried a stderr tail, checked against its attempt",
    calls_failed_by_transport: "a call failed because the transport could not deliver it",
    sessions_renewed: "the transport renewed an HTTP session and the manager listed the tools again",
    tasks_created: "a server answered a tools/call with a task",
    task_status_sent: "a server announced a task's end with notifications/tasks/status",
    task_polls_answered: "a server answered tasks/get",
    task_cancels_received: "a server received tasks/cancel",
    task_results_sent: "a server answered tasks/result",
    peer_client_requests_sent: "a server asked the client for sampling or an elicitation",
    peer_client_answers_checked: "a server checked the client's answer to its sampling or elicitation request",
    peer_cancels_delivered: "a server's cancellation of a request still waiting reached the manager",
    peer_never_answered: "the embedder never answered a server's request (the timeout answered it)",
    probes_refused_legacy: "a legacy server answered server/discover with method not found",
    probes_misleading: "a legacy server answered server/discover with an unrelated error",
    probes_unanswered: "a legacy server never answered server/discover",
    probes_answered_modern: "a stateless server answered server/discover",
    probe_version_refusals: "a stateless server refused the first probe's version (-32022)",
    stateless_health_checks: "a stateless server was health-checked with server/discover",
    stateless_requests_checked: "a stateless server checked a request's _meta",
    initialize_refused_by_modern: "a stateless server refused initialize (-32022)",
    input_rounds_sent: "a stateless server answered a tool call with an input-required result",
    request_states_checked: "a stateless server checked a retry's echoed requestState",
    op_input_rounds_sent: "a stateless server answered a read or a prompt with an input-required result",
    stateless_log_levels_seen: "a stateless request carried the log level the embedder set",
    listens_received: "a stateless server received subscriptions/listen",
    listens_refused_sent: "a stateless server refused subscriptions/listen with an error",
    listen_streams_ended: "a stateless server ended a subscriptions stream while connected",
    stream_resource_updates_sent: "a stateless server announced a followed resource's update on its stream",
    listen_gaps_checked: "a closed stream of a connected server was checked against the re-listen ladder",
    unmirrorable_tools_listed: "a stateless server listed a tool whose x-mcp-header cannot be mirrored",
    inputs_asked_unavailable: "a stateless server asked for an input the embedder has no handler for",
    unknown_result_types_sent: "a stateless server answered a call with an undefined resultType",
    cache_handshakes_served: "the cache answered with the revision a server spoke last",
    downstream_sessions_opened: "a downstream client opened a session with the gateway and initialized",
    downstream_sessions_refused: "a strict downstream session that spoke before initialize was closed",
    downstream_lists_served: "a downstream client completed a list (tools, resources, templates or prompts)",
    downstream_lists_paged: "a downstream list came in several pages",
    downstream_list_changed_told: "the gateway told a downstream session a list changed",
    downstream_view_checks: "a downstream session's settled list was compared with the core's view",
    downstream_calls_ok: "a downstream tools/call was answered with the server's result",
    downstream_calls_tool_errors: "a downstream tools/call was answered with a tool error naming the server",
    downstream_calls_rpc_errors: "a downstream tools/call was answered with a JSON-RPC error",
    downstream_deferred_calls: "a downstream tools/call went to a deferred tool",
    downstream_operations_answered: "a downstream read, prompt or subscription was answered",
    downstream_cancels_passed_on: "a downstream cancellation cancelled the call in the manager",
    downstream_closed_with_work: "a downstream session ended with requests in flight, cancelled upstream",
    downstream_progress_forwarded: "a server's progress reached the downstream client that asked for it",
    downstream_logs_forwarded: "a server's log message reached a downstream session that set a level",
    downstream_peer_forwarded: "a server's request was forwarded to the downstream client with a call to it",
    downstream_peer_answered: "a downstream client's answer to a forwarded request reached the manager",
    downstream_peer_refused: "a server's request was refused by the gateway, saying why",
    downstream_peer_withdrawn: "a forwarded request was withdrawn and the downstream client told",
    downstream_too_many: "a downstream request was refused past max_in_flight",
    modern_discovered: "a stateless downstream client's server/discover was answered",
    modern_listens_acknowledged: "a stateless client's subscriptions/listen stream was acknowledged",
    modern_listens_reopened: "a stateless client ended its listen stream and opened another",
    modern_listen_filters_changed: "a stateless client re-opened its stream to change its resource subscriptions",
    modern_lists_served: "a stateless client completed a list",
    modern_lists_paged: "a stateless client's list came in several pages, one exchange each",
    modern_list_changed_told: "the gateway told a stateless client's listen stream a list changed",
    modern_view_checks: "a stateless client's settled list was compared with the core's view",
    modern_calls_complete: "a stateless client's call, read or prompt got its complete result",
    modern_inputs_asked: "a stateless client was answered an InputRequiredResult",
    modern_inputs_answered: "a stateless client's retry answered a server's request to the manager",
    modern_retries_late: "a stateless client retried an input round late",
    modern_retries_abandoned: "a stateless client never retried an input round",
    modern_states_forged_refused: "a retry with a requestState the gateway never issued was refused with -32602",
    modern_retries_doubled: "a stateless client sent the same retry twice",
    modern_retries_stale_refused: "a retry of a round already taken was refused with -32602",
    modern_exchanges_abandoned: "a stateless client abandoned an exchange with a call in flight, cancelled upstream",
    modern_capability_missing: "a stateless client's call needed a capability it did not declare (-32021)",
}

/// Add the manager's counters (by their serialized names, so new core counters show up
/// without a change here): read field by field as `Counters` serializes itself, the names
/// borrowed, nothing built in between.
pub fn add_core(into: &mut BTreeMap<&'static str, u64>, c: &Counters) {
    // A field that is not a number counts 0, as `Value::as_u64` said; `Counters` is a
    // struct, so the only error (serializing as something else) cannot happen.
    let _ = c.serialize(Fields(into));
}

/// A serializer that takes a struct of `u64` fields and adds each to the map by its name.
struct Fields<'a>(&'a mut BTreeMap<&'static str, u64>);

type Error = serde_json::Error;
type Impossible = serde::ser::Impossible<(), Error>;

fn no_counter<T>() -> Result<T, Error> {
    Err(serde::ser::Error::custom("not a struct of counters"))
}

impl<'a> serde::Serializer for Fields<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible;
    type SerializeTuple = Impossible;
    type SerializeTupleStruct = Impossible;
    type SerializeTupleVariant = Impossible;
    type SerializeMap = Impossible;
    type SerializeStruct = Self;
    type SerializeStructVariant = Impossible;

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Error> {
        Ok(self)
    }
    fn serialize_bool(self, _: bool) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_i8(self, _: i8) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_i16(self, _: i16) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_i32(self, _: i32) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_i64(self, _: i64) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_u8(self, _: u8) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_u16(self, _: u16) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_u32(self, _: u32) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_u64(self, _: u64) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_f32(self, _: f32) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_f64(self, _: f64) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_char(self, _: char) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_str(self, _: &str) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_none(self) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_unit(self) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        no_counter()
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Impossible, Error> {
        no_counter()
    }
    fn serialize_tuple(self, _: usize) -> Result<Impossible, Error> {
        no_counter()
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Impossible, Error> {
        no_counter()
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Impossible, Error> {
        no_counter()
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Impossible, Error> {
        no_counter()
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Impossible, Error> {
        no_counter()
    }
}

impl serde::ser::SerializeStruct for Fields<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        // A number is no allocation as a `Value`; what is not a `u64` counts 0.
        let n = serde_json::to_value(value)?.as_u64().unwrap_or(0);
        *self.0.entry(key).or_default() += n;
        Ok(())
    }
    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

impl Coverage {
    /// Names of the counters still at zero.
    pub fn unreached(&self) -> Vec<String> {
        self.entries()
            .into_iter()
            .filter(|(_, n, _)| *n == 0)
            .map(|(k, _, _)| k)
            .collect()
    }
}
