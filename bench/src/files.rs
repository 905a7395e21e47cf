//! Database files for the measurements: one fresh file each, deleted once measured, so a
//! million-row file does not linger on the disk while the next measurement runs.

use std::cell::Cell;
use std::path::{Path, PathBuf};

/// Fresh database files in one temporary directory.
pub struct Files {
    /// The directory, deleted with what is left in it when dropped.
    pub dir: tempfile::TempDir,
    /// How many paths were handed out.
    made: Cell<usize>,
}

impl Files {
    /// A new temporary directory in `parent`, or in the system's.
    pub fn new(parent: Option<&Path>) -> Files {
        let dir = match parent {
            Some(parent) => tempfile::tempdir_in(parent),
            None => tempfile::tempdir(),
        };
        Files {
            dir: dir.expect("cannot create a temporary directory for the database files"),
            made: Cell::new(0),
        }
    }

    /// A path no measurement has used, deleted with its WAL when the guard drops.
    pub fn fresh(&self, name: &str) -> DbFile {
        let n = self.made.get() + 1;
        self.made.set(n);
        DbFile(self.dir.path().join(format!("{n:02}-{name}.db")))
    }
}

/// One measurement's database file; dropping it deletes the file, its WAL and shared memory.
pub struct DbFile(PathBuf);

impl DbFile {
    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for DbFile {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut file = self.0.clone().into_os_string();
            file.push(suffix);
            // A file SQLite did not create is fine to miss.
            let _ = std::fs::remove_file(file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_file_is_fresh_and_gone_after_use() {
        let files = Files::new(None);
        let first = files.fresh("a");
        let second = files.fresh("a");
        assert_ne!(first.path(), second.path());
        let path = first.path().to_owned();
        std::fs::write(&path, b"x").expect("a file");
        std::fs::write(path.with_extension("db-wal"), b"x").expect("its WAL");
        drop(first);
        assert!(!path.exists() && !path.with_extension("db-wal").exists());
    }
}
