//! Answering what servers ask of the client: sampling (`sampling/createMessage`),
//! elicitation (`elicitation/create`, form and URL mode) and, when asked for, the roots a
//! stateless server asks for as an input. The embedder installs a handler on
//! the [`Builder`](crate::Builder); its presence turns the feature on (and so the capability
//! `initialize` declares). The driver runs each request's handler in a task of its own, so a
//! slow handler (a person filling a form) never holds up the switchboard; the core bounds how
//! many wait per server and how long (`ManagerOptions::peer_request_timeout`). A request the
//! server cancels, or whose connection ends, has its handler's task dropped.

use std::future::Future;
use std::pin::Pin;
pub use switchboard_core::protocol::{form_defaults, PeerAnswer, PeerRequestKind};

/// The future a handler returns: the answer to one request.
pub type PeerFuture = Pin<Box<dyn Future<Output = PeerAnswer> + Send + 'static>>;

/// What a handler is given: the server that asks, and what it asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerRequest {
    /// The server's name.
    pub server: String,
    /// The request, parsed.
    pub kind: PeerRequestKind,
    /// Which input it is when a stateless server asked for it in the middle of a request
    /// (its key, and how many inputs that answer handed over); `None` for a request of the
    /// server's own (the older revisions).
    pub input: Option<switchboard_core::manager::RoundInput>,
}

/// Answers elicitation requests (form mode, URL mode, or both). With a form, answer
/// [`PeerAnswer::Accept`] with the user's data, [`PeerAnswer::Decline`] or
/// [`PeerAnswer::Cancel`]; [`form_defaults`] gives a form's defaults.
pub trait ElicitationHandler: Send + Sync + 'static {
    /// Answer one request (`request.kind` is `ElicitForm` or `ElicitUrl`).
    fn elicit(&self, request: PeerRequest) -> PeerFuture;
    /// Offer form mode (default yes).
    fn form_mode(&self) -> bool {
        true
    }
    /// Offer URL mode (default yes).
    fn url_mode(&self) -> bool {
        true
    }
}

/// Answers sampling requests: [`PeerAnswer::Result`] with a `CreateMessageResult`, or
/// [`PeerAnswer::Decline`] when the user rejects it.
pub trait SamplingHandler: Send + Sync + 'static {
    /// Answer one request (`request.kind` is `Sampling`).
    fn create_message(&self, request: PeerRequest) -> PeerFuture;
}

/// Answers the roots a stateless server asks for as an input of one request (`roots/list`
/// in an `InputRequiredResult`): [`PeerAnswer::Result`] with a `ListRootsResult`
/// (`{"roots": [...]}`). Installing one (`Builder::roots_handler`) declares the `roots`
/// capability; without one the library answers them from its roots ([`Builder::roots`]), as
/// it always answers a server's own `roots/list` request.
///
/// [`Builder::roots`]: crate::Builder::roots
pub trait RootsHandler: Send + Sync + 'static {
    /// Answer one request (`request.kind` is `Roots`).
    fn list_roots(&self, request: PeerRequest) -> PeerFuture;
}

impl<F> ElicitationHandler for F
where
    F: Fn(PeerRequest) -> PeerFuture + Send + Sync + 'static,
{
    fn elicit(&self, request: PeerRequest) -> PeerFuture {
        self(request)
    }
}

impl<F> SamplingHandler for F
where
    F: Fn(PeerRequest) -> PeerFuture + Send + Sync + 'static,
{
    fn create_message(&self, request: PeerRequest) -> PeerFuture {
        self(request)
    }
}
