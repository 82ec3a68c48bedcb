//! What a data root costs on disk: bytes per file and directory, and for
//! every redb database the storage of each table (redb's `TableStats`).
//!
//! `scribe-server debug table-sizes --data D` prints [`report`]; the
//! footprint tests assert bounds on [`table_sizes`]. Read-only: databases
//! are opened with `redb::ReadOnlyDatabase`, which a running server (or any
//! other writer holding the file) refuses, so the command runs offline.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use redb::{Database, ReadOnlyDatabase, ReadableDatabase, ReadableTableMetadata, TableHandle};

use crate::error::Result;

/// redb's page size (the default of `redb::Builder`, which this crate keeps).
pub const PAGE_BYTES: u64 = 4096;

/// Storage of one redb table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSize {
    pub name: String,
    pub rows: u64,
    /// Bytes of keys and values (redb `stored_bytes`).
    pub stored: u64,
    /// Branch-page keys and other metadata (redb `metadata_bytes`).
    pub metadata: u64,
    /// Unused bytes inside the table's pages (redb `fragmented_bytes`).
    pub fragmented: u64,
    pub leaf_pages: u64,
    pub branch_pages: u64,
}

impl TableSize {
    /// Bytes the table occupies: its pages (or, for a table whose values
    /// span more than a page, what redb counts, whichever is larger).
    pub fn total(&self) -> u64 {
        (self.stored + self.metadata + self.fragmented)
            .max((self.leaf_pages + self.branch_pages) * PAGE_BYTES)
    }
}

fn collect(tx: &redb::ReadTransaction) -> Result<Vec<TableSize>> {
    let mut out = Vec::new();
    for handle in tx.list_tables()? {
        let name = handle.name().to_string();
        let table = tx.open_untyped_table(handle)?;
        let s = table.stats()?;
        out.push(TableSize {
            name,
            rows: table.len()?,
            stored: s.stored_bytes(),
            metadata: s.metadata_bytes(),
            fragmented: s.fragmented_bytes(),
            leaf_pages: s.leaf_pages(),
            branch_pages: s.branch_pages(),
        });
    }
    out.sort_by(|a, b| b.total().cmp(&a.total()).then(a.name.cmp(&b.name)));
    Ok(out)
}

/// Every table of an open database, largest first.
pub fn table_sizes(db: &Database) -> Result<Vec<TableSize>> {
    collect(&db.begin_read()?)
}

/// Every table of the redb file at `path` (opened read-only), largest first.
pub fn file_table_sizes(path: &Path) -> Result<Vec<TableSize>> {
    let db = ReadOnlyDatabase::open(path)?;
    collect(&db.begin_read()?)
}

/// Bytes of the regular files under `path` (the file itself if it is one).
pub fn disk_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_file() {
        return meta.len();
    }
    if !meta.is_dir() {
        return 0;
    }
    let mut sum = 0;
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            sum += disk_bytes(&e.path());
        }
    }
    sum
}

fn regular_files(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => regular_files(&p, out),
                Ok(t) if t.is_file() => out.push(p),
                _ => {}
            }
        }
    }
}

fn human(n: u64) -> String {
    if n >= 10 << 20 {
        format!("{:.1} MB", n as f64 / 1e6)
    } else if n >= 10 << 10 {
        format!("{:.1} KB", n as f64 / 1e3)
    } else {
        format!("{n} B")
    }
}

fn table_report(out: &mut String, path: &Path, file_len: u64) -> Result<()> {
    let tables = file_table_sizes(path)?;
    let _ = writeln!(
        out,
        "    {:<34} {:>10} {:>12} {:>12} {:>12} {:>12}",
        "table", "rows", "stored", "metadata", "fragmented", "total"
    );
    let mut sum = 0;
    for t in &tables {
        if t.rows == 0 && t.total() == 0 {
            continue;
        }
        sum += t.total();
        let _ = writeln!(
            out,
            "    {:<34} {:>10} {:>12} {:>12} {:>12} {:>12}",
            t.name,
            t.rows,
            t.stored,
            t.metadata,
            t.fragmented,
            t.total()
        );
    }
    let _ = writeln!(
        out,
        "    {:<34} {:>10} {:>12} {:>12} {:>12} {:>12}",
        "(free pages, table tree, header)",
        "",
        "",
        "",
        "",
        file_len.saturating_sub(sum)
    );
    Ok(())
}

/// A text report of everything under the data root `dir`: each
/// repository's files grouped by role with their bytes, and the tables of
/// every `.redb` file with redb's storage figures.
pub fn report(dir: &Path) -> Result<String> {
    let mut out = String::new();
    let total = disk_bytes(dir);
    let _ = writeln!(
        out,
        "data root {}: {} ({total} bytes)",
        dir.display(),
        human(total)
    );
    let mut files = Vec::new();
    regular_files(dir, &mut files);
    files.sort();
    // Group: every .redb file on its own line with its tables; other files
    // summed by their parent directory.
    let mut groups: std::collections::BTreeMap<PathBuf, (u64, u64)> = Default::default();
    let mut redbs = Vec::new();
    for f in &files {
        let len = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
        if f.extension().is_some_and(|e| e == "redb") {
            redbs.push((f.clone(), len));
        } else {
            let parent = f.parent().unwrap_or(dir).to_path_buf();
            let g = groups.entry(parent).or_default();
            g.0 += 1;
            g.1 += len;
        }
    }
    let rel = |p: &Path| {
        p.strip_prefix(dir)
            .map(|r| r.display().to_string())
            .unwrap_or_else(|_| p.display().to_string())
    };
    let _ = writeln!(out, "directories (regular files other than .redb):");
    for (d, (n, len)) in &groups {
        let name = rel(d);
        let name = if name.is_empty() { ".".into() } else { name };
        let _ = writeln!(out, "  {name:<60} {n:>7} files {len:>14} ({})", human(*len));
    }
    for (f, len) in &redbs {
        let _ = writeln!(out, "{} {len} bytes ({})", rel(f), human(*len));
        if let Err(e) = table_report(&mut out, f, *len) {
            let _ = writeln!(out, "    (cannot read its tables: {e})");
        }
    }
    Ok(out)
}
