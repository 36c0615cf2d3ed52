//! Ctrl-C (SIGINT) and SIGTERM: installed before any server starts, for every command.
//!
//! Stdio servers run in their own process groups, so the terminal's Ctrl-C reaches only this
//! process; without a handler it would die at once and leave behind any server that ignores
//! stdin EOF. Here the signal ends the command instead: the switchboard it registered is shut
//! down (stdin closed, SIGTERM, SIGKILL to each group, every process reaped) and the command
//! exits with 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM). A signal that arrives
//! while [`Builder::start`](switchboard::Builder::start) has not returned yet drops the start
//! future, and with it the only handle: the library then kills every process group at once
//! (SIGKILL). Signals that arrive during that shutdown are ignored (it is bounded).
//!
//! `watch` takes the signal over once it is running, so that it can print its `stopped` line.

use super::Fatal;
use async_signal::{Signal, Signals};
use futures_lite::{future, StreamExt};
use std::cell::{Cell, RefCell};
use switchboard::Switchboard;

pub(super) struct Interrupt {
    signals: Signals,
    got: Cell<Option<Signal>>,
    /// Closed when a signal arrives: wakes every [`wait`](Self::wait).
    closed: (async_channel::Sender<()>, async_channel::Receiver<()>),
    taken_over: Cell<bool>,
    running: RefCell<Option<Switchboard>>,
}

impl Interrupt {
    pub fn install() -> Result<Self, Fatal> {
        let signals = Signals::new([Signal::Int, Signal::Term])
            .map_err(|e| Fatal::failed(format!("cannot install the Ctrl-C handler: {e}")))?;
        Ok(Interrupt {
            signals,
            got: Cell::new(None),
            closed: async_channel::bounded(1),
            taken_over: Cell::new(false),
            running: RefCell::new(None),
        })
    }

    /// The switchboard to shut down if a signal arrives.
    pub fn running(&self, sb: &Switchboard) {
        *self.running.borrow_mut() = Some(sb.clone());
    }

    /// The command handles the signal itself from now on, through [`wait`](Self::wait).
    pub fn take_over(&self) {
        self.taken_over.set(true);
    }

    /// Resolves with the signal once one has arrived.
    pub async fn wait(&self) -> Signal {
        let _ = self.closed.1.recv().await;
        self.got.get().unwrap_or(Signal::Int)
    }

    /// Resolves with the first signal unless the command took signals over; then it only
    /// wakes the command's [`wait`](Self::wait) and never resolves.
    pub async fn listen(&self) -> Signal {
        let signal = loop {
            match (&self.signals).next().await {
                Some(Ok(s)) => break s,
                Some(Err(_)) => continue,
                None => future::pending::<()>().await,
            }
        };
        self.got.set(Some(signal));
        self.closed.0.close();
        if self.taken_over.get() {
            future::pending::<()>().await;
        }
        signal
    }

    /// Shut down whatever the command left running (after its future was dropped).
    pub async fn shut_down(&self) {
        let sb = self.running.borrow_mut().take();
        if let Some(sb) = sb {
            sb.shutdown().await;
        }
    }
}

/// The exit status after a signal: 128 + its number.
pub(super) fn exit_code(signal: Signal) -> u8 {
    match signal {
        Signal::Term => 143,
        _ => 130,
    }
}

/// How a signal is named in messages and in `watch`'s `stopped` line.
pub(super) fn name(signal: Signal) -> &'static str {
    match signal {
        Signal::Term => "sigterm",
        _ => "ctrl-c",
    }
}
