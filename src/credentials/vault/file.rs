//! The vault's file: one JSON document of sealed records, read whole (at most
//! [`MAX_VAULT_BYTES`]), written whole to a temporary file in the same directory and renamed
//! over the old one (a reader sees the old file or the new one, never half of one), mode 0600
//! ([`crate::util::private_files`]).
//! Writers take an exclusive lock on a sibling `.lock` file and re-read under it, so two
//! processes (the gateway and `mcpmux login`) never lose each other's writes.

use super::VaultError;
use crate::util::file_stamp::FileStamp;
use crate::util::private_files::{owner_only, owner_only_dir};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The largest vault file read; a bigger one is refused (no grant store needs more).
pub const MAX_VAULT_BYTES: u64 = 16 * 1024 * 1024;

/// The `format` of the document this code writes and reads.
const FORMAT: &str = "mcpmux-vault/1";

/// The document: each record is sealed on its own, its key in the clear beside it.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Document {
    pub format: String,
    #[serde(default)]
    pub grants: Vec<SealedGrant>,
    #[serde(default)]
    pub registrations: Vec<SealedRegistration>,
}

/// One grant, sealed and bound to its principal and upstream.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SealedGrant {
    pub principal: String,
    pub upstream: String,
    pub sealed: String,
}

/// One client registration, sealed and bound to its upstream and issuer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SealedRegistration {
    pub upstream: String,
    pub issuer: String,
    pub sealed: String,
}

/// What tells a changed file from the one seen before (another process renamed a new one in).
pub(super) type Stamp = FileStamp;

/// The file backend.
#[derive(Debug)]
pub(super) struct VaultFile {
    pub path: PathBuf,
    lock_path: PathBuf,
}

/// `path` with `suffix` added to its file name (`mcpmux-vault` → `mcpmux-vault.lock`).
pub(super) fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

impl VaultFile {
    pub fn new(path: PathBuf) -> VaultFile {
        let lock_path = sibling(&path, ".lock");
        VaultFile { path, lock_path }
    }

    fn io(&self, path: &Path, source: std::io::Error) -> VaultError {
        VaultError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// The file's stamp now; `None` when there is no file (or it cannot be looked at).
    pub fn stamp(&self) -> Option<Stamp> {
        let meta = std::fs::metadata(&self.path).ok()?;
        Some(FileStamp::of(&meta))
    }

    /// The document as it is on disk (empty when there is no file yet).
    pub fn read(&self) -> Result<Document, VaultError> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Document {
                    format: FORMAT.into(),
                    ..Document::default()
                })
            }
            Err(err) => return Err(self.io(&self.path, err)),
        };
        let size = file.metadata().map_err(|e| self.io(&self.path, e))?.len();
        let too_large = |size| VaultError::TooLarge {
            path: self.path.clone(),
            size,
            limit: MAX_VAULT_BYTES,
        };
        if size > MAX_VAULT_BYTES {
            return Err(too_large(size));
        }
        let mut bytes = Vec::with_capacity(size as usize);
        (&mut file)
            .take(MAX_VAULT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| self.io(&self.path, e))?;
        if bytes.len() as u64 > MAX_VAULT_BYTES {
            return Err(too_large(bytes.len() as u64));
        }
        let document: Document = serde_json::from_slice(&bytes).map_err(|e| VaultError::Corrupt {
            path: self.path.clone(),
            why: e.to_string(),
        })?;
        if document.format != FORMAT {
            return Err(VaultError::Corrupt {
                path: self.path.clone(),
                why: format!("format {:?}, this mcpmux reads {FORMAT:?}", document.format),
            });
        }
        Ok(document)
    }

    /// Under the writers' lock: read the document, let `change` change it, and write it back when
    /// `change` says it changed something. The lock is held until the new file is in place.
    pub fn update<T>(
        &self,
        change: impl FnOnce(&mut Document) -> Result<(T, bool), VaultError>,
    ) -> Result<T, VaultError> {
        self.create_dir()?;
        let lock_file = owner_only(
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
        )
        .open(&self.lock_path)
        .map_err(|e| self.io(&self.lock_path, e))?;
        let mut lock = fd_lock::RwLock::new(lock_file);
        let _held = lock.write().map_err(|e| self.io(&self.lock_path, e))?;
        let mut document = self.read()?;
        let (out, changed) = change(&mut document)?;
        if changed {
            self.write(&document)?;
        }
        Ok(out)
    }

    fn create_dir(&self) -> Result<(), VaultError> {
        match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() && !dir.exists() => {
                owner_only_dir(std::fs::DirBuilder::new().recursive(true))
                    .create(dir)
                    .map_err(|e| self.io(dir, e))
            }
            _ => Ok(()),
        }
    }

    /// Write the whole document to a new file beside the old one (0600), flush it to disk, and
    /// rename it over the old one.
    fn write(&self, document: &Document) -> Result<(), VaultError> {
        let bytes = serde_json::to_vec_pretty(document).map_err(|e| VaultError::Corrupt {
            path: self.path.clone(),
            why: e.to_string(),
        })?;
        if bytes.len() as u64 > MAX_VAULT_BYTES {
            return Err(VaultError::TooLarge {
                path: self.path.clone(),
                size: bytes.len() as u64,
                limit: MAX_VAULT_BYTES,
            });
        }
        let temp = sibling(
            &self.path,
            &format!(".tmp.{}.{:016x}", std::process::id(), rand::random::<u64>()),
        );
        let written = (|| {
            let mut file = owner_only(OpenOptions::new().write(true).create_new(true)).open(&temp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            std::fs::rename(&temp, &self.path)
        })();
        if let Err(err) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(self.io(&self.path, err));
        }
        // The rename itself reaches the disk with the directory (best effort).
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(dir) = File::open(dir) {
                let _ = dir.sync_all();
            }
        }
        Ok(())
    }
}
