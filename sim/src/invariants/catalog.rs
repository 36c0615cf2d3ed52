//! The catalog invariants: settled resources, templates and prompts show what the server's
//! lists last said, and every operation completes exactly once.

use super::{output_violation, Ctx, Invariant};
use std::collections::BTreeSet;

/// `CatalogSettlesToServerLists`: for every connected server whose catalog settled, the
/// resources, templates and prompts the manager shows for it (live) are exactly those its
/// last lists gave (an empty slice after a failed first list, the previous one after a failed
/// re-list).
pub fn catalog_settles_to_server_lists(ctx: &Ctx) -> Result<(), String> {
    if ctx.catalog_settled.is_empty() {
        return Ok(());
    }
    let resources = ctx.m.resources();
    let templates = ctx.m.resource_templates();
    let prompts = ctx.m.prompts();
    for (i, applied) in ctx.catalog_settled {
        let name = &ctx.obs.names[*i];
        let shown: [Vec<String>; 3] = [
            resources
                .iter()
                .filter(|r| &r.server == name && !r.deferred)
                .map(|r| r.def.uri.clone())
                .collect(),
            templates
                .iter()
                .filter(|t| &t.server == name && !t.deferred)
                .map(|t| t.def.uri_template.clone())
                .collect(),
            prompts
                .iter()
                .filter(|p| &p.server == name && !p.deferred)
                .map(|p| p.def.name.clone())
                .collect(),
        ];
        for (k, what) in ["resources", "templates", "prompts"].iter().enumerate() {
            let got: BTreeSet<&String> = shown[k].iter().collect();
            let want: BTreeSet<&String> = applied[k].iter().collect();
            // A prompt name a list repeats is one prompt (it routes by name): the view holds
            // it once. Resources and templates are shown as listed.
            let want_len = if k == 2 { want.len() } else { applied[k].len() };
            if got != want || shown[k].len() != want_len {
                return Err(format!(
                    "{name} settled with {what} {:?} in the view, but its last list said {:?}",
                    shown[k], applied[k]
                ));
            }
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
