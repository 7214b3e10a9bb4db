//! What tells one version of a file from the next without reading it (the vault looks for another
//! process's write this way). Unix: the inode, the length, the modification and status change
//! times in nanoseconds (a file renamed over the old one has a new inode). Windows: the length,
//! the creation and last write times (100 ns ticks; std has no stable file id there).

use std::fs::Metadata;

/// A file's identity, length and times as the platform gives them; equal stamps are taken to
/// be the same version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    id: u64,
    len: u64,
    modified: i128,
    changed: i128,
}

impl FileStamp {
    /// The stamp of the file `meta` describes.
    #[cfg(unix)]
    pub fn of(meta: &Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            id: meta.ino(),
            len: meta.len(),
            modified: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            changed: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        }
    }

    /// The stamp of the file `meta` describes.
    #[cfg(windows)]
    pub fn of(meta: &Metadata) -> FileStamp {
        use std::os::windows::fs::MetadataExt;
        FileStamp {
            id: meta.creation_time(),
            len: meta.len(),
            modified: i128::from(meta.last_write_time()),
            changed: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_renamed_over_another_has_another_stamp() {
        let dir = std::env::temp_dir().join(format!("mcpmux-stamp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (file, next) = (dir.join("file"), dir.join("file.next"));
        std::fs::write(&file, "one").expect("write");
        let stamp = |path: &std::path::Path| FileStamp::of(&std::fs::metadata(path).expect("metadata"));
        let first = stamp(&file);
        assert_eq!(stamp(&file), first, "an unchanged file keeps its stamp");
        std::fs::write(&next, "two").expect("write");
        std::fs::rename(&next, &file).expect("rename");
        let second = stamp(&file);
        let _ = std::fs::remove_dir_all(&dir);
        assert_ne!(second, first, "same length, another file");
    }
}
