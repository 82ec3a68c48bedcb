//! The auth data directory (specification section 7.3, schema 4).
//!
//! ```text
//! <auth>/SCRIBE_AUTH   format marker, written last by init and restore
//! <auth>/LOCK          exclusive OS lock held by every opener
//! <auth>/auth.redb     table auth_v1 (&str -> &[u8]), every write Immediate
//! ```
//!
//! The pepper file and the revision witness live outside the directory.
//! [`AuthDir::open`] is the startup of every command that reads passwords or
//! changes state: lock, marker, pepper id, witness. Administrative changes
//! go through [`AuthDir::administer`]: one Immediate transaction applies the
//! change, advances `meta/revision` when anything changed, appends the audit
//! row and records the outcome under `operations/OP`; the witness is
//! rewritten after that commit (a crash in between leaves the database ahead
//! of the witness, which the next startup repairs).

use std::path::{Path, PathBuf};

use redb::{
    Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, WriteTransaction,
};
use scribe_format::sau2::Sau2Result;
use scribe_format::ErrorCode;

use crate::audit::{self, AuditArg};
use crate::ca;
use crate::error::AuthError;
use crate::files::{self, DirLock, Pepper, Witness, DATABASE_FILE, MARKER_FILE};
use crate::ids::Id;
use crate::password::{self, Password};
use crate::rows::*;

/// One day in milliseconds: how long an expired credential is kept.
pub const EXPIRY_GRACE_MS: u64 = 86_400_000;

type Table<'t> = redb::Table<'t, &'static str, &'static [u8]>;

/// Read one raw value.
fn get_raw(
    t: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &str,
) -> Result<Option<Vec<u8>>, AuthError> {
    Ok(t.get(key)
        .map_err(AuthError::db)?
        .map(|g| g.value().to_vec()))
}

fn get_row<R: Row>(
    t: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &Key,
) -> Result<Option<R>, AuthError> {
    let k = key.to_string();
    match get_raw(t, &k)? {
        None => Ok(None),
        Some(bytes) => R::decode(&bytes)
            .map(Some)
            .map_err(|e| AuthError::corrupt(&k, e)),
    }
}

fn require_row<R: Row>(
    t: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &Key,
) -> Result<R, AuthError> {
    get_row(t, key)?.ok_or_else(|| AuthError::MissingRow {
        key: key.to_string(),
    })
}

/// Every `(key, value)` whose key starts with `prefix`, in key order.
fn scan_prefix(
    t: &impl ReadableTable<&'static str, &'static [u8]>,
    prefix: &str,
) -> Result<Vec<(String, Vec<u8>)>, AuthError> {
    let mut out = Vec::new();
    for item in t.range::<&str>(prefix..).map_err(AuthError::db)? {
        let (k, v) = item.map_err(AuthError::db)?;
        let key = k.value();
        if !key.starts_with(prefix) {
            break;
        }
        out.push((key.to_owned(), v.value().to_vec()));
    }
    Ok(out)
}

fn put_row<R: Row>(t: &mut Table<'_>, key: &Key, row: &R) -> Result<(), AuthError> {
    let k = key.to_string();
    let bytes = row.encode().map_err(|e| AuthError::corrupt(&k, e))?;
    t.insert(k.as_str(), bytes.as_slice())
        .map_err(AuthError::db)?;
    Ok(())
}

fn begin_write(db: &Database) -> Result<WriteTransaction, AuthError> {
    let mut txn = db.begin_write().map_err(AuthError::db)?;
    txn.set_durability(Durability::Immediate)
        .map_err(AuthError::db)?;
    Ok(txn)
}

/// A refusal of an administrative command: recorded as its outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

/// How an administrative change ends without success.
#[derive(Debug)]
pub enum AdminError {
    /// Refused: nothing changes; the refusal is audited and recorded as the outcome.
    Refused(Refusal),
    /// Failed (I/O, database): nothing is recorded; the request may be retried.
    Failed(AuthError),
}

impl From<AuthError> for AdminError {
    fn from(e: AuthError) -> Self {
        AdminError::Failed(e)
    }
}

impl From<Refusal> for AdminError {
    fn from(r: Refusal) -> Self {
        AdminError::Refused(r)
    }
}

/// Who asks for an administrative change, and what it is.
pub struct AdminRequest<'a> {
    /// The authenticated administrator's user id.
    pub actor: Id,
    /// The request's operation id (replays return the recorded outcome).
    pub operation: Id,
    /// The request's intent digest (another intent under the same id is refused).
    pub intent: [u8; 32],
    /// The verb, for example `user-add`.
    pub command: &'a str,
    /// The arguments after the verb, as audited.
    pub arguments: &'a [AuditArg],
    /// The time of the request.
    pub now_ms: u64,
}

/// The write side of one administrative transaction.
pub struct AdminTxn<'t> {
    table: Table<'t>,
    changed: bool,
    pepper: &'t Pepper,
    /// Passwords hashed in this transaction: never allowed into its audit row.
    secrets: Vec<String>,
}

impl Drop for AdminTxn<'_> {
    fn drop(&mut self) {
        for s in &mut self.secrets {
            let mut b = std::mem::take(s).into_bytes();
            b.fill(0);
        }
    }
}

impl AdminTxn<'_> {
    /// Read a typed row.
    pub fn get<R: Row>(&self, key: &Key) -> Result<Option<R>, AuthError> {
        get_row(&self.table, key)
    }

    /// Whether a key exists.
    pub fn contains(&self, key: &Key) -> Result<bool, AuthError> {
        Ok(get_raw(&self.table, &key.to_string())?.is_some())
    }

    /// Every raw row under a key prefix (for listings).
    pub fn scan_prefix(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, AuthError> {
        scan_prefix(&self.table, prefix)
    }

    /// Write a typed row; the change advances the revision at commit.
    pub fn put<R: Row>(&mut self, key: &Key, row: &R) -> Result<(), AuthError> {
        self.changed = true;
        put_row(&mut self.table, key, row)
    }

    /// Delete a row; true if it existed.
    pub fn delete(&mut self, key: &Key) -> Result<bool, AuthError> {
        let existed = self
            .table
            .remove(key.to_string().as_str())
            .map_err(AuthError::db)?
            .is_some();
        self.changed |= existed;
        Ok(existed)
    }

    /// Set a user's password: a new PHC string and the next generation.
    pub fn set_password(&mut self, username: &str, password: &Password) -> Result<u64, AuthError> {
        self.secrets.push(password.expose().to_owned());
        let key = Key::Password(username.to_owned());
        let generation = self
            .get::<PasswordRow>(&key)?
            .map_or(1, |r| r.generation.saturating_add(1));
        let phc = password::hash(self.pepper.bytes(), password)?;
        self.put(&key, &PasswordRow { phc, generation })?;
        Ok(generation)
    }

    /// Register a credential with its key, certificate and subject index
    /// rows. Refuses (`already_exists`) a public key registered before.
    pub fn insert_credential(
        &mut self,
        credential: Id,
        row: &CredentialRow,
        certificate_pem: &str,
    ) -> Result<(), AdminError> {
        row.check()
            .map_err(|e| Refusal::new(ErrorCode::Malformed, e.to_string()))?;
        let key_key = Key::CredentialKey(row.key_id);
        if self.contains(&key_key)? {
            return Err(Refusal::new(
                ErrorCode::AlreadyExists,
                format!("the public key {} is registered already", row.key_id),
            )
            .into());
        }
        if self.contains(&Key::Credential(credential))? {
            return Err(Refusal::new(ErrorCode::AlreadyExists, "credential id in use").into());
        }
        self.put(&Key::Credential(credential), row)?;
        self.put(&key_key, &CredentialKeyRow { credential })?;
        self.put(
            &Key::CredentialCert(credential),
            &CredentialCertRow {
                pem: certificate_pem.to_owned(),
            },
        )?;
        self.put(
            &subject_index(row, credential),
            &SubjectCredentialRow {
                created_ms: row.created_ms,
            },
        )?;
        Ok(())
    }

    /// Append an audit row (`audit/SEQ`) in this transaction.
    pub fn audit(
        &mut self,
        unix_ms: u64,
        actor: Option<Id>,
        command: &str,
        operation: Id,
        ok: bool,
        args: &[AuditArg],
    ) -> Result<(), AuthError> {
        append_audit(self, unix_ms, actor, command, operation, ok, args)
    }

    /// Delete a credential with its key, certificate and index rows.
    pub fn remove_credential(&mut self, credential: Id) -> Result<bool, AuthError> {
        let Some(row) = self.get::<CredentialRow>(&Key::Credential(credential))? else {
            return Ok(false);
        };
        self.delete(&Key::Credential(credential))?;
        self.delete(&Key::CredentialKey(row.key_id))?;
        self.delete(&Key::CredentialCert(credential))?;
        self.delete(&subject_index(&row, credential))?;
        Ok(true)
    }
}

fn subject_index(row: &CredentialRow, credential: Id) -> Key {
    if row.kind == CredentialKind::Server {
        Key::ServerCredential {
            server: row.subject.clone(),
            credential,
        }
    } else {
        Key::UserCredential {
            username: row.subject.clone(),
            credential,
        }
    }
}

/// What `init` needs.
pub struct InitOptions {
    pub data: PathBuf,
    pub pepper_file: PathBuf,
    pub witness_file: PathBuf,
    pub trust_domain: String,
    /// The bootstrap administrator's username (`admin` by default in the CLI).
    pub admin_username: String,
    /// The administrator's password; `None` generates one (returned once).
    pub admin_password: Option<Password>,
    pub now_ms: u64,
}

/// What `init` made.
#[derive(Debug)]
pub struct InitReport {
    pub incarnation: Id,
    pub admin_id: Id,
    pub admin_username: String,
    /// The bootstrap administrator's never-expiring `user` credential.
    pub admin_credential: Id,
    pub admin_certificate_pem: String,
    /// Its PKCS#8 private key PEM: exists only here, never stored.
    pub admin_private_key_pem: String,
    /// The generated password, when none was given: shown once.
    pub generated_password: Option<Password>,
}

/// An open auth directory: locked, checked, ready.
pub struct AuthDir {
    data: PathBuf,
    witness_file: PathBuf,
    pepper: Pepper,
    db: Database,
    incarnation: Id,
    trust_domain: String,
    revision: u64,
    // Last: the lock is released after the database is closed.
    _lock: DirLock,
}

impl std::fmt::Debug for AuthDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthDir")
            .field("data", &self.data)
            .field("incarnation", &self.incarnation)
            .field("revision", &self.revision)
            .finish_non_exhaustive()
    }
}

/// Create `dir` for `init`/`restore`/`backup`: refuse one holding a marker,
/// lock it, and remove a database left by an interrupted run.
fn prepare_new_dir(dir: &Path) -> Result<DirLock, AuthError> {
    std::fs::create_dir_all(dir).map_err(|e| AuthError::io(dir, e))?;
    if dir.join(MARKER_FILE).exists() {
        return Err(AuthError::AlreadyInitialized {
            path: dir.to_owned(),
        });
    }
    let lock = DirLock::take(dir)?;
    if dir.join(MARKER_FILE).exists() {
        return Err(AuthError::AlreadyInitialized {
            path: dir.to_owned(),
        });
    }
    let db = dir.join(DATABASE_FILE);
    match std::fs::remove_file(&db) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(AuthError::io(&db, e)),
    }
    Ok(lock)
}

/// `auth.redb` holds the CA private keys: it is made readable by its
/// owner only (0600, Unix), whatever the umask, so a backup directory made
/// by `backup` (often under a shared `/backup`) does not hand them out.
fn create_db(dir: &Path) -> Result<Database, AuthError> {
    let path = dir.join(DATABASE_FILE);
    {
        let mut open = std::fs::OpenOptions::new();
        open.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
        open.open(&path).map_err(|e| AuthError::io(&path, e))?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| AuthError::io(&path, e))?;
    }
    Database::builder().create(&path).map_err(AuthError::db)
}

/// An existing directory opened for an offline command: marker checked,
/// lock held, database open. No pepper, no witness.
struct Offline {
    db: Database,
    _lock: DirLock,
}

impl Offline {
    fn open(dir: &Path) -> Result<Offline, AuthError> {
        files::check_marker(dir)?;
        let lock = DirLock::take(dir)?;
        let db = Database::builder()
            .open(dir.join(DATABASE_FILE))
            .map_err(AuthError::db)?;
        Ok(Offline { db, _lock: lock })
    }
}

/// Copy every row of `src` into a fresh `dst` database, checking that each
/// key belongs to a family and each row has its family's shape. Runs `edit`
/// on the destination table before the one Immediate commit.
fn copy_rows(
    src: &impl ReadableDatabase,
    dst: &Database,
    edit: impl FnOnce(&mut Table<'_>) -> Result<(), AuthError>,
) -> Result<(), AuthError> {
    let read = src.begin_read().map_err(AuthError::db)?;
    let from = read.open_table(TABLE).map_err(AuthError::db)?;
    let txn = begin_write(dst)?;
    {
        let mut to = txn.open_table(TABLE).map_err(AuthError::db)?;
        for item in from.iter().map_err(AuthError::db)? {
            let (k, v) = item.map_err(AuthError::db)?;
            let key = k.value();
            Key::parse(key)
                .and_then(|parsed| parsed.check_row(v.value()))
                .map_err(|e| AuthError::corrupt(key, e))?;
            to.insert(key, v.value()).map_err(AuthError::db)?;
        }
        edit(&mut to)?;
    }
    txn.commit().map_err(AuthError::db)
}

impl AuthDir {
    /// `scribe-auth init`: create the directory, its CAs and the bootstrap
    /// administrator. Refuses an existing witness and an existing directory.
    pub fn init(opts: InitOptions) -> Result<(AuthDir, InitReport), AuthError> {
        check_trust_domain(&opts.trust_domain).map_err(|e| AuthError::Invalid {
            what: "trust domain",
            reason: e.to_string(),
        })?;
        check_name("administrator username", &opts.admin_username).map_err(|e| {
            AuthError::Invalid {
                what: "administrator username",
                reason: e.to_string(),
            }
        })?;
        if opts.witness_file.exists() {
            return Err(AuthError::WitnessExists {
                path: opts.witness_file.clone(),
            });
        }
        let lock = prepare_new_dir(&opts.data)?;
        let pepper = Pepper::read_or_create(&opts.pepper_file)?;
        let (password, generated) = match opts.admin_password {
            Some(p) => (p, false),
            None => (Password::generate(), true),
        };
        let db = create_db(&opts.data)?;
        let incarnation = Id::random();
        let admin_id = Id::random();
        let admin_credential = Id::random();
        let revision = 1;
        let credential_ca = ca::generate(&opts.trust_domain, CaFamily::Credential, 1)?;
        let access_ca = ca::generate(&opts.trust_domain, CaFamily::Access, 1)?;
        let signer = ca::Signer::new(&credential_ca, &opts.trust_domain, CaFamily::Credential, 1)?;
        let (admin_key, admin_key_id) = ca::generate_key()?;
        let credential_row = CredentialRow {
            kind: CredentialKind::User,
            subject: opts.admin_username.clone(),
            expires_ms: NEVER_EXPIRES,
            enabled: true,
            label: "bootstrap administrator".into(),
            key_id: admin_key_id,
            created_ms: opts.now_ms,
            parent: None,
            generation: None,
        };
        let certificate = signer.issue(
            &admin_key,
            admin_credential,
            CredentialKind::User,
            &opts.admin_username,
            opts.now_ms,
            NEVER_EXPIRES,
        )?;
        let txn = begin_write(&db)?;
        {
            let mut atx = AdminTxn {
                table: txn.open_table(TABLE).map_err(AuthError::db)?,
                changed: false,
                pepper: &pepper,
                secrets: Vec::new(),
            };
            atx.put(
                &Key::PepperId,
                &PepperIdRow {
                    pepper_id: pepper.id(),
                },
            )?;
            atx.put(
                &Key::TrustDomain,
                &TrustDomainRow {
                    trust_domain: opts.trust_domain.clone(),
                },
            )?;
            atx.put(&Key::Incarnation, &IncarnationRow { incarnation })?;
            atx.put(&Key::Revision, &RevisionRow { revision })?;
            atx.put(&Key::AuditSequence, &AuditSequenceRow { sequence: 0 })?;
            atx.put(
                &Key::Ca {
                    family: CaFamily::Credential,
                    index: 1,
                },
                &credential_ca,
            )?;
            atx.put(
                &Key::Ca {
                    family: CaFamily::Access,
                    index: 1,
                },
                &access_ca,
            )?;
            atx.put(
                &Key::User(opts.admin_username.clone()),
                &UserRow {
                    id: admin_id,
                    name: opts.admin_username.clone(),
                    enabled: true,
                    administrator: true,
                    kind: UserKind::Person,
                },
            )?;
            atx.put(
                &Key::UserId(admin_id),
                &UserIdRow {
                    username: opts.admin_username.clone(),
                },
            )?;
            atx.set_password(&opts.admin_username, &password)?;
            atx.insert_credential(admin_credential, &credential_row, &certificate)
                .map_err(|e| match e {
                    AdminError::Failed(e) => e,
                    AdminError::Refused(r) => AuthError::Database(r.message),
                })?;
            let args = [
                AuditArg::word("--trust-domain"),
                AuditArg::word(&opts.trust_domain),
                AuditArg::word("--admin"),
                AuditArg::word(&opts.admin_username),
                AuditArg::key(admin_key_id),
            ];
            append_audit(
                &mut atx,
                opts.now_ms,
                Some(admin_id),
                "init",
                Id::random(),
                true,
                &args,
            )?;
        }
        txn.commit().map_err(AuthError::db)?;
        files::sync_dir(&opts.data)?;
        Witness {
            incarnation,
            revision,
        }
        .create(&opts.witness_file)?;
        files::write_marker(&opts.data)?;
        let report = InitReport {
            incarnation,
            admin_id,
            admin_username: opts.admin_username.clone(),
            admin_credential,
            admin_certificate_pem: certificate,
            admin_private_key_pem: admin_key.serialize_pem(),
            generated_password: generated.then_some(password),
        };
        let dir = AuthDir {
            data: opts.data,
            witness_file: opts.witness_file,
            pepper,
            db,
            incarnation,
            trust_domain: opts.trust_domain,
            revision,
            _lock: lock,
        };
        Ok((dir, report))
    }

    /// Startup: lock, marker (schema 3 is refused: run migrate), pepper id,
    /// witness (another incarnation or a database behind it is refused; a
    /// database ahead rewrites it).
    pub fn open(
        data: &Path,
        pepper_file: &Path,
        witness_file: &Path,
    ) -> Result<AuthDir, AuthError> {
        let Offline { db, _lock } = Offline::open(data)?;
        let (pepper_id, trust_domain, incarnation, revision) = {
            let read = db.begin_read().map_err(AuthError::db)?;
            let t = read.open_table(TABLE).map_err(AuthError::db)?;
            (
                require_row::<PepperIdRow>(&t, &Key::PepperId)?.pepper_id,
                require_row::<TrustDomainRow>(&t, &Key::TrustDomain)?.trust_domain,
                require_row::<IncarnationRow>(&t, &Key::Incarnation)?.incarnation,
                require_row::<RevisionRow>(&t, &Key::Revision)?.revision,
            )
        };
        let pepper = Pepper::read(pepper_file)?;
        if pepper.id() != pepper_id {
            return Err(AuthError::PepperMismatch {
                path: pepper_file.to_owned(),
            });
        }
        let witness = Witness::read(witness_file)?.ok_or_else(|| AuthError::WitnessMissing {
            path: witness_file.to_owned(),
        })?;
        if witness.incarnation != incarnation {
            return Err(AuthError::WitnessIncarnation {
                path: witness_file.to_owned(),
                witness: witness.incarnation.hex(),
                database: incarnation.hex(),
            });
        }
        if revision < witness.revision {
            return Err(AuthError::RolledBack {
                path: witness_file.to_owned(),
                database: revision,
                witness: witness.revision,
            });
        }
        if revision > witness.revision {
            Witness {
                incarnation,
                revision,
            }
            .write(witness_file)?;
        }
        Ok(AuthDir {
            data: data.to_owned(),
            witness_file: witness_file.to_owned(),
            pepper,
            db,
            incarnation,
            trust_domain,
            revision,
            _lock,
        })
    }

    pub fn data(&self) -> &Path {
        &self.data
    }

    pub fn incarnation(&self) -> Id {
        self.incarnation
    }

    pub fn trust_domain(&self) -> &str {
        &self.trust_domain
    }

    /// The current `meta/revision`.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Read a typed row (its own read transaction).
    pub fn get<R: Row>(&self, key: &Key) -> Result<Option<R>, AuthError> {
        let read = self.db.begin_read().map_err(AuthError::db)?;
        let t = read.open_table(TABLE).map_err(AuthError::db)?;
        get_row(&t, key)
    }

    /// Every raw row under a key prefix, in key order (one read transaction).
    pub fn scan_prefix(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, AuthError> {
        let read = self.db.begin_read().map_err(AuthError::db)?;
        let t = read.open_table(TABLE).map_err(AuthError::db)?;
        scan_prefix(&t, prefix)
    }

    /// Visit the rows under `prefix` from the highest key down, starting
    /// below `before` (exclusive) when given, until `visit` returns false
    /// (one read transaction; for the newest-first audit listing).
    pub fn scan_prefix_rev(
        &self,
        prefix: &str,
        before: Option<&str>,
        mut visit: impl FnMut(&str, &[u8]) -> Result<bool, AuthError>,
    ) -> Result<(), AuthError> {
        let read = self.db.begin_read().map_err(AuthError::db)?;
        let t = read.open_table(TABLE).map_err(AuthError::db)?;
        // Every key under `prefix` sorts below `prefix` with its last byte
        // raised by one (the prefixes used end in '/').
        let mut end = prefix.to_owned();
        let last = end
            .pop()
            .map_or('\u{1}', |ch| char::from_u32(ch as u32 + 1).unwrap_or(ch));
        end.push(last);
        let upper = match before {
            Some(b) if b < end.as_str() => b,
            _ => end.as_str(),
        };
        if upper <= prefix {
            return Ok(());
        }
        let range = t.range::<&str>(prefix..upper).map_err(AuthError::db)?;
        for item in range.rev() {
            let (k, v) = item.map_err(AuthError::db)?;
            let key = k.value();
            if !key.starts_with(prefix) {
                continue;
            }
            if !visit(key, v.value())? {
                break;
            }
        }
        Ok(())
    }

    /// Check every row: its key belongs to a family and its value has the
    /// family's shape. Returns the number of rows.
    pub fn verify(&self) -> Result<usize, AuthError> {
        let rows = self.scan_prefix("")?;
        for (k, v) in &rows {
            Key::parse(k)
                .and_then(|key| key.check_row(v))
                .map_err(|e| AuthError::corrupt(k, e))?;
        }
        Ok(rows.len())
    }

    /// Check a password for `username` (constant-time comparison; an
    /// unknown user costs the same work). Disabled users never match.
    pub fn check_password(&self, username: &str, password: &Password) -> Result<bool, AuthError> {
        let user = self.get::<UserRow>(&Key::User(username.to_owned()))?;
        let stored = self.get::<PasswordRow>(&Key::Password(username.to_owned()))?;
        match (user, stored) {
            (Some(user), Some(stored)) => {
                let ok = password::verify(self.pepper.bytes(), password, &stored.phc)?;
                Ok(ok && user.enabled)
            }
            _ => Ok(password::verify_unknown_user(self.pepper.bytes(), password)),
        }
    }

    /// Apply one administrative change (see the module documentation).
    ///
    /// A replay of `req.operation` with the same actor and intent returns the
    /// recorded outcome without applying anything; another intent is refused
    /// with `operation_intent_mismatch` (another actor: `forbidden`), with
    /// nothing written. `Err` means nothing was recorded.
    pub fn administer<F>(
        &mut self,
        req: &AdminRequest<'_>,
        change: F,
    ) -> Result<Sau2Result, AuthError>
    where
        F: FnOnce(&mut AdminTxn<'_>) -> Result<Vec<Vec<String>>, AdminError>,
    {
        let op_key = Key::Operation(req.operation);
        let txn = begin_write(&self.db)?;
        let outcome;
        let mut new_revision = None;
        {
            let mut atx = AdminTxn {
                table: txn.open_table(TABLE).map_err(AuthError::db)?,
                changed: false,
                pepper: &self.pepper,
                secrets: Vec::new(),
            };
            let op_raw = get_raw(&atx.table, &op_key.to_string())?;
            if let Some(bytes) = op_raw {
                let recorded = OperationRow::decode(&bytes)
                    .map_err(|e| AuthError::corrupt(&op_key.to_string(), e))?;
                drop(atx);
                txn.abort().map_err(AuthError::db)?;
                return Ok(if recorded.actor != req.actor {
                    Sau2Result::error(
                        ErrorCode::Forbidden,
                        "the operation id belongs to another user",
                    )
                } else if recorded.intent != req.intent {
                    Sau2Result::error(
                        ErrorCode::OperationIntentMismatch,
                        "the operation id was used before with another intent",
                    )
                } else {
                    recorded.result
                });
            }
            match change(&mut atx) {
                Ok(rows) => {
                    outcome = Sau2Result::Rows(rows);
                    if atx.changed {
                        let current =
                            require_row::<RevisionRow>(&atx.table, &Key::Revision)?.revision;
                        let next = current.checked_add(1).ok_or_else(|| {
                            AuthError::Database("meta/revision is at its maximum".into())
                        })?;
                        put_row(
                            &mut atx.table,
                            &Key::Revision,
                            &RevisionRow { revision: next },
                        )?;
                        new_revision = Some(next);
                    }
                    self.record(&mut atx, req, &outcome)?;
                }
                Err(AdminError::Failed(e)) => return Err(e),
                Err(AdminError::Refused(r)) => {
                    drop(atx);
                    txn.abort().map_err(AuthError::db)?;
                    let outcome = Sau2Result::error(r.code, r.message);
                    let txn = begin_write(&self.db)?;
                    {
                        let mut atx = AdminTxn {
                            table: txn.open_table(TABLE).map_err(AuthError::db)?,
                            changed: false,
                            pepper: &self.pepper,
                            secrets: Vec::new(),
                        };
                        self.record(&mut atx, req, &outcome)?;
                    }
                    txn.commit().map_err(AuthError::db)?;
                    return Ok(outcome);
                }
            }
        }
        txn.commit().map_err(AuthError::db)?;
        if let Some(revision) = new_revision {
            self.revision = revision;
            Witness {
                incarnation: self.incarnation,
                revision,
            }
            .write(&self.witness_file)?;
        }
        Ok(outcome)
    }

    fn record(
        &self,
        atx: &mut AdminTxn<'_>,
        req: &AdminRequest<'_>,
        outcome: &Sau2Result,
    ) -> Result<(), AuthError> {
        let ok = matches!(outcome, Sau2Result::Rows(_));
        append_audit(
            atx,
            req.now_ms,
            Some(req.actor),
            req.command,
            req.operation,
            ok,
            req.arguments,
        )?;
        let row = OperationRow {
            actor: req.actor,
            intent: req.intent,
            result: outcome.clone(),
        };
        let key = Key::Operation(req.operation).to_string();
        let bytes = row.encode().map_err(|e| AuthError::corrupt(&key, e))?;
        atx.table
            .insert(key.as_str(), bytes.as_slice())
            .map_err(AuthError::db)?;
        Ok(())
    }

    /// The intent digest of a request body (the SAU2 request bytes after the
    /// operation id): BLAKE3 keyed with a key derived from the pepper, so a
    /// stored digest of a `login` (whose body holds the password) allows no
    /// offline guessing without the pepper.
    pub fn intent_digest(&self, body: &[u8]) -> [u8; 32] {
        let key = blake3::derive_key("scribe-auth sau2 intent v1", self.pepper.bytes());
        *blake3::keyed_hash(&key, body).as_bytes()
    }

    /// Verify `password` against the stored PHC string of `username`: the
    /// user row (if any) and whether the password matched. An unknown user,
    /// or one without a password, costs one hash as well.
    pub fn verify_login(
        &self,
        username: &str,
        password: &Password,
    ) -> Result<(Option<UserRow>, bool), AuthError> {
        let user = self.get::<UserRow>(&Key::User(username.to_owned()))?;
        let stored = self.get::<PasswordRow>(&Key::Password(username.to_owned()))?;
        match (user, stored) {
            (Some(user), Some(stored)) => {
                let ok = password::verify(self.pepper.bytes(), password, &stored.phc)?;
                Ok((Some(user), ok))
            }
            (user, _) => {
                password::verify_unknown_user(self.pepper.bytes(), password);
                Ok((user, false))
            }
        }
    }

    /// One Immediate write transaction without an `operations/` outcome or
    /// a revision advance (login outcomes live under `sessions/`); the
    /// change may audit itself ([`AdminTxn::audit`]). A refusal or failure
    /// discards everything.
    pub fn transact<T>(
        &mut self,
        change: impl FnOnce(&mut AdminTxn<'_>) -> Result<T, AdminError>,
    ) -> Result<Result<T, Refusal>, AuthError> {
        let txn = begin_write(&self.db)?;
        let out = {
            let mut atx = AdminTxn {
                table: txn.open_table(TABLE).map_err(AuthError::db)?,
                changed: false,
                pepper: &self.pepper,
                secrets: Vec::new(),
            };
            change(&mut atx)
        };
        match out {
            Ok(v) => {
                txn.commit().map_err(AuthError::db)?;
                Ok(Ok(v))
            }
            Err(AdminError::Refused(r)) => {
                txn.abort().map_err(AuthError::db)?;
                Ok(Err(r))
            }
            Err(AdminError::Failed(e)) => Err(e),
        }
    }

    /// `user-add`: a new user with a fresh id (and a password, if given).
    pub fn add_user(
        &mut self,
        req: &AdminRequest<'_>,
        username: &str,
        administrator: bool,
        kind: UserKind,
        password: Option<&Password>,
    ) -> Result<Sau2Result, AuthError> {
        self.administer(req, |tx| {
            check_name("username", username)
                .map_err(|e| Refusal::new(ErrorCode::Usage, e.to_string()))?;
            if tx.contains(&Key::User(username.to_owned()))? {
                return Err(Refusal::new(
                    ErrorCode::AlreadyExists,
                    format!("user {username} exists"),
                )
                .into());
            }
            let id = Id::random();
            tx.put(
                &Key::User(username.to_owned()),
                &UserRow {
                    id,
                    name: username.to_owned(),
                    enabled: true,
                    administrator,
                    kind,
                },
            )?;
            tx.put(
                &Key::UserId(id),
                &UserIdRow {
                    username: username.to_owned(),
                },
            )?;
            if let Some(p) = password {
                tx.set_password(username, p)?;
            }
            Ok(vec![vec![id.hex()]])
        })
    }

    /// `user-set-password`.
    pub fn set_password(
        &mut self,
        req: &AdminRequest<'_>,
        username: &str,
        password: &Password,
    ) -> Result<Sau2Result, AuthError> {
        self.administer(req, |tx| {
            if !tx.contains(&Key::User(username.to_owned()))? {
                return Err(
                    Refusal::new(ErrorCode::NotFound, format!("no user {username}")).into(),
                );
            }
            let generation = tx.set_password(username, password)?;
            Ok(vec![vec![generation.to_string()]])
        })
    }

    /// `user-enable` / `user-disable`.
    pub fn set_user_enabled(
        &mut self,
        req: &AdminRequest<'_>,
        username: &str,
        enabled: bool,
    ) -> Result<Sau2Result, AuthError> {
        self.administer(req, |tx| {
            let key = Key::User(username.to_owned());
            let Some(mut user) = tx.get::<UserRow>(&key)? else {
                return Err(
                    Refusal::new(ErrorCode::NotFound, format!("no user {username}")).into(),
                );
            };
            user.enabled = enabled;
            tx.put(&key, &user)?;
            Ok(vec![])
        })
    }

    /// The expiry sweep: delete every credential (with its key, index and
    /// certificate rows) whose expiry is at least one day before `now_ms`.
    /// Audit rows and operation outcomes are never touched. Expired
    /// credentials already grant nothing, so the sweep does not advance the
    /// revision. Returns the deleted credential ids.
    pub fn sweep_expired(&mut self, now_ms: u64) -> Result<Vec<Id>, AuthError> {
        let txn = begin_write(&self.db)?;
        let mut removed = Vec::new();
        {
            let mut atx = AdminTxn {
                table: txn.open_table(TABLE).map_err(AuthError::db)?,
                changed: false,
                pepper: &self.pepper,
                secrets: Vec::new(),
            };
            for (k, v) in atx.scan_prefix("credentials/")? {
                let Ok(Key::Credential(id)) = Key::parse(&k) else {
                    return Err(AuthError::corrupt(
                        &k,
                        scribe_format::FormatError::invalid(
                            "credentials key",
                            "not a credential id",
                        ),
                    ));
                };
                let row = CredentialRow::decode(&v).map_err(|e| AuthError::corrupt(&k, e))?;
                if row.expires_ms != NEVER_EXPIRES
                    && row.expires_ms.saturating_add(EXPIRY_GRACE_MS) <= now_ms
                {
                    atx.remove_credential(id)?;
                    removed.push(id);
                }
            }
        }
        txn.commit().map_err(AuthError::db)?;
        Ok(removed)
    }

    /// Every trusted CA certificate of `family`, PEM, lowest index first.
    pub fn trust_anchor_pem(&self, family: CaFamily) -> Result<String, AuthError> {
        trust_anchor(&self.db, family)
    }

    /// The signing CA of `family`: the highest index.
    pub fn signer(&self, family: CaFamily) -> Result<ca::Signer, AuthError> {
        let rows = self.scan_prefix(&format!("ca/{}/", family.as_str()))?;
        let (k, v) = rows.last().ok_or_else(|| AuthError::MissingRow {
            key: format!("ca/{}/0001", family.as_str()),
        })?;
        let Ok(Key::Ca { index, .. }) = Key::parse(k) else {
            return Err(AuthError::corrupt(
                k,
                scribe_format::FormatError::invalid("ca key", "malformed"),
            ));
        };
        let row = CaRow::decode(v).map_err(|e| AuthError::corrupt(k, e))?;
        ca::Signer::new(&row, &self.trust_domain, family, index)
    }
}

fn trust_anchor(db: &Database, family: CaFamily) -> Result<String, AuthError> {
    let read = db.begin_read().map_err(AuthError::db)?;
    let t = read.open_table(TABLE).map_err(AuthError::db)?;
    let mut out = String::new();
    for (k, v) in scan_prefix(&t, &format!("ca/{}/", family.as_str()))? {
        let row = CaRow::decode(&v).map_err(|e| AuthError::corrupt(&k, e))?;
        out.push_str(&row.certificate_pem);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    if out.is_empty() {
        return Err(AuthError::MissingRow {
            key: format!("ca/{}/0001", family.as_str()),
        });
    }
    Ok(out)
}

/// Append `audit/SEQ` and advance `meta/audit-sequence`.
fn append_audit(
    atx: &mut AdminTxn<'_>,
    unix_ms: u64,
    actor: Option<Id>,
    command: &str,
    operation: Id,
    ok: bool,
    args: &[AuditArg],
) -> Result<(), AuthError> {
    let mut arguments = audit::render(args);
    if atx
        .secrets
        .iter()
        .any(|s| !s.is_empty() && arguments.contains(s.as_str()))
    {
        arguments = audit::WITHHELD.to_owned();
    }
    let sequence = require_row::<AuditSequenceRow>(&atx.table, &Key::AuditSequence)?
        .sequence
        .checked_add(1)
        .ok_or_else(|| AuthError::Database("meta/audit-sequence is at its maximum".into()))?;
    let row = AuditRow {
        unix_ms,
        actor,
        command: command.to_owned(),
        operation,
        ok,
        arguments,
    };
    put_row(&mut atx.table, &Key::Audit(sequence), &row)?;
    put_row(
        &mut atx.table,
        &Key::AuditSequence,
        &AuditSequenceRow { sequence },
    )?;
    Ok(())
}

/// `scribe-auth ca-cert`: the trust anchor PEM of `family` (offline: takes the lock).
pub fn ca_cert(data: &Path, family: CaFamily) -> Result<String, AuthError> {
    let off = Offline::open(data)?;
    trust_anchor(&off.db, family)
}

/// `scribe-auth backup --to`: a consistent copy of `auth.redb` (every row,
/// checked, in one read transaction) and the marker, written last. Never
/// the pepper or the witness. `to` must not hold an auth directory.
pub fn backup(data: &Path, to: &Path) -> Result<usize, AuthError> {
    let off = Offline::open(data)?;
    let _to_lock = prepare_new_dir(to)?;
    let dst = create_db(to)?;
    copy_rows(&off.db, &dst, |_| Ok(()))?;
    let rows = {
        let read = dst.begin_read().map_err(AuthError::db)?;
        let t = read.open_table(TABLE).map_err(AuthError::db)?;
        t.len().map_err(AuthError::db)? as usize
    };
    drop(dst);
    files::sync_dir(to)?;
    files::write_marker(to)?;
    Ok(rows)
}

/// `scribe-auth restore --from`: a new directory from a backup, with a new
/// incarnation and the next revision; the witness is rewritten (whatever
/// incarnation it named), then the marker is written last. The pepper must
/// be the backup's. Returns the opened directory.
pub fn restore(
    data: &Path,
    from: &Path,
    pepper_file: &Path,
    witness_file: &Path,
) -> Result<AuthDir, AuthError> {
    files::check_marker(from)?;
    let pepper = Pepper::read(pepper_file)?;
    let lock = prepare_new_dir(data)?;
    let src = redb::ReadOnlyDatabase::open(from.join(DATABASE_FILE)).map_err(AuthError::db)?;
    {
        let read = src.begin_read().map_err(AuthError::db)?;
        let t = read.open_table(TABLE).map_err(AuthError::db)?;
        if require_row::<PepperIdRow>(&t, &Key::PepperId)?.pepper_id != pepper.id() {
            return Err(AuthError::PepperMismatch {
                path: pepper_file.to_owned(),
            });
        }
    }
    let dst = create_db(data)?;
    let incarnation = Id::random();
    let mut revision = 0;
    let mut trust_domain = String::new();
    copy_rows(&src, &dst, |t| {
        revision = require_row::<RevisionRow>(t, &Key::Revision)?
            .revision
            .checked_add(1)
            .ok_or_else(|| AuthError::Database("meta/revision is at its maximum".into()))?;
        trust_domain = require_row::<TrustDomainRow>(t, &Key::TrustDomain)?.trust_domain;
        put_row(t, &Key::Incarnation, &IncarnationRow { incarnation })?;
        put_row(t, &Key::Revision, &RevisionRow { revision })
    })?;
    drop(src);
    files::sync_dir(data)?;
    Witness {
        incarnation,
        revision,
    }
    .write(witness_file)?;
    files::write_marker(data)?;
    Ok(AuthDir {
        data: data.to_owned(),
        witness_file: witness_file.to_owned(),
        pepper,
        db: dst,
        incarnation,
        trust_domain,
        revision,
        _lock: lock,
    })
}

/// `scribe-auth migrate`: schema 3 to 4. This build has no definition of
/// schema 3, so it refuses (after checking the marker and taking the lock)
/// without changing anything.
pub fn migrate(data: &Path) -> Result<(), AuthError> {
    match files::check_marker(data) {
        Ok(()) => Err(AuthError::MigrationUnavailable(format!(
            "{} is at schema 4 already: nothing to migrate",
            data.display()
        ))),
        Err(AuthError::NeedsMigration { .. }) => {
            let _lock = DirLock::take(data)?;
            Err(AuthError::MigrationUnavailable(format!(
                "{} is at schema 3, and this build cannot convert it: the schema 3 layout is not specified in this build (see docs/auth.md#migrate); nothing was changed",
                data.display()
            )))
        }
        Err(e) => Err(e),
    }
}
