//! Config watching for `serve`: the config files discovery read, the ones it looked for
//! and did not find, and the files its findings depend on (`${file:…}` values, approvals)
//! are polled on an interval — each one's presence, length, modification
//! time and a hash of its contents (read with a bound) — and when any changed, the library
//! re-discovers and syncs to what the files say now ([`Switchboard::rediscover`]): new
//! servers start, changed ones restart, removed ones stop, the others keep running. The
//! gateway hears of the new view through the library's events like any other change, so the
//! downstream client gets `list_changed`.
//!
//! Polling, not file-system notifications: it works the same on every platform and file
//! system (editors that replace a file by renaming included), and a config is a few files.

use crate::files::{read_regular, MAX_CONFIG_BYTES};
use crate::Switchboard;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// How often `serve` looks at its config files unless told otherwise.
pub const DEFAULT_WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// The most files watched (discovery looks at a few dozen places at most).
const MAX_WATCHED: usize = 256;

/// What a file looked like.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fingerprint {
    Absent,
    /// Present, but not readable as a config (too large, not a regular file, no permission):
    /// its length and modification time still tell a change.
    Unreadable {
        len: u64,
        modified: Option<SystemTime>,
    },
    Present {
        len: u64,
        modified: Option<SystemTime>,
        hash: u64,
    },
}

fn fingerprint(path: &PathBuf) -> Fingerprint {
    let Ok(meta) = std::fs::metadata(path) else {
        return Fingerprint::Absent;
    };
    let (len, modified) = (meta.len(), meta.modified().ok());
    match read_regular(path, MAX_CONFIG_BYTES) {
        Ok(bytes) => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            bytes.hash(&mut h);
            Fingerprint::Present {
                len,
                modified,
                hash: h.finish(),
            }
        }
        Err(_) => Fingerprint::Unreadable { len, modified },
    }
}

/// The files to watch: those discovery read, those it looked for, and those its findings
/// depend on (value files, approval and policy files).
pub fn discovered_files(d: &crate::discovery::Discovered) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = d
        .files_read
        .iter()
        .cloned()
        .chain(d.looked_at.iter().map(|l| PathBuf::from(&l.source.path)))
        .chain(d.depends_on.iter().cloned())
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    paths.sort();
    paths.dedup();
    paths.truncate(MAX_WATCHED);
    paths
}

fn watched(sb: &Switchboard) -> Vec<PathBuf> {
    sb.discovery()
        .map(|d| discovered_files(&d))
        .unwrap_or_default()
}

async fn fingerprints(paths: Vec<PathBuf>) -> BTreeMap<PathBuf, Fingerprint> {
    blocking::unblock(move || {
        paths
            .into_iter()
            .map(|p| {
                let f = fingerprint(&p);
                (p, f)
            })
            .collect()
    })
    .await
}

/// Watch the config files `sb` was discovered from, every `every`, and re-discover and sync
/// when one changes. Runs until dropped; a switchboard built from a fixed list of servers
/// has nothing to watch, and this waits forever (an embedder that discovers by itself, like
/// the CLI, uses [`watch_files`]).
pub async fn watch_config(sb: Switchboard, every: Duration) {
    let paths = watched(&sb);
    watch_files(paths, every, || {
        let sb = sb.clone();
        async move {
            let _ = sb.rediscover().await;
            watched(&sb)
        }
    })
    .await
}

/// Watch `paths` every `every`; when one changed (appeared, disappeared, or its length,
/// modification time or contents changed), run `on_change`, which re-reads the config,
/// applies it and returns the paths to watch from then on. Runs until dropped.
///
/// `on_change` also runs once right after the first look at the files: the config was read
/// before watching began, and an edit made in between (while the servers started, or before
/// this task first ran) would otherwise never be seen. When nothing changed, that re-read
/// applies the same config and nothing restarts.
pub async fn watch_files<F, Fut>(mut paths: Vec<PathBuf>, every: Duration, mut on_change: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Vec<PathBuf>>,
{
    paths.sort();
    paths.dedup();
    paths.truncate(MAX_WATCHED);
    if paths.is_empty() {
        return futures_lite::future::pending().await;
    }
    let mut seen = fingerprints(paths.clone()).await;
    loop {
        // Re-read and apply (the first time: the catch-up), then wait for the next change.
        let mut after = on_change().await;
        after.sort();
        after.dedup();
        after.truncate(MAX_WATCHED);
        if after != paths {
            paths = after;
            seen = fingerprints(paths.clone()).await;
        }
        loop {
            async_io::Timer::after(every).await;
            let now = fingerprints(paths.clone()).await;
            if now != seen {
                // Fingerprints taken before the re-read: an edit made while it runs is seen
                // next time.
                seen = now;
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The config was read before watching began: an edit made in between is caught by the
    /// one re-read right after the first look, without waiting for (or needing) a change the
    /// poll would see. With an interval of an hour, that re-read is the only one.
    #[test]
    fn the_config_is_read_again_once_when_watching_begins() {
        let dir = std::env::temp_dir().join(format!("switchboard-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("mcp.json");
        std::fs::write(&file, "{}").unwrap();
        let (tx, rx) = async_channel::unbounded::<()>();
        let watch = watch_files(vec![file.clone()], Duration::from_secs(3600), || {
            let tx = tx.clone();
            let file = file.clone();
            async move {
                let _ = tx.send(()).await;
                vec![file]
            }
        });
        let first = smol::block_on(futures_lite::future::or(
            async {
                watch.await;
                false
            },
            futures_lite::future::or(async { rx.recv().await.is_ok() }, async {
                // Only a guard against hanging when the re-read never comes.
                async_io::Timer::after(Duration::from_secs(60)).await;
                false
            }),
        ));
        assert!(first, "on_change ran once when watching began");
        assert!(rx.try_recv().is_err(), "and only once");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
