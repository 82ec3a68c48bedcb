//! Tests for `scribe_format::wire`: handshake, frames, every message.

use proptest::prelude::*;
use scribe_format::wire::codec::{from_bytes, to_bytes};
use scribe_format::wire::frame::{self, check_frame_len, decode_frame_body};
use scribe_format::wire::handshake::{
    self as hs, Authenticated, HandshakeStatus, PrincipalKind, FLAG_CREDENTIAL, FLAG_LZ4,
    HANDSHAKE_LEN,
};
use scribe_format::wire::message::*;
use scribe_format::wire::{self, Answer, Bytes, Hello, Request, Response, Text};
use scribe_format::{
    BranchId, ChangeSetId, ChunkId, CommitId, ErrorCode, FileContentId, FormatError, ManifestId,
    ObjectId, ObjectKind, OperationId, RepositoryId, WorkspaceId,
};

use super::support::{assert_refuses_truncation_and_trailing, check_area, Golden};

fn entry(path: &str, live: bool) -> TreeEntry {
    TreeEntry {
        path: path.into(),
        change: 7,
        state: live.then_some(FileState {
            manifest: ManifestId([1; 32]),
            content: FileContentId([2; 32]),
            size: 3,
            mode: 1,
        }),
    }
}

fn summary() -> CommitSummary {
    CommitSummary {
        change: 9,
        commit: CommitId([4; 32]),
        branch: BranchId([5; 16]),
        parent: 8,
        workspace: WorkspaceId([6; 16]),
        operation: OperationId([7; 16]),
        author: "Ada".into(),
        message: Text("Hero: final pass ✓".into()),
        timestamp_ms: 1_700_000_000_000,
        entry_count: 2,
    }
}

fn lock() -> LockInfo {
    LockInfo {
        path: "art/hero.psd".into(),
        generation: 3,
        workspace: WorkspaceId([1; 16]),
        branch: BranchId([2; 16]),
        author: "ada".into(),
        acquired_ms: 5,
    }
}

fn workspace() -> WorkspaceInfo {
    WorkspaceInfo {
        workspace: WorkspaceId([1; 16]),
        branch: BranchId([2; 16]),
        branch_name: "main".into(),
        view: vec!["art".into()],
        label: "ada-desktop".into(),
        tags: vec!["artist".into()],
        created_ms: 1,
        retired: false,
        repository: RepositoryId([3; 16]),
        incarnation: [4; 16],
        head: 5,
    }
}

/// One request of every opcode.
fn every_request() -> Vec<Request> {
    let repo = || "game".to_string();
    let oid = ObjectId::new(ObjectKind::Chunk, [9; 32]);
    vec![
        Request::Status(StatusRequest {}),
        Request::RepoCreate(RepoCreate { name: repo() }),
        Request::RepoList(RepoListRequest {}),
        Request::WorkspaceRegister(WorkspaceRegister {
            repo: repo(),
            workspace: WorkspaceId([1; 16]),
            branch: String::new(),
            view: vec!["art".into(), "levels/one".into()],
            label: "desk".into(),
            tags: vec![],
        }),
        Request::WorkspaceRetire(WorkspaceRetire {
            repo: repo(),
            workspace: WorkspaceId([1; 16]),
        }),
        Request::WorkspaceList(WorkspaceListRequest { repo: repo() }),
        Request::ObjectsMissing(ObjectsMissing {
            repo: repo(),
            ids: vec![oid, ObjectId::new(ObjectKind::Manifest, [8; 32])],
        }),
        Request::ObjectPut(ObjectPut {
            repo: repo(),
            operation: OperationId([2; 16]),
            workspace: WorkspaceId([3; 16]),
            id: oid,
            total_len: 10,
            offset: 0,
            data: Bytes(b"0123456789".to_vec()),
        }),
        Request::ObjectPutMany(ObjectPutMany {
            repo: repo(),
            operation: OperationId([2; 16]),
            workspace: WorkspaceId([1; 16]),
            objects: vec![
                ObjectPiece {
                    id: oid,
                    data: Bytes(b"abc".to_vec()),
                },
                ObjectPiece {
                    id: ObjectId::new(ObjectKind::Manifest, [8; 32]),
                    data: Bytes(vec![]),
                },
            ],
        }),
        Request::ObjectsPinMissing(ObjectsPinMissing {
            repo: repo(),
            operation: OperationId([2; 16]),
            workspace: WorkspaceId([3; 16]),
            ids: vec![oid, ObjectId::new(ObjectKind::Manifest, [8; 32])],
        }),
        Request::ObjectPutStaged(ObjectPut {
            repo: repo(),
            operation: OperationId([2; 16]),
            workspace: WorkspaceId([3; 16]),
            id: oid,
            total_len: 10,
            offset: 4,
            data: Bytes(b"456789".to_vec()),
        }),
        Request::ObjectsPublish(ObjectsPublish { repo: repo() }),
        Request::ObjectGet(ObjectGet {
            repo: repo(),
            id: oid,
            offset: 4,
            max_len: 1 << 20,
        }),
        Request::ObjectGetMany(ObjectGetMany {
            repo: repo(),
            ids: vec![oid, ObjectId::new(ObjectKind::Manifest, [8; 32])],
        }),
        Request::Submit(Submit {
            repo: repo(),
            operation: OperationId([3; 16]),
            workspace: WorkspaceId([1; 16]),
            branch: BranchId([0; 16]),
            change_set: ChangeSetId([4; 32]),
            author: "ada".into(),
            message: Text("message".into()),
            keep_locks: true,
            timestamp_ms: 11,
        }),
        Request::OperationOutcome(OperationOutcome {
            repo: repo(),
            operation: OperationId([3; 16]),
        }),
        Request::SubmitInline(SubmitInline {
            repo: repo(),
            operation: OperationId([3; 16]),
            workspace: WorkspaceId([1; 16]),
            branch: BranchId([0; 16]),
            change_set: ChangeSetId([4; 32]),
            author: "ada".into(),
            message: Text("message".into()),
            keep_locks: false,
            timestamp_ms: 12,
            objects: vec![ObjectPiece {
                id: oid,
                data: Bytes(b"abc".to_vec()),
            }],
        }),
        Request::Delta(Delta {
            repo: repo(),
            branch: BranchId([0; 16]),
            from: 1,
            to: 0,
            after: String::new(),
            limit: 100,
        }),
        Request::List(List {
            repo: repo(),
            branch: BranchId([0; 16]),
            change: 0,
            prefix: "art".into(),
            recursive: false,
            after: "art/a".into(),
            limit: 10,
        }),
        Request::Stat(Stat {
            repo: repo(),
            branch: BranchId([0; 16]),
            change: 4,
            path: "a".into(),
        }),
        Request::History(History {
            repo: repo(),
            branch: BranchId([0; 16]),
            path: "a".into(),
            before: 0,
            limit: 5,
        }),
        Request::Log(Log {
            repo: repo(),
            branch: BranchId([0; 16]),
            before: 0,
            limit: 20,
        }),
        Request::Describe(Describe {
            repo: repo(),
            change: 3,
            after: String::new(),
            limit: 50,
        }),
        Request::LockAcquire(LockAcquire {
            repo: repo(),
            workspace: WorkspaceId([1; 16]),
            branch: BranchId([0; 16]),
            author: "ada".into(),
            paths: vec!["art/hero.psd".into()],
        }),
        Request::LockRelease(LockRelease {
            repo: repo(),
            workspace: WorkspaceId([1; 16]),
            paths: vec!["art/hero.psd".into()],
        }),
        Request::LockList(LockList {
            repo: repo(),
            prefix: String::new(),
            after: String::new(),
            limit: 100,
        }),
    ]
}

/// One reply of every opcode, plus the error reply.
fn every_response() -> Vec<Response> {
    let repo_info = RepoInfo {
        id: RepositoryId([1; 16]),
        name: "game".into(),
        main_branch: BranchId([2; 16]),
        incarnation: [3; 16],
        head: 4,
        created_ms: 5,
    };
    vec![
        Response::Status(StatusReply {
            server_version: "0.1.0".into(),
            schema: "scribe.rpc.v1".into(),
            uptime_ms: 1,
            repositories: 2,
            connections: 3,
        }),
        Response::RepoCreated(repo_info.clone()),
        Response::RepoList(RepoList {
            repositories: vec![repo_info],
        }),
        Response::WorkspaceRegistered(workspace()),
        Response::WorkspaceRetired(Ack {}),
        Response::WorkspaceList(WorkspaceList {
            workspaces: vec![workspace()],
        }),
        Response::ObjectsMissing(ObjectsMissingReply {
            missing: vec![ObjectId::new(ObjectKind::Chunk, [9; 32])],
        }),
        Response::ObjectPut(ObjectPutReply {
            received: 10,
            complete: true,
        }),
        Response::ObjectPutMany(ObjectPutManyReply { stored: 2 }),
        Response::ObjectsPinMissing(ObjectsMissingReply {
            missing: vec![ObjectId::new(ObjectKind::Chunk, [7; 32])],
        }),
        Response::ObjectPutStaged(ObjectPutReply {
            received: 4,
            complete: false,
        }),
        Response::ObjectsPublished(ObjectsPublishReply { published: 3 }),
        Response::ObjectData(ObjectData {
            total_len: 10,
            offset: 4,
            data: Bytes(b"456789".to_vec()),
        }),
        Response::ObjectGetMany(ObjectGetManyReply {
            objects: vec![ObjectPiece {
                id: ObjectId::new(ObjectKind::Chunk, [9; 32]),
                data: Bytes(b"xyz".to_vec()),
            }],
        }),
        Response::Submitted(Outcome {
            change: 12,
            commit: Some(CommitId([1; 32])),
            code: 0,
            detail: String::new(),
            paths: vec![],
        }),
        Response::OperationOutcome(OperationOutcomeReply {
            outcome: Some(Outcome {
                change: 0,
                commit: None,
                code: ErrorCode::BaseMismatch.number(),
                detail: "stale".into(),
                paths: vec!["a".into()],
            }),
        }),
        Response::SubmittedInline(Outcome {
            change: 13,
            commit: Some(CommitId([2; 32])),
            code: 0,
            detail: String::new(),
            paths: vec![],
        }),
        Response::Delta(DeltaPage {
            to: 9,
            entries: vec![entry("a", true), entry("b", false)],
            next: Some("b".into()),
        }),
        Response::List(ListPage {
            change: 9,
            entries: vec![entry("art/a", true)],
            directories: vec!["art/sub".into()],
            next: None,
        }),
        Response::Stat(StatReply {
            change: 9,
            entry: Some(entry("a", true)),
        }),
        Response::History(HistoryPage {
            entries: vec![HistoryEntry {
                change: 3,
                action: 1,
                state: entry("a", true).state,
                moved_from: Some(MoveFrom {
                    path: "old".into(),
                    change: 2,
                }),
            }],
            next: 0,
        }),
        Response::Log(LogPage {
            commits: vec![summary()],
            next: 8,
        }),
        Response::Describe(DescribeReply {
            commit: summary(),
            entries: vec![DescribedEntry {
                path: "a".into(),
                action: 2,
                state: entry("a", true).state,
                moved_from: None,
            }],
            next: None,
        }),
        Response::LocksAcquired(LocksReply {
            locks: vec![lock()],
        }),
        Response::LocksReleased(LocksReply { locks: vec![] }),
        Response::LockList(LockListPage {
            locks: vec![lock()],
            next: None,
        }),
        Response::Error(ErrorReply {
            code: ErrorCode::LockedByOther.number(),
            message: "art/hero.psd is locked by ada".into(),
            paths: vec!["art/hero.psd".into()],
        }),
    ]
}

#[test]
fn every_opcode_has_a_sample_and_opcodes_are_unique() {
    let requests = every_request();
    assert_eq!(requests.len(), Request::OPCODES.len());
    let mut seen = std::collections::BTreeSet::new();
    for r in &requests {
        assert!(seen.insert(r.opcode()), "duplicate opcode {}", r.opcode());
        assert!(r.opcode() < frame::REPLY_BIT);
    }
    assert_eq!(every_response().len(), requests.len() + 1);
}

#[test]
fn every_message_round_trips_through_frames_with_and_without_lz4() {
    for lz4 in [false, true] {
        for req in every_request() {
            let bytes = wire::request_frame(&req, lz4);
            let (op, payload) = wire::decode_frame(&bytes, lz4).unwrap();
            assert_eq!(Request::decode(op, &payload).unwrap(), req);
            assert_refuses_truncation_and_trailing(req.name(), &bytes, |b| {
                wire::decode_frame(b, lz4).and_then(|(op, p)| Request::decode(op, &p).map(|_| ()))
            });
        }
        for rep in every_response() {
            let bytes = wire::response_frame(&rep, lz4);
            let (op, payload) = wire::decode_frame(&bytes, lz4).unwrap();
            assert_eq!(Response::decode(op, &payload).unwrap(), rep);
        }
    }
}

/// The field a refused check names, and the lengths it gives.
fn refused(e: FormatError) -> (&'static str, u64, u64) {
    match e {
        FormatError::LimitExceeded {
            what,
            limit,
            actual,
        } => (what, limit, actual),
        other => panic!("not a limit: {other}"),
    }
}

#[test]
fn a_field_longer_than_the_wire_carries_is_refused_by_name_not_cut() {
    for req in every_request() {
        req.check().unwrap();
    }
    for rep in every_response() {
        rep.check().unwrap();
    }
    let register = |label: String, tags: Vec<String>| {
        Request::WorkspaceRegister(WorkspaceRegister {
            repo: "game".into(),
            workspace: WorkspaceId([1; 16]),
            branch: String::new(),
            view: vec![],
            label,
            tags,
        })
    };
    // The longest str16 goes out whole and comes back whole.
    let longest = register("é".repeat(32_767) + "x", vec![]);
    longest.check().unwrap();
    let bytes = wire::request_frame(&longest, false);
    let (op, payload) = wire::decode_frame(&bytes, false).unwrap();
    assert_eq!(Request::decode(op, &payload).unwrap(), longest);
    // One byte more is refused, naming the field, where `put` would cut.
    let e = register("x".repeat(65_536), vec![]).check().unwrap_err();
    assert_eq!(refused(e), ("WorkspaceRegister.label", 65_535, 65_536));
    // In a list, the list's field.
    let e = register(String::new(), vec!["t".into(), "y".repeat(70_000)])
        .check()
        .unwrap_err();
    assert_eq!(refused(e), ("WorkspaceRegister.tags", 65_535, 70_000));
    // A text over 1 MiB (the decoder's bound), by name.
    let submit = Request::Submit(Submit {
        repo: "game".into(),
        operation: OperationId([3; 16]),
        workspace: WorkspaceId([1; 16]),
        branch: BranchId([0; 16]),
        change_set: ChangeSetId([4; 32]),
        author: "ada".into(),
        message: Text("m".repeat((1 << 20) + 1)),
        keep_locks: false,
        timestamp_ms: 1,
    });
    assert_eq!(
        refused(submit.check().unwrap_err()),
        ("Submit.message", 1 << 20, (1 << 20) + 1)
    );
    // A reply the same: an error reply's paths.
    let reply = Response::Error(ErrorReply {
        code: 1,
        message: "m".into(),
        paths: vec!["p".repeat(65_536)],
    });
    assert_eq!(
        refused(reply.check().unwrap_err()),
        ("ErrorReply.paths", 65_535, 65_536)
    );
}

#[test]
fn replies_pair_with_their_requests() {
    for (req, rep) in every_request().iter().zip(every_response()) {
        assert!(rep.answers(req), "{} vs {:?}", req.name(), rep.opcode());
        assert_eq!(rep.opcode(), req.opcode() | 0x8000);
    }
    let err = Response::Error(ErrorReply::new(ErrorCode::Busy, "later"));
    assert!(err.answers(&every_request()[0]));
    assert_eq!(err.opcode(), 0xffff);
}

#[test]
fn golden_frames() {
    let mut goldens = Vec::new();
    for req in every_request().into_iter().take(4) {
        goldens.push(Golden {
            name: format!("request-{:04x}", req.opcode()),
            bytes: wire::request_frame(&req, false),
            identity: None,
        });
    }
    goldens.push(Golden {
        name: "reply-error".into(),
        bytes: wire::response_frame(every_response().last().unwrap(), false),
        identity: None,
    });
    goldens.push(Golden {
        name: "hello".into(),
        bytes: Hello::new(true).encode().to_vec(),
        identity: None,
    });
    goldens.push(Golden {
        name: "answer-accepted".into(),
        bytes: Hello::new(true).answer().encode().to_vec(),
        identity: None,
    });
    goldens.push(Golden {
        name: "hello-credential".into(),
        bytes: Hello::new(true).with_credential().encode().to_vec(),
        identity: None,
    });
    goldens.push(Golden {
        name: "answer-credential".into(),
        bytes: Hello::new(true)
            .with_credential()
            .answer()
            .encode()
            .to_vec(),
        identity: None,
    });
    goldens.push(Golden {
        name: "credential-frame".into(),
        bytes: hs::credential_frame(b"opaque credential").unwrap(),
        identity: None,
    });
    goldens.push(Golden {
        name: "reply-authenticated".into(),
        bytes: hs::authenticated_frame(&ack(), false),
        identity: None,
    });
    let committed = check_area("wire", &goldens);
    for (name, bytes) in &committed {
        if name.starts_with("request") {
            let (op, p) = wire::decode_frame(bytes, false).unwrap();
            let req = Request::decode(op, &p).unwrap();
            assert_eq!(&wire::request_frame(&req, false), bytes);
        }
    }
}

#[test]
fn hand_built_status_frame_and_error_reply() {
    // length 3 = opcode + flags, empty payload
    assert_eq!(
        wire::request_frame(&Request::Status(StatusRequest {}), true),
        vec![3, 0, 0, 0, 0x01, 0x00, 0]
    );
    let err = Response::Error(ErrorReply {
        code: 204,
        message: "no".into(),
        paths: vec!["a".into()],
    });
    let mut want = vec![];
    want.extend_from_slice(&(3u32 + 2 + 2 + 2 + 4 + 2 + 1).to_le_bytes());
    want.extend_from_slice(&[0xff, 0xff, 0]);
    want.extend_from_slice(&204u16.to_le_bytes());
    want.extend_from_slice(&2u16.to_le_bytes());
    want.extend_from_slice(b"no");
    want.extend_from_slice(&1u32.to_le_bytes());
    want.extend_from_slice(&1u16.to_le_bytes());
    want.extend_from_slice(b"a");
    assert_eq!(wire::response_frame(&err, false), want);
}

#[test]
fn hello_and_answer() {
    let hello = Hello::new(true);
    let bytes = hello.encode();
    assert_eq!(&bytes[..8], b"SCRBWIRE");
    assert_eq!(&bytes[8..10], &[1, 0]);
    assert_eq!(&bytes[10..12], &[1, 0]);
    assert_eq!(&bytes[12..16], &[0; 4]);
    assert_eq!(&bytes[16..29], b"scribe.rpc.v1");
    assert_eq!(&bytes[29..], &[0; 3]);
    assert_eq!(Hello::decode(&bytes).unwrap(), hello);
    let answer = hello.answer();
    assert_eq!(answer.status, HandshakeStatus::Accepted);
    assert_eq!(answer.flags, FLAG_LZ4);
    assert_eq!(Answer::decode(&answer.encode()).unwrap(), answer);

    let mut future = hello.clone();
    future.version = 2;
    assert_eq!(
        future.answer().status,
        HandshakeStatus::UnsupportedHandshake
    );
    let mut other = hello.clone();
    other.schema = "scribe.rpc.v9".into();
    assert_eq!(other.answer().status, HandshakeStatus::UnsupportedSchema);
    assert_eq!(other.answer().flags, 0);

    let mut bad = bytes;
    bad[0] = b'X';
    assert!(Hello::decode(&bad).is_err());
    let mut bad = bytes;
    bad[13] = 1;
    assert!(Hello::decode(&bad).is_err());
    let mut bad = bytes;
    bad[30] = b'x';
    assert!(Hello::decode(&bad).is_err(), "bytes after the NUL padding");
    let mut bad = bytes;
    bad[11] = 0x80;
    assert!(Hello::decode(&bad).is_err(), "unknown flag");
    let http = *b"GET / HTTP/1.1\r\nHost: x\r\n\r\n\0\0\0\0\0";
    assert_eq!(http.len(), HANDSHAKE_LEN);
    assert!(Hello::decode(&http).is_err());
    assert_eq!(Answer::malformed().status, HandshakeStatus::Malformed);
}

fn ack() -> Authenticated {
    Authenticated {
        kind: PrincipalKind::User,
        id: Some([0xa5; 16]),
        name: "ada".into(),
    }
}

#[test]
fn the_credential_flag_leaves_the_plain_hello_alone() {
    // A client without a credential sends the bytes it always sent.
    let plain = Hello::new(false).encode();
    assert_eq!(&plain[10..12], &[0, 0]);
    let lz4 = Hello::new(true).encode();
    assert_eq!(&lz4[10..12], &[1, 0]);
    assert_eq!(Hello::new(true).answer().flags, FLAG_LZ4);

    let with = Hello::new(true).with_credential();
    let bytes = with.encode();
    assert_eq!(&bytes[10..12], &[3, 0]);
    assert_eq!(&bytes[..10], &lz4[..10]);
    assert_eq!(&bytes[12..], &lz4[12..]);
    assert_eq!(Hello::decode(&bytes).unwrap(), with);
    let answer = with.answer();
    assert_eq!(answer.status, HandshakeStatus::Accepted);
    assert_eq!(answer.flags, FLAG_LZ4 | FLAG_CREDENTIAL);
    assert_eq!(&answer.encode()[12..14], &[3, 0]);
    assert_eq!(Answer::decode(&answer.encode()).unwrap(), answer);
    let only = Hello::new(false).with_credential().answer();
    assert_eq!(only.flags, FLAG_CREDENTIAL);

    // Refused hellos grant nothing.
    let mut other = with.clone();
    other.schema = "scribe.rpc.v9".into();
    assert_eq!(other.answer().flags, 0);
    // Bits above the known two stay refused, in hellos and answers.
    for bit in 2..16 {
        let mut bad = bytes;
        bad[10..12].copy_from_slice(&(1u16 << bit).to_le_bytes());
        assert!(Hello::decode(&bad).is_err(), "hello flag bit {bit}");
        let mut bad = answer.encode();
        bad[12..14].copy_from_slice(&(1u16 << bit).to_le_bytes());
        assert!(Answer::decode(&bad).is_err(), "answer flag bit {bit}");
    }
}

#[test]
fn credential_frame_bytes() {
    let frame = hs::credential_frame(b"abc").unwrap();
    let mut want = vec![];
    want.extend_from_slice(&(3u32 + 4 + 3).to_le_bytes());
    want.extend_from_slice(&[0x02, 0x00, 0]);
    want.extend_from_slice(&3u32.to_le_bytes());
    want.extend_from_slice(b"abc");
    assert_eq!(frame, want);
    let len = hs::check_credential_frame_len(frame[..4].try_into().unwrap()).unwrap();
    assert_eq!(len, frame.len() - 4);
    assert_eq!(hs::decode_credential_frame(&frame[4..]).unwrap(), b"abc");
    assert_refuses_truncation_and_trailing("credential frame", &frame[4..], |b| {
        hs::decode_credential_frame(b)
    });

    // The largest credential fits the largest frame; one more byte does not.
    let max = vec![7u8; hs::MAX_CREDENTIAL_BYTES];
    let frame = hs::credential_frame(&max).unwrap();
    assert_eq!(frame.len() - 4, hs::MAX_CREDENTIAL_FRAME_BYTES as usize);
    assert_eq!(hs::decode_credential_frame(&frame[4..]).unwrap(), max);
    assert!(matches!(
        hs::credential_frame(&vec![7u8; hs::MAX_CREDENTIAL_BYTES + 1]),
        Err(FormatError::LimitExceeded { .. })
    ));
    assert!(hs::credential_frame(b"").is_err(), "an empty credential");
}

#[test]
fn credential_frames_are_decoded_strictly() {
    let len = |n: u32| hs::check_credential_frame_len(n.to_le_bytes());
    assert!(matches!(
        len(hs::MAX_CREDENTIAL_FRAME_BYTES + 1),
        Err(FormatError::LimitExceeded { .. })
    ));
    assert!(matches!(
        len(u32::MAX),
        Err(FormatError::LimitExceeded { .. })
    ));
    assert!(len(hs::MAX_CREDENTIAL_FRAME_BYTES).is_ok());
    assert!(len(7).is_err(), "too short for one byte of credential");
    assert_eq!(len(8).unwrap(), 8);

    let body = hs::credential_frame(b"abc").unwrap()[4..].to_vec();
    // another opcode (a request sent in the credential's place)
    let mut b = body.clone();
    b[0] = 0x01;
    assert!(hs::decode_credential_frame(&b).is_err());
    // compressed or unknown flags
    for flags in [1u8, 2, 0x80] {
        let mut b = body.clone();
        b[2] = flags;
        assert!(hs::decode_credential_frame(&b).is_err(), "flags {flags}");
    }
    // a declared length that disagrees with the frame
    let mut b = body.clone();
    b[3] = 4;
    assert!(hs::decode_credential_frame(&b).is_err());
    // an empty credential in a well-formed frame
    assert!(hs::decode_credential_frame(&[0x02, 0x00, 0, 0, 0, 0, 0]).is_err());
    // a declared length beyond the limit, refused before anything is read
    let mut b = vec![0x02, 0x00, 0];
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        hs::decode_credential_frame(&b),
        Err(FormatError::LimitExceeded { .. })
    ));
}

#[test]
fn the_credential_opcode_is_no_request() {
    assert!(Request::OPCODES
        .iter()
        .all(|(op, _)| *op != hs::OP_CREDENTIAL));
    let frame = hs::credential_frame(b"abc").unwrap();
    assert!(wire::decode_request(&frame[4..], false).is_err());
    assert_eq!(hs::OP_AUTHENTICATED, 0x8002);
}

#[test]
fn credential_replies() {
    for lz4 in [false, true] {
        let frame = hs::authenticated_frame(&ack(), lz4);
        assert_eq!(
            hs::decode_credential_reply(&frame[4..], lz4).unwrap(),
            Ok(ack())
        );
        let err = ErrorReply::new(ErrorCode::Forbidden, "no such credential");
        let frame = wire::response_frame(&Response::Error(err.clone()), lz4);
        assert_eq!(
            hs::decode_credential_reply(&frame[4..], lz4).unwrap(),
            Err(err)
        );
    }
    let anon = Authenticated {
        kind: PrincipalKind::Anonymous,
        id: None,
        name: "anonymous".into(),
    };
    let frame = hs::authenticated_frame(&anon, false);
    let mut want = vec![];
    want.extend_from_slice(&(3u32 + 1 + 1 + 2 + 9).to_le_bytes());
    want.extend_from_slice(&[0x02, 0x80, 0, 0, 0]);
    want.extend_from_slice(&9u16.to_le_bytes());
    want.extend_from_slice(b"anonymous");
    assert_eq!(frame, want);
    assert_refuses_truncation_and_trailing("credential reply", &frame[4..], |b| {
        hs::decode_credential_reply(b, false)
    });
    // Any other reply is refused, and so is an unknown principal kind.
    let status = wire::response_frame(
        &Response::Status(StatusReply {
            server_version: "x".into(),
            schema: "y".into(),
            uptime_ms: 0,
            repositories: 0,
            connections: 0,
        }),
        false,
    );
    assert!(hs::decode_credential_reply(&status[4..], false).is_err());
    let mut bad = hs::authenticated_frame(&ack(), false);
    bad[7] = PrincipalKind::ALL.len() as u8;
    assert!(hs::decode_credential_reply(&bad[4..], false).is_err());
    for kind in PrincipalKind::ALL {
        assert_eq!(PrincipalKind::from_number(kind.number()), Some(kind));
    }
}

#[test]
fn oversized_frames_are_refused_from_the_length_word() {
    assert!(matches!(
        check_frame_len((wire::MAX_FRAME_BYTES + 1).to_le_bytes()),
        Err(FormatError::LimitExceeded { .. })
    ));
    assert!(check_frame_len(u32::MAX.to_le_bytes()).is_err());
    assert!(check_frame_len(2u32.to_le_bytes()).is_err());
    assert_eq!(check_frame_len(3u32.to_le_bytes()).unwrap(), 3);
}

#[test]
fn hostile_frame_bodies() {
    // unknown opcode
    assert!(Request::decode(0x7777, &[]).is_err());
    // a reply opcode is not a request
    assert!(Request::decode(0x8001, &[]).is_err());
    // unknown flag bits
    assert!(decode_frame_body(&[1, 0, 2], true).is_err());
    // compression that was not negotiated
    let compressed = wire::request_frame(
        &Request::RepoCreate(RepoCreate {
            name: "x".repeat(4000),
        }),
        true,
    );
    assert_eq!(compressed[6], 1, "a 4000-byte repetitive name compresses");
    assert!(wire::decode_frame(&compressed, false).is_err());
    assert!(wire::decode_frame(&compressed, true).is_ok());
    // a compressed payload declaring more than the frame payload limit
    let mut bomb = vec![0x01, 0x00, 1];
    bomb.extend_from_slice(&(frame::MAX_PAYLOAD_BYTES + 1).to_le_bytes());
    assert!(decode_frame_body(&bomb, true).is_err());
    // a list count larger than the frame
    let mut payload = to_bytes(&"game".to_string());
    payload.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        Request::decode(0x0030, &payload),
        Err(FormatError::Truncated { .. })
    ));
    // strict booleans and options
    let mut list = to_bytes(&List {
        repo: "g".into(),
        branch: BranchId([0; 16]),
        change: 0,
        prefix: String::new(),
        recursive: true,
        after: String::new(),
        limit: 1,
    });
    let at = 2 + 1 + 16 + 8 + 2;
    assert_eq!(list[at], 1);
    list[at] = 2;
    assert!(Request::decode(0x0051, &list).is_err());
    assert!(from_bytes::<Option<u8>>(&[2, 0], "option").is_err());
}

fn put_of(repo: &str, data: Vec<u8>) -> ObjectPut {
    ObjectPut {
        repo: repo.into(),
        operation: OperationId([2; 16]),
        workspace: WorkspaceId([3; 16]),
        id: ObjectId::chunk(ChunkId([9; 32])),
        total_len: 1 << 20,
        offset: 4096,
        data: Bytes(data),
    }
}

#[test]
fn object_put_head_and_data_are_the_request_frame() {
    for staged in [false, true] {
        for (repo, len) in [
            ("r", 0usize),
            ("game", 10),
            ("é".repeat(300).as_str(), 70_000),
        ] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let put = put_of(repo, data.clone());
            let req = if staged {
                Request::ObjectPutStaged(put.clone())
            } else {
                Request::ObjectPut(put.clone())
            };
            let frame = wire::request_frame(&req, false);
            // The sender's head followed by the data is the same frame.
            let head = wire::object_put_frame_head(&put_of(repo, Vec::new()), staged, len);
            assert_eq!([head.as_slice(), &data].concat(), frame);
            // The receiver finds the head in any prefix that holds it.
            let body = &frame[4..];
            let parsed = wire::object_put_head(body, body.len()).expect("a head");
            assert_eq!(parsed.staged, staged);
            assert_eq!(parsed.put, put_of(repo, Vec::new()));
            assert_eq!(&body[parsed.data_offset..], &data[..]);
            let short = &body[..parsed.data_offset];
            assert_eq!(
                wire::object_put_head(short, body.len()),
                Some(parsed.clone())
            );
            assert_eq!(
                wire::object_put_head(&short[..short.len() - 1], body.len()),
                None
            );
            assert_eq!(parsed.into_request(data.clone()), req);
            // Data that would not end the frame exactly: left to the full decode.
            assert_eq!(wire::object_put_head(body, body.len() + 1), None);
            if len > 0 {
                assert_eq!(wire::object_put_head(body, body.len() - 1), None);
            }
        }
    }
    // Other requests and compressed frames are not object puts.
    let other = wire::request_frame(&every_request()[0], false);
    assert_eq!(wire::object_put_head(&other[4..], other.len() - 4), None);
    let big = put_of("r", vec![0; 64 << 10]);
    let compressed = wire::request_frame(&Request::ObjectPut(big), true);
    assert_ne!(compressed[6], 0, "the sample frame is compressed");
    assert_eq!(
        wire::object_put_head(&compressed[4..], compressed.len() - 4),
        None
    );
}

#[test]
fn object_data_head_and_data_are_the_reply_frame() {
    for len in [0usize, 1, 70_000] {
        let data: Vec<u8> = (0..len).map(|i| (i * 13 + 1) as u8).collect();
        let reply = ObjectData {
            total_len: 1 << 30,
            offset: 12345,
            data: Bytes(data.clone()),
        };
        let frame = wire::response_frame(&Response::ObjectData(reply.clone()), false);
        let empty = ObjectData {
            data: Bytes(Vec::new()),
            ..reply.clone()
        };
        let head = wire::object_data_frame_head(&empty, len);
        assert_eq!([head.as_slice(), &data].concat(), frame);
        let body = &frame[4..];
        let prefix = &body[..wire::OBJECT_DATA_HEAD_LEN];
        assert_eq!(
            wire::object_data_head(prefix, body.len()),
            Some(empty.clone())
        );
        assert_eq!(wire::object_data_head(body, body.len()), Some(empty));
        assert_eq!(
            wire::object_data_head(&prefix[..prefix.len() - 1], body.len()),
            None
        );
        assert_eq!(wire::object_data_head(prefix, body.len() + 1), None);
        assert_eq!(&body[wire::OBJECT_DATA_HEAD_LEN..], &data[..]);
    }
    // Another reply, an error, or a compressed frame is not taken.
    let other = wire::response_frame(&every_response()[0], false);
    assert_eq!(wire::object_data_head(&other[4..], other.len() - 4), None);
    let err = wire::response_frame(
        &Response::Error(ErrorReply::new(ErrorCode::Corrupt, "x")),
        false,
    );
    assert_eq!(wire::object_data_head(&err[4..], err.len() - 4), None);
    let big = ObjectData {
        total_len: 1,
        offset: 0,
        data: Bytes(vec![0; 64 << 10]),
    };
    let compressed = wire::response_frame(&Response::ObjectData(big), true);
    assert_eq!(
        wire::object_data_head(&compressed[4..], compressed.len() - 4),
        None
    );
}

proptest! {
    #[test]
    fn credential_decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
        if let Ok(c) = hs::decode_credential_frame(&bytes) {
            prop_assert_eq!(&hs::credential_frame(&c).unwrap()[4..], &bytes[..]);
        }
        for lz4 in [false, true] {
            let _ = hs::decode_credential_reply(&bytes, lz4);
        }
    }

    #[test]
    fn object_put_head_agrees_with_decode(staged in any::<bool>(), len in 0usize..64, pos in any::<usize>(), value in any::<u8>(), cut in any::<usize>()) {
        // A valid object put body with one byte changed: a head found
        // means the full decode gives the same request with the rest as
        // its data.
        let put = put_of("repo", vec![5; len]);
        let req = if staged { Request::ObjectPutStaged(put) } else { Request::ObjectPut(put) };
        let mut bytes = wire::request_frame(&req, false)[4..].to_vec();
        let p = pos % bytes.len();
        bytes[p] = value;
        let body_len = bytes.len();
        let prefix = &bytes[..cut % (body_len + 1)];
        if let Some(h) = wire::object_put_head(prefix, body_len) {
            let data = bytes[h.data_offset..].to_vec();
            let decoded = wire::decode_request(&bytes, false).expect("decodes");
            prop_assert_eq!(decoded, h.into_request(data));
        }
    }

    #[test]
    fn arbitrary_frames_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), lz4 in any::<bool>()) {
        if let Ok((op, payload)) = wire::decode_frame(&bytes, lz4) {
            let _ = Request::decode(op, &payload);
            let _ = Response::decode(op, &payload);
        }
        if bytes.len() >= 2 {
            let op = u16::from_le_bytes([bytes[0], bytes[1]]);
            let _ = Request::decode(op, &bytes[2..]);
            let _ = Response::decode(op | 0x8000, &bytes[2..]);
        }
    }

    #[test]
    fn mutated_requests_never_panic(index in any::<usize>(), pos in any::<usize>(), value in any::<u8>()) {
        let requests = every_request();
        let req = &requests[index % requests.len()];
        let mut payload = req.encode_payload();
        if !payload.is_empty() {
            let p = pos % payload.len();
            payload[p] = value;
        }
        if let Ok(decoded) = Request::decode(req.opcode(), &payload) {
            prop_assert_eq!(decoded.encode_payload(), payload);
        }
    }

    #[test]
    fn submit_round_trips(message in ".{0,200}", author in "[a-zA-Z ]{0,40}", keep in any::<bool>(), ts in any::<u64>()) {
        let req = Request::Submit(Submit {
            repo: "r".into(),
            operation: OperationId([1; 16]),
            workspace: WorkspaceId([2; 16]),
            branch: BranchId([3; 16]),
            change_set: ChangeSetId([4; 32]),
            author,
            message: Text(message),
            keep_locks: keep,
            timestamp_ms: ts,
        });
        let frame = wire::request_frame(&req, true);
        let (op, p) = wire::decode_frame(&frame, true).unwrap();
        prop_assert_eq!(Request::decode(op, &p).unwrap(), req);
    }
}

#[test]
fn object_get_many_parts_are_the_reply_frame() {
    let id = |n: u8| ObjectId::new(ObjectKind::Chunk, [n; 32]);
    let sizes: [&[usize]; 5] = [&[], &[0], &[10], &[70_000], &[5, 70_000, 3, 0, 100_000, 9]];
    for (case, lens) in sizes.iter().enumerate() {
        let datas: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(k, len)| (0..*len).map(|i| (i * 7 + k) as u8).collect())
            .collect();
        let reply = ObjectGetManyReply {
            objects: datas
                .iter()
                .enumerate()
                .map(|(k, d)| ObjectPiece {
                    id: id(k as u8 + 1),
                    data: Bytes(d.clone()),
                })
                .collect(),
        };
        let frame = wire::response_frame(&Response::ObjectGetMany(reply), false);
        let pieces: Vec<(ObjectId, &[u8])> = datas
            .iter()
            .enumerate()
            .map(|(k, d)| (id(k as u8 + 1), d.as_slice()))
            .collect();
        for inline_below in [0, 16, 1 << 20] {
            let parts = wire::object_get_many_frame_parts(&pieces, inline_below);
            let mut out = Vec::new();
            let mut by_reference = 0;
            for p in &parts {
                match p {
                    wire::FramePart::Head(h) => out.extend_from_slice(h),
                    wire::FramePart::Data(n) => {
                        by_reference += 1;
                        out.extend_from_slice(pieces[*n].1)
                    }
                }
            }
            assert_eq!(out, frame, "case {case}, inline below {inline_below}");
            let expect = lens.iter().filter(|l| **l >= inline_below).count();
            assert_eq!(
                by_reference, expect,
                "case {case}, inline below {inline_below}"
            );
        }
    }
}

/// `read_object_get_many` of a whole body: `None` when it is not taken,
/// else its answer (`Err` as a string).
fn streamed(body: &[u8], prefix_len: usize) -> Option<Result<ObjectGetManyReply, String>> {
    let k = prefix_len.min(body.len());
    let mut rest = &body[k..];
    wire::read_object_get_many(&body[..k], body.len(), &mut rest)
        .map(|r| r.map_err(|e| format!("{e:?}")))
}

#[test]
fn object_get_many_read_in_pieces_is_the_decoded_reply() {
    let id = |n: u8| ObjectId::new(ObjectKind::Chunk, [n; 32]);
    for lens in [&[][..], &[0], &[1, 70_000, 0, 5]] {
        let reply = ObjectGetManyReply {
            objects: lens
                .iter()
                .enumerate()
                .map(|(k, len)| ObjectPiece {
                    id: id(k as u8),
                    data: Bytes((0..*len).map(|i| (i * 3 + k) as u8).collect()),
                })
                .collect(),
        };
        let frame = wire::response_frame(&Response::ObjectGetMany(reply.clone()), false);
        for prefix in [3, 7, wire::OBJECT_DATA_HEAD_LEN, frame.len()] {
            let got = streamed(&frame[4..], prefix).expect("taken");
            assert_eq!(got, Ok(reply.clone()), "{lens:?}, prefix {prefix}");
        }
        // Data cut short by the stream: an I/O error, not a reply.
        if !lens.is_empty() {
            let body = &frame[4..];
            let mut cut = &body[23..body.len() - 1];
            let got = wire::read_object_get_many(&body[..23], body.len(), &mut cut);
            assert!(matches!(got, Some(Err(wire::StreamedReplyError::Io(_)))));
        }
    }
    // Not taken: another reply, a compressed frame, a prefix shorter than
    // the frame header.
    let other = wire::response_frame(&every_response()[0], false);
    assert_eq!(streamed(&other[4..], 23), None);
    let big = ObjectGetManyReply {
        objects: vec![ObjectPiece {
            id: id(1),
            data: Bytes(vec![0; 64 << 10]),
        }],
    };
    let compressed = wire::response_frame(&Response::ObjectGetMany(big.clone()), true);
    assert_eq!(streamed(&compressed[4..], 23), None);
    let plain = wire::response_frame(&Response::ObjectGetMany(big), false);
    assert_eq!(streamed(&plain[4..], 2), None);
}

proptest! {
    /// Whatever the bytes after the header, reading in pieces agrees with
    /// decoding the whole body: the same reply, or a refusal.
    #[test]
    fn object_get_many_read_in_pieces_agrees_with_decode(
        tail in proptest::collection::vec(any::<u8>(), 0..200),
        seeded in any::<bool>(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
    ) {
        let mut body = vec![0x34, 0x80, 0];
        if seeded {
            // A well-formed reply to mutate.
            let reply = ObjectGetManyReply {
                objects: vec![
                    ObjectPiece { id: ObjectId::new(ObjectKind::Chunk, [3; 32]), data: Bytes(tail.clone()) },
                    ObjectPiece { id: ObjectId::new(ObjectKind::Manifest, [4; 32]), data: Bytes(vec![7; 9]) },
                ],
            };
            body = wire::response_frame(&Response::ObjectGetMany(reply), false)[4..].to_vec();
            for (at, x) in &flips {
                let n = body.len();
                let at = 3 + at % (n - 3);
                body[at] ^= x;
            }
        } else {
            body.extend_from_slice(&tail);
        }
        let whole = wire::decode_response(&body, false);
        for prefix in [3, 23] {
            match (streamed(&body, prefix), &whole) {
                (Some(Ok(r)), Ok(Response::ObjectGetMany(w))) => prop_assert_eq!(&r, w),
                (Some(Err(_)), Err(_)) => {}
                (got, whole) => prop_assert!(false, "streamed {:?}, decoded {:?}", got, whole),
            }
        }
    }
}

/// The parts of an `ObjectPutMany` frame written in order are its
/// request frame, for groups of no objects, empty objects, one object and
/// many of mixed sizes and kinds (every object's data is the sender's own
/// buffer, nothing copied).
#[test]
fn object_put_many_parts_are_the_request_frame() {
    let piece = |i: usize, len: usize| ObjectPiece {
        id: if i % 3 == 2 {
            ObjectId::manifest(ManifestId([i as u8; 32]))
        } else {
            ObjectId::chunk(ChunkId([i as u8; 32]))
        },
        data: Bytes((0..len).map(|k| (k * 13 + i) as u8).collect()),
    };
    let groups: Vec<Vec<ObjectPiece>> = vec![
        Vec::new(),
        vec![piece(0, 0)],
        vec![piece(1, 5)],
        (0..300).map(|i| piece(i, (i * 37) % 5_000)).collect(),
        (0..4).map(|i| piece(i, [0, 70_000, 0, 1][i])).collect(),
    ];
    for (g, objects) in groups.into_iter().enumerate() {
        let put = ObjectPutMany {
            repo: ["r", "game-assets", &"é".repeat(200)][g % 3].into(),
            operation: OperationId([4; 16]),
            workspace: WorkspaceId([5; 16]),
            objects,
        };
        let request = Request::ObjectPutMany(put.clone());
        assert_eq!(request.opcode(), wire::OP_OBJECT_PUT_MANY);
        let frame = wire::request_frame(&request, false);
        let parts = wire::object_put_many_frame_parts(&put, 1);
        let mut joined = Vec::new();
        let mut sent = Vec::new();
        for p in &parts {
            match p {
                wire::FramePart::Head(h) => joined.extend_from_slice(h),
                wire::FramePart::Data(n) => {
                    joined.extend_from_slice(&put.objects[*n].data.0);
                    sent.push(*n);
                }
            }
        }
        assert_eq!(joined, frame, "group {g}");
        // Every object with data is a part of its own (not copied).
        let with_data: Vec<usize> = (0..put.objects.len())
            .filter(|&n| !put.objects[n].data.0.is_empty())
            .collect();
        assert_eq!(sent, with_data, "group {g}: data copied");
    }
}

/// An `ObjectPutMany` decoded in place is the decoded request, its
/// objects' data ranges of the frame body (nothing copied); other
/// requests and compressed frames are left to `decode_request`.
#[test]
fn object_put_many_view_is_the_decoded_request_without_copies() {
    let piece = |i: usize, len: usize| ObjectPiece {
        id: if i % 3 == 2 {
            ObjectId::manifest(ManifestId([i as u8; 32]))
        } else {
            ObjectId::chunk(ChunkId([i as u8; 32]))
        },
        data: Bytes((0..len).map(|k| (k * 7 + i) as u8).collect()),
    };
    let groups: Vec<Vec<ObjectPiece>> = vec![
        Vec::new(),
        vec![piece(0, 0)],
        (0..300).map(|i| piece(i, (i * 37) % 5_000)).collect(),
        (0..4).map(|i| piece(i, [0, 70_000, 0, 1][i])).collect(),
    ];
    for (g, objects) in groups.into_iter().enumerate() {
        let n = objects.len();
        let request = Request::ObjectPutMany(ObjectPutMany {
            repo: ["r", &"é".repeat(200)][g % 2].into(),
            operation: OperationId([4; 16]),
            workspace: WorkspaceId([5; 16]),
            objects,
        });
        let frame = wire::request_frame(&request, false);
        let body = &frame[4..];
        let view = wire::object_put_many_view(body)
            .expect("taken")
            .expect("decoded");
        assert!(view.put.objects.is_empty());
        assert_eq!(view.pieces.len(), n);
        assert_eq!(view.to_request(), request, "group {g}");
        assert_eq!(wire::decode_request(body, false), Ok(view.to_request()));
        let span = body.as_ptr_range();
        for (id, data) in &view.pieces {
            let at = data.as_ptr_range();
            assert!(
                span.start <= at.start && at.end <= span.end,
                "group {g}: {id}'s data is not in the frame body"
            );
        }
    }
    // Not taken: another request, a compressed frame, a body shorter than
    // the frame header.
    let other = wire::request_frame(&every_request()[0], false);
    assert_eq!(wire::object_put_many_view(&other[4..]), None);
    let big = Request::ObjectPutMany(ObjectPutMany {
        repo: "r".into(),
        operation: OperationId([4; 16]),
        workspace: WorkspaceId([5; 16]),
        objects: vec![piece(1, 64 << 10)],
    });
    let compressed = wire::request_frame(&big, true);
    assert_eq!(
        compressed[6],
        frame::FLAG_COMPRESSED,
        "the sample compresses"
    );
    assert_eq!(wire::object_put_many_view(&compressed[4..]), None);
    assert_eq!(wire::object_put_many_view(&[0x33]), None);
}

proptest! {
    /// Whatever the bytes, the in-place decode of an `ObjectPutMany` agrees
    /// with decoding the whole body: the same request or the same refusal.
    #[test]
    fn object_put_many_view_agrees_with_decode(
        tail in proptest::collection::vec(any::<u8>(), 0..200),
        seeded in any::<bool>(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in any::<u8>(),
    ) {
        let mut body = vec![0x33, 0x00, 0];
        if seeded {
            let put = ObjectPutMany {
                repo: "assets".into(),
                operation: OperationId([1; 16]),
                workspace: WorkspaceId([2; 16]),
                objects: vec![
                    ObjectPiece { id: ObjectId::chunk(ChunkId([3; 32])), data: Bytes(tail.clone()) },
                    ObjectPiece { id: ObjectId::manifest(ManifestId([4; 32])), data: Bytes(vec![7; 9]) },
                ],
            };
            body = wire::request_frame(&Request::ObjectPutMany(put), false)[4..].to_vec();
            for (at, x) in &flips {
                let n = body.len();
                let at = 3 + at % (n - 3);
                body[at] ^= x;
            }
            if cut % 4 == 0 {
                let keep = 3 + cut as usize % (body.len() - 3);
                body.truncate(keep);
            }
        } else {
            body.extend_from_slice(&tail);
        }
        let whole = wire::decode_request(&body, false);
        match wire::object_put_many_view(&body) {
            Some(Ok(v)) => prop_assert_eq!(Ok(v.to_request()), whole),
            Some(Err(e)) => prop_assert_eq!(Err(e), whole),
            None => prop_assert!(false, "an ObjectPutMany body was not taken"),
        }
    }
}
