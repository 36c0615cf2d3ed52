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
/// cannot fail where the first passed. Builds with debug assertions (the tests) compare
/// every server every step anyway, and report a failure on unchanged inputs as the broken
/// generation promise it is.
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
    let resources = ctx.m.resources();
    let templates = ctx.m.resource_templates();
    let prompts = ctx.m.prompts();
    for c in ctx.catalog_settled {
        let unchanged = memo[c.server] == Some(key(c));
        if unchanged && !every {
            continue;
        }
        let name = &ctx.obs.names[c.server];
        let shown: [Vec<&String>; 3] = [
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
        for (k, what) in ["resources", "templates", "prompts"].iter().enumerate() {
            let got: BTreeSet<&String> = shown[k].iter().copied().collect();
            let want: BTreeSet<&String> = c.applied[k].iter().collect();
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
        memo[c.server] = Some(key(c));
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
