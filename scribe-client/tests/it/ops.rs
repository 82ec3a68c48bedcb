//! Every operation through both transports.

use scribe_client::ClientError;
use scribe_format::wire::message as m;
use scribe_format::{ErrorCode, ObjectId, ObjectKind, OperationId, WorkspaceId};
use scribe_server::service::pins;

use super::support::*;

fn code(e: ClientError) -> ErrorCode {
    e.code()
}

#[test]
fn status_and_repositories() {
    both(|env| {
        let mut c = env.client();
        let s = c.status().unwrap();
        assert_eq!(s.schema, "scribe.rpc.v1");
        assert_eq!(s.repositories, 1);
        let created = c.repo_create("film").unwrap();
        assert_eq!(created.name, "film");
        assert_eq!(created.head, 0);
        let names: Vec<String> = c.repo_list().unwrap().into_iter().map(|r| r.name).collect();
        assert_eq!(names.len(), 2);
        assert!(names.contains(&"film".to_string()) && names.contains(&REPO.to_string()));
        assert_eq!(
            code(c.repo_create("film").unwrap_err()),
            ErrorCode::AlreadyExists
        );
        assert_eq!(
            code(c.repo_create("a/b").unwrap_err()),
            ErrorCode::Malformed
        );
        // The client stays usable after a refusal.
        assert_eq!(c.status().unwrap().repositories, 2);
    });
}

#[test]
fn workspace_register_is_idempotent_and_retire_fences() {
    both(|env| {
        let mut c = env.client();
        let ws = WorkspaceId([7; 16]);
        let a = register(&mut c, ws);
        let b = register(&mut c, ws);
        assert_eq!(
            a.created_ms, b.created_ms,
            "a retried registration registers nothing new"
        );
        assert_eq!(a.branch_name, "main");
        assert_eq!(c.workspace_list(REPO).unwrap().len(), 1);
        c.workspace_retire(REPO, ws).unwrap();
        // A retried retirement returns the recorded outcome.
        c.workspace_retire(REPO, ws).unwrap();
        assert!(c.workspace_list(REPO).unwrap().is_empty());
        let again = c.workspace_register(m::WorkspaceRegister {
            repo: REPO.into(),
            workspace: ws,
            branch: String::new(),
            view: vec![],
            label: String::new(),
            tags: vec![],
        });
        assert_eq!(code(again.unwrap_err()), ErrorCode::WorkspaceRetired);
        // A retired workspace cannot pin uploads.
        let put = c.object_put(m::ObjectPut {
            repo: REPO.into(),
            operation: OperationId([1; 16]),
            workspace: ws,
            id: ObjectId::chunk(scribe_format::ChunkId::of(b"x")),
            total_len: 1,
            offset: 0,
            data: scribe_format::wire::Bytes(b"x".to_vec()),
        });
        assert_eq!(code(put.unwrap_err()), ErrorCode::WorkspaceRetired);
        let unknown = c.workspace_list("nope").unwrap_err();
        assert_eq!(code(unknown), ErrorCode::NotFound);
    });
}

#[test]
fn objects_move_both_ways_in_bounded_pieces() {
    both(|env| {
        let mut c = env.client();
        let ws = WorkspaceId([1; 16]);
        register(&mut c, ws);
        let op = OperationId([2; 16]);
        // 9 MiB: three pieces of at most 4 MiB.
        let big: Vec<u8> = (0..9 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        let f = file(&big);
        let ids: Vec<ObjectId> = f.objects.iter().map(|(id, _)| *id).collect();
        assert_eq!(c.objects_missing(REPO, &ids).unwrap(), ids);
        let r = c
            .upload_missing(
                REPO,
                ws,
                op,
                f.objects.iter().map(|(id, b)| (*id, b.as_slice())),
            )
            .unwrap();
        assert_eq!(r.sent, 2);
        assert!(c.objects_missing(REPO, &ids).unwrap().is_empty());
        // Offering again sends nothing.
        let r = c
            .upload_missing(
                REPO,
                ws,
                op,
                f.objects.iter().map(|(id, b)| (*id, b.as_slice())),
            )
            .unwrap();
        assert_eq!(r.sent, 0);
        assert_eq!(c.download(REPO, ids[0]).unwrap(), big);
        let mut sink = Vec::new();
        assert_eq!(
            c.download_to(REPO, ids[1], &mut sink).unwrap(),
            f.objects[1].1.len() as u64
        );
        assert_eq!(sink, f.objects[1].1);
        // Pins were written for both objects under the operation.
        let repo = env.service().root().open_repository_by_name(REPO).unwrap();
        assert_eq!(pins::count(&repo, ws, op).unwrap(), 2);
        assert_eq!(pins::active(&repo).unwrap().len(), 2);
        let absent = ObjectId::chunk(scribe_format::ChunkId::of(b"absent"));
        assert_eq!(
            code(c.download(REPO, absent).unwrap_err()),
            ErrorCode::NotFound
        );
        // Retirement makes the workspace's pins inactive.
        register(&mut c, ws);
        c.workspace_retire(REPO, ws).unwrap();
        assert!(pins::active(&repo).unwrap().is_empty());
    });
}

/// Regression: small objects used to cost one pin transaction and one
/// durable publication each (about 9 ms), so 2,000 small files took 37 s to
/// submit. They now travel in groups of at most 4 MiB.
#[test]
fn small_objects_upload_in_groups_with_their_pins() {
    both(|env| {
        let mut c = env.client();
        let ws = WorkspaceId([1; 16]);
        register(&mut c, ws);
        let op = OperationId([2; 16]);
        let files: Vec<File> = (0..600u32)
            .map(|i| file(&vec![(i % 251) as u8; 8 * 1024 + i as usize]))
            .collect();
        let objects: Vec<(ObjectId, Vec<u8>)> = files
            .iter()
            .flat_map(|f| f.objects.iter().cloned())
            .collect();
        let ids: Vec<ObjectId> = objects.iter().map(|(id, _)| *id).collect();
        let r = c
            .upload_missing(
                REPO,
                ws,
                op,
                objects.iter().map(|(id, b)| (*id, b.as_slice())),
            )
            .unwrap();
        assert_eq!(r.sent, ids.len());
        assert!(c.objects_missing(REPO, &ids).unwrap().is_empty());
        let repo = env.service().root().open_repository_by_name(REPO).unwrap();
        assert_eq!(pins::count(&repo, ws, op).unwrap(), ids.len());
        assert_eq!(c.download(REPO, ids[0]).unwrap(), objects[0].1);
        // A group with one wrong object stores none of it.
        let good = ObjectId::chunk(scribe_format::ChunkId::of(b"good"));
        let bad = ObjectId::chunk(scribe_format::ChunkId::of(b"bad"));
        let piece = |id, data: &[u8]| m::ObjectPiece {
            id,
            data: scribe_format::wire::Bytes(data.to_vec()),
        };
        let err = c
            .object_put_many(m::ObjectPutMany {
                repo: REPO.into(),
                operation: op,
                workspace: ws,
                objects: vec![piece(good, b"good"), piece(bad, b"not bad")],
            })
            .unwrap_err();
        assert_eq!(code(err), ErrorCode::Corrupt);
        assert_eq!(c.objects_missing(REPO, &[good]).unwrap(), vec![good]);
        // More than 4 MiB in one group is refused.
        let big = vec![0u8; 3 << 20];
        let id = ObjectId::chunk(scribe_format::ChunkId::of(&big));
        let err = c
            .object_put_many(m::ObjectPutMany {
                repo: REPO.into(),
                operation: op,
                workspace: ws,
                objects: vec![piece(id, &big), piece(id, &big)],
            })
            .unwrap_err();
        assert_eq!(code(err), ErrorCode::LimitExceeded);
    });
}

#[test]
fn uploads_refuse_wrong_bytes_and_out_of_order_pieces() {
    both(|env| {
        let mut c = env.client();
        let ws = WorkspaceId([1; 16]);
        register(&mut c, ws);
        let op = OperationId([2; 16]);
        let id = ObjectId::chunk(scribe_format::ChunkId::of(b"hello"));
        let put = |c: &mut scribe_client::Client, offset: u64, data: &[u8], total: u64| {
            c.object_put(m::ObjectPut {
                repo: REPO.into(),
                operation: op,
                workspace: ws,
                id,
                total_len: total,
                offset,
                data: scribe_format::wire::Bytes(data.to_vec()),
            })
        };
        // Bytes that do not hash to the id are refused and not stored.
        assert_eq!(
            code(put(&mut c, 0, b"HELLO", 5).unwrap_err()),
            ErrorCode::Corrupt
        );
        assert_eq!(c.objects_missing(REPO, &[id]).unwrap(), vec![id]);
        // A piece that does not continue the upload is refused.
        assert!(!put(&mut c, 0, b"he", 5).unwrap().complete);
        assert_eq!(
            code(put(&mut c, 3, b"lo", 5).unwrap_err()),
            ErrorCode::Malformed
        );
        // Restarting from 0 works.
        assert!(!put(&mut c, 0, b"hel", 5).unwrap().complete);
        assert!(put(&mut c, 3, b"lo", 5).unwrap().complete);
        assert!(c.objects_missing(REPO, &[id]).unwrap().is_empty());
        // A declared length above the chunk limit is refused before buffering.
        assert_eq!(
            code(put(&mut c, 0, b"x", 1 << 40).unwrap_err()),
            ErrorCode::LimitExceeded
        );
    });
}

#[test]
fn submit_answers_and_retries_return_the_recorded_outcome() {
    both(|env| {
        let mut c = env.client();
        let ws = WorkspaceId([1; 16]);
        register(&mut c, ws);
        let op = OperationId([9; 16]);
        let ch = change(&[
            ("art/hero.psd", Some(b"pixels"), 0),
            ("readme.txt", Some(b"hi"), 0),
        ]);
        let o = upload_and_submit(&mut c, ws, op, &ch, "first");
        let n = accepted(&o);
        // Same operation id, same intent: the same outcome, nothing new.
        let again = c.submit(submit_req(ws, op, ch.id, "first")).unwrap();
        assert_eq!(again, o);
        assert_eq!(c.operation_outcome(REPO, op).unwrap(), Some(o.clone()));
        // Same id, a change set never uploaded: still the recorded intent check.
        let never = change(&[("never.txt", Some(b"never"), 0)]);
        let r = c.submit(submit_req(ws, op, never.id, "first")).unwrap();
        assert_eq!(r.code, ErrorCode::OperationIntentMismatch.number());
        // Same id, another intent.
        let other = c
            .submit(submit_req(ws, op, ch.id, "another message"))
            .unwrap();
        assert_eq!(other.code, ErrorCode::OperationIntentMismatch.number());
        assert_eq!(c.repo_list().unwrap()[0].head, n);
        // The final outcome released the intent's pins.
        let repo = env.service().root().open_repository_by_name(REPO).unwrap();
        assert_eq!(pins::count(&repo, ws, op).unwrap(), 0);
        // A finished intent cannot pin again.
        let late = c.upload_missing(
            REPO,
            ws,
            op,
            std::iter::once((
                ObjectId::chunk(scribe_format::ChunkId::of(b"late")),
                &b"late"[..],
            )),
        );
        assert_eq!(late.unwrap_err().code(), ErrorCode::AlreadyExists);
        // A stale base is refused and recorded.
        let op2 = OperationId([10; 16]);
        let stale = change(&[("readme.txt", Some(b"ho"), n + 5)]);
        let r = upload_and_submit(&mut c, ws, op2, &stale, "stale");
        assert_ne!(r.code, 0);
        assert_eq!(r.change, 0);
        assert_eq!(c.operation_outcome(REPO, op2).unwrap(), Some(r));
        assert_eq!(
            c.operation_outcome(REPO, OperationId([77; 16])).unwrap(),
            None
        );
        // A change set never uploaded: refused, not recorded.
        let op3 = OperationId([11; 16]);
        let ghost = change(&[("ghost.txt", Some(b"boo"), 0)]);
        let r = c.submit(submit_req(ws, op3, ghost.id, "ghost")).unwrap();
        assert_eq!(r.code, ErrorCode::MissingObjects.number());
        assert_eq!(c.operation_outcome(REPO, op3).unwrap(), None);
        // Manifests missing: the metadata layer refuses with missing_objects.
        let cs_only: Vec<_> = ghost
            .objects
            .iter()
            .filter(|(id, _)| id.kind == ObjectKind::ChangeSet)
            .map(|(id, b)| (*id, b.as_slice()))
            .collect();
        c.upload_missing(REPO, ws, op3, cs_only).unwrap();
        let r = c.submit(submit_req(ws, op3, ghost.id, "ghost")).unwrap();
        assert_eq!(r.code, ErrorCode::MissingObjects.number());
    });
}

#[test]
fn read_side_pages_through_trees_deltas_history_log_and_describe() {
    both(|env| {
        let mut c = env.client();
        let ws = WorkspaceId([1; 16]);
        register(&mut c, ws);
        let names: Vec<String> = (0..10).map(|i| format!("dir/f{i:02}.bin")).collect();
        let mut entries: Vec<(&str, Option<&[u8]>, u64)> = names
            .iter()
            .map(|n| (n.as_str(), Some(n.as_bytes()), 0))
            .collect();
        entries.push(("top.txt", Some(b"top"), 0));
        let c1 = accepted(&upload_and_submit(
            &mut c,
            ws,
            OperationId([1; 16]),
            &change(&entries),
            "one",
        ));
        let c2 = accepted(&upload_and_submit(
            &mut c,
            ws,
            OperationId([2; 16]),
            &change(&[("top.txt", Some(b"top v2"), c1), ("dir/f00.bin", None, c1)]),
            "two",
        ));
        // Stat at the head and at the first change.
        let st = c
            .stat(m::Stat {
                repo: REPO.into(),
                branch: main_branch(),
                change: 0,
                path: "top.txt".into(),
            })
            .unwrap();
        assert_eq!(st.change, c2);
        assert_eq!(st.entry.as_ref().unwrap().change, c2);
        assert_eq!(st.entry.unwrap().state.unwrap().size, 6);
        let old = c
            .stat(m::Stat {
                repo: REPO.into(),
                branch: main_branch(),
                change: c1,
                path: "dir/f00.bin".into(),
            })
            .unwrap();
        assert!(old.entry.is_some());
        let gone = c
            .stat(m::Stat {
                repo: REPO.into(),
                branch: main_branch(),
                change: 0,
                path: "dir/f00.bin".into(),
            })
            .unwrap();
        assert!(gone.entry.is_none());
        // Non-recursive root listing: one file and one directory.
        let root = c
            .list(m::List {
                repo: REPO.into(),
                branch: main_branch(),
                change: 0,
                prefix: String::new(),
                recursive: false,
                after: String::new(),
                limit: 0,
            })
            .unwrap();
        assert_eq!(root.directories, vec!["dir".to_string()]);
        assert_eq!(root.entries.len(), 1);
        assert_eq!(root.next, None);
        // Recursive listing in pages of 4.
        let mut seen = Vec::new();
        let mut after = String::new();
        loop {
            let p = c
                .list(m::List {
                    repo: REPO.into(),
                    branch: main_branch(),
                    change: 0,
                    prefix: "dir".into(),
                    recursive: true,
                    after: after.clone(),
                    limit: 4,
                })
                .unwrap();
            assert!(p.entries.len() <= 4);
            seen.extend(p.entries.into_iter().map(|e| e.path));
            match p.next {
                Some(n) => after = n,
                None => break,
            }
        }
        assert_eq!(seen, names[1..].to_vec());
        // Delta from c1 to the head, in pages of 1: the tombstone and the edit.
        let mut delta = Vec::new();
        let mut after = String::new();
        loop {
            let p = c
                .delta(m::Delta {
                    repo: REPO.into(),
                    branch: main_branch(),
                    from: c1,
                    to: 0,
                    after: after.clone(),
                    limit: 1,
                })
                .unwrap();
            assert_eq!(p.to, c2);
            delta.extend(p.entries);
            match p.next {
                Some(n) => after = n,
                None => break,
            }
        }
        let paths: Vec<(&str, bool)> = delta
            .iter()
            .map(|e| (e.path.as_str(), e.state.is_some()))
            .collect();
        assert_eq!(paths, vec![("dir/f00.bin", false), ("top.txt", true)]);
        let full = c
            .delta(m::Delta {
                repo: REPO.into(),
                branch: main_branch(),
                from: 0,
                to: 0,
                after: String::new(),
                limit: 0,
            })
            .unwrap();
        assert_eq!(full.entries.len(), 11);
        // History of top.txt, newest first, one per page.
        let h = c
            .history(m::History {
                repo: REPO.into(),
                branch: main_branch(),
                path: "top.txt".into(),
                before: 0,
                limit: 1,
            })
            .unwrap();
        assert_eq!(h.entries.len(), 1);
        assert_eq!(h.entries[0].change, c2);
        assert_eq!(h.entries[0].action, 2);
        assert_eq!(h.next, c2);
        let h2 = c
            .history(m::History {
                repo: REPO.into(),
                branch: main_branch(),
                path: "top.txt".into(),
                before: h.next,
                limit: 1,
            })
            .unwrap();
        assert_eq!(h2.entries[0].change, c1);
        assert_eq!(h2.next, 0);
        // Log newest first.
        let log = c
            .log(m::Log {
                repo: REPO.into(),
                branch: main_branch(),
                before: 0,
                limit: 0,
            })
            .unwrap();
        let changes: Vec<u64> = log.commits.iter().map(|s| s.change).collect();
        assert_eq!(changes, vec![c2, c1]);
        assert_eq!(log.commits[0].message.0, "two");
        assert_eq!(log.commits[0].author, "ada");
        assert_eq!(log.next, 0);
        let page = c
            .log(m::Log {
                repo: REPO.into(),
                branch: main_branch(),
                before: 0,
                limit: 1,
            })
            .unwrap();
        assert_eq!(page.next, c2);
        // Describe the second change in pages of 1.
        let d = c
            .describe(m::Describe {
                repo: REPO.into(),
                change: c2,
                after: String::new(),
                limit: 1,
            })
            .unwrap();
        assert_eq!(d.commit.change, c2);
        assert_eq!(d.entries.len(), 1);
        let next = d.next.clone().unwrap();
        let d2 = c
            .describe(m::Describe {
                repo: REPO.into(),
                change: c2,
                after: next,
                limit: 1,
            })
            .unwrap();
        assert_eq!(d2.next, None);
        let mut described: Vec<String> = d
            .entries
            .into_iter()
            .chain(d2.entries)
            .map(|e| e.path)
            .collect();
        described.sort();
        assert_eq!(
            described,
            vec!["dir/f00.bin".to_string(), "top.txt".to_string()]
        );
        let missing = c.describe(m::Describe {
            repo: REPO.into(),
            change: 99,
            after: String::new(),
            limit: 0,
        });
        assert_eq!(code(missing.unwrap_err()), ErrorCode::NotFound);
    });
}

#[test]
fn locks_acquire_release_list_and_refuse_others() {
    both(|env| {
        let mut c = env.client();
        let a = WorkspaceId([1; 16]);
        let b = WorkspaceId([2; 16]);
        register(&mut c, a);
        register(&mut c, b);
        let acquire = |c: &mut scribe_client::Client, ws, paths: &[&str]| {
            c.lock_acquire(m::LockAcquire {
                repo: REPO.into(),
                workspace: ws,
                branch: main_branch(),
                author: "ada".into(),
                paths: paths.iter().map(|p| p.to_string()).collect(),
            })
        };
        let got = acquire(&mut c, a, &["art/a.psd", "art/b.psd", "level.map"]).unwrap();
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|l| l.workspace == a));
        let refused = acquire(&mut c, b, &["art/a.psd"]).unwrap_err();
        assert_eq!(refused.code(), ErrorCode::LockedByOther);
        // Listing by prefix, paged.
        let p1 = c
            .lock_list(m::LockList {
                repo: REPO.into(),
                prefix: "art/".into(),
                after: String::new(),
                limit: 1,
            })
            .unwrap();
        assert_eq!(p1.locks.len(), 1);
        let p2 = c
            .lock_list(m::LockList {
                repo: REPO.into(),
                prefix: "art/".into(),
                after: p1.next.unwrap(),
                limit: 1,
            })
            .unwrap();
        assert_eq!(p2.locks.len(), 1);
        assert_eq!(p2.next, None);
        assert_ne!(p1.locks[0].path, p2.locks[0].path);
        // Another workspace cannot release them.
        let r = c.lock_release(m::LockRelease {
            repo: REPO.into(),
            workspace: b,
            paths: vec!["level.map".into()],
        });
        assert_eq!(r.unwrap_err().code(), ErrorCode::LockedByOther);
        let released = c
            .lock_release(m::LockRelease {
                repo: REPO.into(),
                workspace: a,
                paths: vec!["level.map".into()],
            })
            .unwrap();
        assert_eq!(released.len(), 1);
        assert_eq!(released[0].path, "level.map");
        let all = c
            .lock_list(m::LockList {
                repo: REPO.into(),
                prefix: String::new(),
                after: String::new(),
                limit: 0,
            })
            .unwrap();
        assert_eq!(all.locks.len(), 2);
        // A workspace that holds locks cannot retire.
        assert_eq!(
            c.workspace_retire(REPO, a).unwrap_err().code(),
            ErrorCode::Busy
        );
        let bad = acquire(&mut c, a, &["/abs"]).unwrap_err();
        assert_eq!(bad.code(), ErrorCode::InvalidPath);
    });
}

#[test]
fn lz4_frames_carry_the_same_operations() {
    let env = Env::new(Transport::Tcp);
    let mut c = env.client_with(&scribe_client::ClientOptions {
        lz4: true,
        ..Default::default()
    });
    assert!(c.lz4());
    let ws = WorkspaceId([1; 16]);
    register(&mut c, ws);
    let text = b"compressible ".repeat(10_000);
    let ch = change(&[("notes.txt", Some(&text), 0)]);
    accepted(&upload_and_submit(
        &mut c,
        ws,
        OperationId([3; 16]),
        &ch,
        "lz4",
    ));
    let manifest = ch
        .objects
        .iter()
        .find(|(id, _)| id.kind == ObjectKind::Chunk)
        .unwrap();
    assert_eq!(c.download(REPO, manifest.0).unwrap(), text);
}

#[test]
fn uploads_beyond_the_service_budget_are_refused_busy() {
    both(|env| {
        env.service().set_upload_budget(1 << 20);
        let mut c = env.client();
        let ws = WorkspaceId([1; 16]);
        register(&mut c, ws);
        let big = vec![7u8; 2 << 20];
        let f = file(&big);
        let e = c
            .upload_missing(
                REPO,
                ws,
                OperationId([1; 16]),
                f.objects.iter().map(|(id, b)| (*id, b.as_slice())),
            )
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::ServerBusy);
        // Small objects still go through, and the budget is returned after each.
        for i in 0..4u8 {
            let small = file(&[i; 300 << 10]);
            c.upload_missing(
                REPO,
                ws,
                OperationId([2; 16]),
                small.objects.iter().map(|(id, b)| (*id, b.as_slice())),
            )
            .unwrap();
        }
    });
}

/// The client library reaches the service the same way over every
/// transport, TLS and a separate server process included.
#[test]
fn a_submit_and_its_download_over_every_transport() {
    for t in Transport::ALL {
        let env = Env::new(t);
        let mut c = env.client();
        assert_eq!(
            c.is_in_process(),
            matches!(t, Transport::InProcess | Transport::Path),
            "{t:?}"
        );
        let ws = WorkspaceId([1; 16]);
        register(&mut c, ws);
        let content = noise(100_000, 9);
        let ch = change(&[("a.bin", Some(&content), 0)]);
        let n = accepted(&upload_and_submit(
            &mut c,
            ws,
            OperationId([1; 16]),
            &ch,
            "m",
        ));
        assert_eq!(n, 1, "{t:?}");
        let chunk = file(&content).objects[0].0;
        assert_eq!(c.download(REPO, chunk).unwrap(), content, "{t:?}");
    }
}

/// `SubmitInline`: the objects travel in the submission; an accepted change
/// publishes them (no upload pin), a refused, malformed or replayed one
/// stores none of them.
#[test]
fn submit_inline_publishes_its_objects_only_when_accepted() {
    both(|env| {
        let mut c = env.client();
        let ws = WorkspaceId([1; 16]);
        register(&mut c, ws);
        let piece = |(id, data): &(ObjectId, Vec<u8>)| m::ObjectPiece {
            id: *id,
            data: scribe_format::wire::Bytes(data.clone()),
        };
        let inline = |op, ch: &Change, objects: Vec<m::ObjectPiece>| {
            let s = submit_req(ws, op, ch.id, "inline");
            m::SubmitInline {
                repo: s.repo,
                operation: s.operation,
                workspace: s.workspace,
                branch: s.branch,
                change_set: s.change_set,
                author: s.author,
                message: s.message,
                keep_locks: s.keep_locks,
                timestamp_ms: s.timestamp_ms,
                objects,
            }
        };
        let ids = |ch: &Change| ch.objects.iter().map(|(id, _)| *id).collect::<Vec<_>>();
        let op = OperationId([21; 16]);
        let ch = change(&[("a.txt", Some(b"alpha"), 0), ("b.txt", Some(b"beta"), 0)]);
        assert_eq!(
            c.objects_missing(REPO, &ids(&ch)).unwrap().len(),
            ch.objects.len()
        );
        let o = c
            .submit_inline(inline(op, &ch, ch.objects.iter().map(piece).collect()))
            .unwrap();
        let n = accepted(&o);
        assert!(c.objects_missing(REPO, &ids(&ch)).unwrap().is_empty());
        for (id, bytes) in &ch.objects {
            assert_eq!(&c.download(REPO, *id).unwrap(), bytes);
        }
        let repo = env.service().root().open_repository_by_name(REPO).unwrap();
        assert_eq!(pins::count(&repo, ws, op).unwrap(), 0);
        // A retry answers the recorded outcome; so does a plain Submit.
        let again = c
            .submit_inline(inline(op, &ch, ch.objects.iter().map(piece).collect()))
            .unwrap();
        assert_eq!(again, o);
        assert_eq!(c.submit(submit_req(ws, op, ch.id, "inline")).unwrap(), o);
        assert_eq!(c.repo_list().unwrap()[0].head, n);

        // Refused (a stale base): recorded, and its objects are not stored.
        let op2 = OperationId([22; 16]);
        let stale = change(&[("a.txt", Some(b"stale edit"), n + 3)]);
        let r = c
            .submit_inline(inline(
                op2,
                &stale,
                stale.objects.iter().map(piece).collect(),
            ))
            .unwrap();
        assert_eq!(r.code, ErrorCode::BaseMismatch.number(), "{r:?}");
        assert_eq!(c.operation_outcome(REPO, op2).unwrap(), Some(r));
        assert_eq!(
            c.objects_missing(REPO, &ids(&stale)).unwrap().len(),
            stale.objects.len()
        );

        // Bytes that do not hash to their id: refused whole, not recorded.
        let op3 = OperationId([23; 16]);
        let bad = change(&[("c.txt", Some(b"gamma"), 0)]);
        let mut pieces: Vec<m::ObjectPiece> = bad.objects.iter().map(piece).collect();
        pieces[0].data.0.push(b'!');
        let err = c.submit_inline(inline(op3, &bad, pieces)).unwrap_err();
        assert_eq!(code(err), ErrorCode::Corrupt);
        assert_eq!(c.operation_outcome(REPO, op3).unwrap(), None);
        assert_eq!(
            c.objects_missing(REPO, &ids(&bad)).unwrap().len(),
            bad.objects.len()
        );

        // Without the change set object (and the server lacks it): refused
        // as missing, not recorded; without a chunk: refused by acceptance.
        let no_cs: Vec<m::ObjectPiece> = bad
            .objects
            .iter()
            .filter(|(id, _)| id.kind != ObjectKind::ChangeSet)
            .map(piece)
            .collect();
        let r = c.submit_inline(inline(op3, &bad, no_cs)).unwrap();
        assert_eq!(r.code, ErrorCode::MissingObjects.number());
        assert_eq!(c.operation_outcome(REPO, op3).unwrap(), None);
        let no_chunk: Vec<m::ObjectPiece> = bad
            .objects
            .iter()
            .filter(|(id, _)| id.kind != ObjectKind::Chunk)
            .map(piece)
            .collect();
        let r = c.submit_inline(inline(op3, &bad, no_chunk)).unwrap();
        assert_eq!(r.code, ErrorCode::MissingObjects.number(), "{r:?}");
        assert_eq!(
            c.objects_missing(REPO, &ids(&bad)).unwrap().len(),
            bad.objects.len()
        );

        // More than 4 MiB of objects in one submission is refused.
        let big = vec![7u8; 3 << 20];
        let id = ObjectId::chunk(scribe_format::ChunkId::of(&big));
        let op4 = OperationId([24; 16]);
        let mut two = inline(op4, &bad, vec![piece(&(id, big.clone()))]);
        two.objects.push(piece(&(id, big)));
        assert_eq!(
            code(c.submit_inline(two).unwrap_err()),
            ErrorCode::LimitExceeded
        );
        assert_eq!(c.repo_list().unwrap()[0].head, n);
    });
}
