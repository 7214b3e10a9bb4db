use super::chain::Chain;
use super::verify::{verify, Broken, Intact};
use super::*;
use crate::config::{AuditConfig, AuditSink};
use std::path::PathBuf;

fn event(method: &str) -> Event {
    Event {
        time: record::now_rfc3339(),
        method: method.into(),
        ..Event::default()
    }
}

fn lines(n: usize) -> Vec<String> {
    let mut chain = Chain::default();
    (0..n)
        .map(|i| chain.next_line(&event(&format!("m{i}"))).expect("line"))
        .collect()
}

fn joined(lines: &[String]) -> Vec<u8> {
    lines.iter().flat_map(|l| format!("{l}\n").into_bytes()).collect()
}

fn broken(text: &[u8]) -> Broken {
    verify(text).expect_err("a broken chain")
}

#[test]
fn an_intact_file_verifies() {
    let file = lines(5);
    let last_hash = Some(chain::hash(file[4].as_bytes()));
    let intact = Intact {
        lines: 5,
        last_seq: Some(5),
        last_hash,
    };
    assert_eq!(verify(&joined(&file)), Ok(intact));
    let empty = Intact {
        lines: 0,
        last_seq: None,
        last_hash: None,
    };
    assert_eq!(verify(b""), Ok(empty));
}

#[test]
fn an_edited_line_is_named() {
    let mut file = lines(5);
    file[2] = file[2].replace("\"m2\"", "\"m9\"");
    let found = broken(&joined(&file));
    assert_eq!(found.line, 3, "{found:?}");
    assert!(found.why.contains("edited"), "{found:?}");
}

#[test]
fn a_removed_line_is_found_where_the_sequence_jumps() {
    let mut file = lines(5);
    file.remove(2);
    let found = broken(&joined(&file));
    assert_eq!(found.line, 3, "{found:?}");
    assert!(found.why.contains("removed"), "{found:?}");
    // The first line removed: the file no longer starts its chain.
    let found = broken(&joined(&lines(3)[1..]));
    assert_eq!(found.line, 1, "{found:?}");
}

#[test]
fn reordered_lines_are_named() {
    let mut file = lines(5);
    file.swap(1, 3);
    let found = broken(&joined(&file));
    assert_eq!(found.line, 2, "{found:?}");
    assert!(found.why.contains("reordered"), "{found:?}");
}

#[test]
fn a_line_cut_short_or_not_json_is_named() {
    let mut file = lines(4);
    file[1].truncate(30);
    let found = broken(&joined(&file));
    assert_eq!(found.line, 2, "{found:?}");
    assert!(found.why.contains("not JSON"), "{found:?}");
    let mut text = joined(&lines(3));
    text.truncate(text.len() - 10);
    assert_eq!(broken(&text).line, 3);
    let mut file = lines(3);
    file[1] = "[1,2]".into();
    assert!(broken(&joined(&file)).why.contains("not a JSON object"));
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpmux-audit-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

fn file_config(path: &std::path::Path) -> AuditConfig {
    AuditConfig {
        sink: AuditSink::File(path.to_path_buf()),
        queue_size: 64,
    }
}

#[tokio::test]
async fn a_restart_continues_the_chain_of_the_file() {
    let dir = scratch("restart");
    let path = dir.join("audit.jsonl");
    for round in 0..2 {
        let log = AuditLog::open(&file_config(&path)).expect("open");
        for i in 0..3 {
            log.record(event(&format!("r{round}-{i}")));
        }
        assert!(log.flush(Duration::from_secs(10)).await);
        assert_eq!(log.status().lines_written, 3);
    }
    let text = std::fs::read(&path).expect("read");
    let verdict = verify(&text).expect("intact");
    assert_eq!((verdict.lines, verdict.last_seq), (6, Some(6)));
    // /status shows the head of the chain that verify ends on.
    let log = AuditLog::open(&file_config(&path)).expect("open");
    let status = log.status();
    assert_eq!((status.last_seq, status.last_hash), (6, verdict.last_hash));
    #[cfg(unix)]
    {
        let mode =
            std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).expect("meta").permissions());
        assert_eq!(mode & 0o777, 0o600);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sink that says when a write began and holds it until released.
struct Held {
    began: std::sync::mpsc::SyncSender<()>,
    release: std::sync::mpsc::Receiver<()>,
}

impl std::io::Write for Held {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = self.began.send(());
        let _ = self.release.recv();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_without_waiting() {
    let (began, writing) = std::sync::mpsc::sync_channel(8);
    let (release, held) = std::sync::mpsc::sync_channel(8);
    let sink = Held { began, release: held };
    let log = AuditLog::start("held".into(), Box::new(sink), Chain::default(), 2).expect("start");
    log.record(event("first"));
    writing.recv().expect("the writer took the first line");
    // The writer is stuck in a write: two lines fill the queue, the next two are dropped.
    for i in 0..4 {
        log.record(event(&format!("queued-{i}")));
    }
    assert_eq!(log.status().dropped, 2);
    for _ in 0..4 {
        let _ = release.send(());
    }
    assert!(log.flush(Duration::from_secs(10)).await);
    let status = log.status();
    assert_eq!(
        (status.lines_written, status.dropped, status.write_errors),
        (3, 2, 0)
    );
}

#[tokio::test]
async fn a_failing_sink_is_counted_and_the_chain_skips_what_was_not_written() {
    let failing = AuditConfig {
        sink: AuditSink::File("/dev/full".into()),
        queue_size: 16,
    };
    let log = AuditLog::open(&failing).expect("open /dev/full");
    log.record(event("lost"));
    assert!(log.flush(Duration::from_secs(10)).await);
    let status = log.status();
    assert_eq!((status.lines_written, status.write_errors), (0, 1));
    assert!(
        status.last_error.is_some_and(|e| e.contains("space")),
        "{:?}",
        log.status()
    );
}

#[tokio::test]
async fn a_flush_gives_up_at_its_deadline_when_the_writer_is_stuck() {
    let (began, writing) = std::sync::mpsc::sync_channel(8);
    let (release, held) = std::sync::mpsc::sync_channel(8);
    let log = AuditLog::start(
        "held".into(),
        Box::new(Held { began, release: held }),
        Chain::default(),
        1,
    )
    .expect("start");
    log.record(event("stuck"));
    writing.recv().expect("the writer took the line");
    log.record(event("queued"));
    assert!(
        !log.flush(Duration::from_millis(200)).await,
        "the writer never finishes its write"
    );
    for _ in 0..4 {
        let _ = release.send(());
    }
    assert!(log.flush(Duration::from_secs(10)).await);
    assert_eq!(log.status().lines_written, 2);
}
