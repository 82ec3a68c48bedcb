//! Metadata recovery journal profile 2 on real redb files: every write
//! recorded with a commit boundary in its own transaction, the profile
//! required by openers, export as `.scrj` segments and replay into a
//! quarantined database (refusing gaps, wrong identities, incomplete
//! transactions, corruption, trailing data), and a repository database
//! rebuilt from its journal compared row by row.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableHandle};
use scribe_format::changeset::Entry;
use scribe_format::recovery::{self as rj, Record, RecoveryError, TypeCheck};
use scribe_format::{ErrorCode, OperationId, WorkspaceId};
use scribe_metadata::journal::{self, POSITION, POS_END, POS_FLOOR, RECORDS};
use scribe_metadata::workspaces::Registration;
use scribe_metadata::{DataRoot, MetadataError, Repository};

use super::support::*;

/// Every record of `db`'s outbox in order, checked: contiguous from
/// floor + 1 to end, decoding, types consistent, ending on a boundary.
pub fn outbox(db: &Database) -> Vec<(u64, Record)> {
    let tx = db.begin_read().unwrap();
    let pos = tx.open_table(POSITION).unwrap();
    let end = pos.get(POS_END).unwrap().unwrap().value();
    let floor = pos.get(POS_FLOOR).unwrap().unwrap().value();
    let t = tx.open_table(RECORDS).unwrap();
    let mut out = Vec::new();
    // Past a floor, start from the types the database recorded.
    let mut check = if floor == 0 {
        TypeCheck::default()
    } else {
        TypeCheck::with_types(journal::recorded_types(&tx).unwrap())
    };
    let mut next = floor + 1;
    for row in t.iter().unwrap() {
        let (k, v) = row.unwrap();
        assert_eq!(k.value(), next, "outbox sequences are contiguous");
        next += 1;
        let rec = Record::decode(v.value()).unwrap();
        check.apply(&rec).unwrap();
        out.push((k.value(), rec));
    }
    assert_eq!(next - 1, end, "end is the last recorded sequence");
    assert_eq!(check.pending(), 0, "the outbox ends on a commit boundary");
    out
}

fn reg(e: &Env, ws: WorkspaceId) -> Registration {
    Registration {
        workspace: ws,
        owner: Some([4; 16]),
        branch: e.main,
        view: vec!["art".into()],
        label: "desk".into(),
        tags: vec!["ci".into()],
    }
}

/// A workload touching every kind of authoritative write: buffered and
/// streamed acceptance (the latter drops and recreates its stage table), a
/// rejection, locks taken and released, workspace registration and
/// retirement, upload pins, and change notes.
pub fn workload(e: &Env) {
    let c1 = commit(e, vec![add(e, "art/a.psd", 10), add(e, "code/b.rs", 20)]);
    commit(e, vec![Entry::delete("code/b.rs", c1)]);
    let mut many: Vec<Entry> = (0..80)
        .map(|i| add(e, &format!("bulk/d{}/f{i:03}", i % 7), 100 + i))
        .collect();
    many.sort_by(|a, b| a.path.cmp(&b.path));
    commit(e, many);
    // A rejection (the base no longer matches) records its outcome.
    let o = e
        .repo
        .submit(submission(e, vec![Entry::delete("code/b.rs", c1)]))
        .unwrap();
    rejected(&o);
    let ws = WorkspaceId::random();
    e.repo.register_workspace(&reg(e, ws)).unwrap();
    e.repo
        .lock(&["art/a.psd".into(), "art/c.psd".into()], ws, e.main, "ada")
        .unwrap();
    e.repo.unlock(&["art/c.psd".into()], ws).unwrap();
    e.repo.add_change_note(c1, "ada", "first").unwrap();
    e.repo.add_change_note(c1, "bob", "second").unwrap();
    let other = WorkspaceId::random();
    e.repo.register_workspace(&reg(e, other)).unwrap();
    e.repo
        .retire_workspace(other, OperationId::random())
        .unwrap();
}

#[test]
fn every_write_is_recorded_with_a_commit_boundary_in_its_transaction() {
    let e = env();
    let before = outbox(e.repo.database());
    // Creation itself is journaled: declarations of every table, the rows.
    assert!(matches!(before.first(), Some((1, Record::Declare { .. }))));
    let creation_tables: std::collections::BTreeSet<String> = before
        .iter()
        .filter_map(|(_, r)| match r {
            Record::Declare { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    let tx = e.repo.database().begin_read().unwrap();
    let all: std::collections::BTreeSet<String> = tx
        .list_tables()
        .unwrap()
        .map(|t| t.name().to_owned())
        .filter(|n| !rj::RESERVED_TABLES.contains(&n.as_str()))
        .collect();
    drop(tx);
    assert_eq!(creation_tables, all, "every table is declared at creation");
    let boundaries =
        |recs: &[(u64, Record)]| recs.iter().filter(|(_, r)| *r == Record::Commit).count();
    assert_eq!(boundaries(&before), 1, "creation is one transaction");

    let n = before.len();
    commit(&e, vec![add(&e, "a.txt", 3)]);
    let after = outbox(e.repo.database());
    assert_eq!(boundaries(&after), 2);
    // The acceptance's records: puts into its tables, no declaration of a
    // table already declared, one boundary last.
    let tail = &after[n..];
    assert!(tail
        .iter()
        .all(|(_, r)| !matches!(r, Record::Declare { .. })));
    for t in ["history", "commits", "operations", "snapshot_nodes", "meta"] {
        assert!(
            tail.iter()
                .any(|(_, r)| matches!(r, Record::Put { name, .. } if name == t)),
            "acceptance records puts into {t}"
        );
    }
    assert_eq!(tail.last().unwrap().1, Record::Commit);

    // The catalog is journaled too: creating a repository records its
    // reservation and its ready state as two transactions.
    let catalog = Database::open(e.dir.path().join("data/catalog.redb"));
    // (The data root holds the catalog open; read it through a copy.)
    drop(catalog);
    let copy = e.dir.path().join("catalog-copy.redb");
    std::fs::copy(e.dir.path().join("data/catalog.redb"), &copy).unwrap();
    let cat = Database::open(&copy).unwrap();
    let recs = outbox(&cat);
    assert_eq!(boundaries(&recs), 3, "creation, reservation, ready");
    assert!(recs
        .iter()
        .any(|(_, r)| matches!(r, Record::Put { name, .. } if name == "repo_names")));
}

#[test]
fn an_aborted_or_dropped_transaction_exposes_neither_rows_nor_records() {
    let e = env();
    let db = e.repo.database();
    let before = outbox(db);
    let rows = journal::dump_rows(db).unwrap();
    for abort in [true, false] {
        let tx = journal::begin(db).unwrap();
        {
            let mut t = tx.open_table(scribe_metadata::tables::LOCKS).unwrap();
            t.insert("x", b"y".as_slice()).unwrap();
            let mut n = tx
                .open_table(scribe_metadata::tables::CHANGE_NOTES)
                .unwrap();
            n.insert(b"k".as_slice(), b"v".as_slice()).unwrap();
        }
        if abort {
            tx.abort().unwrap();
        } else {
            drop(tx);
        }
        assert_eq!(outbox(db), before);
        assert_eq!(journal::dump_rows(db).unwrap(), rows);
    }
    // A transaction that changes nothing adds no boundary.
    let tx = journal::begin(db).unwrap();
    tx.open_table(scribe_metadata::tables::LOCKS).unwrap();
    tx.commit().unwrap();
    assert_eq!(outbox(db), before);
}

/// A put record encoded ahead (a streamed preparation's producer encodes
/// them beside the writer) is written with its row exactly as `insert`
/// records one; a record of another row, value or table is refused and the
/// transaction, dropped, leaves neither rows nor records.
#[test]
fn a_put_record_encoded_ahead_is_written_only_with_its_own_row() {
    use scribe_metadata::journal::PutRecord;
    let e = env();
    let db = e.repo.database();
    let before = outbox(db);
    let rows = journal::dump_rows(db).unwrap();
    for (name, key, value) in [
        ("locks", "y", b"v".as_slice()),
        ("locks", "x", b"w".as_slice()),
        ("change_notes", "x", b"v".as_slice()),
    ] {
        let tx = journal::begin(db).unwrap();
        {
            let mut t = tx.open_table(scribe_metadata::tables::LOCKS).unwrap();
            let rec = PutRecord::encode(name, key.as_bytes(), value).unwrap();
            let r = t
                .insert_encoded("x", b"v".as_slice(), rec)
                .map(|old| old.is_some());
            assert!(matches!(r, Err(MetadataError::Gate(_))), "{r:?}");
        }
        drop(tx);
        assert_eq!(outbox(db), before);
        assert_eq!(journal::dump_rows(db).unwrap(), rows);
    }
    let tx = journal::begin(db).unwrap();
    {
        let mut t = tx.open_table(scribe_metadata::tables::LOCKS).unwrap();
        let rec = PutRecord::encode("locks", b"x", b"v").unwrap();
        assert!(t
            .insert_encoded("x", b"v".as_slice(), rec)
            .unwrap()
            .is_none());
    }
    tx.commit().unwrap();
    let after = outbox(db);
    assert_eq!(
        after[before.len()..]
            .iter()
            .map(|(_, r)| r.clone())
            .collect::<Vec<_>>(),
        vec![
            Record::Put {
                name: "locks".into(),
                key: b"x".to_vec(),
                value: b"v".to_vec(),
            },
            Record::Commit,
        ]
    );
}

/// Replace `from` by `to` in the text file at `path`.
fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{}: {text}", path.display());
    std::fs::write(path, text.replace(from, to)).unwrap();
}

fn assert_profile_missing(r: Result<impl Sized, MetadataError>, what: &str) {
    match r {
        Err(e @ MetadataError::RecoveryProfileMissing { .. }) => {
            assert_eq!(e.code(), ErrorCode::UnsupportedVersion);
            let text = e.to_string();
            assert!(text.contains(what), "{text}");
            assert!(text.contains("no converter"), "{text}");
        }
        Err(other) => panic!("expected RecoveryProfileMissing, got {other}"),
        Ok(_) => panic!("a store without the recovery profile was opened"),
    }
}

#[test]
fn stores_without_the_recovery_profile_are_refused_without_conversion() {
    // New descriptors declare the feature.
    let e = env();
    let data = e.dir.path().join("data");
    let repo_dir = e.repo.dir().to_owned();
    for d in [&data, &repo_dir] {
        let text = std::fs::read_to_string(d.join("SCRIBE_FORMAT")).unwrap();
        assert!(
            text.contains("required-features = atomic-publication-v2,recovery-journal-v2\n"),
            "{text}"
        );
    }
    let Env {
        root, repo, dir, ..
    } = e;
    drop(repo);
    drop(root);

    // A data root descriptor of an earlier build.
    let root_desc = data.join("SCRIBE_FORMAT");
    let original = std::fs::read_to_string(&root_desc).unwrap();
    edit(&root_desc, ",recovery-journal-v2", "");
    assert_profile_missing(DataRoot::open(&data), "recovery-journal-v2");
    std::fs::write(&root_desc, &original).unwrap();

    // A catalog without the recovery tables (an earlier build's file).
    let cat_path = data.join("catalog.redb");
    let cat_bytes = std::fs::read(&cat_path).unwrap();
    {
        let db = Database::open(&cat_path).unwrap();
        let tx = db.begin_write().unwrap();
        tx.delete_table(journal::TYPES).unwrap();
        tx.commit().unwrap();
    }
    assert_profile_missing(DataRoot::open(&data), rj::TABLE_TYPES);
    std::fs::write(&cat_path, &cat_bytes).unwrap();

    // A repository descriptor without the feature, then a metadata.redb
    // without the tables: refused, and nothing written to the database.
    let repo_desc = repo_dir.join("SCRIBE_FORMAT");
    let repo_original = std::fs::read_to_string(&repo_desc).unwrap();
    edit(&repo_desc, ",recovery-journal-v2", "");
    let objects = || -> scribe_metadata::Objects {
        scribe_metadata::DirObjects::open(&repo_dir.join("objects/interim")).unwrap()
    };
    assert_profile_missing(
        Repository::open_dir(&repo_dir, objects()),
        "recovery-journal-v2",
    );
    std::fs::write(&repo_desc, &repo_original).unwrap();
    let meta_path = repo_dir.join("metadata.redb");
    {
        let db = Database::open(&meta_path).unwrap();
        let tx = db.begin_write().unwrap();
        tx.delete_table(journal::IDENTITY).unwrap();
        tx.commit().unwrap();
    }
    assert_profile_missing(
        Repository::open_dir(&repo_dir, objects()),
        rj::TABLE_IDENTITY,
    );
    // No implicit initialization: the table is still absent.
    let db = Database::open(&meta_path).unwrap();
    let tx = db.begin_read().unwrap();
    assert!(tx
        .list_tables()
        .unwrap()
        .all(|t| t.name() != rj::TABLE_IDENTITY));
    drop(dir);
}

fn export_all(db: &Database, dir: &Path, name: &str, after: u64) -> PathBuf {
    let p = dir.join(name);
    journal::export_segment(db, after, &p).unwrap();
    p
}

#[test]
fn a_repository_database_rebuilt_from_its_journal_matches_row_by_row() {
    let e = env();
    workload(&e);
    assert_doctor_clean(&e.repo);
    let db = e.repo.database();
    let recs = outbox(db);
    let end = recs.last().unwrap().0;
    // Split the journal at a commit boundary in the middle.
    let mid = recs
        .iter()
        .filter(|(_, r)| *r == Record::Commit)
        .map(|(s, _)| *s)
        .nth(3)
        .unwrap();
    let out = tempfile::tempdir().unwrap();
    let first = out.path().join("a.scrj");
    let h1 = journal::export_segment(db, 0, &first).unwrap();
    // (A full export, then the second half separately.)
    assert_eq!((h1.after, h1.end), (0, end));
    let head = out.path().join("head.scrj");
    let second = out.path().join("tail.scrj");
    {
        // The first half: export everything and cut at `mid` by re-encoding.
        let (h, records) = rj::decode_segment(&std::fs::read(&first).unwrap()).unwrap();
        let pairs: Vec<(u64, Vec<u8>)> = records
            .iter()
            .filter(|(s, _)| *s <= mid)
            .map(|(s, r)| (*s, r.encode().unwrap()))
            .collect();
        let bytes = rj::encode_segment(rj::SegmentHeader { end: mid, ..h }, &pairs).unwrap();
        std::fs::write(&head, bytes).unwrap();
    }
    let h2 = journal::export_segment(db, mid, &second).unwrap();
    assert_eq!((h2.after, h2.end), (mid, end));
    // A cursor that is not a commit boundary is refused.
    let err = journal::export_segment(db, mid + 1, &out.path().join("x.scrj")).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Usage, "{err}");
    assert!(!out.path().join("x.scrj").exists());

    let original = journal::dump_rows(db).unwrap();
    let profile = {
        let tx = db.begin_read().unwrap();
        journal::check_profile(&tx, Path::new("metadata.redb")).unwrap()
    };
    for (name, segments) in [
        ("whole.redb", vec![first.clone()]),
        ("halves.redb", vec![head.clone(), second.clone()]),
    ] {
        let target = out.path().join(name);
        let done = journal::replay(&segments, &target, Some(profile.identity)).unwrap();
        assert_eq!(done.end, end);
        assert!(!journal::quarantine_path(&target).exists());
        let rebuilt = Database::open(&target).unwrap();
        let rows = journal::dump_rows(&rebuilt).unwrap();
        // Every table, every row, byte for byte.
        assert_eq!(
            rows.keys().collect::<Vec<_>>(),
            original.keys().collect::<Vec<_>>()
        );
        for (table, want) in &original {
            assert_eq!(&rows[table], want, "table {table}");
        }
        assert!(original["history"].len() > 80 && !original["locks"].is_empty());
        // Every table of the original is journaled.
        let tx = db.begin_read().unwrap();
        let names: BTreeMap<String, ()> = tx
            .list_tables()
            .unwrap()
            .map(|t| (t.name().to_owned(), ()))
            .filter(|(n, _)| !rj::RESERVED_TABLES.contains(&n.as_str()))
            .collect();
        assert_eq!(
            names.keys().collect::<Vec<_>>(),
            rows.keys().collect::<Vec<_>>()
        );
        // The rebuilt database continues the same journal: same identity,
        // end and floor at the replayed end, an empty outbox.
        let tx = rebuilt.begin_read().unwrap();
        let p = journal::check_profile(&tx, &target).unwrap();
        assert_eq!(p.identity, profile.identity);
        assert_eq!((p.end, p.floor), (end, end));
        assert_eq!(tx.open_table(RECORDS).unwrap().len().unwrap(), 0);
    }

    // The rebuilt file serves: put it in place of a copy of the repository
    // and open it; doctor is clean and the history reads the same.
    let Env {
        root, repo, dir, ..
    } = e;
    let repo_dir = repo.dir().to_owned();
    let head_before = repo.head().unwrap();
    drop(repo);
    drop(root);
    std::fs::remove_file(repo_dir.join("metadata.redb")).unwrap();
    std::fs::copy(
        out.path().join("halves.redb"),
        repo_dir.join("metadata.redb"),
    )
    .unwrap();
    let root = reopen(&dir.path().join("data"));
    let id = root.list_repositories().unwrap()[0].id;
    let repo = root.open_repository(id).unwrap();
    assert_eq!(repo.head().unwrap(), head_before);
    assert_doctor_clean(&repo);
    // New writes continue the journal after the replayed end.
    let before = outbox(repo.database());
    assert!(before.is_empty());
    repo.add_change_note(1, "ada", "after rebuild").unwrap();
    let next = outbox(repo.database());
    assert_eq!(next.first().unwrap().0, end + 1);
}

/// Run replay into a fresh target and return its refusal; the target and
/// its quarantine file must not exist afterwards.
fn refused(segments: &[PathBuf], expect: Option<[u8; 16]>) -> MetadataError {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("rebuilt.redb");
    let err = journal::replay(segments, &target, expect).unwrap_err();
    assert!(!target.exists(), "a refused replay published {err}");
    assert!(
        !journal::quarantine_path(&target).exists(),
        "quarantine left after {err}"
    );
    err
}

fn source(err: &MetadataError) -> &RecoveryError {
    match err {
        MetadataError::Recovery { source, .. } => source,
        other => panic!("expected a recovery refusal, got {other}"),
    }
}

#[test]
fn replay_refuses_gaps_identities_incomplete_corrupt_and_trailing_input() {
    let e = env();
    commit(&e, vec![add(&e, "a", 1)]);
    let db = e.repo.database();
    let out = tempfile::tempdir().unwrap();
    let recs = outbox(db);
    let bounds: Vec<u64> = recs
        .iter()
        .filter(|(_, r)| *r == Record::Commit)
        .map(|(s, _)| *s)
        .collect();
    let (b1, end) = (bounds[0], *bounds.last().unwrap());
    let whole = export_all(db, out.path(), "whole.scrj", 0);
    let tail = export_all(db, out.path(), "tail.scrj", b1);
    let head = out.path().join("head.scrj");
    {
        let (h, records) = rj::decode_segment(&std::fs::read(&whole).unwrap()).unwrap();
        let pairs: Vec<(u64, Vec<u8>)> = records
            .iter()
            .filter(|(s, _)| *s <= b1)
            .map(|(s, r)| (*s, r.encode().unwrap()))
            .collect();
        std::fs::write(
            &head,
            rj::encode_segment(rj::SegmentHeader { end: b1, ..h }, &pairs).unwrap(),
        )
        .unwrap();
    }
    let identity = {
        let tx = db.begin_read().unwrap();
        journal::check_profile(&tx, Path::new("m"))
            .unwrap()
            .identity
    };

    // The valid inputs replay (so each refusal below is about its defect).
    let ok = tempfile::tempdir().unwrap();
    journal::replay(
        &[head.clone(), tail.clone()],
        &ok.path().join("t.redb"),
        Some(identity),
    )
    .unwrap();

    // A gap: the tail alone does not start at 0.
    let err = refused(std::slice::from_ref(&tail), None);
    assert_eq!(
        *source(&err),
        RecoveryError::SegmentGap {
            expected: 0,
            found: b1
        }
    );
    assert_eq!(err.code(), ErrorCode::Corrupt);
    assert!(err.to_string().contains("tail.scrj"), "{err}");
    // A repeated nonempty segment.
    let err = refused(&[head.clone(), head.clone(), tail.clone()], None);
    assert!(
        matches!(source(&err), RecoveryError::SegmentGap { .. }),
        "{err}"
    );
    // Overlap: the whole journal followed by its tail.
    let err = refused(&[whole.clone(), tail.clone()], None);
    assert!(
        matches!(source(&err), RecoveryError::SegmentGap { expected, found } if *expected == end && *found == b1)
    );
    // Wrong identity: expected another database, or segments of two.
    let err = refused(std::slice::from_ref(&whole), Some([9; 16]));
    assert!(
        matches!(source(&err), RecoveryError::IdentityMismatch { .. }),
        "{err}"
    );
    let other = env();
    let foreign = export_all(other.repo.database(), out.path(), "foreign.scrj", 0);
    let _ = foreign;
    let foreign_tail = {
        commit(&other, vec![add(&other, "z", 2)]);
        let recs = outbox(other.repo.database());
        let b = recs.iter().find(|(_, r)| *r == Record::Commit).unwrap().0;
        export_all(other.repo.database(), out.path(), "foreign-tail.scrj", b)
    };
    let _ = foreign_tail;
    let err = refused(
        &[
            head.clone(),
            export_all(other.repo.database(), out.path(), "f2.scrj", b1),
        ],
        None,
    );
    assert!(
        matches!(source(&err), RecoveryError::IdentityMismatch { .. }),
        "{err}"
    );

    // An incomplete transaction: a segment cut inside a transaction (the
    // encoder refuses to write one; these bytes are assembled by hand).
    let (h, records) = rj::decode_segment(&std::fs::read(&whole).unwrap()).unwrap();
    let cut = b1 + 2;
    let mut bytes = Vec::new();
    bytes.extend_from_slice(b"SCRJ");
    bytes.extend_from_slice(&1u16.to_le_bytes());
    bytes.extend_from_slice(&h.identity);
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes.extend_from_slice(&cut.to_le_bytes());
    for (s, r) in records.iter().filter(|(s, _)| *s <= cut) {
        let r = r.encode().unwrap();
        bytes.extend_from_slice(&s.to_le_bytes());
        bytes.extend_from_slice(&(r.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&r);
    }
    let d = blake3::hash(&bytes);
    bytes.extend_from_slice(d.as_bytes());
    let incomplete = out.path().join("incomplete.scrj");
    std::fs::write(&incomplete, &bytes).unwrap();
    let err = refused(&[incomplete], None);
    assert_eq!(
        *source(&err),
        RecoveryError::IncompleteTransaction { sequence: cut }
    );

    // Corruption: one flipped bit in the middle; the refusal names the file
    // and a byte offset.
    let mut flipped = std::fs::read(&whole).unwrap();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x10;
    let corrupt = out.path().join("corrupt.scrj");
    std::fs::write(&corrupt, &flipped).unwrap();
    let err = refused(&[corrupt], None);
    assert!(err.to_string().contains("corrupt.scrj: at byte"), "{err}");
    // Truncated.
    let whole_bytes = std::fs::read(&whole).unwrap();
    let truncated = out.path().join("truncated.scrj");
    std::fs::write(&truncated, &whole_bytes[..whole_bytes.len() - 1]).unwrap();
    let err = refused(&[truncated], None);
    assert!(
        matches!(
            source(&err),
            RecoveryError::Format(scribe_format::FormatError::Truncated { .. })
        ),
        "{err}"
    );
    // Trailing data after the digest.
    let mut longer = whole_bytes.clone();
    longer.extend_from_slice(b"\0");
    let trailing = out.path().join("trailing.scrj");
    std::fs::write(&trailing, &longer).unwrap();
    let err = refused(&[trailing], None);
    assert!(
        matches!(
            source(&err),
            RecoveryError::Format(scribe_format::FormatError::TrailingBytes { .. })
        ),
        "{err}"
    );
    // An existing target is never replaced.
    let target = ok.path().join("t.redb");
    let err = journal::replay(std::slice::from_ref(&whole), &target, None).unwrap_err();
    assert_eq!(err.code(), ErrorCode::AlreadyExists);
}

#[test]
fn export_refuses_a_missing_sequence_and_a_malformed_record() {
    let e = env();
    commit(&e, vec![add(&e, "a", 1)]);
    let out = tempfile::tempdir().unwrap();
    let Env {
        root, repo, dir, ..
    } = e;
    let path = repo.dir().join("metadata.redb");
    drop(repo);
    drop(root);
    let db = Database::open(&path).unwrap();
    // A malformed record.
    {
        let tx = db.begin_write().unwrap();
        tx.open_table(RECORDS)
            .unwrap()
            .insert(3, [1u8, 9].as_slice())
            .unwrap();
        tx.commit().unwrap();
    }
    let to = out.path().join("s.scrj");
    let err = journal::export_segment(&db, 0, &to).unwrap_err();
    assert!(
        matches!(source(&err), RecoveryError::UnknownOpcode(9)),
        "{err}"
    );
    assert!(!to.exists());
    // A missing sequence.
    {
        let tx = db.begin_write().unwrap();
        tx.open_table(RECORDS).unwrap().remove(3).unwrap();
        tx.commit().unwrap();
    }
    let err = journal::export_segment(&db, 0, &to).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Corrupt, "{err}");
    assert!(err.to_string().contains("sequence 3 is missing"), "{err}");
    assert!(!to.exists());
    assert!(!out.path().join("s.scrj.tmp").exists());
    drop(dir);
}
