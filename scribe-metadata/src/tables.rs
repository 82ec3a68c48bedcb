//! Table definitions of `catalog.redb` (section 7.1) and repository
//! `metadata.redb` at schema 3 (sections 8 and 12).
//!
//! Key and value types follow the recovery journal's four key types: byte
//! strings, UTF-8 strings, fixed 16-byte identifiers and `u64` (redb numeric,
//! little endian). Values are byte strings unless a table stores one `u64`.

use redb::TableDefinition;

/// A table keyed by byte strings.
pub type BytesTable = TableDefinition<'static, &'static [u8], &'static [u8]>;
/// A table keyed by a 16-byte identifier.
pub type IdTable = TableDefinition<'static, [u8; 16], &'static [u8]>;

// ---- catalog.redb (schema 1)
pub const CATALOG_META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
pub const CATALOG_REPOS: IdTable = TableDefinition::new("repos");
pub const CATALOG_REPO_NAMES: TableDefinition<&str, [u8; 16]> = TableDefinition::new("repo_names");

// ---- metadata.redb (schema 3)
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
pub const BRANCHES: IdTable = TableDefinition::new("branches");
pub const COMMITS: TableDefinition<u64, &[u8]> = TableDefinition::new("commits");
pub const SNAPSHOT_NODES: TableDefinition<u64, &[u8]> = TableDefinition::new("snapshot_nodes");
pub const SNAPSHOT_ROOTS: BytesTable = TableDefinition::new("snapshot_roots");
pub const HISTORY: BytesTable = TableDefinition::new("history");
pub const MOVES: BytesTable = TableDefinition::new("moves");
pub const FILE_LINEAGE: BytesTable = TableDefinition::new("file_lineage");
pub const CHANGE_PATHS: BytesTable = TableDefinition::new("change_paths");
pub const WORKSPACES: IdTable = TableDefinition::new("workspaces");
pub const LOCKS: TableDefinition<&str, &[u8]> = TableDefinition::new("locks");
pub const OPERATIONS: IdTable = TableDefinition::new("operations");
pub const CHANGE_NOTES: BytesTable = TableDefinition::new("change_notes");
pub const BRANCH_HEADS: TableDefinition<[u8; 16], u64> = TableDefinition::new("branch_heads_v2");
pub const MERGE_PARENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("merge_parents_v2");
pub const BRANCH_OPERATIONS: IdTable = TableDefinition::new("branch_operations_v2");
pub const BRANCH_PENDING: IdTable = TableDefinition::new("branch_pending_v2");
pub const ACCEPTED_MANIFESTS: BytesTable = TableDefinition::new("accepted_manifests");
pub const WORKSPACE_STATE: BytesTable = TableDefinition::new("workspace_state");
pub const SUBMIT_STAGE: BytesTable = TableDefinition::new("submit_stage");
pub const SUBMIT_LOCK_UPDATES: BytesTable = TableDefinition::new("submit_lock_updates");
pub const UPLOAD_PINS: BytesTable = TableDefinition::new("upload_pins");

/// Every table name a schema-3 repository must hold; opening refuses a
/// database lacking any of them (nothing is created implicitly).
pub const REQUIRED_TABLES: &[&str] = &[
    "meta",
    "branches",
    "commits",
    "snapshot_nodes",
    "snapshot_roots",
    "history",
    "moves",
    "file_lineage",
    "change_paths",
    "workspaces",
    "locks",
    "operations",
    "change_notes",
    "branch_heads_v2",
    "merge_parents_v2",
    "branch_operations_v2",
    "branch_pending_v2",
    "accepted_manifests",
    "workspace_state",
    "submit_stage",
    "submit_lock_updates",
    "upload_pins",
];

/// `meta` keys of `metadata.redb`.
pub mod meta {
    pub const SCHEMA: &str = "schema";
    pub const REPOSITORY_ID: &str = "repository-id";
    pub const INCARNATION: &str = "incarnation";
    pub const REPO_META: &str = "repo-meta";
    pub const SNAPSHOT_PROFILE: &str = "snapshot-profile";
    pub const SNAPSHOT_LIVE: &str = "snapshot-live";
    pub const PATH_FOLD_PROFILE: &str = "path-fold-profile";
    pub const MIGRATION_VERSION: &str = "migration-version";
    pub const MIGRATION_ACTIVE: &str = "migration-active";
    pub const MIGRATION_CURSOR: &str = "migration-cursor";
    pub const PENDING_SUBMIT: &str = "pending-submit";
    pub const LOCK_EPOCH: &str = "lock-epoch";
    pub const LOCK_UPDATE_COUNT: &str = "lock-update-count";
    pub const LOCK_RELEASE_COUNT: &str = "lock-release-count";
    pub const LOCK_UPDATE_OWNER: &str = "lock-update-owner";
}

/// Repository schema served by this build.
pub const REPOSITORY_SCHEMA: u32 = 3;
/// Snapshot profile served by this build.
pub const SNAPSHOT_PROFILE: u32 = 3;
/// Current repository migration revision.
pub const MIGRATION_VERSION: u32 = 3;
/// Collision profile of canonical paths (section 5).
pub const PATH_FOLD_PROFILE: u32 = 1;
/// Catalog schema.
pub const CATALOG_SCHEMA: u32 = 1;

/// Undo inventory tags of `submit_stage` (atomic publication profile 1).
pub mod stage_tag {
    pub const HISTORY: u8 = 1;
    pub const MOVES: u8 = 2;
    pub const CHANGE_PATHS: u8 = 3;
    pub const FILE_LINEAGE: u8 = 4;
    pub const ACCEPTED_MANIFESTS: u8 = 5;
    pub const SNAPSHOT_NODES: u8 = 6;
    pub const LOCK_UPDATES: u8 = 7;
}

/// `workspace_state` key kinds.
pub mod ws_kind {
    pub const OWNER_INDEX: u8 = 1;
    pub const OWNER_COUNT: u8 = 2;
    pub const RETIRED: u8 = 3;
    pub const RETIRE_OUTCOME: u8 = 4;
    pub const LOCK_INDEX: u8 = 5;
}
