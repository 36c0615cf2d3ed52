//! What to do when the MCP server refuses a request (`401`/`403`), and when to refresh a
//! token before it expires. The limits here are what stop a server that refuses every token
//! from sending the user through the browser forever.

use super::challenge::Challenge;
use super::types::{AuthError, Credentials, Grant};
use serde::Serialize;

/// Step-ups (`403 insufficient_scope`, a new authorization with more scopes) per refused
/// request chain, at most.
pub const MAX_STEP_UPS: u32 = 2;
/// Full authorizations after a `401`, per refused request chain, at most.
pub const MAX_REAUTHORIZATIONS: u32 = 1;
/// A token this close to its expiry (seconds) is refreshed before use.
pub const REFRESH_MARGIN_SECS: u64 = 60;

/// The reaction to a refused request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Reaction {
    /// The request went out with credentials that have been replaced since: send it again.
    Retry,
    /// Refresh the access token, then send the request again.
    Refresh,
    /// Run a full authorization ([`crate::auth::Flow::authorize`]); `step_up` keeps the
    /// scopes held so far.
    Authorize {
        /// A `403 insufficient_scope` step-up.
        step_up: bool,
    },
    /// Stop: the request fails with this error.
    GiveUp(AuthError),
}

/// What one server's guard has decided so far, for status and tests: every refusal ends in
/// exactly one of the reactions counted here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GuardCounters {
    /// Refusals (`401`/`403`) handed to the guard.
    pub refusals: u64,
    /// Refusals of credentials replaced since, answered with a plain retry.
    pub retries: u64,
    /// Refreshes decided after a refusal.
    pub refreshes: u64,
    /// Full authorizations decided after a refusal.
    pub authorizations: u64,
    /// Step-ups decided after `insufficient_scope`.
    pub step_ups: u64,
    /// Refusals given up on.
    pub give_ups: u64,
}

/// The per-server memory of refusals. Credentials carry a generation (bumped by
/// [`Guard::installed`]); a refusal of an older generation is answered with a plain retry,
/// so a burst of concurrent `401`s costs one authorization, not one each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Guard {
    generation: u64,
    refreshed: bool,
    reauthorizations: u32,
    step_ups: u32,
    counters: GuardCounters,
}

impl Guard {
    /// What this guard decided so far.
    pub fn counters(&self) -> GuardCounters {
        self.counters
    }

    /// The generation of the credentials in use now (0: none yet).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// New credentials are in use (after a flow finished, or loaded from the store).
    pub fn installed(&mut self) {
        self.generation += 1;
    }

    /// A request was accepted: the refusal chain is over.
    pub fn accepted(&mut self) {
        self.end_chain();
    }

    fn end_chain(&mut self) {
        self.refreshed = false;
        self.reauthorizations = 0;
        self.step_ups = 0;
    }

    /// A request sent with credentials of generation `sent` was refused with `status`
    /// (`401` or `403`) and `challenge`; `creds` are the credentials held now.
    pub fn refused(
        &mut self,
        status: u16,
        challenge: &Challenge,
        sent: u64,
        creds: Option<&Credentials>,
    ) -> Reaction {
        let reaction = self.react(status, challenge, sent, creds);
        let c = &mut self.counters;
        c.refusals += 1;
        match reaction {
            Reaction::Retry => c.retries += 1,
            Reaction::Refresh => c.refreshes += 1,
            Reaction::Authorize { step_up: true } => c.step_ups += 1,
            Reaction::Authorize { step_up: false } => c.authorizations += 1,
            Reaction::GiveUp(_) => {
                c.give_ups += 1;
                // The chain is over: the next request starts a new one. Otherwise one storm
                // would leave every later request of the process given up at once.
                self.end_chain();
            }
        }
        reaction
    }

    fn react(
        &mut self,
        status: u16,
        challenge: &Challenge,
        sent: u64,
        creds: Option<&Credentials>,
    ) -> Reaction {
        if sent < self.generation {
            return Reaction::Retry;
        }
        let attempts = self.reauthorizations + self.step_ups + 1;
        if challenge.insufficient_scope() {
            if creds.is_none() {
                // Nothing to step up from: a plain authorization with the challenged scope.
                return self.reauthorize(status, attempts);
            }
            if self.step_ups >= MAX_STEP_UPS {
                return Reaction::GiveUp(AuthError::Rejected { status, attempts });
            }
            self.step_ups += 1;
            return Reaction::Authorize { step_up: true };
        }
        if status == 403 {
            return Reaction::GiveUp(AuthError::Forbidden);
        }
        if creds.is_some_and(|c| c.refresh_token.is_some()) && !self.refreshed {
            self.refreshed = true;
            return Reaction::Refresh;
        }
        self.reauthorize(status, attempts)
    }

    fn reauthorize(&mut self, status: u16, attempts: u32) -> Reaction {
        if self.reauthorizations >= MAX_REAUTHORIZATIONS {
            return Reaction::GiveUp(AuthError::Rejected { status, attempts });
        }
        self.reauthorizations += 1;
        Reaction::Authorize { step_up: false }
    }

    /// Whether `creds` should be refreshed before the next request at `now` (seconds since
    /// the Unix epoch): it can be without a person (a refresh token, or the
    /// client-credentials grant), and it expires within [`REFRESH_MARGIN_SECS`].
    pub fn should_refresh(creds: &Credentials, now: u64) -> bool {
        (creds.refresh_token.is_some() || creds.grant == Grant::ClientCredentials)
            && creds
                .expires_at
                .is_some_and(|at| at <= now.saturating_add(REFRESH_MARGIN_SECS))
    }
}
