//! The registry invariants: `status()` agrees with the registries, exposed tools belong to
//! live servers, qualified names follow the naming rule whatever the arrival order, and
//! `server_state()` tells the same story as the rest.

use super::{names_need_fresh_check, summary, touched, Ctx};
use crate::observe::{ViewTool, SHADOW_REBUILD_EVERY};
use std::collections::BTreeMap;
use std::sync::Arc;
use switchboard_core::manager::ServerStatus;
use switchboard_core::names::{NameTable, MAX_NAME_LEN};

/// `status()` is Connected iff in `connections()`, Connecting iff pending, else Disconnected,
/// and no server is in two exclusive registries.
///
/// The registries and the statuses are derived from the servers' phases and the set of known
/// servers, so while `phase_generation()` stands where this check last passed they are those
/// it passed with; with no `StatusChanged` in the step and the same statuses before and after,
/// it passes again. Builds with debug assertions check anyway and assert that it does.
pub fn status_agrees_with_registries(ctx: &Ctx) -> Result<(), String> {
    let gen = ctx.m.phase_generation();
    let same = ctx.obs.registries_checked.get() == Some(gen)
        && ctx.step.status_events.is_empty()
        && ctx.before.status == ctx.after.status;
    if same && !cfg!(debug_assertions) {
        return Ok(());
    }
    let checked = registries_agree(ctx);
    debug_assert!(
        !same || checked.is_ok(),
        "phase_generation() did not move, but the registry check now fails: {checked:?}"
    );
    if checked.is_ok() {
        ctx.obs.registries_checked.set(Some(gen));
    }
    checked
}

/// The comparison of `status_agrees_with_registries`.
fn registries_agree(ctx: &Ctx) -> Result<(), String> {
    let c = ctx.m.connections();
    let pc = ctx.m.pending_connections();
    let pt = ctx.m.pending_tool_loads();
    // Which registries hold each server, found in one merge per registry: a registry lists
    // names in order, and so does the index (a name out of order or unknown is reported).
    let mut held = vec![[false; 3]; ctx.obs.names.len()];
    for (k, registry) in [&c, &pc, &pt].into_iter().enumerate() {
        let mut index = ctx.obs.index.iter().peekable();
        for n in registry {
            while index.next_if(|(name, _)| name.as_str() < *n).is_some() {}
            let Some((_, &i)) = index.next_if(|(name, _)| name.as_str() == *n) else {
                return Err(format!(
                    "registry holds unknown server {n:?} (or lists it out of order)"
                ));
            };
            held[i][k] = true;
        }
    }
    for (i, name) in ctx.obs.names.iter().enumerate() {
        let n = name.as_str();
        let [a, b, d] = held[i];
        if u8::from(a) + u8::from(b) + u8::from(d) > 1 {
            return Err(format!("{n} is in two registries (connections={a}, pending connections={b}, pending tool loads={d})"));
        }
        let derived = if a {
            ServerStatus::Connected
        } else if b || d {
            ServerStatus::Connecting
        } else {
            ServerStatus::Disconnected
        };
        if ctx.after.status[i] != derived {
            return Err(format!(
                "status({n}) = {:?} but the registries say {derived:?}",
                ctx.after.status[i]
            ));
        }
        match ctx.step.status_events.get(n) {
            Some(e) if *e != ctx.after.status[i] => {
                return Err(format!(
                    "the last StatusChanged for {n} says {e:?} but status() is {:?}",
                    ctx.after.status[i]
                ))
            }
            None if ctx.before.status[i] != ctx.after.status[i] => {
                return Err(format!(
                    "{n} went {:?} -> {:?} without a StatusChanged",
                    ctx.before.status[i], ctx.after.status[i]
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Every exposed tool belongs to a connected server or a pending one with deferred tools, and
/// never to one that was disconnected or whose late failure was reported; a change of a
/// server's slice is announced (`ToolsChanged` or `StartupComplete`) unless its round is open.
pub fn exposed_tools_belong_to_live_servers(ctx: &Ctx) -> Result<(), String> {
    if !Arc::ptr_eq(&ctx.before.tools, &ctx.after.tools)
        && ctx.before.tools != ctx.after.tools
        && ctx.step.reports.is_empty()
    {
        for (i, name) in ctx.obs.names.iter().enumerate() {
            if ctx.step.tools_changed.contains(name) || ctx.before.same_slice(ctx.after, name) {
                continue;
            }
            let in_open_round = ctx.obs.rounds.values().any(|r| {
                !r.reported
                    && r.members
                        .get(&i)
                        .is_some_and(|c| ctx.obs.latest_conn[i] == Some(*c))
            });
            if !in_open_round {
                return Err(format!("{name}'s tools changed without a ToolsChanged"));
            }
        }
    }
    if ctx.m.tool_count() != ctx.after.tools.len() {
        return Err(format!(
            "tool_count() = {} but the view has {} tools",
            ctx.m.tool_count(),
            ctx.after.tools.len()
        ));
    }
    let unchanged =
        Arc::ptr_eq(&ctx.before.tools, &ctx.after.tools) && ctx.before.status == ctx.after.status;
    // Where neither the view nor a status moved, the per-tool checks read only the view list,
    // the statuses and the withdrawn marks (`server_state()` is read only when one moved):
    // with the very list, the same statuses and the same marks as the last step that passed
    // them, they pass again. Builds with debug assertions check anyway.
    let mut memo = ctx.obs.exposed_checked.borrow_mut();
    let same_inputs = unchanged
        && memo.as_ref().is_some_and(|(tools, status, withdrawn)| {
            Arc::ptr_eq(tools, &ctx.after.tools)
                && *status == ctx.after.status
                && *withdrawn == ctx.obs.withdrawn
        });
    if same_inputs && !cfg!(debug_assertions) {
        return Ok(());
    }
    let mut last: Option<&str> = None;
    for t in ctx.after.tools.iter() {
        if last == Some(t.server.as_str()) {
            continue;
        }
        let Some(&i) = ctx.obs.index.get(&t.server) else {
            return Err(format!(
                "tool {} belongs to unknown server {}",
                t.qualified, t.server
            ));
        };
        if ctx.obs.withdrawn[i] {
            return Err(format!(
                "tool {} of {} is exposed after the server was disconnected or its failure reported",
                t.qualified, t.server
            ));
        }
        match ctx.after.status[i] {
            ServerStatus::Connected => {
                if t.deferred {
                    return Err(format!(
                        "tool {} is deferred but {} is connected",
                        t.qualified, t.server
                    ));
                }
            }
            ServerStatus::Connecting => {
                if !t.deferred {
                    return Err(format!(
                        "tool {} is live but {} is still connecting",
                        t.qualified, t.server
                    ));
                }
            }
            _ => {
                return Err(format!(
                    "tool {} is exposed but {} is disconnected",
                    t.qualified, t.server
                ))
            }
        }
        // The rich state agrees with the view (count and deferred flag); it is derived from the
        // same fields, so it is re-read only when the view or a status moved.
        if !unchanged {
            server_state_agrees(ctx, t)?;
        }
        last = Some(t.server.as_str());
    }
    *memo = Some((
        Arc::clone(&ctx.after.tools),
        ctx.after.status.clone(),
        ctx.obs.withdrawn.clone(),
    ));
    Ok(())
}

/// `server_state()` of `t`'s server counts what the view shows and agrees on `deferred`.
fn server_state_agrees(ctx: &Ctx, t: &ViewTool) -> Result<(), String> {
    let n = ctx
        .after
        .tools
        .iter()
        .filter(|u| u.server == t.server)
        .count();
    match summary(ctx.m, &t.server) {
        Some(st) if st.tool_count != n || st.deferred != t.deferred => Err(format!(
            "server_state({}) says {} tools, deferred={}, but the view has {n}, deferred={}",
            t.server, st.tool_count, st.deferred, t.deferred
        )),
        _ => Ok(()),
    }
}

/// Qualified names are unique, at most 64 characters of `[a-z0-9_]`, sorted, route back to
/// their pair, and equal what a fresh `NameTable` builds from the same pairs.
pub fn qualified_names_are_valid(ctx: &Ctx) -> Result<(), String> {
    if Arc::ptr_eq(&ctx.before.tools, &ctx.after.tools) {
        return Ok(()); // the very list the last step checked
    }
    let tools: &[ViewTool] = &ctx.after.tools;
    for w in tools.windows(2) {
        if w[0].qualified >= w[1].qualified {
            return Err(format!(
                "view not strictly sorted: {:?} then {:?}",
                w[0].qualified, w[1].qualified
            ));
        }
    }
    for t in tools {
        let q = &t.qualified;
        if q.is_empty()
            || q.len() > MAX_NAME_LEN
            || !q
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(format!("invalid qualified name {q:?}"));
        }
    }
    if !names_need_fresh_check(ctx.obs, ctx.after) {
        return Ok(());
    }
    for t in tools {
        if ctx.m.resolve_tool(&t.qualified) != Some((t.server.as_str(), t.raw.as_str())) {
            return Err(format!(
                "{} does not route to ({}, {})",
                t.qualified, t.server, t.raw
            ));
        }
    }
    // Independent of arrival order: a table built from scratch, servers in reverse order.
    let scheme = if ctx.double_underscore {
        switchboard_core::NamingScheme::DoubleUnderscore
    } else {
        switchboard_core::NamingScheme::Seed
    };
    let mut by_server: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for t in tools {
        by_server.entry(&t.server).or_default().push(&t.raw);
    }
    let mut shadow = ctx.obs.shadow.borrow_mut();
    shadow.changes += 1;
    let from_scratch =
        shadow.table.scheme() != scheme || shadow.changes % SHADOW_REBUILD_EVERY == 1;
    if from_scratch {
        let mut fresh = NameTable::new(scheme);
        for (server, raws) in by_server.iter().rev() {
            fresh.set_server_tools(server, raws.iter().rev().copied());
        }
        shadow.table = fresh;
        shadow.slices = by_server
            .iter()
            .map(|(s, r)| (s.to_string(), r.iter().map(|t| t.to_string()).collect()))
            .collect();
    } else {
        // Only the servers whose slice changed, in reverse order (the manager applies them as
        // they arrive): the table must still come out as the rule says for these pairs.
        let gone: Vec<String> = shadow
            .slices
            .keys()
            .filter(|k| !by_server.contains_key(k.as_str()))
            .cloned()
            .collect();
        for server in gone.iter().rev() {
            shadow.table.remove_server(server);
            shadow.slices.remove(server);
        }
        for (server, raws) in by_server.iter().rev() {
            if shadow
                .slices
                .get(*server)
                .is_some_and(|old| old.iter().eq(raws.iter()))
            {
                continue;
            }
            shadow
                .table
                .set_server_tools(server, raws.iter().rev().copied());
            shadow.slices.insert(
                server.to_string(),
                raws.iter().map(|t| t.to_string()).collect(),
            );
        }
    }
    let seen = tools
        .iter()
        .map(|t| (t.qualified.as_str(), t.server.as_str(), t.raw.as_str()));
    if !shadow.table.iter().eq(seen) {
        let rebuilt: Vec<(&str, &str, &str)> = shadow.table.iter().collect();
        let seen: Vec<(&str, &str, &str)> = tools
            .iter()
            .map(|t| (t.qualified.as_str(), t.server.as_str(), t.raw.as_str()))
            .collect();
        let how = if from_scratch {
            "a table built from scratch"
        } else {
            "a table fed the changes in another order"
        };
        return Err(format!(
            "names depend on arrival order: view {seen:?}, {how} {rebuilt:?}"
        ));
    }
    Ok(())
}

/// `server_state()` tells the same story as `status()`: its phase names the status, it has a
/// connection exactly while an attempt is open (the latest one opened), a next attempt time
/// exactly while it waits to reconnect, and a time to ready for a connected server;
/// `servers()` and `sources()` list exactly the servers `server_state()` knows.
///
/// Checked for the servers a step touched (its scope, every server whose status changed or
/// whose transport was opened or closed), and for all of them on embedder requests.
pub fn server_state_is_coherent(ctx: &Ctx) -> Result<(), String> {
    let step = ctx.step;
    let all = step.lifecycle || step.disconnect_all;
    let mut known = 0usize;
    for (i, name) in ctx.obs.names.iter().enumerate() {
        if !touched(step, ctx.before, ctx.after, i) {
            continue;
        }
        let Some(st) = ctx.summaries.get(ctx.m, i, name) else {
            if ctx.after.status[i] != ServerStatus::Disconnected {
                return Err(format!(
                    "server_state({name}) is None but status() is {:?}",
                    ctx.after.status[i]
                ));
            }
            continue;
        };
        known += 1;
        let status = ctx.after.status[i];
        if st.status != status {
            return Err(format!(
                "server_state({name}) says {:?}, status() says {status:?}",
                st.status
            ));
        }
        let phase_ok = match status {
            ServerStatus::Connected => st.phase.as_str() == "connected",
            ServerStatus::Connecting => {
                ["opening", "initializing", "listing-tools", "backoff"].contains(&st.phase.as_str())
            }
            _ => st.phase.as_str() == "idle",
        };
        if !phase_ok {
            return Err(format!(
                "server_state({name}).phase = {:?} while it is {status:?}",
                st.phase
            ));
        }
        if status != ServerStatus::Disconnected && st.attempts == 0 {
            return Err(format!(
                "{name} is {status:?} but server_state counts no attempt"
            ));
        }
        let waiting = st.phase.as_str() == "backoff";
        if st.next_attempt_at.is_some() != waiting
            || st.next_attempt_at.is_some_and(|at| at < ctx.now)
        {
            return Err(format!(
                "server_state({name}) is in phase {} with next attempt {:?} at {:?}",
                st.phase, st.next_attempt_at, ctx.now
            ));
        }
        let attempt_open = !waiting && status != ServerStatus::Disconnected;
        if attempt_open != st.conn.is_some() || (attempt_open && st.conn != ctx.obs.latest_conn[i])
        {
            return Err(format!(
                "server_state({name}).conn = {:?} in phase {} (latest attempt {:?})",
                st.conn, st.phase, ctx.obs.latest_conn[i]
            ));
        }
        if status == ServerStatus::Connected {
            let ok = match (st.started_at, st.ready_at, st.time_to_ready) {
                (Some(a), Some(b), Some(t)) => b >= a && b - a == t && b <= ctx.now,
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "connected {name} has started {:?}, ready {:?}, time to ready {:?}",
                    st.started_at, st.ready_at, st.time_to_ready
                ));
            }
        } else if let (Some(a), Some(b)) = (st.started_at, st.ready_at) {
            if b < a && st.time_to_ready.is_some() {
                return Err(format!(
                    "{name} is on a new attempt (started {a:?}, last ready {b:?}) but shows a time to ready"
                ));
            }
        }
    }
    if all {
        let listed: Vec<String> = ctx.m.servers().into_iter().map(|s| s.name).collect();
        let sources: Vec<&str> = ctx.m.sources().into_keys().collect();
        if listed.len() != known
            || sources.len() != known
            || listed.iter().zip(&sources).any(|(a, b)| a != b)
        {
            return Err(format!(
                "servers() lists {listed:?} and sources() {sources:?}, but server_state() knows {known}"
            ));
        }
    }
    Ok(())
}
