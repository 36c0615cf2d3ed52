//! The token store: one file per server under `$XDG_DATA_HOME/switchboard/tokens/` (else
//! `~/.local/share/switchboard/tokens/`), holding that server's credentials by issuer. Files
//! are written atomically (a temporary file, then a rename) with mode 0600 in a 0700
//! directory; a file for another URL, or one that does not parse, is that server's problem
//! only and is never printed (it holds tokens).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use switchboard_core::auth::Credentials;

/// The largest token file read.
const MAX_FILE: u64 = 1024 * 1024;
const VERSION: u32 = 1;

#[derive(serde::Serialize, serde::Deserialize)]
struct Entry {
    version: u32,
    /// The server URL the credentials are for: an entry for another URL is foreign.
    url: String,
    /// The issuer of the credentials in use.
    current: Option<String>,
    /// Credentials by issuer.
    credentials: BTreeMap<String, Credentials>,
}

/// Where tokens live. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TokenStore {
    dir: PathBuf,
}

/// Why the store could not be read or written (never with the file's contents).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing failed.
    #[error("token store {path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        error: std::io::Error,
    },
    /// The file is not a token store entry.
    #[error("token store {path}: not a valid entry ({reason}); run `switchboard logout` for this server")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong, without the contents.
        reason: String,
    },
}

impl TokenStore {
    /// The store in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        TokenStore { dir: dir.into() }
    }

    /// The default store: `$XDG_DATA_HOME/switchboard/tokens`, else
    /// `$HOME/.local/share/switchboard/tokens`; `None` without either.
    pub fn default_location() -> Option<Self> {
        let base = std::env::var_os("XDG_DATA_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| Path::new(&h).join(".local/share"))
            })?;
        Some(TokenStore::at(base.join("switchboard").join("tokens")))
    }

    fn path(&self, server: &str) -> PathBuf {
        // Server names are letters, digits, `-`, `_` and `.`; anything else is escaped so
        // a name can never leave the directory.
        let mut name = String::new();
        for c in server.chars() {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                name.push(c);
            } else {
                name.push_str(&format!("%{:02X}", c as u32));
            }
        }
        self.dir.join(format!("{name}.json"))
    }

    fn read(&self, server: &str) -> Result<Option<Entry>, StoreError> {
        let path = self.path(server);
        let shown = path.display().to_string();
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(StoreError::Io { path: shown, error }),
        };
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_FILE + 1), &mut text)
            .map_err(|error| StoreError::Io {
                path: shown.clone(),
                error,
            })?;
        if text.len() as u64 > MAX_FILE {
            return Err(StoreError::Corrupt {
                path: shown,
                reason: "larger than 1 MiB".into(),
            });
        }
        let entry: Entry = serde_json::from_slice(&text).map_err(|e| StoreError::Corrupt {
            path: shown.clone(),
            // The position only: the message of a serde error may quote the contents.
            reason: format!("does not parse at line {} column {}", e.line(), e.column()),
        })?;
        if entry.version != VERSION {
            return Err(StoreError::Corrupt {
                path: shown,
                reason: format!("version {}", entry.version),
            });
        }
        Ok(Some(entry))
    }

    /// The credentials in use for `server` at `url`, if any (an entry for another URL is
    /// ignored).
    pub fn load(&self, server: &str, url: &str) -> Result<Option<Credentials>, StoreError> {
        Ok(self
            .read(server)?
            .filter(|e| e.url == url)
            .and_then(|mut e| {
                let current = e.current?;
                e.credentials.remove(&current)
            }))
    }

    /// Saves `creds` as the credentials in use for `server` at `url`, keeping those of other
    /// issuers (a corrupt or foreign entry is replaced).
    pub fn save(&self, server: &str, url: &str, creds: &Credentials) -> Result<(), StoreError> {
        let mut entry = match self.read(server) {
            Ok(Some(e)) if e.url == url => e,
            _ => Entry {
                version: VERSION,
                url: url.to_string(),
                current: None,
                credentials: BTreeMap::new(),
            },
        };
        entry.current = Some(creds.issuer.clone());
        entry
            .credentials
            .insert(creds.issuer.clone(), creds.clone());
        let text = serde_json::to_vec_pretty(&entry).expect("serializable");
        self.write_atomic(&self.path(server), &text)
    }

    /// Forgets everything stored for `server`; true when there was something.
    pub fn remove(&self, server: &str) -> Result<bool, StoreError> {
        let path = self.path(server);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(StoreError::Io {
                path: path.display().to_string(),
                error,
            }),
        }
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let io = |error| StoreError::Io {
            path: path.display().to_string(),
            error,
        };
        create_private_dir(&self.dir).map_err(io)?;
        let tmp = path.with_extension(format!("json.tmp.{}", std::process::id()));
        let result = (|| {
            let mut f = private_file(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(io)
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_core::auth::{AuthMethod, Client};

    fn creds(issuer: &str, token: &str) -> Credentials {
        Credentials {
            issuer: issuer.into(),
            resource: "http://h/mcp".into(),
            token_endpoint: format!("{issuer}/token"),
            client: Client {
                client_id: "c".into(),
                client_secret: None,
                auth_method: AuthMethod::None,
                signing_algorithm: None,
            },
            access_token: token.into(),
            refresh_token: None,
            expires_at: Some(5),
            scopes: vec![],
            grant: Default::default(),
        }
    }

    #[test]
    fn saves_privately_loads_by_url_and_keeps_other_issuers() {
        let dir = std::env::temp_dir().join(format!("switchboard-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = TokenStore::at(&dir);
        assert!(store.load("s", "http://h/mcp").unwrap().is_none());
        store
            .save("s", "http://h/mcp", &creds("http://a", "one"))
            .unwrap();
        store
            .save("s", "http://h/mcp", &creds("http://b", "two"))
            .unwrap();
        assert_eq!(
            store
                .load("s", "http://h/mcp")
                .unwrap()
                .unwrap()
                .access_token,
            "two"
        );
        assert!(
            store.load("s", "http://other/mcp").unwrap().is_none(),
            "foreign URL"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("s.json"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(dir.join("bad.json"), "{\"secret-token\": ").unwrap();
        let e = store.load("bad", "http://h/mcp").unwrap_err().to_string();
        assert!(!e.contains("secret-token"), "{e}");
        assert!(store.remove("s").unwrap());
        assert!(!store.remove("s").unwrap());
        assert!(store.path("../x").ends_with("%2E%2E%2Fx.json"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
