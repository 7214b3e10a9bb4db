//! The pin stage of the catalog (`[pinning]`): each tools list an upstream sends is observed
//! when it arrives (not per rebuild) against the lock, by the server's configured name and its
//! own tool names, before mcpmux's shaping; under `mode = "block"` a drifted tool is left out of
//! the merged lists and remembered by its exposed name, so a call says why. Drifts are logged
//! here and handed to the sink the composition root installs (metric, audit).

use super::store::CatalogStore;
use super::ListKind;
use crate::config::{PinMode, UpstreamId};
use crate::pinning::{Drift, LockError, Mode, Observed, PinBook};
use crate::protocol::RawObject;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Told of each new drift (once per changed definition).
pub type DriftSink = Arc<dyn Fn(&Drift) + Send + Sync>;

/// The pin book and where drifts go.
#[derive(Default)]
pub(super) struct PinStage {
    book: PinBook,
    sink: Option<DriftSink>,
}

/// A tool left out of lists because its definition drifted from its pin.
#[derive(Debug, Clone)]
pub struct BlockedItem {
    pub upstream: UpstreamId,
    /// What a call by its exposed name is answered (names the drift and how to approve it).
    pub message: String,
}

fn mode_of(mode: PinMode) -> Mode {
    match mode {
        PinMode::Off => Mode::Off,
        PinMode::Warn => Mode::Warn,
        PinMode::Block => Mode::Block,
    }
}

impl PinStage {
    /// `upstream` sent this tools list.
    pub(super) fn observe(&mut self, upstream: &UpstreamId, items: &[RawObject]) {
        let tools: Vec<serde_json::Value> = (items.iter())
            .filter_map(|item| serde_json::from_str(&item.to_json()).ok())
            .collect();
        let observed = self.book.observe(upstream.as_str(), &tools);
        self.report(observed);
    }

    /// Log what was pinned and what drifted; hand each new drift to the sink.
    fn report(&self, observed: Observed) {
        let lock = self.book.path().display();
        if !observed.pinned.is_empty() {
            tracing::info!(
                tools = observed.pinned.len(),
                "pinned {} on first sight in {lock}",
                observed.pinned.join(", ")
            );
        }
        if let Some(err) = observed.error {
            tracing::error!(%err, "the pinned tool definitions hold in memory only");
        }
        for drift in &observed.new_drifts {
            let does = match self.book.mode() {
                Mode::Block => "left out of lists until approved",
                _ => "still listed (mode = \"warn\")",
            };
            tracing::warn!(
                server = %drift.server,
                tool = %drift.tool,
                changed = %drift.members(),
                "tool {:?} of server {:?} changed its definition since it was pinned in {lock} ({}); {does}; \
                 `mcpmux pins` shows the diff, `mcpmux pins approve {}/{}` accepts it:\n{}",
                drift.tool,
                drift.server,
                drift.members(),
                drift.server,
                drift.tool,
                drift.diff().trim_end(),
            );
            if let Some(sink) = &self.sink {
                sink(drift);
            }
        }
    }

    /// Only these servers are configured now (a reload): the others' drifts go.
    pub(super) fn keep_servers(&mut self, keep: impl Fn(&str) -> bool) {
        self.book.keep_servers(keep);
    }

    /// Whether `upstream`'s tool `original` is left out of lists.
    pub(super) fn blocks(&self, upstream: &UpstreamId, original: &str) -> bool {
        self.book.blocks(upstream.as_str(), original)
    }

    /// What a call of a blocked tool is answered.
    pub(super) fn blocked(&self, upstream: &UpstreamId, original: &str) -> BlockedItem {
        let changed = (self.book.drift(upstream.as_str(), original)).map(Drift::members);
        BlockedItem {
            upstream: upstream.clone(),
            message: format!(
                "tool {original} of server {server} changed its definition since it was pinned in {lock}: {changed}; \
                 run `mcpmux pins` to review and `mcpmux pins approve {server}/{original}` to accept",
                server = upstream.as_str(),
                lock = self.book.path().display(),
                changed = changed.unwrap_or_default(),
            ),
        }
    }
}

impl CatalogStore {
    /// Pin tool definitions from now on (at start, before any list arrives): `mode` and the
    /// lock at `path`; each new drift goes to `sink`. A lock that does not read is the error.
    pub fn install_pinning(&self, mode: PinMode, path: &Path, sink: DriftSink) -> Result<(), LockError> {
        let book = PinBook::open(mode_of(mode), path)?;
        self.parts.lock().pins = PinStage {
            book,
            sink: Some(sink),
        };
        Ok(())
    }

    /// A reload: `mode` and `path` from now on, the lock read again (an approval another replica
    /// wrote counts), every tool seen compared again; returns whether the tools hosts see
    /// changed. A lock that does not read changes nothing and is the error.
    pub fn reload_pinning(&self, mode: PinMode, path: &Path) -> Result<bool, LockError> {
        let mut parts = self.parts.lock();
        let blocking = |book: &PinBook| -> Vec<(String, String, String)> {
            match book.mode() {
                Mode::Block => (book.drifts())
                    .map(|d| (d.server.clone(), d.tool.clone(), d.current.sha256.clone()))
                    .collect(),
                _ => Vec::new(),
            }
        };
        let was = blocking(&parts.pins.book);
        let observed = parts.pins.book.reload(mode_of(mode), path)?;
        parts.pins.report(observed);
        if blocking(&parts.pins.book) == was {
            // Nothing hosts see changed: the snapshot stays.
            return Ok(false);
        }
        let before = self.snapshot();
        let after = self.rebuild(&parts, before.epoch + 1);
        Ok(after
            .list(ListKind::Tools)
            .differs_from(before.list(ListKind::Tools)))
    }

    /// Accept the current definition of `server`'s drifted tools (or of its `tool`): the lock
    /// is written and they are listed again. Returns the tools approved and whether the tools
    /// hosts see changed (they are then to be told).
    pub fn approve_pins(&self, server: &str, tool: Option<&str>) -> Result<(Vec<String>, bool), LockError> {
        let mut parts = self.parts.lock();
        let approved = parts.pins.book.approve(server, tool)?;
        if approved.is_empty() {
            return Ok((approved, false));
        }
        tracing::info!(server, tools = %approved.join(", "), "approved the new definitions; the lock is written");
        let before = self.snapshot();
        let after = self.rebuild(&parts, before.epoch + 1);
        let changed = after
            .list(ListKind::Tools)
            .differs_from(before.list(ListKind::Tools));
        Ok((approved, changed))
    }

    /// Every current drift, by server then tool.
    pub fn drifts(&self) -> Vec<Drift> {
        self.parts.lock().pins.book.drifts().cloned().collect()
    }

    /// The pinning mode and lock file in force.
    pub fn pinning(&self) -> (Mode, PathBuf) {
        let parts = self.parts.lock();
        (parts.pins.book.mode(), parts.pins.book.path().to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Naming;
    use parking_lot::Mutex;

    fn tool(name: &str, description: &str) -> RawObject {
        RawObject::parse(&serde_json::json!({"name": name, "description": description}).to_string()).unwrap()
    }

    fn names(store: &CatalogStore) -> Vec<String> {
        (store.snapshot().list(ListKind::Tools).items.iter())
            .map(|i| i.exposed.to_string())
            .collect()
    }

    fn lock(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcpmux-catalog-pins-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("mcpmux.lock")
    }

    #[test]
    fn block_leaves_a_drifted_tool_out_says_why_and_approval_lists_it_again() {
        let docs = UpstreamId::new("docs");
        let store = CatalogStore::new(vec![(docs.clone(), Naming::new("docs", "__"))]);
        let told = Arc::new(Mutex::new(Vec::new()));
        let sink_told = told.clone();
        let path = lock("block");
        let sink: DriftSink =
            Arc::new(move |d: &Drift| sink_told.lock().push(format!("{}/{}", d.server, d.tool)));
        store.install_pinning(PinMode::Block, &path, sink).unwrap();
        store.replace(&docs, ListKind::Tools, vec![tool("echo", "a"), tool("add", "b")]);
        assert!(path.exists(), "pinned on first sight");
        assert!(store.replace(
            &docs,
            ListKind::Tools,
            vec![tool("echo", "changed"), tool("add", "b")]
        ));
        assert_eq!(names(&store), ["docs__add"]);
        assert_eq!(*told.lock(), ["docs/echo"]);
        let snapshot = store.snapshot();
        let blocked = snapshot
            .list(ListKind::Tools)
            .blocked("docs__echo")
            .expect("remembered");
        assert_eq!(blocked.upstream, docs);
        assert!(
            blocked.message.starts_with("tool echo of server docs changed its definition since it was pinned in ")
                && blocked.message.contains(": description; run `mcpmux pins` to review and `mcpmux pins approve docs/echo` to accept"),
            "{}",
            blocked.message
        );
        // The same list again: no second report.
        store.replace(
            &docs,
            ListKind::Tools,
            vec![tool("echo", "changed"), tool("add", "b")],
        );
        assert_eq!(told.lock().len(), 1);
        assert_eq!(store.drifts().len(), 1);
        let (approved, changed) = store.approve_pins("docs", Some("echo")).unwrap();
        assert_eq!((approved, changed), (vec!["echo".to_string()], true));
        assert_eq!(names(&store), ["docs__add", "docs__echo"]);
        assert!(store
            .snapshot()
            .list(ListKind::Tools)
            .blocked("docs__echo")
            .is_none());
    }

    #[test]
    fn a_reload_that_removes_a_server_forgets_its_drifts() {
        let (docs, gone) = (UpstreamId::new("docs"), UpstreamId::new("gone"));
        let store = CatalogStore::new(vec![
            (docs.clone(), Naming::new("docs", "__")),
            (gone.clone(), Naming::new("gone", "__")),
        ]);
        store
            .install_pinning(PinMode::Block, &lock("removed"), Arc::new(|_: &Drift| {}))
            .unwrap();
        for id in [&docs, &gone] {
            store.replace(id, ListKind::Tools, vec![tool("echo", "a")]);
            store.replace(id, ListKind::Tools, vec![tool("echo", "b")]);
        }
        assert_eq!(store.drifts().len(), 2);
        store.set_upstreams(vec![(docs, Naming::new("docs", "__"))]);
        let left: Vec<String> = store.drifts().into_iter().map(|d| d.server).collect();
        assert_eq!(left, ["docs"]);
    }

    #[test]
    fn warn_lists_a_drifted_tool_and_reports_it_and_a_reload_to_block_hides_it() {
        let docs = UpstreamId::new("docs");
        let store = CatalogStore::new(vec![(docs.clone(), Naming::new("docs", "__"))]);
        let told = Arc::new(Mutex::new(0));
        let sink_told = told.clone();
        let path = lock("warn");
        store
            .install_pinning(
                PinMode::Warn,
                &path,
                Arc::new(move |_: &Drift| *sink_told.lock() += 1),
            )
            .unwrap();
        store.replace(&docs, ListKind::Tools, vec![tool("echo", "a")]);
        store.replace(&docs, ListKind::Tools, vec![tool("echo", "b")]);
        assert_eq!(names(&store), ["docs__echo"]);
        assert_eq!(*told.lock(), 1);
        assert!(store.reload_pinning(PinMode::Block, &path).unwrap());
        assert!(names(&store).is_empty());
        assert_eq!(*told.lock(), 1, "a known drift is not reported again");
        assert!(store.reload_pinning(PinMode::Off, &path).unwrap());
        assert_eq!(names(&store), ["docs__echo"]);
        // A reload that changes nothing hosts see keeps the snapshot.
        let epoch = store.snapshot().epoch;
        assert!(!store.reload_pinning(PinMode::Off, &path).unwrap());
        assert_eq!(store.snapshot().epoch, epoch);
    }
}
