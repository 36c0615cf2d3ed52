//! The catalog invariants: settled resources, templates and prompts show what the server's
//! lists last said, and every operation completes exactly once.

use super::{output_violation, Ctx, Invariant, SettledCatalog};
use std::collections::BTreeSet;

/// `CatalogSettlesToServerLists`: for every connected server whose catalog settled, the
/// resources, templates and prompts the manager shows for it (live) are exactly those its
/// last lists gave (an empty slice after a failed first list, the previous one after a failed
/// re-list).
///
/// A server that passed with the same inputs is not compared again: the comparison is a pure
/// function of the server's name, what the three catalog getters return and its applied
/// lists. The getters return the same while `Manager::catalog_generation()` has not moved
/// (the core's promise), and the applied lists are the same while the attempt and its lists
/// generation are (the simulated server bumps it at every write), so a repeated comparison
/// cannot fail where the first passed. A server that is compared reads its own slice
/// borrowed (`Manager::shown_catalog`, what the getters copy out for it) instead of copying
/// every server's items out of the three getters. Builds with debug assertions (the tests)
/// compare every server every step anyway, through the three getters too, assert both
/// readings agree, and report a failure on unchanged inputs as the broken generation promise
/// it is.
pub fn catalog_settles_to_server_lists(ctx: &Ctx) -> Result<(), String> {
    if ctx.catalog_settled.is_empty() {
        return Ok(());
    }
    let gen = ctx.m.catalog_generation();
    let mut memo = ctx.obs.catalog_checked.borrow_mut();
    if memo.len() < ctx.obs.names.len() {
        memo.resize(ctx.obs.names.len(), None);
    }
    let key = |c: &SettledCatalog| (gen, c.attempt, c.lists_gen);
    let every = cfg!(debug_assertions);
    if !every
        && ctx
            .catalog_settled
            .iter()
            .all(|c| memo[c.server] == Some(key(c)))
    {
        return Ok(());
    }
    let getters = every.then(|| {
        (
            ctx.m.resources(),
            ctx.m.resource_templates(),
            ctx.m.prompts(),
        )
    });
    for c in ctx.catalog_settled {
        let unchanged = memo[c.server] == Some(key(c));
        if unchanged && !every {
            continue;
        }
        let name = &ctx.obs.names[c.server];
        let shown = ctx.m.shown_catalog(name).filter(|(_, deferred)| !deferred);
        // Listed as the lists gave them (the usual case): the same sets, the same lengths.
        let as_listed = shown.is_some_and(|(cat, _)| {
            cat.resources.iter().map(|r| &r.uri).eq(&c.applied[0])
                && cat
                    .templates
                    .iter()
                    .map(|t| &t.uri_template)
                    .eq(&c.applied[1])
                && cat.prompts.iter().map(|p| &p.name).eq(&c.applied[2])
        });
        let shown: [Vec<&String>; 3] = match shown {
            _ if as_listed => Default::default(),
            Some((cat, _)) => {
                // The prompt name table holds a name once: the view shows it once.
                let mut prompts: Vec<&String> = cat.prompts.iter().map(|p| &p.name).collect();
                prompts.sort_unstable();
                prompts.dedup();
                [
                    cat.resources.iter().map(|r| &r.uri).collect(),
                    cat.templates.iter().map(|t| &t.uri_template).collect(),
                    prompts,
                ]
            }
            _ => Default::default(),
        };
        let verdict = if as_listed {
            Ok(())
        } else {
            compare(name, &shown, c, unchanged)
        };
        if let Some((resources, templates, prompts)) = &getters {
            let listed: [Vec<&String>; 3] = [
                resources
                    .iter()
                    .filter(|r| &r.server == name && !r.deferred)
                    .map(|r| &r.def.uri)
                    .collect(),
                templates
                    .iter()
                    .filter(|t| &t.server == name && !t.deferred)
                    .map(|t| &t.def.uri_template)
                    .collect(),
                prompts
                    .iter()
                    .filter(|p| &p.server == name && !p.deferred)
                    .map(|p| &p.def.name)
                    .collect(),
            ];
            let full = compare(name, &listed, c, unchanged);
            debug_assert_eq!(
                full.is_ok(),
                verdict.is_ok(),
                "{name}'s borrowed catalog ({verdict:?}) and the getters ({full:?}) disagree"
            );
            full?;
        }
        verdict?;
        memo[c.server] = Some(key(c));
    }
    Ok(())
}

/// Whether what the view shows of one server (`shown`: resource URIs, template URIs, prompt
/// names) is what its last lists gave.
fn compare(
    name: &str,
    shown: &[Vec<&String>; 3],
    c: &SettledCatalog,
    unchanged: bool,
) -> Result<(), String> {
    for (k, what) in ["resources", "templates", "prompts"].iter().enumerate() {
        let mut got: Vec<&str> = shown[k].iter().map(|s| s.as_str()).collect();
        got.sort_unstable();
        got.dedup();
        let mut want: Vec<&str> = c.applied[k].iter().map(String::as_str).collect();
        want.sort_unstable();
        want.dedup();
        // A prompt name a list repeats is one prompt (it routes by name): the view holds
        // it once. Resources and templates are shown as listed.
        let want_len = if k == 2 {
            want.len()
        } else {
            c.applied[k].len()
        };
        if got != want || shown[k].len() != want_len {
            let stale = if unchanged {
                "catalog_generation() did not move since this catalog last matched, but "
            } else {
                ""
            };
            return Err(format!(
                "{stale}{name} settled with {what} {:?} in the view, but its last list said {:?}",
                shown[k], c.applied[k]
            ));
        }
    }
    Ok(())
}

/// `EveryOperationCompletesOnce`: no operation completed twice (or unasked), and the
/// manager's operations in flight are exactly the embedder's outstanding ones.
pub fn operations_complete_once(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, Invariant::EveryOperationCompletesOnce)?;
    let manager: BTreeSet<_> = ctx.m.operations_in_flight().into_iter().collect();
    let embedder: BTreeSet<_> = ctx.obs.ops.keys().copied().collect();
    if manager != embedder {
        return Err(format!(
            "operations in flight {manager:?}, but the embedder waits for {embedder:?}"
        ));
    }
    Ok(())
}
