//! Counters of the interesting paths the manager took. They change no behaviour; the
//! simulator reads them to check that its generated cases reach every path sometimes.

use serde::Serialize;

/// Counters of interesting paths, for the simulator's "sometimes" assertions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub stale_events: u64,
    /// An `Opened` for an attempt no longer tracked (abandoned, or its end reported first),
    /// answered with `CloseTransport`.
    pub stale_opened_closed: u64,
    pub deferred_servers_at_gate: u64,
    pub deferred_calls_sent: u64,
    pub late_failures: u64,
    pub connect_timeouts: u64,
    pub request_timeouts: u64,
    pub call_timeouts: u64,
    pub calls_cancelled: u64,
    pub repeated_cursors: u64,
    pub unknown_responses: u64,
    pub bad_frames: u64,
    pub unsupported_versions: u64,
    pub list_changed_applied: u64,
    pub peer_requests_answered: u64,
    pub gates_by_timer: u64,
    pub uncached_waits_expired: u64,
    pub reconnects_scheduled: u64,
    pub reconnects_succeeded: u64,
    pub breakers_tripped: u64,
    pub ping_timeouts: u64,
    pub health_failures: u64,
    pub progress_resets: u64,
    /// Servers that failed during startup and were scheduled for a retry
    /// (`retry_startup_failures`).
    pub startup_retries: u64,
    /// A `Sync` started a stopped server it listed with an unchanged config.
    pub syncs_restarted_stopped: u64,
    /// A call named a tool that had left the view (told why, not "unknown tool").
    pub calls_to_retired_tools: u64,
}
