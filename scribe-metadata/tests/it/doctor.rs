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
