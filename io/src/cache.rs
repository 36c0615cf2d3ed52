//! The disk tool cache: the tools each server listed last time, so the startup gate can offer
//! deferred tools before a slow server is ready.
//!
//! One JSON file per [`CacheKey`] under `$XDG_CACHE_HOME/switchboard/tools/` (else
//! `~/.cache/switchboard/tools/`), named after the sanitized server name and the first 16 hex
//! digits of the config hash. The file holds the full server name and config hash, and `load`
//! checks both, so two keys that sanitize to the same file name only ever cost a miss.
//!
//! A cache can only make startup faster, never break it: every problem on `load` (missing,
//! unreadable, corrupt, another version, another key, too old) is a miss, logged at warn when
//! it is unexpected. Writes are atomic (temp file in the same directory, fsync, rename), so a
//! reader — in this process or another — sees a whole old entry, a whole new one, or none.
//! A writer that dies between writing its temp file and the rename leaves the temp file
//! behind: each `store` removes such files once they are [`STALE_TEMP_AGE`] old, an age no
//! live writer's temp file reaches.
//!
//! The API is synchronous file IO; the driver runs it off the executor, e.g.
//! `blocking::unblock(move || cache.load(&key, now))` (`ToolCache` is cheap to clone). Time is
//! a parameter (`now_unix_ms`) so TTL behaviour is testable without sleeping.

use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use switchboard_core::catalog::Catalog;
use switchboard_core::manager::CacheKey;
use switchboard_core::tool::ToolDef;

/// The entry format written by this version. Entries of any other version are misses.
pub const CACHE_VERSION: u32 = 1;
/// How long an entry is trusted by default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// Files larger than this are not read (treated as corrupt).
const MAX_ENTRY_BYTES: u64 = 64 * 1024 * 1024;
/// Longest sanitized server-name part of a file name.
const MAX_NAME_PART: usize = 64;

/// A temp file older than this is left over from a writer that died before its rename (no
/// writer holds one for more than the time it takes to write and fsync an entry): removed.
pub const STALE_TEMP_AGE: Duration = Duration::from_secs(60 * 60);

/// Distinguishes temp files written by the threads of one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    version: u32,
    server: String,
    config_hash: String,
    written_at_unix_ms: u64,
    tools: Vec<ToolDef>,
    /// Resources, templates and prompts; absent in entries written before they were kept
    /// (those still load, with no catalog).
    #[serde(default)]
    catalog: Option<Catalog>,
}

/// The current wall-clock time in milliseconds since the Unix epoch (0 if the clock is before
/// 1970).
pub fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A directory of cached tool lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCache {
    dir: PathBuf,
    ttl: Duration,
}

impl ToolCache {
    /// A cache in `dir` (created on the first `store`), with the default 30-day TTL.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ToolCache {
            dir: dir.into(),
            ttl: DEFAULT_TTL,
        }
    }

    /// The cache in the default directory, or `None` if neither `XDG_CACHE_HOME` nor `HOME`
    /// gives one.
    pub fn in_default_dir() -> Option<Self> {
        Self::default_dir().map(Self::new)
    }

    /// `$XDG_CACHE_HOME/switchboard/tools` if that variable holds an absolute path (a relative
    /// one is ignored: it would move with the working directory), else
    /// `$HOME/.cache/switchboard/tools`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .filter(|p| p.is_absolute())
                    .map(|home| home.join(".cache"))
            })?;
        Some(base.join("switchboard").join("tools"))
    }

    /// Entries older than `ttl` are misses.
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The directory that holds the entries.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How long an entry is trusted.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The file that holds `key`'s entry.
    pub fn path_for(&self, key: &CacheKey) -> PathBuf {
        self.dir.join(file_name(key))
    }

    /// The cached tools for `key`, if a valid, fresh entry exists. Never fails: every problem
    /// is a miss.
    pub fn load(&self, key: &CacheKey, now_unix_ms: u64) -> Option<Vec<ToolDef>> {
        self.load_entry(key, now_unix_ms).map(|(tools, _)| tools)
    }

    /// The cached tools and catalog (resources, templates, prompts) for `key`, as
    /// [`ToolCache::load`] finds them; the catalog is `None` in an entry written without one.
    pub fn load_entry(
        &self,
        key: &CacheKey,
        now_unix_ms: u64,
    ) -> Option<(Vec<ToolDef>, Option<Catalog>)> {
        let path = self.path_for(key);
        let text = match read_bounded(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(server = %key.server, path = %path.display(), error = %e, "tool cache entry unreadable; ignoring it");
                return None;
            }
        };
        // Straight from the bytes (no `Value` tree): the version first, so an entry of another
        // version is a quiet miss whatever its shape.
        #[derive(Deserialize)]
        struct Version {
            version: Option<serde_json::Value>,
        }
        let version = match serde_json::from_slice::<Version>(&text) {
            Ok(v) => v.version.as_ref().and_then(serde_json::Value::as_u64),
            Err(e) => {
                tracing::warn!(server = %key.server, path = %path.display(), error = %e, "tool cache entry is corrupt; ignoring it");
                return None;
            }
        };
        if version != Some(u64::from(CACHE_VERSION)) {
            tracing::debug!(server = %key.server, path = %path.display(), ?version, "tool cache entry of another version; ignoring it");
            return None;
        }
        let entry: Entry = match serde_json::from_slice(&text) {
            Ok(entry) => entry,
            Err(e) => {
                tracing::warn!(server = %key.server, path = %path.display(), error = %e, "tool cache entry is corrupt; ignoring it");
                return None;
            }
        };
        if entry.server != key.server || entry.config_hash != key.config_hash {
            tracing::debug!(server = %key.server, path = %path.display(), "tool cache entry is for another server or config; ignoring it");
            return None;
        }
        // A timestamp in the future (the clock went back) counts as fresh.
        let age = Duration::from_millis(now_unix_ms.saturating_sub(entry.written_at_unix_ms));
        if age > self.ttl {
            tracing::debug!(server = %key.server, path = %path.display(), age_s = age.as_secs(), "tool cache entry expired");
            return None;
        }
        // The server's own freshness hint counted from the store; the core is told what is
        // left of it now (it decides what that allows).
        let mut catalog = entry.catalog;
        if let Some(f) = catalog.as_mut().and_then(|c| c.freshness.as_mut()) {
            let age_ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
            f.ttl_ms = f.ttl_ms.saturating_sub(age_ms);
        }
        Some((entry.tools, catalog))
    }

    /// Writes `tools` as `key`'s entry, atomically. Concurrent writers (threads or processes)
    /// never leave a torn file: the last rename wins.
    pub fn store(&self, key: &CacheKey, tools: &[ToolDef], now_unix_ms: u64) -> io::Result<()> {
        self.store_entry(key, tools, None, now_unix_ms)
    }

    /// Writes `tools` and `catalog` as `key`'s entry, atomically, as [`ToolCache::store`].
    pub fn store_entry(
        &self,
        key: &CacheKey,
        tools: &[ToolDef],
        catalog: Option<&Catalog>,
        now_unix_ms: u64,
    ) -> io::Result<()> {
        #[derive(Serialize)]
        struct EntryRef<'a> {
            version: u32,
            server: &'a str,
            config_hash: &'a str,
            written_at_unix_ms: u64,
            tools: &'a [ToolDef],
            #[serde(skip_serializing_if = "Option::is_none")]
            catalog: Option<&'a Catalog>,
        }
        let bytes = serde_json::to_vec(&EntryRef {
            version: CACHE_VERSION,
            server: &key.server,
            config_hash: &key.config_hash,
            written_at_unix_ms: now_unix_ms,
            tools,
            catalog,
        })
        .map_err(io::Error::other)?;

        fs::create_dir_all(&self.dir)?;
        let name = file_name(key);
        let temp = self.dir.join(format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            fs::rename(&temp, self.dir.join(&name))
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&temp);
            return Err(e);
        }
        // Make the rename itself durable. Best effort: not every platform can fsync a dir.
        if let Ok(dir) = fs::File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        self.remove_stale_temp_files(now_unix_ms);
        Ok(())
    }

    /// Removes temp files of writers that died before their rename: those last modified more
    /// than [`STALE_TEMP_AGE`] before `now_unix_ms`. Best effort; returns how many it removed.
    pub fn remove_stale_temp_files(&self, now_unix_ms: u64) -> usize {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !is_temp_name(&name.to_string_lossy()) {
                continue;
            }
            let modified = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            let Some(modified) = modified else { continue };
            let age = Duration::from_millis(now_unix_ms.saturating_sub(modified));
            if age > STALE_TEMP_AGE && fs::remove_file(entry.path()).is_ok() {
                tracing::debug!(path = %entry.path().display(), age_s = age.as_secs(), "removed a stale tool cache temp file");
                removed += 1;
            }
        }
        removed
    }
}

fn read_bounded(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let file = fs::File::open(path)?;
    let mut text = Vec::new();
    file.take(MAX_ENTRY_BYTES + 1).read_to_end(&mut text)?;
    if text.len() as u64 > MAX_ENTRY_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "entry is larger than 64 MiB",
        ));
    }
    Ok(text)
}

/// `.<entry file name>.<pid>.<counter>.tmp`, as `store` names its temp files.
fn is_temp_name(name: &str) -> bool {
    let Some(inner) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else {
        return false;
    };
    let mut parts = inner.rsplitn(3, '.');
    let numeric =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let (counter, pid, entry) = (parts.next(), parts.next(), parts.next());
    numeric(counter) && numeric(pid) && entry.is_some_and(|e| e.ends_with(".json"))
}

/// `<sanitized server>-<first 16 hex digits of the config hash>.json`.
fn file_name(key: &CacheKey) -> String {
    let mut name: String = key
        .server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_NAME_PART)
        .collect();
    if name.is_empty() {
        name.push('_');
    }
    let hash: String = key
        .config_hash
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(16)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    format!("{name}-{hash}.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_store_temp_names_count_as_temp_files() {
        assert!(is_temp_name(".a-0123.json.42.7.tmp"));
        assert!(!is_temp_name("a-0123.json"));
        assert!(!is_temp_name(".a-0123.json.x.7.tmp"));
        assert!(!is_temp_name(".notes.tmp"));
        assert!(!is_temp_name(".a.json..7.tmp"));
    }

    #[test]
    fn file_names_are_sanitized_and_short() {
        let key = CacheKey {
            server: "../my server/ü".to_string(),
            config_hash: "ABCDEF0123456789ffff".to_string(),
        };
        assert_eq!(file_name(&key), "___my_server__-abcdef0123456789.json");
        let long = CacheKey {
            server: "x".repeat(300),
            config_hash: String::new(),
        };
        assert_eq!(file_name(&long), format!("{}-.json", "x".repeat(64)));
    }
}
