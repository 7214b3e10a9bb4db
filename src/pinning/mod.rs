//! Pinned tool definitions (`[pinning]`): the lock file of definitions trusted on first sight,
//! and the [`PinBook`] that holds it with the mode in force, compares each tools list a server
//! sends with it (new, same or drifted), remembers the drifts until they are approved, and
//! writes the lock when it changes. Pure bookkeeping and the lock's I/O: the catalog decides
//! what a drift hides, the composition root what it counts and audits.

pub mod diff;
pub mod lock;

pub use lock::{LockError, Pin, Pins};

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a changed definition does (the `[pinning] mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    #[default]
    Off,
    Warn,
    Block,
}

/// A tool whose definition differs from its pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    /// The server's configured name.
    pub server: String,
    /// The server's own tool name.
    pub tool: String,
    pub pinned: Pin,
    /// The definition the server sends now.
    pub current: Pin,
    /// The members that differ, in definition order.
    pub changed: Vec<&'static str>,
}

impl Drift {
    fn new(server: &str, tool: &str, pinned: Pin, current: Pin) -> Drift {
        let changed = diff::changed_members(&pinned.definition, &current.definition);
        Drift {
            server: server.to_string(),
            tool: tool.to_string(),
            pinned,
            current,
            changed,
        }
    }

    /// The changed members, comma-separated.
    pub fn members(&self) -> String {
        self.changed.join(", ")
    }

    /// The readable diff, one block per changed member.
    pub fn diff(&self) -> String {
        diff::render(&self.pinned.definition, &self.current.definition)
    }
}

/// What observing a server's tools list found.
#[derive(Debug, Default)]
pub struct Observed {
    /// Drifts not seen before (each reported once).
    pub new_drifts: Vec<Drift>,
    /// Tools pinned on first sight.
    pub pinned: Vec<String>,
    /// The lock could not be written (the pins hold in memory meanwhile).
    pub error: Option<LockError>,
}

/// The lock in memory, the mode in force, and the tools seen with their drifts.
#[derive(Debug, Default)]
pub struct PinBook {
    mode: Mode,
    path: PathBuf,
    pins: Pins,
    /// The last definitions each server sent: server → tool → definition.
    seen: BTreeMap<String, BTreeMap<String, Pin>>,
    /// Tools whose sent definition differs from the pin: (server, tool) → drift.
    drifts: BTreeMap<(String, String), Drift>,
}

impl PinBook {
    /// The lock at `path` (an empty one when the file does not exist yet), in `mode`; a lock
    /// that does not read is an error naming the file. With `Mode::Off` the file is not read.
    pub fn open(mode: Mode, path: &Path) -> Result<PinBook, LockError> {
        let pins = match mode {
            Mode::Off => Pins::new(),
            Mode::Warn | Mode::Block => lock::read(path)?,
        };
        Ok(PinBook {
            mode,
            path: path.to_path_buf(),
            pins,
            ..PinBook::default()
        })
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every current drift, by server then tool.
    pub fn drifts(&self) -> impl Iterator<Item = &Drift> {
        self.drifts.values()
    }

    /// The drift of `server`'s `tool`, if its definition differs from its pin.
    pub fn drift(&self, server: &str, tool: &str) -> Option<&Drift> {
        self.drifts.get(&(server.to_string(), tool.to_string()))
    }

    /// Whether `server`'s `tool` is left out of lists (a drift under `Mode::Block`).
    pub fn blocks(&self, server: &str, tool: &str) -> bool {
        self.mode == Mode::Block && self.drift(server, tool).is_some()
    }

    /// The pins (for tests and the lock's readers).
    pub fn pins(&self) -> &Pins {
        &self.pins
    }

    /// `server` sent this tools list: new tools are pinned (and the lock written), a tool whose
    /// definition differs from its pin is a drift (new ones returned once), a tool back to its
    /// pinned definition is no longer one. Nothing happens with `Mode::Off` but remembering the
    /// list (a reload that turns pinning on pins it).
    pub fn observe(&mut self, server: &str, tools: &[Value]) -> Observed {
        let seen: BTreeMap<String, Pin> = (tools.iter())
            .filter_map(Pin::of_tool)
            .map(|pin| (pin.name().to_string(), pin))
            .collect();
        self.seen.insert(server.to_string(), seen);
        self.check(Some(server))
    }

    /// Compare what was seen (of `only` that server, or of all) with the pins.
    fn check(&mut self, only: Option<&str>) -> Observed {
        let mut observed = Observed::default();
        if self.mode == Mode::Off {
            self.drifts.clear();
            return observed;
        }
        let mut dirty = false;
        for (server, tools) in self.seen.iter().filter(|(s, _)| only.is_none_or(|o| o == *s)) {
            let pinned = self.pins.entry(server.clone()).or_default();
            self.drifts
                .retain(|(s, t), _| s != server || tools.contains_key(t));
            for (name, current) in tools {
                let key = (server.clone(), name.clone());
                match pinned.get(name) {
                    None => {
                        pinned.insert(name.clone(), current.clone());
                        observed.pinned.push(name.clone());
                        dirty = true;
                    }
                    Some(pin) if pin.sha256 == current.sha256 => {
                        self.drifts.remove(&key);
                    }
                    Some(pin) => {
                        let known =
                            (self.drifts.get(&key)).is_some_and(|d| d.current.sha256 == current.sha256);
                        if !known {
                            let drift = Drift::new(server, name, pin.clone(), current.clone());
                            observed.new_drifts.push(drift.clone());
                            self.drifts.insert(key, drift);
                        }
                    }
                }
            }
        }
        if dirty {
            observed.error = lock::write(&self.path, &self.pins).err();
        }
        observed
    }

    /// Accept the current definitions of `server`'s drifted tools (or of its `tool` alone): the
    /// lock is updated and written; returns the tools approved (none: nothing drifted there).
    pub fn approve(&mut self, server: &str, tool: Option<&str>) -> Result<Vec<String>, LockError> {
        let keys: Vec<(String, String)> = (self.drifts.keys())
            .filter(|(s, t)| s == server && tool.is_none_or(|tool| tool == t))
            .cloned()
            .collect();
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut pins = self.pins.clone();
        for key in &keys {
            if let Some(drift) = self.drifts.get(key) {
                (pins.entry(key.0.clone()).or_default()).insert(key.1.clone(), drift.current.clone());
            }
        }
        lock::write(&self.path, &pins)?;
        self.pins = pins;
        for key in &keys {
            self.drifts.remove(key);
        }
        Ok(keys.into_iter().map(|(_, tool)| tool).collect())
    }

    /// Only the servers `keep` says yes to are configured now: what was seen of the others, and
    /// their drifts, go (their pins stay in the lock, for when they come back).
    pub fn keep_servers(&mut self, keep: impl Fn(&str) -> bool) {
        self.seen.retain(|server, _| keep(server));
        self.drifts.retain(|(server, _), _| keep(server));
    }

    /// A reload: `mode` and `path` from now on, and the lock read again (a replica may have
    /// approved a drift, or an operator edited it); every tool seen is compared again. A lock
    /// that does not read changes nothing and is the error.
    pub fn reload(&mut self, mode: Mode, path: &Path) -> Result<Observed, LockError> {
        let fresh = PinBook::open(mode, path)?;
        self.mode = fresh.mode;
        self.path = fresh.path;
        self.pins = fresh.pins;
        // Drifts are found again against the lock as it is now (and reported again only when
        // their definition is one not reported before).
        let before = std::mem::take(&mut self.drifts);
        let mut observed = self.check(None);
        observed.new_drifts.retain(|d| {
            !(before.get(&(d.server.clone(), d.tool.clone()))).is_some_and(|b| b.current == d.current)
        });
        Ok(observed)
    }
}

#[cfg(test)]
mod tests;
