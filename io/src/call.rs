//! A tool call in flight: [`Call`] knows its [`CallId`], hands out its progress, is awaited
//! for its result, and cancels the call when dropped before it completed.

use crate::driver::link::{Error, Progress, Request};
use crate::rt::OneshotReceiver;
use async_channel::{Receiver, Sender, TrySendError};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use switchboard_core::manager::{CallId, CallOutcome, Input};
use switchboard_core::ToolResult;

/// How to make one call ([`Switchboard::call_with`](crate::Switchboard::call_with)).
/// `Default`: the switchboard's call timeout, no progress.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOptions {
    /// This call's timeout instead of the default (`Builder::call_timeout`).
    pub timeout: Option<Duration>,
    /// Send a progress token with the call, so the server's progress reaches
    /// [`Call::progress`] (and `Event::Progress` names the call).
    pub progress: bool,
    /// A `_meta` object sent in the `tools/call` params, except `progressToken`: progress
    /// tokens are the library's own (set with `progress`).
    pub meta: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A request that did not fit in the request queue yet: sent at the first poll.
type Sending = Pin<Box<dyn Future<Output = Result<(), ()>> + Send>>;

/// One call in flight. Await it for the result; drop it to cancel the call.
#[must_use = "a call is cancelled when its handle is dropped"]
pub struct Call {
    id: CallId,
    requests: Sender<Request>,
    sending: Option<Sending>,
    reply: OneshotReceiver<CallOutcome>,
    progress: Option<Receiver<Progress>>,
    /// Sent to the driver and not completed: dropping the handle cancels it.
    in_flight: bool,
    done: bool,
}

impl Call {
    pub(crate) fn start(
        requests: Sender<Request>,
        id: CallId,
        request: Request,
        reply: OneshotReceiver<CallOutcome>,
        progress: Option<Receiver<Progress>>,
    ) -> Call {
        // The common case sends at once, without an allocation.
        let (sending, in_flight) = match requests.try_send(request) {
            Ok(()) => (None, true),
            Err(TrySendError::Full(request)) => {
                let tx = requests.clone();
                let sending: Sending =
                    Box::pin(async move { tx.send(request).await.map_err(drop) });
                (Some(sending), false)
            }
            Err(TrySendError::Closed(_)) => (None, false),
        };
        Call {
            id,
            requests,
            sending,
            reply,
            progress,
            in_flight,
            done: false,
        }
    }

    /// The call's id, as `Event::CallCompleted` and `Event::Progress` name it.
    pub fn id(&self) -> CallId {
        self.id
    }

    /// The call's progress notifications, in order, if it was made with
    /// [`CallOptions::progress`]. Bounded: a reader that falls behind misses some. Ends when
    /// the call completes.
    pub fn progress(&self) -> Option<&Receiver<Progress>> {
        self.progress.as_ref()
    }
}

// Nothing in a `Call` is pinned in place (its one future is boxed).
impl Unpin for Call {}

impl Future for Call {
    type Output = Result<ToolResult, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(Err(Error::Stopped));
        }
        if let Some(sending) = &mut this.sending {
            match sending.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(sent) => {
                    this.sending = None;
                    this.in_flight = sent.is_ok();
                }
            }
        }
        let outcome = match Pin::new(&mut this.reply).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(outcome) => outcome,
        };
        this.done = true;
        this.in_flight = false;
        Poll::Ready(match outcome {
            Ok(CallOutcome::Ok(r)) => Ok(r),
            Ok(CallOutcome::Err(e)) => Err(Error::Call(e)),
            Ok(CallOutcome::Cancelled) => Err(Error::Cancelled),
            Ok(other) => Err(Error::Call(switchboard_core::CallError::Protocol(format!(
                "unexpected call outcome {other:?}"
            )))),
            Err(_) => Err(Error::Stopped),
        })
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if self.in_flight {
            // Best effort: a full request queue or a stopped driver drops the cancellation;
            // the call then ends at its deadline (or already ended with the driver).
            let _ = self
                .requests
                .try_send(Request::Input(Input::CancelCall { call: self.id }));
        }
    }
}
