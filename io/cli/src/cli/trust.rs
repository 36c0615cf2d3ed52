//! `switchboard trust` and `switchboard untrust`: the user's decision on the project's
//! servers, kept in Switchboard's approvals file ([`TrustStore`]). Discovery tells which
//! servers await approval and the hash each approval binds to; nothing is started here.

use super::{discovery_options, Fatal, Global, EXIT_OK};
use switchboard::{discover, TrustEntry, TrustStore};

/// The command that approves a server, without its name.
pub(super) fn approve_command(g: &Global) -> String {
    match &g.project {
        Some(dir) => {
            let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
            format!(
                "switchboard --project {} trust",
                shell_quote(&dir.to_string_lossy())
            )
        }
        None => "switchboard trust".to_string(),
    }
}

/// `text` as one shell word.
fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./=:,+@%".contains(c));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

fn store_of(options: &switchboard::DiscoveryOptions) -> Result<TrustStore, Fatal> {
    options
        .trust_store
        .as_ref()
        .map(TrustStore::new)
        .ok_or_else(|| {
            Fatal::usage("no place for approvals: neither XDG_DATA_HOME nor HOME is set")
        })
}

/// Approve the named servers (or every one awaiting approval) for this project.
pub(super) async fn trust(g: &Global, names: Vec<String>) -> Result<u8, Fatal> {
    if !g.configs.is_empty() {
        return Err(Fatal::usage(
            "--config files are your own: their servers need no approval",
        ));
    }
    let (_, mut options) = discovery_options(g)?;
    // What awaits approval is what would not start without it.
    options.trust_project = false;
    let store = store_of(&options)?;
    let key = options.project_key();
    let found = blocking::unblock({
        let options = options.clone();
        move || {
            let found = discover(&options);
            if found.inputs_needed.is_empty() {
                return found;
            }
            // An approval binds to the config, which keeps `${input:id}` as a reference:
            // the answer is not part of it, and nothing starts here, so any answer will do
            // to see what awaits approval.
            let mut options = options;
            for input in &found.inputs_needed {
                options.inputs.insert(input.id.clone(), String::new());
            }
            discover(&options)
        }
    })
    .await;
    let mut chosen = Vec::new();
    let mut already = Vec::new();
    if names.is_empty() {
        chosen.extend(found.awaiting.iter());
    } else {
        for name in &names {
            if let Some(a) = found.awaiting.iter().find(|a| &a.server == name) {
                chosen.push(a);
            } else if let Some(a) = found.approved.iter().find(|a| &a.server == name) {
                already.push((name.clone(), a.by.as_str()));
            } else {
                return Err(Fatal::usage(format!(
                    "{name:?} is not a project server awaiting approval (see `switchboard status`)"
                )));
            }
        }
    }
    if !chosen.is_empty() {
        let entries = chosen.iter().map(|a| {
            (
                a.server.clone(),
                TrustEntry {
                    config_hash: a.config_hash.clone(),
                    source: Some(a.source.path.clone()),
                },
            )
        });
        store.approve(&key, entries).map_err(|e| {
            Fatal::usage(format!(
                "cannot record the approval in {}: {e}",
                store.path().display()
            ))
        })?;
    }
    let mut out = String::new();
    for a in &chosen {
        out.push_str(&format!(
            "approved {} ({} {})\n",
            a.server, a.source.provider, a.source.path
        ));
    }
    for (name, by) in &already {
        out.push_str(&format!("{name} is already approved ({by})\n"));
    }
    if chosen.is_empty() && already.is_empty() {
        out.push_str("no project server awaits approval\n");
    }
    if !g.quiet {
        print!("{}", super::term::terminal_safe(&out));
    }
    Ok(EXIT_OK)
}

/// Withdraw this project's approvals (the named ones, or all).
pub(super) async fn untrust(g: &Global, names: Vec<String>) -> Result<u8, Fatal> {
    let (_, options) = discovery_options(g)?;
    let store = store_of(&options)?;
    let key = options.project_key();
    let approved = store
        .approvals(&key)
        .map_err(|e| Fatal::usage(format!("cannot read {}: {e}", store.path().display())))?;
    if let Some(missing) = names.iter().find(|n| !approved.contains_key(n.as_str())) {
        return Err(Fatal::usage(format!(
            "{missing:?} was not approved by `switchboard trust` in this project"
        )));
    }
    let filter = (!names.is_empty()).then_some(names.as_slice());
    let removed = blocking::unblock({
        let store = store.clone();
        let names = filter.map(<[String]>::to_vec);
        move || store.revoke(&key, names.as_deref())
    })
    .await
    .map_err(|e| Fatal::usage(format!("cannot change {}: {e}", store.path().display())))?;
    if !g.quiet {
        let mut out = String::new();
        for name in &removed {
            out.push_str(&format!("withdrew the approval of {name}\n"));
        }
        if removed.is_empty() {
            out.push_str("no approval to withdraw in this project\n");
        }
        print!("{}", super::term::terminal_safe(&out));
    }
    Ok(EXIT_OK)
}
