//! Workspaces created directly through `scribe-workspace` (no server),
//! for tests and benchmarks of local operations (`status`, scans) that
//! need a workspace whose state is exactly the files on disk.

use std::path::Path;

use scribe_format::{BranchId, FileContentId, ManifestId, RepositoryId, WorkspaceId};
use scribe_workspace::records::{fingerprint_of, BaselineRecord};
use scribe_workspace::scan::{now_ms, scan, ScanOptions};
use scribe_workspace::{Workspace, WorkspaceMeta};

/// A workspace description with fixed ids, of repository `repo` on an
/// unreachable server, synced to change 1, with the whole tree in view.
pub fn meta(repo: &str) -> WorkspaceMeta {
    WorkspaceMeta {
        workspace_id: WorkspaceId([1; 16]),
        repository_id: RepositoryId([2; 16]),
        branch_id: BranchId([0; 16]),
        incarnation: [0; 16],
        repository_name: repo.into(),
        server: "scribe://127.0.0.1:1".into(),
        author: "ada".into(),
        view: Vec::new(),
        tags: Vec::new(),
        readonly: false,
        transfer_compression: false,
        synced: 1,
    }
}

/// Make `dir` a workspace (`meta`) whose baselines are exactly the files
/// in it now, as if change 1 had synced them (what a submit or sync
/// records; the manifests are not real, so nothing may be fetched).
pub fn with_baselines(dir: &Path, meta: &WorkspaceMeta) -> Workspace {
    let ws = Workspace::create(dir, meta).expect("create the workspace");
    let found = scan(dir, &ScanOptions::default());
    let now = now_ms();
    let tx = ws.write().expect("write");
    for f in &found.files {
        let full = dir.join(&f.path);
        let bytes = std::fs::read(&full).expect("read");
        let m = std::fs::metadata(&full).expect("stat");
        tx.put_baseline(
            &f.path,
            &BaselineRecord {
                incarnation: meta.incarnation,
                manifest: ManifestId([0; 32]),
                content: FileContentId::of(&bytes),
                size: bytes.len() as u64,
                mode: u8::from(f.executable),
                change: 1,
                fingerprint: fingerprint_of(&m, now),
            },
        )
        .expect("baseline");
    }
    tx.commit().expect("commit");
    ws
}
