//! Files of a tree (a workspace, a data root): write with parents, read
//! with the path in the panic message.

use std::path::Path;

/// Write `bytes` at `root/path`, creating the parent directories.
pub fn write(root: &Path, path: &str, bytes: &[u8]) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().expect("a file path has a parent")).expect("mkdir");
    std::fs::write(&full, bytes).unwrap_or_else(|e| panic!("write {}: {e}", full.display()));
}

/// The bytes at `root/path`.
pub fn read(root: &Path, path: &str) -> Vec<u8> {
    std::fs::read(root.join(path)).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// Copy the directory tree `from` to `to`, leaving out files named `skip`
/// (for example a data root's `LOCK`).
pub fn copy_tree(from: &Path, to: &Path, skip: &[&str]) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("dir entry");
        let dst = to.join(e.file_name());
        if e.file_type().expect("file type").is_dir() {
            copy_tree(&e.path(), &dst, skip);
        } else if !skip.iter().any(|s| e.file_name() == *s) {
            std::fs::copy(e.path(), dst).expect("copy");
        }
    }
}
