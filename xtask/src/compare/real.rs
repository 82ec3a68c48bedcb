//! REG and TC: real trees nobody here wrote (issue 19), Scribe against
//! Git on the same bytes.
//!
//! REG is the cargo registry's unpacked sources (many small text files),
//! TC a Rust toolchain directory (large `.so`/`.rlib` files beside many
//! small HTML pages). Each is copied once into `DIR/snapshots/` and reused
//! by every later run, so runs on different days compare the same bytes
//! (`--registry-tree` / `--toolchain-tree` choose the sources; the
//! snapshot's file count and bytes go into the report). At `--scale` below
//! 1 the snapshot is every k-th file of the tree.
//!
//! Per run and tool, alternated: the import (Scribe `add .` + `submit`;
//! Git `add -A` + `commit`, its `push` timed as its own row), the server's
//! disk (Git's bare repository again after `git gc`), `status` clean,
//! after 10 files were touched and after 10 files were edited, the submit
//! of those 10 edits (Scribe `edit` + `submit`; Git `commit -a` + `push`)
//! and a fresh workspace (`workspace create` against `git clone`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{human, median, median_u, platform, rm, secs, tree_bytes, Bench, Sample, Step, Tool};

/// The default source of tree `key` (REG or TC), when the machine has one.
pub(super) fn default_source(key: &str) -> Option<PathBuf> {
    match key {
        "REG" => {
            let home = std::env::var_os("CARGO_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
            let src = home.join("registry/src");
            let mut dirs: Vec<PathBuf> = std::fs::read_dir(&src)
                .ok()?
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            dirs.sort();
            dirs.into_iter().next()
        }
        "TC" => {
            let out = std::process::Command::new("rustc")
                .args(["--print", "sysroot"])
                .output()
                .ok()?;
            let p = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
            p.is_dir().then_some(p)
        }
        _ => None,
    }
}

/// Every regular file under `root`, relative, sorted; symbolic links and
/// other special files are left out (neither tool versions them alike).
fn list_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(t) = e.file_type() else { continue };
            let r = rel.join(e.file_name());
            if t.is_dir() {
                stack.push(r);
            } else if t.is_file() {
                out.push(r);
            }
        }
    }
    out.sort();
    out
}

/// `cp -a` of `from/.` into `to` (which may exist).
fn copy_tree(b: &Bench, from: &Path, to: &Path) -> Step {
    std::fs::create_dir_all(to).expect("mkdir");
    b.run(
        to,
        Path::new("cp"),
        &[
            "-a",
            &format!("{}/.", from.display()),
            &to.display().to_string(),
        ],
        &[],
    )
}

/// Ten small files spread over the tree (at most 64 KiB each), the ones
/// the status and submit steps touch and edit.
fn pick_edits(snap: &Path) -> Vec<PathBuf> {
    let small: Vec<PathBuf> = list_files(snap)
        .into_iter()
        .filter(|p| {
            let name = p.to_string_lossy();
            !name.starts_with(".git")
                && !name.contains("/.git")
                && std::fs::metadata(snap.join(p)).is_ok_and(|m| m.len() <= 64 * 1024)
        })
        .collect();
    let n = small.len();
    if n == 0 {
        return Vec::new();
    }
    (0..10.min(n))
        .map(|i| small[i * n / 10.min(n)].clone())
        .collect()
}

impl Bench {
    /// The snapshot of tree `key` (copied once): (path, files, bytes).
    fn snapshot(&mut self, key: &str, src: &Path) -> (PathBuf, usize, u64) {
        let scale = self.o.scale;
        let name = if (scale - 1.0).abs() < 1e-9 {
            key.to_lowercase()
        } else {
            format!("{}-scale-{scale}", key.to_lowercase())
        };
        let snaps = self.o.dir.join("snapshots");
        let dst = snaps.join(&name);
        if !dst.is_dir() {
            let tmp = snaps.join(format!("{name}.partial"));
            rm(&tmp);
            std::fs::create_dir_all(&tmp).expect("mkdir");
            eprintln!(
                "compare: {key}: copying {} into {} (once)",
                src.display(),
                dst.display()
            );
            if (scale - 1.0).abs() < 1e-9 {
                copy_tree(self, src, &tmp);
                // Only regular files and directories (what list_files sees).
                let out = std::process::Command::new("find")
                    .arg(&tmp)
                    .args(["-not", "-type", "f", "-not", "-type", "d", "-delete"])
                    .status();
                assert!(out.is_ok_and(|s| s.success()), "find -delete");
            } else {
                let all = list_files(src);
                let want = ((all.len() as f64 * scale) as usize).max(200);
                let step = (all.len() / want.max(1)).max(1);
                for rel in all.iter().step_by(step) {
                    let to = tmp.join(rel);
                    std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
                    std::fs::copy(src.join(rel), &to).expect("copy");
                }
            }
            std::fs::rename(&tmp, &dst).expect("publish the snapshot");
            self.notes.push(format!(
                "{key}: snapshot made from {} in this run",
                src.display()
            ));
        } else {
            self.notes.push(format!(
                "{key}: snapshot {} reused (made by an earlier run)",
                dst.display()
            ));
        }
        let files = list_files(&dst);
        let bytes = files
            .iter()
            .filter_map(|p| std::fs::metadata(dst.join(p)).ok())
            .map(|m| m.len())
            .sum();
        (dst, files.len(), bytes)
    }

    /// Workload REG or TC (module docs).
    /// `add .` + `submit` of the snapshot into a fresh data root opened by
    /// the client itself (a path URL), timed like the TCP import.
    fn embedded_import(&mut self, snap: &Path, name: &str, nbytes: u64) -> Sample {
        let data = self.work.join(format!("embedded-{name}"));
        let ws = self.work.join(format!("embedded-{name}-ws"));
        rm(&data);
        rm(&ws);
        let d = data.display().to_string();
        self.run(&self.root, &self.server_bin, &["init", "--data", &d], &[]);
        self.run(
            &self.root,
            &self.server_bin,
            &["repo", "create", name, "--data", &d],
            &[],
        );
        let w = ws.display().to_string();
        self.scribe(
            &self.root,
            &["workspace", "create", &w, "--server", &d, "--repo", name],
        );
        copy_tree(self, snap, &ws);
        platform::sync_all();
        self.warm_memory(2 * nbytes);
        let s = self.measure(Tool::Scribe, |steps| {
            steps.push(self.scribe(&ws, &["add", "."]));
            steps.push(self.scribe(&ws, &["submit", "-m", "import"]));
        });
        rm(&ws);
        rm(&data);
        s
    }

    pub(super) fn real_tree(&mut self, key: &str, label: &str, src: Option<PathBuf>) {
        let Some(src) = src.or_else(|| default_source(key)) else {
            self.notes.push(format!(
                "{key} ({label}): skipped, no source tree (give --{}-tree)",
                if key == "REG" {
                    "registry"
                } else {
                    "toolchain"
                }
            ));
            return;
        };
        let (snap, nfiles, nbytes) = self.snapshot(key, &src);
        let edits = pick_edits(&snap);
        let runs = if key == "TC" {
            self.o.heavy_runs()
        } else {
            self.o.fast_runs()
        };
        let tools: Vec<Tool> = [Tool::Scribe, Tool::Git]
            .into_iter()
            .filter(|t| self.o.measures(*t))
            .collect();
        let desc =
            |what: &str| format!("{key} {label} ({nfiles} files, {}): {what}", human(nbytes));

        // The machine's small-file limit beside the figures: a plain copy
        // of the snapshot and one sync, files per second.
        let mut copy_rates = Vec::new();
        for _ in 0..2 {
            let to = self.work.join(format!("copy-{}", key.to_lowercase()));
            rm(&to);
            platform::sync_all();
            let t = Instant::now();
            copy_tree(self, &snap, &to);
            platform::sync_all();
            copy_rates.push(nfiles as f64 / t.elapsed().as_secs_f64());
            rm(&to);
        }
        self.notes.push(format!(
            "{key}: the machine's limit, `cp -a` of the snapshot plus `sync`: {:.0} files/s ({} of {nfiles} files in {})",
            median(&copy_rates),
            human(nbytes),
            secs(nfiles as f64 / median(&copy_rates))
        ));

        let mut rows: BTreeMap<(&str, Tool), Vec<Sample>> = BTreeMap::new();
        let mut gc_sizes: BTreeMap<Tool, Vec<u64>> = BTreeMap::new();
        let mut fresh_counts: BTreeMap<Tool, Vec<usize>> = BTreeMap::new();
        for run in 0..runs {
            for &t in &tools {
                let name = format!("{}-{run}", key.to_lowercase());
                let tag = t.name().replace(' ', "");
                let ws = self.work.join(format!("{tag}-{name}"));
                eprintln!("compare: {key} run {} {}", run + 1, t.name());
                self.prepare(t, &name, &ws);
                copy_tree(self, &snap, &ws);
                platform::sync_all();
                self.warm_memory(2 * nbytes);

                // Import.
                let s = self.measure(t, |steps| match t {
                    Tool::Scribe => {
                        steps.push(self.scribe(&ws, &["add", "."]));
                        steps.push(self.scribe(&ws, &["submit", "-m", "import"]));
                    }
                    _ => {
                        steps.push(self.git(&ws, &["add", "-A"]));
                        steps.push(self.git(&ws, &["commit", "-q", "-m", "import"]));
                    }
                });
                rows.entry(("import", t)).or_default().push(s);
                if t == Tool::Git {
                    let s = self.measure(t, |steps| {
                        steps.push(self.git(&ws, &["push", "-q", "origin", "main"]))
                    });
                    rows.entry(("push", t)).or_default().push(s);
                    let bare = self.bare(t, &name);
                    self.git(&bare, &["gc", "-q"]);
                    gc_sizes.entry(t).or_default().push(super::du(&bare));
                } else {
                    gc_sizes
                        .entry(t)
                        .or_default()
                        .push(rows[&("import", t)].last().map_or(0, |s| s.stored));
                }

                // Status: settle once, then clean, touched, edited.
                let status = |b: &Bench| -> Step {
                    match t {
                        Tool::Scribe => b.scribe(&ws, &["status"]),
                        _ => b.git(&ws, &["status"]),
                    }
                };
                platform::sync_all();
                std::thread::sleep(Duration::from_secs(2));
                status(self);
                for _ in 0..2 {
                    let s = self.measure(t, |steps| steps.push(status(self)));
                    rows.entry(("status clean", t)).or_default().push(s);
                }
                let later = std::time::SystemTime::now() + Duration::from_secs(5);
                for p in &edits {
                    let f = std::fs::File::options()
                        .write(true)
                        .open(ws.join(p))
                        .expect("open to touch");
                    f.set_modified(later).expect("touch");
                }
                std::thread::sleep(Duration::from_secs(2));
                let s = self.measure(t, |steps| steps.push(status(self)));
                rows.entry(("status, 10 files touched (first)", t))
                    .or_default()
                    .push(s);
                let rels: Vec<String> = edits.iter().map(|p| p.display().to_string()).collect();
                let mut open_step = None;
                if t == Tool::Scribe {
                    let mut a = vec!["edit"];
                    a.extend(rels.iter().map(String::as_str));
                    open_step = Some(self.scribe(&ws, &a));
                }
                for p in &edits {
                    use std::io::Write;
                    let mut f = std::fs::File::options()
                        .append(true)
                        .open(ws.join(p))
                        .expect("open to edit");
                    writeln!(f, "\n# edit {run}").expect("edit");
                }
                std::thread::sleep(Duration::from_secs(2));
                let s = self.measure(t, |steps| steps.push(status(self)));
                rows.entry(("status, 10 files edited", t))
                    .or_default()
                    .push(s);
                let s = self.measure(t, |steps| match t {
                    Tool::Scribe => {
                        steps.extend(open_step.take());
                        steps.push(self.scribe(&ws, &["submit", "-m", "ten edits"]));
                    }
                    _ => {
                        steps.push(self.git(&ws, &["commit", "-q", "-a", "-m", "ten edits"]));
                        steps.push(self.git(&ws, &["push", "-q", "origin", "main"]));
                    }
                });
                rows.entry(("submit of the 10 edits", t))
                    .or_default()
                    .push(s);
                rm(&ws);

                // A fresh workspace of the head.
                let fresh = self.work.join(format!("{tag}-{name}-fresh"));
                rm(&fresh);
                platform::sync_all();
                self.warm_memory(2 * nbytes);
                let fs = fresh.display().to_string();
                let s = self.measure(t, |steps| match t {
                    Tool::Scribe => {
                        let url = self.scribe_url();
                        steps.push(self.scribe(
                            &self.root,
                            &[
                                "workspace",
                                "create",
                                &fs,
                                "--server",
                                &url,
                                "--repo",
                                &name,
                            ],
                        ));
                    }
                    _ => {
                        let url = self.git_url(t, &name);
                        steps.push(self.git(&self.root, &["clone", "-q", &url, &fs]));
                    }
                });
                rows.entry(("fresh workspace", t)).or_default().push(s);
                if t == Tool::Scribe {
                    // The same import embedded: a path URL, the server in
                    // the client's process (the quickstart's default). Only
                    // TCP was measured until an embedded import of the
                    // registry tree was found hanging (issue 19, 2026-12-07).
                    let s = self.embedded_import(&snap, &name, nbytes);
                    rows.entry(("import, embedded (path URL)", t))
                        .or_default()
                        .push(s);
                }
                fresh_counts
                    .entry(t)
                    .or_default()
                    .push(tree_bytes(&fresh).1);
                rm(&fresh);
                if t == Tool::Git {
                    rm(&self.bare(t, &name));
                }
            }
        }
        let order = [
            "import",
            "push",
            "status clean",
            "status, 10 files touched (first)",
            "status, 10 files edited",
            "submit of the 10 edits",
            "fresh workspace",
            "import, embedded (path URL)",
        ];
        for what in order {
            for &t in &tools {
                if let Some(s) = rows.remove(&(what, t)) {
                    let d = desc(what);
                    let stored = what == "import" || what == "push";
                    self.push_row(&d, t, s, stored);
                    if what == "import" && t == Tool::Git {
                        self.note_row(
                            &d,
                            t,
                            "add -A + commit; the push to the server is the next row",
                        );
                    }
                    if what == "import, embedded (path URL)" {
                        self.note_row(
                            &d,
                            t,
                            "add . + submit into a data root of its own, `--server PATH`",
                        );
                    }
                    if what == "import" && t == Tool::Scribe {
                        self.note_row(&d, t, "add . + submit, the upload to the server included");
                    }
                    if what == "submit of the 10 edits" && t == Tool::Scribe {
                        self.note_row(&d, t, "edit (open the 10 files) + submit");
                    }
                    if what == "fresh workspace" {
                        let n = median_u(
                            &fresh_counts
                                .get(&t)
                                .map(|v| v.iter().map(|&x| x as u64).collect::<Vec<_>>())
                                .unwrap_or_default(),
                        );
                        self.note_row(&d, t, &format!("{n} files placed (median)"));
                    }
                }
            }
        }
        for &t in &tools {
            let v = gc_sizes.get(&t).cloned().unwrap_or_default();
            self.notes.push(format!(
                "{key}: server disk of one import, {}: {} (median of {} runs{})",
                t.name(),
                human(median_u(&v)),
                v.len(),
                if t == Tool::Git {
                    ", the bare repository after `git gc`"
                } else {
                    ", the data root's growth"
                }
            ));
        }
        self.real_disk.insert(
            key.to_string(),
            (
                median_u(&gc_sizes.get(&Tool::Scribe).cloned().unwrap_or_default()),
                median_u(&gc_sizes.get(&Tool::Git).cloned().unwrap_or_default()),
                nfiles,
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_small_files_are_picked_across_the_tree_and_git_files_are_not() {
        let d = tempfile::tempdir().expect("tempdir");
        for i in 0..40 {
            let p = d.path().join(format!("a{:02}/f.txt", i));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"x").unwrap();
        }
        std::fs::write(d.path().join("a00/big.bin"), vec![0u8; 70 * 1024]).unwrap();
        std::fs::create_dir_all(d.path().join("a05/.github")).unwrap();
        std::fs::write(d.path().join("a05/.github/ci.yml"), b"x").unwrap();
        std::fs::write(d.path().join(".gitignore"), b"x").unwrap();
        let picked = pick_edits(d.path());
        assert_eq!(picked.len(), 10, "{picked:?}");
        for p in &picked {
            let s = p.to_string_lossy();
            assert!(s.ends_with("f.txt"), "{s}");
        }
        // Spread: the first and the last tenth of the sorted list.
        assert_eq!(picked[0], PathBuf::from("a00/f.txt"));
        assert_eq!(picked[9], PathBuf::from("a36/f.txt"));
        assert_eq!(list_files(d.path()).len(), 43);
    }
}
