//! Servers' requests for the client (sampling, elicitation, stateless servers' roots inputs),
//! carried to the serving loop so the gateway can forward them to a downstream client.
//!
//! [`PeerForwarder::install`] puts handlers on the [`Builder`] (which also declares the
//! capabilities upstream); each request a handler is given goes to the loop with a reply
//! channel, under a key the loop issues, and the gateway decides who answers it. A handler
//! whose request the library withdraws is dropped, which closes its reply channel: the loop
//! sees that and tells the gateway the request is withdrawn.

use crate::peer::{ElicitationHandler, PeerFuture, PeerRequest, RootsHandler, SamplingHandler};
use crate::Builder;
use async_channel::{Receiver, Sender};
use std::sync::Arc;
use switchboard_core::protocol::{codes, PeerAnswer};

/// Most servers' requests waiting to reach the loop; more wait in their handlers.
const QUEUE: usize = 256;

/// One request for the loop, with where its answer goes.
pub(crate) struct Asked {
    pub request: PeerRequest,
    pub reply: Sender<PeerAnswer>,
}

/// Carries the servers' requests of one [`Switchboard`](crate::Switchboard) to `serve`: make
/// one, [`install`](Self::install) it on the builder, and hand it to
/// [`serve_stdio`](super::serve_stdio) or [`serve_http`](super::serve_http).
#[derive(Clone)]
pub struct PeerForwarder {
    tx: Sender<Asked>,
    pub(crate) rx: Receiver<Asked>,
}

impl Default for PeerForwarder {
    fn default() -> Self {
        let (tx, rx) = async_channel::bounded(QUEUE);
        PeerForwarder { tx, rx }
    }
}

impl std::fmt::Debug for PeerForwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerForwarder")
            .field("queued", &self.rx.len())
            .finish()
    }
}

impl PeerForwarder {
    /// A forwarder with nothing queued.
    pub fn new() -> Self {
        Self::default()
    }

    /// Answer sampling, elicitation (both modes) and stateless servers' roots inputs through
    /// the downstream clients (the gateway answers the roots no client's request takes from
    /// the roots it keeps).
    pub fn install(&self, builder: Builder) -> Builder {
        let handler = Arc::new(Forward {
            tx: self.tx.clone(),
        });
        builder
            .elicitation_handler(handler.clone())
            .sampling_handler(handler.clone())
            .roots_handler(handler)
    }
}

struct Forward {
    tx: Sender<Asked>,
}

impl Forward {
    fn ask(&self, request: PeerRequest) -> PeerFuture {
        let tx = self.tx.clone();
        Box::pin(async move {
            let (reply, answer) = async_channel::bounded(1);
            let gone = || PeerAnswer::Error {
                code: codes::INTERNAL_ERROR,
                message: "switchboard serve stopped before a client answered".into(),
            };
            if tx.send(Asked { request, reply }).await.is_err() {
                return gone();
            }
            answer.recv().await.unwrap_or_else(|_| gone())
        })
    }
}

impl ElicitationHandler for Forward {
    fn elicit(&self, request: PeerRequest) -> PeerFuture {
        self.ask(request)
    }
}

impl SamplingHandler for Forward {
    fn create_message(&self, request: PeerRequest) -> PeerFuture {
        self.ask(request)
    }
}

impl RootsHandler for Forward {
    fn list_roots(&self, request: PeerRequest) -> PeerFuture {
        self.ask(request)
    }
}
