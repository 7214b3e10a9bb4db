//! Files only their owner may read (the vault, its key and lock, the audit log): on Unix created
//! with mode 0600 and their directories 0700. Windows has no mode bits: a file there gets the
//! access list its directory passes on, which for a folder in the user's profile lets only that
//! user (and the administrators) read it, so nothing is set.

use std::fs::{DirBuilder, OpenOptions};

/// `options` creating a file readable and writable by its owner only.
pub fn owner_only(options: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600)
    }
    #[cfg(not(unix))]
    {
        options
    }
}

/// `builder` creating directories only their owner may enter.
pub fn owner_only_dir(builder: &mut DirBuilder) -> &mut DirBuilder {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700)
    }
    #[cfg(not(unix))]
    {
        builder
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_and_directories_are_the_owners_only() {
        let base = std::env::temp_dir().join(format!("mcpmux-private-{}", std::process::id()));
        let dir = base.join("inner");
        owner_only_dir(DirBuilder::new().recursive(true))
            .create(&dir)
            .expect("create the directory");
        let file = dir.join("secret");
        owner_only(OpenOptions::new().write(true).create_new(true))
            .open(&file)
            .expect("create the file");
        let mode =
            |path: &std::path::Path| std::fs::metadata(path).expect("metadata").permissions().mode() & 0o777;
        let (dir_mode, file_mode) = (mode(&dir), mode(&file));
        let _ = std::fs::remove_dir_all(&base);
        assert_eq!((dir_mode, file_mode), (0o700, 0o600));
    }
}
