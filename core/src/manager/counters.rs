//! Counters of the interesting paths the manager took. They change no behaviour; the
//! simulator reads them to check that its generated cases reach every path sometimes.

use serde::Serialize;

/// Counters of interesting paths, for the simulator's "sometimes" assertions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Events for an attempt or a cache lookup that is no longer current, ignored.
    pub stale_events: u64,
    /// An `Opened` for an attempt no longer tracked (abandoned, or its end reported first),
    /// answered with `CloseTransport`.
    pub stale_opened_closed: u64,
    /// Servers reported deferred at a gate: still connecting, served from the cache.
    pub deferred_servers_at_gate: u64,
    /// Calls that waited for a deferred server and went out once it connected.
    pub deferred_calls_sent: u64,
    /// Attempts that failed before connecting with no round open for them (a startup
    /// failure after the gate's report).
    pub late_failures: u64,
    /// Attempts that did not connect within their connect timeout.
    pub connect_timeouts: u64,
    /// `tools/list` pages that went unanswered within the request timeout.
    pub request_timeouts: u64,
    /// Calls that reached their deadline.
    pub call_timeouts: u64,
    /// Calls the embedder cancelled while they were in flight.
    pub calls_cancelled: u64,
    /// Listings failed because the server handed back a cursor it had given before.
    pub repeated_cursors: u64,
    /// Responses to no request in flight (unknown, or already answered or cancelled).
    pub unknown_responses: u64,
    /// Frames that could not be read (malformed, or too large).
    pub bad_frames: u64,
    /// Tool names a live list gave more than once (the first definition kept, with a warning).
    pub duplicate_tool_names: u64,
    /// Unreadable frames whose id named a request in flight: that request failed at once.
    pub unreadable_answers: u64,
    /// `initialize` answers with a protocol version the client does not speak.
    pub unsupported_versions: u64,
    /// `server/discover` probes sent (a retry with another version counts again).
    pub probes_sent: u64,
    /// Probes answered by a stateless server.
    pub probes_modern: u64,
    /// Probes that found a legacy server (an error, no delivery, no answer in time).
    pub probes_legacy: u64,
    /// Probes that went unanswered within the probe timeout (stdio).
    pub probe_timeouts: u64,
    /// Probes answered with a `DiscoverResult` after their timeout, before the `initialize`
    /// sent after them was answered: the revision is the stateless one after all.
    pub late_discovers: u64,
    /// Refusals of `initialize`'s version held while the probe sent before it was still
    /// unanswered (its answer decides).
    pub initialize_refusals_held: u64,
    /// Probes asked again with a version an `UnsupportedProtocolVersion` error listed.
    pub probe_version_retries: u64,
    /// Attempts that skipped the probe: the server's revision was remembered.
    pub probes_skipped: u64,
    /// Cache entries whose lists were still fresh when loaded (a live `ttlMs`).
    pub cache_fresh_loaded: u64,
    /// Cache entries not used: private to credentials other than the current ones.
    pub cache_private_refused: u64,
    /// Stateless connections ready from fresh cached lists, without listing.
    pub lists_skipped_fresh: u64,
    /// Lists asked again because the cached ones a connection was ready from expired.
    pub lists_expired_relisted: u64,
    /// Tools of stateless servers dropped for `x-mcp-header` annotations that cannot be
    /// mirrored into headers.
    pub tools_dropped_for_headers: u64,
    /// `InputRequiredResult`s received (each one round of a multi round-trip request).
    pub input_required_rounds: u64,
    /// Requests retried with the inputs (and state) a server asked for.
    pub input_retries: u64,
    /// Multi round-trip requests failed because an input could not be given.
    pub inputs_unavailable: u64,
    /// Results with a `resultType` the client does not know.
    pub unknown_result_types: u64,
    /// Log levels set on a stateless server: kept for its requests' `_meta`, nothing sent.
    pub log_levels_per_request: u64,
    /// `subscriptions/listen` streams asked for (stateless connections).
    pub listens_sent: u64,
    /// Streams the server acknowledged.
    pub listens_acknowledged: u64,
    /// Streams that ended while their server was connected (asked again on a ladder).
    pub listen_streams_closed: u64,
    /// Streams asked again after one ended.
    pub listens_resent: u64,
    /// Streams the server refused with an error (not asked again on that connection).
    pub listens_refused: u64,
    /// Streams asked again and acknowledged, whose lists were fetched again.
    pub lists_refetched_after_stream: u64,
    /// Resource subscriptions changed on a stateless connection (a new stream filter).
    pub stream_subscriptions_changed: u64,
    /// Re-lists applied to a connected server (after `RefreshTools` or `tools/list_changed`).
    pub list_changed_applied: u64,
    /// Requests from a server (`ping`, `roots/list`, others) answered.
    pub peer_requests_answered: u64,
    /// Gate timers that fired with their round still open.
    pub gates_by_timer: u64,
    /// Rounds reported because `uncached_wait` ran out with servers still pending.
    pub uncached_waits_expired: u64,
    /// Reconnect (or startup retry) attempts scheduled.
    pub reconnects_scheduled: u64,
    /// Servers that connected again on a reconnect attempt.
    pub reconnects_succeeded: u64,
    /// Servers whose automatic reconnects stopped after too many unexpected closes.
    pub breakers_tripped: u64,
    /// Health pings that went unanswered within their timeout.
    pub ping_timeouts: u64,
    /// Connections failed because too many pings in a row went unanswered.
    pub health_failures: u64,
    /// Call deadlines pushed out by progress notifications.
    pub progress_resets: u64,
    /// Servers that failed during startup and were scheduled for a retry
    /// (`retry_startup_failures`).
    pub startup_retries: u64,
    /// A `Sync` started a stopped server it listed with an unchanged config.
    pub syncs_restarted_stopped: u64,
    /// A call named a tool that had left the view (told why, not "unknown tool").
    pub calls_to_retired_tools: u64,
    /// Requests the transport could not deliver (`TransportEvent::RequestFailed`), failed.
    pub requests_failed_by_transport: u64,
    /// Requests whose credentials the server refused (`TransportEvent::Unauthorized`) that
    /// failed alone: their connection went on.
    pub refusals_failed_request: u64,
    /// Attempts ended because the server refused our credentials (during the handshake, or
    /// until a person logs in).
    pub refusals_ended_attempt: u64,
    /// HTTP sessions renewed by the transport (`TransportEvent::SessionRenewed`).
    pub sessions_renewed: u64,
    /// Refreshes asked while another was under way, queued behind it.
    pub refreshes_queued: u64,
    /// Refreshes of a server still connecting, answered by its first list.
    pub refreshes_of_connecting: u64,
    /// Refreshes of a server neither connected nor connecting, refused at once.
    pub refreshes_not_connected: u64,
    /// Refreshes answered because the connection was lost (or the server stopped) first.
    pub refreshes_lost: u64,
    /// Tool calls the server took as tasks (answered with a task, then polled).
    pub task_calls: u64,
    /// `tasks/get` polls sent.
    pub task_polls: u64,
    /// `notifications/tasks/status` about a task call in flight.
    pub task_status_notifications: u64,
    /// Tasks cancelled on their server because the caller gave up (timeout, cancel).
    pub task_cancels: u64,
    /// Sampling or elicitation requests of servers handed to the embedder.
    pub peer_requests_forwarded: u64,
    /// Those the embedder answered with a result (or an accepted elicitation).
    pub peer_answered: u64,
    /// Those the embedder declined or cancelled.
    pub peer_declined: u64,
    /// Those the embedder answered with an error (or an answer that did not fit).
    pub peer_answered_error: u64,
    /// Those the embedder did not answer in time: the server got a timeout error.
    pub peer_timed_out: u64,
    /// Those the server cancelled before the embedder answered.
    pub peer_cancelled_by_server: u64,
    /// Those withdrawn because their connection ended.
    pub peer_withdrawn_on_close: u64,
    /// Requests refused at once because the client does not offer that feature.
    pub peer_refused_off: u64,
    /// Requests refused at once because their params were malformed.
    pub peer_refused_invalid: u64,
    /// Requests refused at once because too many of that server's were waiting.
    pub peer_refused_full: u64,
    /// Answers ignored: a second answer, or one for a request withdrawn or never issued.
    pub peer_answers_ignored: u64,
    /// `notifications/roots/list_changed` sent (one per server told).
    pub roots_list_changed_sent: u64,
    /// `notifications/elicitation/complete` reported for a known URL elicitation.
    pub elicitations_completed: u64,
    /// `resources/list` pages requested.
    pub resource_pages_requested: u64,
    /// `resources/templates/list` pages requested.
    pub template_pages_requested: u64,
    /// `prompts/list` pages requested.
    pub prompt_pages_requested: u64,
    /// Resource lists applied (first lists and re-lists).
    pub resource_lists_applied: u64,
    /// Resource template lists applied.
    pub template_lists_applied: u64,
    /// Prompt lists applied.
    pub prompt_lists_applied: u64,
    /// Resource, template or prompt lists that failed (the server kept its tools).
    pub catalog_lists_failed: u64,
    /// Resource or prompt `list_changed` notifications coalesced into a list under way.
    pub catalog_relists_coalesced: u64,
    /// Operations (reads, prompt gets, completions, subscriptions, log levels) started.
    pub operations_started: u64,
    /// Operations that waited for a deferred server and went out once it connected.
    pub deferred_operations_sent: u64,
    /// Operations that reached their deadline.
    pub operation_timeouts: u64,
    /// Operations the embedder cancelled.
    pub operations_cancelled: u64,
    /// Resources read.
    pub resources_read: u64,
    /// Prompts got.
    pub prompts_got: u64,
    /// Completions answered.
    pub completions: u64,
    /// Subscriptions, unsubscriptions and log levels the server accepted.
    pub operations_acknowledged: u64,
    /// Reads or subscriptions refused because several servers list the URI.
    pub ambiguous_uris: u64,
    /// `notifications/resources/updated` received.
    pub resource_updates: u64,
    /// `tasks/list` pages answered.
    pub task_pages_listed: u64,
    /// Structured results checked against their tool's output schema and found conforming.
    pub output_schema_passed: u64,
    /// Results refused: no `structuredContent`, or one that does not match the tool's
    /// output schema.
    pub output_schema_refused: u64,
    /// Output schemas that did not compile (their tools' results go unchecked).
    pub output_schema_unusable: u64,
    /// Results with `isError` from a tool with an output schema, passed on unchecked.
    pub output_schema_error_results: u64,
}
