//! Which key seals the vault and which ones open it: `[vault] key`, else the `[cluster]` key,
//! else a key generated on the first write and kept beside the vault (`<vault>.key`, mode 0600),
//! so a restart opens what the last run sealed. Every other key known (`previous_keys`, the
//! cluster's previous keys, the cluster key and the generated key once a key is configured)
//! still opens what it sealed, so setting or rotating a key loses no grant.

use super::file::sibling;
use super::VaultError;
use crate::config::VaultConfig;
use crate::seal::{ClusterKey, Sealer};
use crate::util::private_files::owner_only;
use parking_lot::Mutex;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The vault's keys.
#[derive(Debug)]
pub(super) struct Keys {
    /// The file of the generated key.
    pub key_file: PathBuf,
    /// Keys that open only.
    previous: Vec<ClusterKey>,
    /// Seals and opens; `None` until the generated key exists (no key configured, none
    /// generated yet: nothing was ever sealed).
    sealer: Mutex<Option<Arc<Sealer>>>,
}

impl Keys {
    pub fn resolve(config: &VaultConfig) -> Result<Keys, VaultError> {
        let key_file = sibling(&config.path, ".key");
        let generated = read_key_file(&key_file)?;
        let mut previous = config.previous_keys.clone();
        let current = match (&config.key, &config.cluster_key) {
            (Some(key), cluster) => {
                previous.extend(cluster.iter().cloned());
                previous.extend(config.cluster_previous_keys.iter().cloned());
                previous.extend(generated);
                Some(key.clone())
            }
            (None, Some(cluster)) => {
                previous.extend(config.cluster_previous_keys.iter().cloned());
                previous.extend(generated);
                Some(cluster.clone())
            }
            (None, None) => generated,
        };
        let sealer = current.map(|key| Arc::new(Sealer::new(&key, &previous)));
        Ok(Keys {
            key_file,
            previous,
            sealer: Mutex::new(sealer),
        })
    }

    /// The sealer, if there is a key (there is none before the first write without a
    /// configured key).
    pub fn for_opening(&self) -> Option<Arc<Sealer>> {
        self.sealer.lock().clone()
    }

    /// The sealer, the key generated and kept in the key file first when there is none (called
    /// under the vault's writers' lock, so two processes never generate two keys).
    pub fn for_sealing(&self) -> Result<Arc<Sealer>, VaultError> {
        let mut sealer = self.sealer.lock();
        if let Some(sealer) = sealer.as_ref() {
            return Ok(sealer.clone());
        }
        let key = match read_key_file(&self.key_file)? {
            Some(key) => key,
            None => write_key_file(&self.key_file)?,
        };
        let made = Arc::new(Sealer::new(&key, &self.previous));
        *sealer = Some(made.clone());
        Ok(made)
    }
}

/// The generated key, if its file exists.
fn read_key_file(path: &Path) -> Result<Option<ClusterKey>, VaultError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(VaultError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    ClusterKey::parse(&text)
        .map(Some)
        .map_err(|why| VaultError::BadKeyFile {
            path: path.to_path_buf(),
            why: why.to_string(),
        })
}

/// A new key in a new file (mode 0600; an existing file is never overwritten).
fn write_key_file(path: &Path) -> Result<ClusterKey, VaultError> {
    let key = ClusterKey::generate();
    let io = |source| VaultError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = owner_only(std::fs::OpenOptions::new().write(true).create_new(true))
        .open(path)
        .map_err(io)?;
    file.write_all(format!("{}\n", key.to_base64()).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io)?;
    tracing::info!(key_file = %path.display(), "vault: generated its sealing key (set [vault] key to use one of yours)");
    Ok(key)
}
