//! `doctor` reports each corruption a test introduces, by name.

use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use scribe_format::changeset::Entry;
use scribe_format::commit::{CommitEnvelopeV5, CommitPayload, Origin};
use scribe_format::{ObjectId, WorkspaceId};
use scribe_metadata::records::{keys, CommitRecord, HistoryRecord};
use scribe_metadata::tables;

use super::support::*;

/// A small repository: three changes with an edit, a delete, a move and a lock.
fn populated() -> Env {
    let e = env();
    let c1 = commit(
        &e,
        vec![
            add(&e, "art/a.png", 1),
            add(&e, "art/b.png", 2),
            add(&e, "docs/readme", 3),
        ],
    );
    let c2 = commit(
        &e,
        vec![
            Entry::edit("art/a.png", c1, state(&e, 4)),
            Entry::delete("docs/readme", c1),
        ],
    );
    commit(
        &e,
        vec![
            Entry::delete("art/a.png", c2),
            add(&e, "art/hero.png", 5).moved_from("art/a.png", c2),
        ],
    );
    e.repo
        .lock(&["art/b.png".into()], WorkspaceId::random(), e.main, "bob")
        .unwrap();
    assert_doctor_clean(&e.repo);
    e
}

fn write<K: redb::Key + 'static, V: redb::Value + 'static>(
    e: &Env,
    t: TableDefinition<K, V>,
    f: impl FnOnce(&mut redb::Table<K, V>),
) {
    let tx = e.repo.database().begin_write().unwrap();
    {
        let mut table = tx.open_table(t).unwrap();
        f(&mut table);
    }
    tx.commit().unwrap();
}

fn expect(e: &Env, name: &str) {
    let report = e.repo.doctor().unwrap();
    assert!(
        report.has(name),
        "expected {name}, got {:?}",
        report.problems
    );
}

#[test]
fn a_rewritten_history_row_is_reported() {
    let e = populated();
    let k = keys::history(&e.main, "art/b.png", 1);
    write(&e, tables::HISTORY, |t| {
        let mut rec = HistoryRecord::decode(t.get(k.as_slice()).unwrap().unwrap().value()).unwrap();
        rec.state.as_mut().unwrap().size += 1;
        t.insert(k.as_slice(), rec.encode().as_slice()).unwrap();
    });
    expect(&e, "history.tree");
}

#[test]
fn a_rewritten_page_is_reported() {
    let e = populated();
    write(&e, tables::SNAPSHOT_NODES, |t| {
        let (id, mut page) = {
            let (k, v) = t.first().unwrap().unwrap();
            (k.value(), v.value().to_vec())
        };
        let last = page.len() - 1;
        page[last] ^= 0x55;
        t.insert(id, page.as_slice()).unwrap();
    });
    expect(&e, "snapshot.page");
}

#[test]
fn a_rewritten_envelope_is_reported() {
    let e = populated();
    let rec = e.repo.describe(2).unwrap().record;
    e.objects
        .overwrite(&ObjectId::commit(rec.commit_id), b"\x05\x00garbage")
        .unwrap();
    expect(&e, "commit.envelope-identity");
}

#[test]
fn a_replaced_envelope_with_a_repointed_index_row_is_reported_by_its_child() {
    let e = populated();
    let rec = e.repo.describe(1).unwrap().record;
    let root = {
        let tx = e.repo.database().begin_read().unwrap();
        let t = tx.open_table(tables::SNAPSHOT_ROOTS).unwrap();
        let v = t.get(keys::root(&e.main, 1).as_slice()).unwrap().unwrap();
        scribe_format::snapshot::RootRow::decode(v.value()).unwrap()
    };
    let forged = CommitEnvelopeV5 {
        payload: CommitPayload {
            repository: e.repo.id(),
            branch: e.main,
            change: 1,
            parent_change: 0,
            branched_from: None,
            change_set: rec.change_set,
            operation: rec.operation,
            workspace: rec.workspace,
            timestamp_ms: rec.timestamp_ms,
            author: rec.author.clone(),
            message: "rewritten history".into(),
        },
        actor: None,
        parent_commit: None,
        origin: Origin::None,
        content_root: root.exact.content,
        revision_root: root.exact.revision,
    };
    let bytes = forged.encode().unwrap();
    let id = scribe_format::commit::commit_id(&bytes).unwrap();
    e.objects.put(&ObjectId::commit(id), &bytes).unwrap();
    write(&e, tables::COMMITS, |t| {
        let mut r = CommitRecord::decode(t.get(1).unwrap().unwrap().value()).unwrap();
        r.commit_id = id;
        r.message = "rewritten history".into();
        t.insert(1, r.encode().as_slice()).unwrap();
    });
    let report = e.repo.doctor().unwrap();
    assert!(report.has("commit.parent-link"), "{:?}", report.problems);
    assert!(
        !report.has("commit.envelope-identity"),
        "{:?}",
        report.problems
    );
}

#[test]
fn missing_lineage_edges_change_paths_and_witnesses_are_reported() {
    let e = populated();
    write(&e, tables::FILE_LINEAGE, |t| {
        let k = keys::lineage(2, "art/a.png", 1, "art/a.png");
        assert!(t.remove(k.as_slice()).unwrap().is_some());
    });
    expect(&e, "lineage.missing");
    write(&e, tables::FILE_LINEAGE, |t| {
        t.insert(keys::lineage(3, "x", 1, "y").as_slice(), [].as_slice())
            .unwrap();
    });
    expect(&e, "lineage.extra");
    write(&e, tables::CHANGE_PATHS, |t| {
        t.remove(keys::change_path(&e.main, 2, "docs/readme").as_slice())
            .unwrap();
    });
    expect(&e, "history.change-paths");
    expect(&e, "history.entry-count");
    write(&e, tables::ACCEPTED_MANIFESTS, |t| {
        let k = t.first().unwrap().unwrap().0.value().to_vec();
        t.remove(k.as_slice()).unwrap();
    });
    expect(&e, "manifests.missing");
}

#[test]
fn lock_index_live_count_and_root_rows_are_checked() {
    let e = populated();
    write(&e, tables::WORKSPACE_STATE, |t| {
        let k = {
            let mut it = t.range::<&[u8]>(&[5u8][..]..).unwrap();
            it.next().unwrap().unwrap().0.value().to_vec()
        };
        t.remove(k.as_slice()).unwrap();
    });
    expect(&e, "locks.index");
    write(&e, tables::META, |t| {
        t.insert("snapshot-live", 99u64.to_le_bytes().as_slice())
            .unwrap();
    });
    expect(&e, "meta.snapshot-live");
    write(&e, tables::SNAPSHOT_ROOTS, |t| {
        let k = keys::root(&e.main, 3);
        let mut v = t.get(k.as_slice()).unwrap().unwrap().value().to_vec();
        v[1 + 24] ^= 1; // first byte of the exact content digest
        t.insert(k.as_slice(), v.as_slice()).unwrap();
    });
    expect(&e, "snapshot.root-provenance");
}

#[test]
fn a_rewritten_move_row_is_reported() {
    let e = populated();
    write(&e, tables::MOVES, |t| {
        let k = keys::history(&e.main, "art/hero.png", 3);
        t.insert(
            k.as_slice(),
            scribe_metadata::records::encode_move("art/b.png", 1).as_slice(),
        )
        .unwrap();
    });
    expect(&e, "history.moves");
}

#[test]
fn a_removed_history_row_is_reported_as_missing_coverage() {
    let e = populated();
    write(&e, tables::HISTORY, |t| {
        t.remove(keys::history(&e.main, "art/b.png", 1).as_slice())
            .unwrap();
    });
    expect(&e, "history.coverage");
    expect(&e, "history.change-paths");
}

/// A missing root row is corruption that reads and submits name, not an
/// older tree served in its place (a submit on that tree would drop every
/// later file from the head): below the head, at the head, buffered and
/// streamed.
#[test]
fn a_missing_root_row_is_refused_by_reads_and_submits_not_served_as_an_older_tree() {
    use scribe_metadata::MetadataError;
    let corrupt = |r: Result<Option<_>, MetadataError>, what: &str| match r {
        Err(MetadataError::Corrupt(m)) => assert!(m.contains("snapshot root"), "{what}: {m}"),
        other => panic!("{what}: expected corruption, got {other:?}"),
    };
    let e = populated();
    let remove = |change: u64| {
        write(&e, tables::SNAPSHOT_ROOTS, |t| {
            t.remove(keys::root(&e.main, change).as_slice())
                .unwrap()
                .expect("the root row");
        })
    };
    // Below the head: change 2's tree is not change 1's.
    remove(2);
    corrupt(e.repo.stat(e.main, 2, "art/b.png"), "stat at 2");
    assert!(e.repo.stat(e.main, 1, "docs/readme").unwrap().is_some());
    assert!(e.repo.stat(e.main, 3, "art/hero.png").unwrap().is_some());
    // At the head: neither read nor submitted on.
    remove(3);
    corrupt(e.repo.stat(e.main, 3, "art/b.png"), "stat at the head");
    match e.repo.submit(submission(&e, vec![add(&e, "new.txt", 9)])) {
        Err(MetadataError::Corrupt(m)) => assert!(m.contains("snapshot root"), "{m}"),
        other => panic!("buffered submit: {other:?}"),
    }
    let many: Vec<Entry> = (0..600)
        .map(|i| add(&e, &format!("bulk/{i:04}"), 100 + i))
        .collect();
    match e.repo.submit(submission(&e, many)) {
        Err(MetadataError::Corrupt(m)) => assert!(m.contains("snapshot root"), "{m}"),
        other => panic!("streamed submit: {other:?}"),
    }
    // Nothing was accepted on the damaged head.
    assert!(e.repo.stat(e.main, 1, "art/b.png").unwrap().is_some());
    expect(&e, "snapshot.root-missing");
}
