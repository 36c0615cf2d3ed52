//! Requests of servers for the embedder: each `PeerRequest` the core emits runs its handler in
//! a task of its own, whose answer comes back through the inbound channel and goes to the core
//! as `AnswerPeerRequest`. A withdrawn request drops its task (cancelling the handler). The
//! core bounds how many wait per server, so the tasks are bounded too.

use super::{Driver, Inbound, Internal};
use crate::peer::{ElicitationHandler, PeerRequest, RootsHandler, SamplingHandler};
use std::sync::Arc;
use switchboard_core::manager::Event;
use switchboard_core::protocol::{PeerAnswer, PeerRequestKind};
use switchboard_core::PeerRequestKey;

/// The embedder's handlers; a missing one means its feature is off (never declared).
#[derive(Clone, Default)]
pub(crate) struct PeerHandlers {
    pub elicitation: Option<Arc<dyn ElicitationHandler>>,
    pub sampling: Option<Arc<dyn SamplingHandler>>,
    pub roots: Option<Arc<dyn RootsHandler>>,
}

impl Driver {
    /// Start or stop a handler for a peer-request event of the core's.
    pub(super) fn on_peer_event(&mut self, ev: &Event) {
        match ev {
            Event::PeerRequest {
                server,
                request,
                kind,
                input,
            } => self.start_peer_handler(*request, server, kind, input.clone()),
            Event::PeerRequestWithdrawn { request, .. } => {
                // Dropping the task cancels the handler.
                self.peer_tasks.remove(request);
            }
            _ => {}
        }
    }

    fn start_peer_handler(
        &mut self,
        key: PeerRequestKey,
        server: &str,
        kind: &PeerRequestKind,
        input: Option<switchboard_core::manager::RoundInput>,
    ) {
        let request = PeerRequest {
            server: server.to_string(),
            kind: kind.clone(),
            input,
        };
        let future = match kind {
            PeerRequestKind::Roots => self.cfg.peer.roots.as_ref().map(|h| h.list_roots(request)),
            PeerRequestKind::Sampling { .. } => self
                .cfg
                .peer
                .sampling
                .as_ref()
                .map(|h| h.create_message(request)),
            _ => self
                .cfg
                .peer
                .elicitation
                .as_ref()
                .map(|h| h.elicit(request)),
        };
        let tx = self.inbound_tx.clone();
        let task = self.cfg.spawner.spawn(async move {
            // The core only forwards what a handler was installed for; answer anyway.
            let answer = match future {
                Some(f) => f.await,
                None => PeerAnswer::Error {
                    code: switchboard_core::protocol::codes::METHOD_NOT_FOUND,
                    message: "no handler for this request".into(),
                },
            };
            let _ = tx
                .send(Inbound::Internal(Internal::PeerAnswered(key, answer)))
                .await;
        });
        self.peer_tasks.insert(key, task);
    }

    /// A handler answered: the core writes the response (once; a late one is ignored there).
    pub(super) fn on_peer_answered(&mut self, key: PeerRequestKey, answer: PeerAnswer) {
        self.peer_tasks.remove(&key);
        let now = self.now();
        self.m.handle(
            now,
            switchboard_core::Input::AnswerPeerRequest {
                request: key,
                answer,
            },
        );
    }
}
