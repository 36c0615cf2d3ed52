//! Switchboard's own approvals of project-level servers: one JSON file under the user's data
//! directory (`$XDG_DATA_HOME/switchboard/trust.json`, else
//! `~/.local/share/switchboard/trust.json`), keyed by the project's canonical path, then by
//! server name, holding the config hash that was approved. An approval holds only for that
//! hash, so an edited entry needs approval again (the decision itself is the core's:
//! [`Approvals::decide`](switchboard_core::config::Approvals::decide)).
//!
//! The file lives outside every project, so a repository cannot approve its own servers.
//! Reads are bounded like every config read; writes are atomic (temp file, fsync, rename). A
//! store that does not parse is an error, never overwritten.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, ErrorKind, Write};
use std::path::{Path, PathBuf};

/// The store's format version.
const TRUST_VERSION: u32 = 1;

/// The largest store read (4 MiB, like a config file).
const MAX_TRUST_BYTES: u64 = crate::files::MAX_CONFIG_BYTES;

/// One approval: the config it was given for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustEntry {
    /// [`config_hash`](switchboard_core::config::config_hash) of the approved entry.
    pub config_hash: String,
    /// The file the entry was in when approved (for people reading the store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustFile {
    version: u32,
    /// Project path → server name → approval.
    #[serde(default)]
    projects: BTreeMap<String, BTreeMap<String, TrustEntry>>,
}

/// The approvals file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustStore {
    path: PathBuf,
}

impl TrustStore {
    /// The store at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        TrustStore { path: path.into() }
    }

    /// `$XDG_DATA_HOME/switchboard/trust.json` if that variable holds an absolute path, else
    /// `$HOME/.local/share/switchboard/trust.json`; `None` when neither gives one.
    pub fn default_path() -> Option<PathBuf> {
        let absolute = |v: &str| {
            std::env::var_os(v)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        let base = absolute("XDG_DATA_HOME")
            .or_else(|| absolute("HOME").map(|h| h.join(".local").join("share")))?;
        Some(base.join("switchboard").join("trust.json"))
    }

    /// Where the store is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The approvals for `project` (a canonical path): server name → approval. A store that
    /// does not exist holds none.
    pub fn approvals(&self, project: &str) -> io::Result<BTreeMap<String, TrustEntry>> {
        Ok(self.load()?.projects.remove(project).unwrap_or_default())
    }

    /// Approve `servers` (name, config hash, source file) for `project`, replacing earlier
    /// approvals of the same names.
    pub fn approve(
        &self,
        project: &str,
        servers: impl IntoIterator<Item = (String, TrustEntry)>,
    ) -> io::Result<()> {
        let mut file = self.load()?;
        file.projects
            .entry(project.to_string())
            .or_default()
            .extend(servers);
        self.save(file)
    }

    /// Withdraw the approvals of `servers` for `project` (`None`: every one of them).
    /// Returns the names withdrawn.
    pub fn revoke(&self, project: &str, servers: Option<&[String]>) -> io::Result<Vec<String>> {
        let mut file = self.load()?;
        let Some(approved) = file.projects.get_mut(project) else {
            return Ok(Vec::new());
        };
        let removed: Vec<String> = match servers {
            None => std::mem::take(approved).into_keys().collect(),
            Some(names) => names
                .iter()
                .filter(|n| approved.remove(n.as_str()).is_some())
                .cloned()
                .collect(),
        };
        if approved.is_empty() {
            file.projects.remove(project);
        }
        if !removed.is_empty() {
            self.save(file)?;
        }
        Ok(removed)
    }

    fn load(&self) -> io::Result<TrustFile> {
        let bytes = match crate::files::read_regular(&self.path, MAX_TRUST_BYTES) {
            Ok(bytes) => bytes,
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                return Ok(TrustFile {
                    version: TRUST_VERSION,
                    ..TrustFile::default()
                })
            }
            Err(e) => return Err(e),
        };
        let file: TrustFile = serde_json::from_slice(&bytes).map_err(|e| {
            io::Error::new(ErrorKind::InvalidData, format!("not a trust store: {e}"))
        })?;
        if file.version != TRUST_VERSION {
            return Err(io::Error::new(
                ErrorKind::InvalidData,
                format!(
                    "trust store version {} is not {TRUST_VERSION}",
                    file.version
                ),
            ));
        }
        Ok(file)
    }

    fn save(&self, file: TrustFile) -> io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(&file).map_err(io::Error::other)?;
        bytes.push(b'\n');
        let dir = self.path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir)?;
        let temp = dir.join(format!(".trust.json.{}.tmp", std::process::id()));
        let written = (|| {
            let mut out = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&temp)?;
            out.write_all(&bytes)?;
            out.sync_all()?;
            fs::rename(&temp, &self.path)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written
    }
}
