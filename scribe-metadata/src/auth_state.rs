//! `auth-state.redb` (specification section 7.2, schema 1): what a storage
//! server that serves with scribe-auth must remember on its own, so an auth
//! answer can never be replayed against it or rolled back.
//!
//! One table, `auth_state_v1` (`&[u8]` key → `&[u8]` value):
//!
//! | key | value |
//! |---|---|
//! | `schema` | u32 LE 1 |
//! | `namespace` | UTF-8 auth namespace; opening with another is refused |
//! | `u8 1 ‖ [16] repository ‖ [16] workspace` | `[16]` owning principal (permanent workspace claim) |
//! | `u8 2 ‖ [16] repository ‖ [16] operation` | `[16]` owning principal `‖ [32]` operation fingerprint |
//! | `auth-revision` | `[16]` auth incarnation `‖ u64 LE` revision |
//!
//! Every claim and every revision record is its own Immediate transaction,
//! written before the mutation it authorizes; a claim is never rewritten.
//! A second claim with another value is refused: `operation_intent_mismatch`
//! when only an operation's fingerprint differs, otherwise `forbidden`. An
//! auth answer from a lower revision of the recorded incarnation is
//! `auth_unavailable`; one from another incarnation (after
//! `scribe-auth restore`) replaces the record.
//!
//! The file carries the metadata recovery journal profile 2 like the
//! catalog and every repository (seed 004: "catalog, repository, and
//! storage ownership databases"): every write is a journaled transaction
//! published to the independent archive `auth-state.recovery` (or the
//! directory `auth-state.recovery-location` selects) before it returns, so
//! `scribe-server recover --from-archive` rebuilds a lost file and
//! `consolidate` folds its journal into a base.
//!
//! This module is the file and its rules; `auth-init` (which first adds
//! `auth-ownership-v1` to the data root's `required-features`) and the
//! service's use of it are built on top (issue #15).

use scribe_format::echo::echo;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use scribe_format::ErrorCode;

use crate::archive::Archive;
use crate::error::{MetadataError, Result};
use crate::journal;

/// The file name inside the data root.
pub const AUTH_STATE_FILE: &str = "auth-state.redb";
/// The feature `auth-init` adds to the data root's `required-features`.
pub const FEATURE: &str = "auth-ownership-v1";

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("auth_state_v1");
const SCHEMA: u32 = 1;
const KEY_SCHEMA: &[u8] = b"schema";
const KEY_NAMESPACE: &[u8] = b"namespace";
const KEY_REVISION: &[u8] = b"auth-revision";
const WORKSPACE_CLAIM: u8 = 1;
const OPERATION_CLAIM: u8 = 2;

/// A 16-byte id (repository, workspace, operation, principal, incarnation).
pub type Id16 = [u8; 16];

/// The newest auth state a server has seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuthRevision {
    pub incarnation: Id16,
    pub revision: u64,
}

/// An open `auth-state.redb`.
pub struct AuthState {
    db: Arc<Database>,
    archive: Arc<Archive>,
    path: PathBuf,
}

fn claim_key(tag: u8, repository: &Id16, id: &Id16) -> [u8; 33] {
    let mut k = [0u8; 33];
    k[0] = tag;
    k[1..17].copy_from_slice(repository);
    k[17..].copy_from_slice(id);
    k
}

impl AuthState {
    /// Create `auth-state.redb` in `data_root` for `namespace`; an
    /// existing file is refused (`already_exists`).
    pub fn create(data_root: &Path, namespace: &str) -> Result<AuthState> {
        if namespace.is_empty() || namespace.len() > 255 || namespace.chars().any(char::is_control)
        {
            return Err(MetadataError::refused(
                ErrorCode::Malformed,
                format!("{} is not an auth namespace", echo(namespace)),
            ));
        }
        let path = data_root.join(AUTH_STATE_FILE);
        if path.exists() {
            return Err(MetadataError::refused(
                ErrorCode::AlreadyExists,
                format!("{} exists already", path.display()),
            ));
        }
        let db = Arc::new(Database::create(&path)?);
        journal::initialize(&db)?;
        let archive = Arc::new(Archive::create(&path, db.clone())?);
        let tx = journal::begin_archived(&db, &archive)?;
        {
            let mut t = tx.open_table(TABLE)?;
            t.insert(KEY_SCHEMA, &SCHEMA.to_le_bytes()[..])?;
            t.insert(KEY_NAMESPACE, namespace.as_bytes())?;
        }
        tx.commit()?;
        Ok(AuthState { db, archive, path })
    }

    /// Open the file of `data_root`, refusing another schema or namespace.
    pub fn open(data_root: &Path, namespace: &str) -> Result<AuthState> {
        let path = data_root.join(AUTH_STATE_FILE);
        if !path.exists() {
            return Err(MetadataError::refused(
                ErrorCode::NotFound,
                format!(
                    "{} is missing (run `scribe-server auth-init`)",
                    path.display()
                ),
            ));
        }
        let db = Arc::new(Database::open(&path)?);
        {
            let tx = db.begin_read()?;
            journal::check_profile(&tx, &path)?;
        }
        let archive = Arc::new(Archive::open(&path, db.clone())?);
        let state = AuthState { db, archive, path };
        let schema = state.get(KEY_SCHEMA)?;
        match schema.as_deref() {
            Some(b) if b == SCHEMA.to_le_bytes() => {}
            Some(b) if b.len() == 4 => {
                return Err(MetadataError::VersionMismatch {
                    path: state.path.clone(),
                    what: "auth-state schema",
                    found: u32::from_le_bytes([b[0], b[1], b[2], b[3]]).to_string(),
                    expected: SCHEMA.to_string(),
                })
            }
            _ => return Err(state.corrupt("the schema row is missing or not a u32")),
        }
        let stored = state.get(KEY_NAMESPACE)?;
        let stored = stored
            .as_deref()
            .and_then(|b| std::str::from_utf8(b).ok())
            .ok_or_else(|| state.corrupt("the namespace row is missing or not UTF-8"))?;
        if stored != namespace {
            return Err(MetadataError::refused(
                ErrorCode::Forbidden,
                format!(
                    "{} belongs to auth namespace {}, not {}",
                    state.path.display(),
                    echo(stored),
                    echo(namespace)
                ),
            ));
        }
        Ok(state)
    }

    /// Open the file of `data_root` whatever namespace it records (offline
    /// tools that only read claims, such as `migrate`).
    pub fn open_existing(data_root: &Path) -> Result<AuthState> {
        let path = data_root.join(AUTH_STATE_FILE);
        let db = Arc::new(Database::open(&path)?);
        let archive = Arc::new(Archive::open(&path, db.clone())?);
        let state = AuthState { db, archive, path };
        let ns = state.get(KEY_NAMESPACE)?;
        let ns = ns
            .as_deref()
            .and_then(|b| std::str::from_utf8(b).ok())
            .ok_or_else(|| state.corrupt("the namespace row is missing or not UTF-8"))?
            .to_owned();
        drop(state);
        AuthState::open(data_root, &ns)
    }

    /// The file's recovery archive (for offline consolidation).
    pub fn archive(&self) -> &Archive {
        &self.archive
    }

    fn corrupt(&self, what: &str) -> MetadataError {
        MetadataError::corrupt(format!("{}: {what}", self.path.display()))
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(TABLE)?;
        Ok(t.get(key)?.map(|v| v.value().to_vec()))
    }

    /// Write `value` under `key` in its own Immediate transaction unless a
    /// value is there already; the value that stands afterwards.
    fn put_once(&self, key: &[u8], value: &[u8]) -> Result<Vec<u8>> {
        let tx = journal::begin_archived(&self.db, &self.archive)?;
        let standing = {
            let mut t = tx.open_table(TABLE)?;
            let existing = t.get(key)?.map(|v| v.value().to_vec());
            match existing {
                Some(v) => v,
                None => {
                    t.insert(key, value)?;
                    value.to_vec()
                }
            }
        };
        tx.commit()?;
        Ok(standing)
    }

    /// Claim `workspace` of `repository` for `principal`, for good. The same
    /// claim again is fine; a claim by anyone else is `forbidden`.
    pub fn claim_workspace(
        &self,
        repository: &Id16,
        workspace: &Id16,
        principal: &Id16,
    ) -> Result<()> {
        let key = claim_key(WORKSPACE_CLAIM, repository, workspace);
        let standing = self.put_once(&key, principal)?;
        if standing.len() != 16 {
            return Err(self.corrupt("a workspace claim is not 16 bytes"));
        }
        if standing != principal {
            return Err(MetadataError::refused(
                ErrorCode::Forbidden,
                "the workspace belongs to another principal",
            ));
        }
        Ok(())
    }

    /// Claim `operation` of `repository` for `principal` with the
    /// operation's `fingerprint`. The same claim again is fine; the same
    /// principal with another fingerprint is `operation_intent_mismatch`;
    /// another principal is `forbidden`.
    pub fn claim_operation(
        &self,
        repository: &Id16,
        operation: &Id16,
        principal: &Id16,
        fingerprint: &[u8; 32],
    ) -> Result<()> {
        let key = claim_key(OPERATION_CLAIM, repository, operation);
        let mut value = [0u8; 48];
        value[..16].copy_from_slice(principal);
        value[16..].copy_from_slice(fingerprint);
        let standing = self.put_once(&key, &value)?;
        if standing.len() != 48 {
            return Err(self.corrupt("an operation claim is not 48 bytes"));
        }
        if standing[..16] != principal[..] {
            return Err(MetadataError::refused(
                ErrorCode::Forbidden,
                "the operation id belongs to another principal",
            ));
        }
        if standing[16..] != fingerprint[..] {
            return Err(MetadataError::refused(
                ErrorCode::OperationIntentMismatch,
                "the operation id was used before with another intent",
            ));
        }
        Ok(())
    }

    /// The principal that claimed `workspace` of `repository`, if any.
    pub fn workspace_owner(&self, repository: &Id16, workspace: &Id16) -> Result<Option<Id16>> {
        match self.get(&claim_key(WORKSPACE_CLAIM, repository, workspace))? {
            None => Ok(None),
            Some(v) => <[u8; 16]>::try_from(v.as_slice())
                .map(Some)
                .map_err(|_| self.corrupt("a workspace claim is not 16 bytes")),
        }
    }

    /// The principal that claimed `operation` of `repository`, if any.
    pub fn operation_owner(&self, repository: &Id16, operation: &Id16) -> Result<Option<Id16>> {
        match self.get(&claim_key(OPERATION_CLAIM, repository, operation))? {
            None => Ok(None),
            Some(v) if v.len() == 48 => {
                let mut owner = [0u8; 16];
                owner.copy_from_slice(&v[..16]);
                Ok(Some(owner))
            }
            Some(_) => Err(self.corrupt("an operation claim is not 48 bytes")),
        }
    }

    /// The recorded newest auth state, if any.
    pub fn revision(&self) -> Result<Option<AuthRevision>> {
        match self.get(KEY_REVISION)? {
            None => Ok(None),
            Some(b) => decode_revision(&b)
                .map(Some)
                .ok_or_else(|| self.corrupt("auth-revision is not exactly 24 bytes")),
        }
    }

    /// Before acting on an auth answer carrying `seen`: an answer from a
    /// lower revision of the recorded incarnation is `auth_unavailable`; a
    /// newer revision or another incarnation is recorded first (its own
    /// Immediate transaction), then the answer may be used.
    pub fn observe(&self, seen: AuthRevision) -> Result<()> {
        let tx = journal::begin_archived(&self.db, &self.archive)?;
        {
            let mut t = tx.open_table(TABLE)?;
            let current = t.get(KEY_REVISION)?.map(|v| v.value().to_vec());
            let current = match current {
                None => None,
                Some(b) => Some(
                    decode_revision(&b)
                        .ok_or_else(|| self.corrupt("auth-revision is not exactly 24 bytes"))?,
                ),
            };
            match current {
                Some(c) if c.incarnation == seen.incarnation && seen.revision < c.revision => {
                    return Err(MetadataError::refused(
                        ErrorCode::AuthUnavailable,
                        format!(
                            "the auth service answered from revision {}, older than {} seen \
                             before (was its database rolled back?)",
                            seen.revision, c.revision
                        ),
                    ));
                }
                Some(c) if c == seen => return Ok(()),
                _ => {
                    let mut v = [0u8; 24];
                    v[..16].copy_from_slice(&seen.incarnation);
                    v[16..].copy_from_slice(&seen.revision.to_le_bytes());
                    t.insert(KEY_REVISION, &v[..])?;
                }
            }
        }
        tx.commit()?;
        Ok(())
    }
}

/// Rebuild a lost `auth-state.redb` of `data_root` from its recovery
/// archive alone (the caller holds the data root's lock), through a
/// quarantined file published only when complete and verified.
pub fn recover(data_root: &Path) -> Result<journal::Replayed> {
    let path = data_root.join(AUTH_STATE_FILE);
    let dir = crate::archive::archive_dir(&path)?;
    crate::archive::recover(&dir, &path)
}

/// Whether `data_root` has an auth-state archive (`HEAD` present).
pub fn has_archive(data_root: &Path) -> bool {
    crate::archive::archive_dir(&data_root.join(AUTH_STATE_FILE))
        .is_ok_and(|d| d.join(crate::archive::HEAD_FILE).is_file())
}

/// Consolidate the archive of `data_root`'s `auth-state.redb` (offline:
/// the caller holds the data root's lock); `None` when there is none.
pub fn consolidate(data_root: &Path) -> Result<Option<crate::consolidate::Consolidated>> {
    let path = data_root.join(AUTH_STATE_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let db = Arc::new(Database::open(&path)?);
    let archive = Archive::open(&path, db)?;
    crate::consolidate::consolidate(&archive).map(Some)
}

fn decode_revision(b: &[u8]) -> Option<AuthRevision> {
    if b.len() != 24 {
        return None;
    }
    let mut incarnation = [0u8; 16];
    incarnation.copy_from_slice(&b[..16]);
    let mut r = [0u8; 8];
    r.copy_from_slice(&b[16..]);
    Some(AuthRevision {
        incarnation,
        revision: u64::from_le_bytes(r),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPO: Id16 = [1; 16];
    const ANN: Id16 = [0xA; 16];
    const BOB: Id16 = [0xB; 16];

    fn fresh() -> (tempfile::TempDir, AuthState) {
        let tmp = tempfile::tempdir().unwrap();
        let s = AuthState::create(tmp.path(), "studio").unwrap();
        (tmp, s)
    }

    fn code(e: MetadataError) -> ErrorCode {
        e.code()
    }

    #[test]
    fn the_file_holds_the_schema_and_namespace_bytes() {
        let (tmp, s) = fresh();
        assert_eq!(s.get(b"schema").unwrap().unwrap(), vec![1, 0, 0, 0]);
        assert_eq!(s.get(b"namespace").unwrap().unwrap(), b"studio".to_vec());
        drop(s);
        assert_eq!(
            code(AuthState::open(tmp.path(), "other").err().unwrap()),
            ErrorCode::Forbidden
        );
        assert!(AuthState::open(tmp.path(), "studio").is_ok());
        assert_eq!(
            code(AuthState::create(tmp.path(), "studio").err().unwrap()),
            ErrorCode::AlreadyExists
        );
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            code(AuthState::open(empty.path(), "studio").err().unwrap()),
            ErrorCode::NotFound
        );
    }

    #[test]
    fn a_workspace_claim_is_permanent_and_exact_bytes() {
        let (tmp, s) = fresh();
        let ws = [7; 16];
        s.claim_workspace(&REPO, &ws, &ANN).unwrap();
        s.claim_workspace(&REPO, &ws, &ANN).unwrap();
        assert_eq!(
            code(s.claim_workspace(&REPO, &ws, &BOB).unwrap_err()),
            ErrorCode::Forbidden
        );
        // The same workspace id in another repository is another claim.
        s.claim_workspace(&[2; 16], &ws, &BOB).unwrap();
        let mut key = vec![1u8];
        key.extend_from_slice(&REPO);
        key.extend_from_slice(&ws);
        assert_eq!(s.get(&key).unwrap().unwrap(), ANN.to_vec());
        drop(s);
        let s = AuthState::open(tmp.path(), "studio").unwrap();
        assert_eq!(
            code(s.claim_workspace(&REPO, &ws, &BOB).unwrap_err()),
            ErrorCode::Forbidden
        );
    }

    #[test]
    fn an_operation_claim_names_intent_and_owner() {
        let (_tmp, s) = fresh();
        let op = [9; 16];
        s.claim_operation(&REPO, &op, &ANN, &[1; 32]).unwrap();
        s.claim_operation(&REPO, &op, &ANN, &[1; 32]).unwrap();
        assert_eq!(
            code(s.claim_operation(&REPO, &op, &ANN, &[2; 32]).unwrap_err()),
            ErrorCode::OperationIntentMismatch
        );
        assert_eq!(
            code(s.claim_operation(&REPO, &op, &BOB, &[1; 32]).unwrap_err()),
            ErrorCode::Forbidden
        );
        let mut key = vec![2u8];
        key.extend_from_slice(&REPO);
        key.extend_from_slice(&op);
        let mut want = ANN.to_vec();
        want.extend_from_slice(&[1; 32]);
        assert_eq!(s.get(&key).unwrap().unwrap(), want);
    }

    #[test]
    fn revisions_only_move_forward_within_an_incarnation() {
        let (tmp, s) = fresh();
        let a = [0xAA; 16];
        assert_eq!(s.revision().unwrap(), None);
        s.observe(AuthRevision {
            incarnation: a,
            revision: 5,
        })
        .unwrap();
        s.observe(AuthRevision {
            incarnation: a,
            revision: 5,
        })
        .unwrap();
        s.observe(AuthRevision {
            incarnation: a,
            revision: 7,
        })
        .unwrap();
        assert_eq!(
            code(
                s.observe(AuthRevision {
                    incarnation: a,
                    revision: 6
                })
                .unwrap_err()
            ),
            ErrorCode::AuthUnavailable
        );
        let mut v = a.to_vec();
        v.extend_from_slice(&7u64.to_le_bytes());
        assert_eq!(s.get(b"auth-revision").unwrap().unwrap(), v);
        // A restore of the auth service: another incarnation replaces it,
        // even at a lower revision.
        let b = [0xBB; 16];
        s.observe(AuthRevision {
            incarnation: b,
            revision: 1,
        })
        .unwrap();
        drop(s);
        let s = AuthState::open(tmp.path(), "studio").unwrap();
        assert_eq!(
            s.revision().unwrap(),
            Some(AuthRevision {
                incarnation: b,
                revision: 1
            })
        );
    }

    #[test]
    fn a_revision_row_of_another_length_is_corrupt() {
        let (_tmp, s) = fresh();
        let tx = journal::begin_archived(&s.db, &s.archive).unwrap();
        {
            let mut t = tx.open_table(TABLE).unwrap();
            t.insert(&b"auth-revision"[..], &[0u8; 23][..]).unwrap();
        }
        tx.commit().unwrap();
        assert_eq!(code(s.revision().unwrap_err()), ErrorCode::Corrupt);
        let seen = AuthRevision {
            incarnation: [1; 16],
            revision: 1,
        };
        assert_eq!(code(s.observe(seen).unwrap_err()), ErrorCode::Corrupt);
        // Nothing was overwritten.
        assert_eq!(s.get(b"auth-revision").unwrap().unwrap().len(), 23);
    }

    #[test]
    fn claim_owners_read_back_and_a_damaged_claim_is_corrupt() {
        let (_tmp, s) = fresh();
        let (ws, op) = ([7; 16], [8; 16]);
        assert_eq!(s.workspace_owner(&REPO, &ws).unwrap(), None);
        assert_eq!(s.operation_owner(&REPO, &op).unwrap(), None);
        s.claim_workspace(&REPO, &ws, &ANN).unwrap();
        s.claim_operation(&REPO, &op, &BOB, &[3; 32]).unwrap();
        assert_eq!(s.workspace_owner(&REPO, &ws).unwrap(), Some(ANN));
        assert_eq!(s.operation_owner(&REPO, &op).unwrap(), Some(BOB));
        // Another repository holds other claims.
        assert_eq!(s.workspace_owner(&[2; 16], &ws).unwrap(), None);
        // A claim of another length is corrupt, never an owner.
        s.put_once(&claim_key(WORKSPACE_CLAIM, &REPO, &[9; 16]), &[1; 5])
            .unwrap();
        assert_eq!(
            code(s.workspace_owner(&REPO, &[9; 16]).unwrap_err()),
            ErrorCode::Corrupt
        );
        s.put_once(&claim_key(OPERATION_CLAIM, &REPO, &[9; 16]), &[1; 16])
            .unwrap();
        assert_eq!(
            code(s.operation_owner(&REPO, &[9; 16]).unwrap_err()),
            ErrorCode::Corrupt
        );
    }

    #[test]
    fn a_lost_file_is_rebuilt_from_its_archive_with_every_claim() {
        let (tmp, s) = fresh();
        let seen = AuthRevision {
            incarnation: [5; 16],
            revision: 9,
        };
        s.claim_workspace(&REPO, &[7; 16], &ANN).unwrap();
        s.claim_operation(&REPO, &[8; 16], &BOB, &[3; 32]).unwrap();
        s.observe(seen).unwrap();
        drop(s);
        assert!(has_archive(tmp.path()));
        let check = |tmp: &tempfile::TempDir| {
            std::fs::remove_file(tmp.path().join(AUTH_STATE_FILE)).unwrap();
            assert!(AuthState::open(tmp.path(), "studio").is_err());
            recover(tmp.path()).unwrap();
            let s = AuthState::open(tmp.path(), "studio").unwrap();
            assert_eq!(s.workspace_owner(&REPO, &[7; 16]).unwrap(), Some(ANN));
            assert_eq!(s.operation_owner(&REPO, &[8; 16]).unwrap(), Some(BOB));
            assert_eq!(s.revision().unwrap(), Some(seen));
            // The rebuilt file keeps its rules: a rollback is refused.
            let older = AuthRevision {
                incarnation: [5; 16],
                revision: 8,
            };
            assert_eq!(
                code(s.observe(older).unwrap_err()),
                ErrorCode::AuthUnavailable
            );
        };
        check(&tmp);
        // After consolidation the base alone carries the claims.
        let c = consolidate(tmp.path()).unwrap().unwrap();
        assert!(c.wrote_base && c.rows >= 5, "{c:?}");
        check(&tmp);
    }

    #[test]
    fn a_restored_copy_gets_a_fresh_archive_that_rebuilds_it() {
        let (tmp, s) = fresh();
        s.claim_workspace(&REPO, &[7; 16], &ANN).unwrap();
        drop(s);
        // A backup carries the file without its archive.
        let other = tempfile::tempdir().unwrap();
        std::fs::copy(
            tmp.path().join(AUTH_STATE_FILE),
            other.path().join(AUTH_STATE_FILE),
        )
        .unwrap();
        assert!(AuthState::open(other.path(), "studio").is_err());
        crate::archive::start_fresh(&other.path().join(AUTH_STATE_FILE)).unwrap();
        let s = AuthState::open(other.path(), "studio").unwrap();
        assert_eq!(s.workspace_owner(&REPO, &[7; 16]).unwrap(), Some(ANN));
        drop(s);
        std::fs::remove_file(other.path().join(AUTH_STATE_FILE)).unwrap();
        recover(other.path()).unwrap();
        let s = AuthState::open(other.path(), "studio").unwrap();
        assert_eq!(s.workspace_owner(&REPO, &[7; 16]).unwrap(), Some(ANN));
    }
}
