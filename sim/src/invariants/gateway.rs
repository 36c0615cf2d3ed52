//! The serving side's promises, judged from what the world saw the gateway do. Each is stated
//! in words first:
//!
//! - [`Invariant::DownstreamViewIsAnnounced`]: a downstream session's last complete list (of
//!   tools, resources, templates or prompts) equals the core's view of that kind, unless the
//!   gateway has told that session `list_changed` since it served the list. So a change of
//!   the core's view is announced in the very step it happens, and a list served after the
//!   announcement shows it.
//! - [`Invariant::ForwardedRequestsAnsweredOnce`]: every downstream request is answered
//!   exactly once, on the session and exchange it came on, unless the client cancelled it or
//!   its session ended; one that needs no server is answered in the step it arrived. Every
//!   server request handed to the gateway is answered to the manager exactly once — by the
//!   client it was forwarded to (one with a call in flight to that server, on that call's
//!   exchange, that declared the capability), or refused at once saying why — unless the
//!   manager withdrew it first; never after.
//! - [`Invariant::DownstreamCancelReachesUpstream`]: a downstream request in flight that the
//!   client cancels, or whose session ends, is cancelled in the manager (the gateway asks in
//!   the same step, and the manager no longer runs it once asked), and is never answered.
//! - [`Invariant::DownstreamRequestsBounded`]: no downstream request waits past its timeout:
//!   one handed to the manager is answered by its call's deadline at the latest.
//! - [`Invariant::InputRoundsHonoured`]: an input asked of a stateless client (an
//!   `InputRequiredResult`) is answered to the manager only by a retry carrying the newest
//!   `requestState` the gateway issued for that call, by one retry of that round at most,
//!   for a server that call goes to; a retry whose `requestState` the gateway never issued
//!   is refused with `-32602`.
//!
//! A stateless client has no session: each of its requests is an exchange of its own (a
//! one-request session here), so what it was served is kept per client ([`ModernObs`]): its
//! lists (pages of several exchanges) and its listen stream. A list is held to the core's
//! view from the moment it was served whole, unless the stream told a change since (or the
//! list began while the client had no stream: nothing would have told it).
//!
//! The world records what it saw in a [`GatewayObs`] while the gateway's outputs are
//! drained; checks that need the output order report into `found`, the rest are the
//! functions below, run after every step.

use crate::verdict::Invariant;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use switchboard_core::gateway::{ExchangeId, SessionId};
use switchboard_core::manager::CallId;
use switchboard_core::{Instant, PeerRequestKey};

/// The four lists a session can hold, in this order everywhere.
pub const LIST_METHODS: [&str; 4] = [
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "prompts/list",
];

/// The field of each list's result holding its items, and the field naming each item.
pub const LIST_FIELDS: [(&str, &str); 4] = [
    ("tools", "name"),
    ("resources", "uri"),
    ("resourceTemplates", "uriTemplate"),
    ("prompts", "name"),
];

/// Which list a `notifications/*/list_changed` announces (resources cover templates too).
pub fn announced_lists(method: &str) -> &'static [usize] {
    match method {
        "notifications/tools/list_changed" => &[0],
        "notifications/resources/list_changed" => &[1, 2],
        "notifications/prompts/list_changed" => &[3],
        _ => &[],
    }
}

/// One downstream request the gateway received and has not answered.
#[derive(Debug, Clone)]
pub struct OpenRequest {
    pub exchange: ExchangeId,
    pub method: String,
    pub at: Instant,
    /// The call or operation the gateway asked the manager for.
    pub call: Option<CallId>,
    /// The server its tool call went to, when the view named one.
    pub server: Option<String>,
    /// For a list: it asked for the first page.
    pub first_page: bool,
    /// A stateless client's retry: the `requestState` it sent.
    pub state: Option<String>,
}

/// What a session was served of one list.
#[derive(Debug, Clone, Default)]
pub struct ListObs {
    /// The last complete listing (item keys in served order).
    pub listed: Option<Vec<String>>,
    /// A `list_changed` was told since `listed` was served.
    pub stale: bool,
    /// A listing under way: the pages so far, and whether a change was told during it.
    pub building: Option<(Vec<String>, bool)>,
    /// The generation of the core's view of its kind that `listed` last equalled (the
    /// judgement cannot change until one of them does).
    pub passed: Option<u64>,
}

/// What one list page did to a client's list as the judge holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageTaken {
    /// A page after the first.
    pub paged: bool,
    /// The last page: the list is now `listed`.
    pub completed: bool,
}

/// What an answer to a list request says, as the judge reads it.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// It is an error (`error` is present).
    pub error: bool,
    /// The result's items (its field of the list's kind, when an array): each one's key
    /// (name, URI or template), when a string.
    pub items: Option<&'a [Option<String>]>,
    /// The result has a `nextCursor`.
    pub more: bool,
}

impl ListObs {
    /// Take `v`, an answer to a list (an error drops the listing under way): the first page
    /// starts a listing (already `stale` when its client could not be told of changes), the
    /// last completes it. An item without a key counts as the empty one.
    pub fn take_page(&mut self, v: Page<'_>, first_page: bool, stale: bool) -> PageTaken {
        let none = PageTaken {
            paged: false,
            completed: false,
        };
        if v.error {
            self.building = None;
            return none;
        }
        let items = v
            .items
            .into_iter()
            .flatten()
            .map(|i| i.clone().unwrap_or_default());
        if first_page {
            self.building = Some((Vec::new(), stale));
        }
        if let Some((so_far, _)) = self.building.as_mut() {
            so_far.extend(items);
        }
        let more = v.more;
        let paged = more && !first_page;
        if more {
            return PageTaken { paged, ..none };
        }
        match self.building.take() {
            Some((all, stale)) => {
                self.listed = Some(all);
                self.stale = stale;
                self.passed = None;
                PageTaken {
                    paged,
                    completed: true,
                }
            }
            None => PageTaken { paged, ..none },
        }
    }
}

/// One session, as the gateway served it.
#[derive(Debug, Clone, Default)]
pub struct SessionObs {
    /// What it declared: sampling, form and URL elicitation.
    pub caps: (bool, bool, bool),
    /// Requests in flight, by the id's JSON text.
    pub open: BTreeMap<String, OpenRequest>,
    /// Requests it cancelled (no answer may follow).
    pub cancelled: BTreeSet<String>,
    pub lists: [ListObs; 4],
}

/// A server's request handed to the gateway.
#[derive(Debug, Clone, PartialEq)]
pub enum PeerObs {
    /// Handed over at `at`, not yet forwarded or answered (for a stateless client's call:
    /// waiting in its input round for the client's retry).
    Handed { server: String, at: Instant },
    /// Forwarded to `session` under `id`, at `at`.
    Forwarded {
        session: SessionId,
        id: Value,
        at: Instant,
    },
    /// Answered to the manager, or withdrawn by it.
    Done,
}

/// A stateless client, as the gateway served it across its exchanges.
#[derive(Debug, Clone, Default)]
pub struct ModernObs {
    pub lists: [ListObs; 4],
    /// Its acknowledged listen stream, while open.
    pub listen: Option<SessionId>,
}

impl ModernObs {
    /// Its stream ended (or a change was told on it): what it holds may be stale.
    pub fn all_stale(&mut self, kinds: &[usize]) {
        for &k in kinds {
            let l = &mut self.lists[k];
            l.stale = true;
            if let Some((_, stale)) = l.building.as_mut() {
                *stale = true;
            }
        }
    }
}

/// A `requestState` the gateway issued in an `InputRequiredResult`.
#[derive(Debug, Clone)]
pub struct IssuedState {
    pub call: CallId,
    /// The server the call goes to, when the view named one.
    pub server: Option<String>,
    /// The retry (session, id) that answered the round's inputs, once one did.
    pub taken: Option<(SessionId, String)>,
}

/// Everything the world saw of the gateway.
#[derive(Debug, Default)]
pub struct GatewayObs {
    /// Stateless clients, by their index in the plan.
    pub modern: BTreeMap<usize, ModernObs>,
    /// The exchanges (one-request sessions) of stateless clients: whose they are.
    pub exchanges: BTreeMap<SessionId, usize>,
    /// Every `requestState` issued, by its text.
    pub states: BTreeMap<String, IssuedState>,
    /// The newest state issued for each call.
    pub latest: BTreeMap<CallId, String>,
    pub sessions: BTreeMap<SessionId, SessionObs>,
    pub peers: BTreeMap<PeerRequestKey, PeerObs>,
    /// The gateway's calls and operations: the session and request id they answer.
    pub calls: BTreeMap<CallId, (SessionId, String)>,
    /// Calls the gateway asked the manager to cancel, not yet handled by it.
    pub cancelling: BTreeSet<CallId>,
    /// Violations seen while outputs were drained.
    pub found: Vec<(Invariant, String)>,
}

/// The core's view of one kind, as the check needs it: each entry's served key (qualified
/// name, URI or template) and, for tools and prompts, its raw name on its server.
pub type Expected = Vec<(String, Option<String>)>;

/// `true` when `listed` is what a gateway serving `view` lists: the same number of entries,
/// each naming a distinct entry of the view by its key, or (with plain names) by a raw name
/// no other entry has and no key equals.
fn same_list(listed: &[String], view: &Expected, plain: bool) -> bool {
    if listed.len() != view.len() {
        return false;
    }
    let mut used = vec![false; view.len()];
    for name in listed {
        // Several entries may share a key (one URI listed by two servers): take a free one.
        let by_key = (0..view.len()).find(|&i| !used[i] && view[i].0 == *name);
        let hit = match by_key {
            Some(i) => Some(i),
            None if plain => {
                let raws: Vec<usize> = view
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, raw))| raw.as_deref() == Some(name.as_str()))
                    .map(|(i, _)| i)
                    .collect();
                (raws.len() == 1).then(|| raws[0])
            }
            None => None,
        };
        match hit {
            Some(i) if !used[i] => used[i] = true,
            _ => return false,
        }
    }
    true
}

/// [`Invariant::DownstreamViewIsAnnounced`], for sessions and stateless clients alike.
/// `gens` are the generations `views` were read at (the tools', the catalog's): a list that
/// passed against its kind's generation is not compared again (debug builds compare it and
/// assert it still passes).
pub fn downstream_view_is_announced(
    obs: &mut GatewayObs,
    views: [&Expected; 4],
    plain: bool,
    gens: (u64, u64),
) -> Result<(), String> {
    // Who holds the list: a session (its number), or a stateless client (its index).
    let sessions = obs
        .sessions
        .iter_mut()
        .map(|(s, o)| ((true, s.0), &mut o.lists));
    let clients = obs
        .modern
        .iter_mut()
        .map(|(i, o)| ((false, *i as u64), &mut o.lists));
    for ((session, n), lists) in sessions.chain(clients) {
        for (k, l) in lists.iter_mut().enumerate() {
            let Some(listed) = &l.listed else { continue };
            if l.stale {
                continue;
            }
            let gen = if k == 0 { gens.0 } else { gens.1 };
            let passed = l.passed == Some(gen);
            if passed && !cfg!(debug_assertions) {
                continue;
            }
            let plain = plain && (k == 0 || k == 3);
            let same = same_list(listed, views[k], plain);
            debug_assert!(
                same || !passed,
                "a list that passed failed against the same generation of the view"
            );
            if same {
                l.passed = Some(gen);
            } else {
                let keys: Vec<&str> = views[k].iter().map(|(k, _)| k.as_str()).collect();
                let who = if session {
                    "session"
                } else {
                    "stateless client"
                };
                return Err(format!(
                    "{who} {n} holds {} {listed:?}, the core's view is {keys:?}, and no list_changed told it",
                    LIST_METHODS[k]
                ));
            }
        }
    }
    Ok(())
}

/// [`Invariant::InputRoundsHonoured`], when the gateway answers a server's request `peer`
/// (of `server`) to the manager while handling a stateless client's retry, request `id` of
/// `session`: the retry carries the newest state issued for its call, no other retry of that
/// round answered before it, and the call goes to that server (when the view named one).
pub fn retry_may_answer(
    obs: &mut GatewayObs,
    session: SessionId,
    id: &str,
    peer: PeerRequestKey,
    server: &str,
) -> Result<(), String> {
    let state = obs
        .sessions
        .get(&session)
        .and_then(|s| s.open.get(id))
        .and_then(|r| r.state.clone());
    let Some(state) = state else {
        return Err(format!(
            "server request p{} was answered by session {}'s request {id}, which carries no requestState",
            peer.0, session.0
        ));
    };
    let Some(issued) = obs.states.get_mut(&state) else {
        return Err(format!(
            "server request p{} was answered by a retry whose requestState the gateway never issued",
            peer.0
        ));
    };
    if obs.latest.get(&issued.call) != Some(&state) {
        return Err(format!(
            "server request p{} was answered by a retry of call {}'s round that had ended",
            peer.0, issued.call.0
        ));
    }
    let me = (session, id.to_string());
    match &issued.taken {
        Some(other) if *other != me => {
            return Err(format!(
                "two retries of call {}'s round answered inputs (session {}'s {} and session {}'s {id})",
                issued.call.0, other.0 .0, other.1, session.0
            ))
        }
        _ => issued.taken = Some(me),
    }
    match &issued.server {
        Some(s) if s != server => Err(format!(
            "server request p{} of {server} was answered by a retry of call {}, which goes to {s}",
            peer.0, issued.call.0
        )),
        _ => Ok(()),
    }
}

/// [`Invariant::InputRoundsHonoured`], when a stateless client's retry is answered: one whose
/// `requestState` the gateway never issued gets `-32602`.
/// `code` is the answer's `/error/code` (when an integer); `shown` writes the answer.
pub fn forged_state_refused(
    obs: &GatewayObs,
    r: &OpenRequest,
    code: Option<i64>,
    shown: impl FnOnce() -> String,
) -> Result<(), String> {
    let Some(state) = &r.state else { return Ok(()) };
    if obs.states.contains_key(state) {
        return Ok(());
    }
    if code == Some(-32602) {
        Ok(())
    } else {
        Err(format!(
            "a {} retry whose requestState the gateway never issued was answered {}",
            r.method,
            shown()
        ))
    }
}

/// [`Invariant::ForwardedRequestsAnsweredOnce`], the part judged after a step: a request
/// that no call carries is answered in the step it arrived.
pub fn requests_answered_or_forwarded(obs: &GatewayObs) -> Result<(), String> {
    // A listen stream stays open with no answer: it is the client's to end.
    for (session, s) in &obs.sessions {
        for (id, r) in &s.open {
            if r.call.is_none() && r.method != "subscriptions/listen" {
                return Err(format!(
                    "session {}'s {} (id {id}) was neither answered nor handed to the manager",
                    session.0, r.method
                ));
            }
        }
    }
    Ok(())
}

/// [`Invariant::DownstreamCancelReachesUpstream`], after the manager handled a cancellation:
/// the call is gone from it.
pub fn cancelled_calls_left_the_manager(
    cancelled: &[CallId],
    calls: &[CallId],
    ops: &[CallId],
) -> Result<(), String> {
    for c in cancelled {
        if calls.contains(c) || ops.contains(c) {
            return Err(format!(
                "the gateway cancelled call {}, but the manager still runs it",
                c.0
            ));
        }
    }
    Ok(())
}

/// [`Invariant::DownstreamRequestsBounded`]: a request handed to the manager is answered by
/// the deadline its call got (`bound` after it arrived).
pub fn downstream_requests_bounded(
    obs: &GatewayObs,
    now: Instant,
    bound: Duration,
) -> Result<(), String> {
    for (session, s) in &obs.sessions {
        for (id, r) in &s.open {
            if r.call.is_some() && now > r.at + bound {
                return Err(format!(
                    "session {}'s {} (id {id}) arrived at {}ms and is still unanswered at {}ms (bound {}ms)",
                    session.0,
                    r.method,
                    r.at.as_millis(),
                    now.as_millis(),
                    bound.as_millis()
                ));
            }
        }
    }
    Ok(())
}

/// After the heal, once the work finished: every server request handed to the gateway was
/// answered or withdrawn (one forwarded less than `answer_within` ago may still wait for
/// the client, or for the manager's timeout), and no downstream request waits.
pub fn gateway_settled(
    obs: &GatewayObs,
    now: Instant,
    answer_within: Duration,
) -> Result<(), String> {
    for (k, p) in &obs.peers {
        // An input asked of a stateless client waits for its retry, or for the manager's
        // timeout, as a forwarded request does; with only sessions, handing over is decided
        // at once.
        let waiting = match p {
            PeerObs::Forwarded { at, .. } => *at + answer_within > now,
            PeerObs::Handed { at, .. } => !obs.modern.is_empty() && *at + answer_within > now,
            PeerObs::Done => false,
        };
        if *p != PeerObs::Done && !waiting {
            return Err(format!(
                "server request p{} handed to the gateway is still {p:?}",
                k.0
            ));
        }
    }
    for (session, s) in &obs.sessions {
        let waiting = s
            .open
            .iter()
            .find(|(_, r)| r.method != "subscriptions/listen");
        if let Some((id, r)) = waiting {
            return Err(format!(
                "session {}'s {} (id {id}) was never answered",
                session.0, r.method
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(entries: &[(&str, &str)]) -> Expected {
        entries
            .iter()
            .map(|(k, r)| (k.to_string(), Some(r.to_string())))
            .collect()
    }

    fn retry(state: &str) -> OpenRequest {
        OpenRequest {
            exchange: ExchangeId(9),
            method: "tools/call".into(),
            at: Instant::from_millis(0),
            call: None,
            server: None,
            first_page: true,
            state: Some(state.into()),
        }
    }

    #[test]
    fn an_input_is_answered_by_one_retry_of_its_calls_newest_round() {
        let mut obs = GatewayObs::default();
        let issue = |obs: &mut GatewayObs, state: &str| {
            obs.states.insert(
                state.into(),
                IssuedState {
                    call: CallId(7),
                    server: Some("db".into()),
                    taken: None,
                },
            );
            obs.latest.insert(CallId(7), state.into());
        };
        issue(&mut obs, "s1");
        for (session, id) in [(1, "1"), (2, "2")] {
            let mut s = SessionObs::default();
            s.open.insert(id.into(), retry("s1"));
            obs.sessions.insert(SessionId(session), s);
        }
        let p = PeerRequestKey(3);
        assert!(retry_may_answer(&mut obs, SessionId(1), "1", p, "db").is_ok());
        // The same retry may answer several inputs of its round; another may not.
        assert!(retry_may_answer(&mut obs, SessionId(1), "1", p, "db").is_ok());
        assert!(retry_may_answer(&mut obs, SessionId(2), "2", p, "db").is_err());
        // A server the call does not go to.
        issue(&mut obs, "s2");
        obs.sessions
            .get_mut(&SessionId(2))
            .unwrap()
            .open
            .insert("2".into(), retry("s2"));
        assert!(retry_may_answer(&mut obs, SessionId(2), "2", p, "mail").is_err());
        // A round that ended: s1 is no longer the call's newest state.
        obs.states.get_mut("s1").unwrap().taken = None;
        assert!(retry_may_answer(&mut obs, SessionId(1), "1", p, "db").is_err());
    }

    #[test]
    fn a_state_never_issued_is_refused_with_invalid_params() {
        let obs = GatewayObs::default();
        let shown = || String::from("{}");
        assert!(forged_state_refused(&obs, &retry("x"), Some(-32602), shown).is_ok());
        assert!(forged_state_refused(&obs, &retry("x"), None, shown).is_err());
        assert!(forged_state_refused(&obs, &retry("x"), Some(-32603), shown).is_err());
    }

    #[test]
    fn a_listing_matches_by_key_or_by_a_unique_plain_name() {
        let v = view(&[
            ("mcp_a_echo", "echo"),
            ("mcp_b_echo", "echo"),
            ("mcp_b_run", "run"),
        ]);
        let listed = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(same_list(
            &listed(&["mcp_a_echo", "mcp_b_echo", "run"]),
            &v,
            true
        ));
        assert!(!same_list(
            &listed(&["mcp_a_echo", "mcp_b_echo", "run"]),
            &v,
            false
        ));
        // "echo" names two entries: not a plain name.
        assert!(!same_list(
            &listed(&["echo", "mcp_b_echo", "run"]),
            &v,
            true
        ));
        assert!(!same_list(&listed(&["mcp_a_echo", "mcp_b_echo"]), &v, true));
        assert!(!same_list(
            &listed(&["mcp_a_echo", "mcp_a_echo", "run"]),
            &v,
            true
        ));
    }
}
