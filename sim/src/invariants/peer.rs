//! Servers' requests to the client (sampling, elicitation). The simulated servers judge every
//! answer as it reaches them (`world/peer.rs`) — at most once, never after the cancellation
//! reached the manager, never "method not found" for a declared capability — and the
//! embedder judges every request handed to it; each finding is kept in the step under the
//! invariant it breaks and reported here. That every request is answered at least once while
//! its connection lives is checked once the faults are healed.

use super::{output_violation, Ctx, Invariant};

/// Every server request to the client is answered at most once on the wire.
pub fn peer_requests_answered_once(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, Invariant::PeerRequestsAnsweredOnce)
}

/// A declared capability's requests reach the embedder; an undeclared one's are refused.
pub fn declared_capabilities_have_handlers(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, Invariant::DeclaredCapabilitiesHaveHandlers)
}

/// Nothing is sent for a request after the manager received the server's cancellation.
pub fn nothing_sent_for_cancelled_requests(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, Invariant::NothingSentForCancelledRequests)
}
