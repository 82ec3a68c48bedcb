//! Issue 19: what an import costs in `metadata.redb`, measured by redb's
//! table statistics (sizes, never times).

use scribe_format::changeset::Entry;
use scribe_metadata::footprint::{self, TableSize};
use scribe_metadata::{archive, journal};

use super::support::*;

/// Files of the generated import: paths shaped like a source tree
/// (about 50 bytes, the registry and toolchain trees average 44 and 64).
const FILES: u64 = 2_000;

fn path_of(i: u64) -> String {
    format!(
        "library/crate-{:02}/src/module_{:02}/file_{i:05}.rs",
        i % 37,
        (i / 37) % 23
    )
}

fn import(env: &Env) {
    let mut entries: Vec<Entry> = (0..FILES).map(|i| add(env, &path_of(i), 40 + i)).collect();
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    commit(env, entries);
}

/// Register the environment's workspace (pins need a registered owner).
fn register_desk(env: &Env) {
    env.repo
        .register_workspace(&scribe_metadata::workspaces::Registration {
            workspace: env.ws,
            owner: None,
            branch: env.main,
            view: Vec::new(),
            label: "desk".into(),
            tags: Vec::new(),
        })
        .unwrap();
}

fn sum(tables: &[TableSize]) -> u64 {
    tables.iter().map(TableSize::total).sum()
}

fn describe(tables: &[TableSize]) -> String {
    tables
        .iter()
        .filter(|t| t.total() > 0)
        .map(|t| format!("{} rows={} total={}", t.name, t.rows, t.total()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Bytes of the pages redb has allocated (the rest of the file is free).
fn allocated_bytes(db: &redb::Database) -> u64 {
    let w = db.begin_write().unwrap();
    let s = w.stats().unwrap();
    let used = s.allocated_pages() * s.page_size() as u64;
    w.abort().unwrap();
    used
}

fn file_len(dir: &std::path::Path) -> u64 {
    std::fs::metadata(dir.join("metadata.redb")).unwrap().len()
}

/// Bytes per file of one streamed 2,000-file import (paths of about 50
/// bytes): every table together at most 1,200 (the outbox no longer keeps
/// a second copy of every row: it held 2,100 before), and once the
/// repository is opened again (which compacts a file that is at least a
/// quarter free) the whole `metadata.redb` at most 1,200. Issue 19's
/// 1 KiB is out of reach by the specified rows alone (docs/metadata.md,
/// "Footprint"): snapshot pages, history, change_paths and witnesses
/// store about 1,000 bytes per such file before any redb overhead.
#[test]
fn a_streamed_import_costs_at_most_1200_bytes_of_metadata_per_file() {
    let env = env();
    import(&env);
    assert_doctor_clean(&env.repo);
    let tables = footprint::table_sizes(env.repo.database()).unwrap();
    let per_file = sum(&tables) / FILES;
    let repo_dir = env.repo.dir().to_owned();
    let before = file_len(&repo_dir);
    eprintln!(
        "tables {per_file} B/file, file {} B/file\n{}",
        before / FILES,
        describe(&tables)
    );
    assert!(
        per_file <= 1200,
        "tables hold {per_file} bytes per file:\n{}",
        describe(&tables)
    );
    let Env {
        root,
        repo,
        dir: tmp,
        ..
    } = env;
    let rows = journal::dump_rows(repo.database()).unwrap();
    drop(repo);
    drop(root);
    let root = reopen(&tmp.path().join("data"));
    let id = root.list_repositories().unwrap()[0].id;
    let repo = root.open_repository(id).unwrap();
    let after = file_len(&repo_dir);
    eprintln!(
        "reopened: file {} B/file (was {})",
        after / FILES,
        before / FILES
    );
    assert!(
        after / FILES <= 1200,
        "metadata.redb is {after} bytes, {} per file (before reopening {before})",
        after / FILES
    );
    // The outbox rows the archive already held were deleted before the
    // compaction (the import's last ones stayed until the next write).
    let (floor, end, left) = outbox(&repo);
    assert_eq!(
        (left, floor),
        (0, end),
        "the outbox keeps {left} archived rows (floor {floor}, end {end})"
    );
    // Compaction changed no row; the repository serves on.
    assert_eq!(journal::dump_rows(repo.database()).unwrap(), rows);
    assert_doctor_clean(&repo);
    repo.add_change_note(1, "ada", "after compaction").unwrap();
}

fn outbox(repo: &scribe_metadata::Repository) -> (u64, u64, u64) {
    use redb::{ReadableDatabase, ReadableTableMetadata};
    let tx = repo.database().begin_read().unwrap();
    let p = journal::check_profile(&tx, std::path::Path::new("m")).unwrap();
    let rows = tx.open_table(journal::RECORDS).unwrap().len().unwrap();
    (p.floor, p.end, rows)
}

/// The outbox rows the archive already holds are deleted by the next
/// archived write once 4,096 accumulate (floor advanced to the archived
/// end); the archive alone still rebuilds the database row for row, the
/// repository reopens, and consolidation still works.
#[test]
fn archived_outbox_rows_are_pruned_and_the_archive_still_rebuilds_the_database() {
    let env = env();
    import(&env);
    let (floor, end, rows) = outbox(&env.repo);
    assert!(end > 4 * journal::PRUNE_ARCHIVED_RECORDS, "end {end}");
    assert!(floor > 0, "nothing pruned: floor {floor}, end {end}");
    assert_eq!(rows, end - floor, "the outbox holds exactly floor+1..=end");
    assert!(
        rows < end / 2,
        "the outbox still holds {rows} of {end} records"
    );
    // The floor is a published boundary: HEAD covers it.
    let dir = env.repo.dir().join("metadata.recovery");
    assert!(archive::read_head(&dir).unwrap().end >= floor);
    archive::verify(&dir).unwrap();
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("metadata.redb");
    archive::recover(&dir, &target).unwrap();
    assert_eq!(
        journal::dump_rows(&redb::Database::open(&target).unwrap()).unwrap(),
        journal::dump_rows(env.repo.database()).unwrap()
    );
    // Writes go on; reopening (which drains the outbox beyond HEAD) and
    // consolidation accept the advanced floor.
    let c = commit(&env, vec![add(&env, "after/prune.txt", 9)]);
    let (_tmp, _root, repo) = restart(env);
    assert_eq!(repo.head().unwrap(), c);
    assert_doctor_clean(&repo);
    let done = scribe_metadata::consolidate::consolidate(repo.archive()).unwrap();
    assert!(done.wrote_base);
    archive::verify(&dir).unwrap();
}

/// Seed 004, streamed preparation: "Staging transactions append to the
/// local durable recovery outbox without individually flushing archive
/// HEAD. Preparation publishes that outbox once before entering the
/// publication gate." No staging transaction publishes on its own (each
/// did once: one HEAD per batch); a publisher beside the writer archives
/// what is committed every 16 of them while the preparation goes on
/// (docs/metadata.md, "Streamed preparation"), so the publication before
/// the gate is short: HEAD moves during the staging, not only after it.
#[test]
fn streamed_staging_publishes_the_archive_every_16_batches_not_per_batch() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    const EVERY: u64 = 16;
    let env = env();
    let dir = env.repo.dir().join("metadata.recovery");
    let heads = Arc::new(AtomicU64::new(0));
    let batches = Arc::new(AtomicU64::new(0));
    let moved_during = Arc::new(AtomicBool::new(false));
    {
        let heads = heads.clone();
        env.repo.archive().set_hook(Some(Box::new(move |step| {
            if step == "head" {
                heads.fetch_add(1, Ordering::SeqCst);
            }
            Ok(())
        })));
        let batches = batches.clone();
        let moved_during = moved_during.clone();
        let dir = dir.clone();
        let start = std::sync::Mutex::new(None);
        env.repo.set_stage_hook(Some(Box::new(move |n| {
            batches.fetch_max(n, Ordering::SeqCst);
            let end = archive::read_head(&dir).unwrap().end;
            if n == 1 {
                *start.lock().unwrap() = Some(end);
            }
            // The writer waits here (at most 10 s) for the publication it
            // asked for at batch 16: it cannot come from the writer, which
            // publishes only when it is done.
            if n == EVERY + 2 {
                let first = start.lock().unwrap().expect("batch 1 seen");
                let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
                while std::time::Instant::now() < until {
                    if archive::read_head(&dir).unwrap().end > first {
                        moved_during.store(true, Ordering::SeqCst);
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
        })));
    }
    import(&env);
    let (heads, batches) = (heads.load(Ordering::SeqCst), batches.load(Ordering::SeqCst));
    assert!(
        batches >= EVERY + 2,
        "a streamed import of {FILES} files: {batches} staging batches"
    );
    assert!(
        moved_during.load(Ordering::SeqCst),
        "the archive HEAD did not move while {batches} batches were staged"
    );
    // The reservation, one per 16 batches, the one before the gate, the
    // acceptance (and at most one more for a publication that raced the
    // hook's installation): far fewer than one per batch.
    assert!(
        heads <= 4 + batches / EVERY,
        "{heads} HEAD publications for {batches} staging batches"
    );
    env.repo.archive().set_hook(None);
    env.repo.set_stage_hook(None);
    assert_doctor_clean(&env.repo);
    // Everything committed is archived before the import returned.
    let v = archive::verify(&dir).unwrap();
    assert_eq!(v.head.end, outbox(&env.repo).1);
}

/// A serving data root gives the free pages of a streamed import back
/// without a restart (`DataRoot::compact_idle_repositories`): not while a
/// handle is held or before it was found unheld for the quiet time, then
/// by reopening it (outbox pruned, file compacted), after which it serves
/// on from the new handle and nothing is left to do.
#[test]
fn an_idle_repository_is_compacted_while_the_root_stays_open() {
    use std::time::Duration;
    let env = env();
    import(&env);
    let repo_dir = env.repo.dir().to_owned();
    let before = file_len(&repo_dir);
    let used = allocated_bytes(env.repo.database());
    let rows = journal::dump_rows(env.repo.database()).unwrap();
    assert!(env.repo.compaction_wanted());
    let Env {
        root,
        repo,
        dir: _keep,
        ..
    } = env;
    // Held by a request: left alone.
    assert!(root
        .compact_idle_repositories(Duration::ZERO)
        .unwrap()
        .is_empty());
    let id = repo.id();
    drop(repo);
    // Found unheld for less than the quiet time: left alone; handing it
    // out again starts the count again.
    let quiet = Duration::from_millis(300);
    assert!(root.compact_idle_repositories(quiet).unwrap().is_empty());
    std::thread::sleep(2 * quiet);
    drop(root.open_repository(id).unwrap());
    assert!(root.compact_idle_repositories(quiet).unwrap().is_empty());
    assert_eq!(file_len(&repo_dir), before);
    // Quiet and unheld: reopened and compacted.
    assert_eq!(
        root.compact_idle_repositories(Duration::ZERO).unwrap(),
        vec![id]
    );
    // The file is given back down to about the pages in use (redb keeps
    // its region headers and a little allocator slack): how much that is
    // depends on how the import's batches fell, so the bound is the used
    // pages, not a fixed fraction of the file.
    let after = file_len(&repo_dir);
    eprintln!("metadata.redb {before} -> {after} bytes, {used} in use before");
    assert!(
        used < before * 3 / 4 && after <= used + used / 8,
        "metadata.redb {before} -> {after} bytes, {used} in use before"
    );
    let repo = root.open_repository(id).unwrap();
    assert!(!repo.compaction_wanted());
    assert_eq!(outbox(&repo).2, 0);
    assert_eq!(journal::dump_rows(repo.database()).unwrap(), rows);
    drop(repo);
    assert!(root
        .compact_idle_repositories(Duration::ZERO)
        .unwrap()
        .is_empty());
    let repo = root.open_repository(id).unwrap();
    assert_doctor_clean(&repo);
    repo.add_change_note(1, "ada", "served after the compaction")
        .unwrap();
}

/// The opening that compacts after a streamed import prunes the outbox
/// only up to a HEAD the archive's own opening accepted: a HEAD that
/// belongs to another database is refused before any outbox row goes
/// (an unchecked HEAD would have bounded the pruning).
#[test]
fn an_archive_head_of_another_database_prunes_nothing_and_is_refused() {
    use redb::{ReadableDatabase, ReadableTableMetadata};
    let env = env();
    import(&env);
    assert!(env.repo.compaction_wanted());
    let repo_dir = env.repo.dir().to_owned();
    let rows_before = outbox(&env.repo).2;
    assert!(rows_before > 0, "the import leaves archived rows to prune");
    let Env {
        root,
        repo,
        dir: tmp,
        ..
    } = env;
    let id = repo.id();
    drop(repo);
    drop(root);
    let head_file = repo_dir.join("metadata.recovery").join(archive::HEAD_FILE);
    let mut head = archive::read_head(&repo_dir.join("metadata.recovery")).unwrap();
    head.identity[0] ^= 0xff;
    std::fs::write(&head_file, head.encode()).unwrap();
    let root = reopen(&tmp.path().join("data"));
    let Err(err) = root.open_repository(id) else {
        panic!("a foreign HEAD is refused");
    };
    assert!(err.to_string().contains("archive of database"), "{err}");
    drop(root);
    let db = redb::Database::open(repo_dir.join("metadata.redb")).unwrap();
    let tx = db.begin_read().unwrap();
    let rows = tx.open_table(journal::RECORDS).unwrap().len().unwrap();
    assert_eq!(
        rows, rows_before,
        "outbox rows were pruned under a foreign HEAD"
    );
}

/// A streamed preparation numbers its pages so that each staging
/// transaction's undo rows for them (`u8 6 ‖ page id LE`) lie in a few
/// stretches of `submit_stage`, not one per low byte: with ids one after
/// another a transaction of a few hundred pages touched up to 256 separate
/// leaves of the inventory (docs/metadata.md, "Streamed preparation").
#[test]
fn a_staging_transactions_page_undo_rows_lie_in_few_stretches_of_the_inventory() {
    use redb::ReadableDatabase;
    use std::sync::{Arc, Mutex};
    /// The inventory's page undo keys after the last transaction, and the
    /// stretches each transaction's new keys formed.
    type Seen = (Vec<Vec<u8>>, Vec<usize>);
    let env = env();
    let seen: Arc<Mutex<Seen>> = Arc::default();
    {
        let seen = seen.clone();
        let repo = Arc::downgrade(&env.repo);
        env.repo.set_stage_hook(Some(Box::new(move |_| {
            let Some(repo) = repo.upgrade() else { return };
            let tx = repo.database().begin_read().unwrap();
            let stage = tx
                .open_table(scribe_metadata::tables::SUBMIT_STAGE)
                .unwrap();
            let pages: Vec<Vec<u8>> = stage
                .range::<&[u8]>([6u8].as_slice()..[7u8].as_slice())
                .unwrap()
                .map(|r| r.unwrap().0.value().to_vec())
                .collect();
            let mut seen = seen.lock().unwrap();
            let before: std::collections::HashSet<&Vec<u8>> = seen.0.iter().collect();
            // Stretches of keys new in this transaction, in key order.
            let mut stretches = 0;
            let mut in_new = false;
            for k in &pages {
                let new = !before.contains(k);
                if new && !in_new {
                    stretches += 1;
                }
                in_new = new;
            }
            drop(before);
            if pages.len() > seen.0.len() {
                seen.1.push(stretches);
            }
            seen.0 = pages;
        })));
    }
    import(&env);
    env.repo.set_stage_hook(None);
    let seen = seen.lock().unwrap();
    let (pages, stretches) = (&seen.0, &seen.1);
    assert!(
        pages.len() as u64 >= FILES && stretches.len() >= 4,
        "{} page undo rows in {} transactions: too few to judge",
        pages.len(),
        stretches.len()
    );
    let worst = stretches.iter().max().copied().unwrap_or(0);
    assert!(
        worst <= 4,
        "a staging transaction's page undo rows lay in {worst} stretches \
         of the inventory (per transaction: {stretches:?})"
    );
    assert_doctor_clean(&env.repo);
}

/// A streamed acceptance leaves its finished intent's pins (about one per
/// uploaded object) to its caller, to clean up after the answer: the
/// server's group path hands them to its cleanup thread. `submit` itself
/// still cleans up before it returns.
#[test]
fn a_streamed_acceptance_leaves_its_pins_to_the_caller_and_submit_cleans_them() {
    use scribe_format::ObjectId;
    let env = env();
    register_desk(&env);
    let pinned = |s: &scribe_metadata::accept::Submission| {
        let ids: Vec<ObjectId> = s
            .change_set
            .entries
            .iter()
            .filter_map(|e| e.state.as_ref())
            .map(|st| ObjectId::manifest(st.manifest))
            .collect();
        env.repo
            .pin_uploads(s.workspace, s.operation, &ids)
            .unwrap();
        ids.len() as u64
    };
    let entries = |from: u64| -> Vec<Entry> {
        let mut v: Vec<Entry> = (from..from + 200)
            .map(|i| add(&env, &path_of(i), 40 + i))
            .collect();
        v.sort_by(|a, b| a.path.cmp(&b.path));
        v
    };
    // Through prepare + submit_prepared (the server's group path).
    let s = submission(&env, entries(0));
    let n = pinned(&s);
    let p = env.repo.prepare(&s).unwrap();
    assert!(p.streams(&s), "200 files take the streamed preparation");
    let o = env.repo.submit_prepared(&[(s.clone(), p)]).unwrap();
    accepted(&o[0]);
    let left = env.repo.pin_summary().unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].pins, n);
    assert_eq!(left[0].intents, vec![(s.operation, n, true)], "finished");
    env.repo.cleanup_finished_pins().unwrap();
    assert!(env.repo.pin_summary().unwrap().is_empty());
    // Through submit: nothing left when it returns.
    let s = submission(&env, entries(200));
    pinned(&s);
    accepted(&env.repo.submit(s).unwrap());
    assert!(env.repo.pin_summary().unwrap().is_empty());
    assert_doctor_clean(&env.repo);
}

/// An intent with many pins (an import leaves about one per uploaded
/// object) is cleaned in transactions of at most 512 pins whose archive
/// publication is shared: the archive's HEAD moves once for all of them,
/// not once per transaction (issue 19: 201 transactions after a 52,073-file
/// import, each flushing the archive's segment and HEAD besides its own
/// commit), and it covers every one of them when the cleanup returns.
#[test]
fn a_large_intents_pin_cleanup_publishes_the_archive_once() {
    use redb::ReadableDatabase;
    use scribe_format::{ObjectId, ObjectKind};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    const POSITION: redb::TableDefinition<u8, u64> =
        redb::TableDefinition::new("scribe_recovery_position");
    let env = env();
    register_desk(&env);
    let s = submission(&env, vec![add(&env, "art/hero.psd", 7)]);
    // Pins may name objects the store does not hold (seed 004): five full
    // cleanup transactions and a last one of 17.
    let ids: Vec<ObjectId> = (0..5 * 512 + 17u32)
        .map(|i| {
            let mut d = [0u8; 32];
            d[..4].copy_from_slice(&i.to_le_bytes());
            ObjectId::new(ObjectKind::Chunk, d)
        })
        .collect();
    for part in ids.chunks(1000) {
        env.repo
            .pin_uploads(s.workspace, s.operation, part)
            .unwrap();
    }
    let p = env.repo.prepare(&s).unwrap();
    accepted(&env.repo.submit_prepared(&[(s.clone(), p)]).unwrap()[0]);
    assert_eq!(env.repo.pin_summary().unwrap()[0].pins, ids.len() as u64);
    let heads = Arc::new(AtomicU64::new(0));
    {
        let heads = heads.clone();
        env.repo.archive().set_hook(Some(Box::new(move |step| {
            if step == "head" {
                heads.fetch_add(1, Ordering::SeqCst);
            }
            Ok(())
        })));
    }
    let flushes = env.repo.archive().flushes();
    env.repo.cleanup_finished_pins().unwrap();
    env.repo.archive().set_hook(None);
    assert!(env.repo.pin_summary().unwrap().is_empty());
    // Only the last of the six transactions is flushed (docs/metadata.md,
    // "Staging flushes"); it carries the five before it.
    assert_eq!(
        env.repo.archive().flushes() - flushes,
        1,
        "flushed commits of the cleanup"
    );
    assert_eq!(
        env.repo.archive().durable_end(),
        env.repo.archive().head().end
    );
    let heads = heads.load(Ordering::SeqCst);
    assert!(
        (1..=2).contains(&heads),
        "{heads} archive HEAD publications for six cleanup transactions"
    );
    let end = {
        let r = env.repo.database().begin_read().unwrap();
        r.open_table(POSITION)
            .unwrap()
            .get(0)
            .unwrap()
            .unwrap()
            .value()
    };
    let head = archive::read_head(&env.repo.dir().join("metadata.recovery")).unwrap();
    assert_eq!(
        head.end, end,
        "the archive covers every cleanup transaction"
    );
    assert_doctor_clean(&env.repo);
}
