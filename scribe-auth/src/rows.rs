//! Every key family of `auth_v1` (specification section 7.3) with a strict
//! typed row.
//!
//! Each value is one SAU2 row of strings (`u16 0 ‖ u16 1 ‖ u16 n ‖ n ×
//! str16`, [`scribe_format::sau2`]) except `operations/`, whose layout is
//! binary ([`OperationRow`]). Decoders refuse any other field count, any
//! field that is not in its canonical text form (decimal without leading
//! zeros, ids as 32 lowercase hex, `true`/`false`, the listed words) and any
//! combination the specification excludes, with a named [`FormatError`].

use std::fmt;

use scribe_format::sau2::{self, Sau2Result};
use scribe_format::FormatError;

use crate::ids::{parse_lower_hex, Id, KeyId};

/// The one table of `auth.redb`.
pub const TABLE: redb::TableDefinition<'static, &'static str, &'static [u8]> =
    redb::TableDefinition::new("auth_v1");

/// Longest user, server, namespace or repository name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// Check a name used inside a key (username, server, namespace, repository):
/// 1 to 128 bytes, no `/`, no whitespace or control characters.
pub fn check_name(what: &'static str, name: &str) -> Result<(), FormatError> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(FormatError::invalid(
            what,
            format!("must be 1 to {MAX_NAME_BYTES} bytes, found {}", name.len()),
        ));
    }
    if name
        .chars()
        .any(|c| c == '/' || c.is_whitespace() || c.is_control())
    {
        return Err(FormatError::invalid(
            what,
            format!(
                "{} contains '/', whitespace or a control character",
                scribe_format::echo::echo(name)
            ),
        ));
    }
    Ok(())
}

/// A decimal `u64` in canonical form (no sign, no leading zeros).
pub fn parse_u64(what: &'static str, s: &str) -> Result<u64, FormatError> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    if !canonical {
        return Err(FormatError::invalid(
            what,
            format!("not a canonical decimal: {s:?}"),
        ));
    }
    s.parse::<u64>()
        .map_err(|_| FormatError::invalid(what, format!("beyond u64: {s:?}")))
}

fn parse_bool(what: &'static str, s: &str) -> Result<bool, FormatError> {
    match s {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(FormatError::invalid(
            what,
            format!("expected true or false, found {s:?}"),
        )),
    }
}

fn bool_text(b: bool) -> String {
    if b { "true" } else { "false" }.to_owned()
}

fn opt_id(what: &'static str, s: &str) -> Result<Option<Id>, FormatError> {
    if s.is_empty() {
        Ok(None)
    } else {
        Ok(Some(Id::parse(s).map_err(|_| id_error(what, s))?))
    }
}

fn id(what: &'static str, s: &str) -> Result<Id, FormatError> {
    Id::parse(s).map_err(|_| id_error(what, s))
}

fn id_error(what: &'static str, s: &str) -> FormatError {
    FormatError::invalid(
        what,
        format!("expected 32 lowercase hex digits, found {s:?}"),
    )
}

fn opt_text<T: fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map(ToString::to_string).unwrap_or_default()
}

/// A 32-byte intent digest, shown as 64 lowercase hex digits.
fn digest(what: &'static str, s: &str) -> Result<[u8; 32], FormatError> {
    parse_lower_hex::<32>(s, what)
}

/// A typed row of one key family.
pub trait Row: Sized {
    /// The family name used in errors (`"users"`).
    const FAMILY: &'static str;
    /// The exact field count.
    const FIELDS: usize;
    /// The fields, in stored order.
    fn to_fields(&self) -> Vec<String>;
    /// Decode exactly [`Row::FIELDS`] fields.
    fn from_fields(fields: Vec<String>) -> Result<Self, FormatError>;

    /// The stored bytes.
    fn encode(&self) -> Result<Vec<u8>, FormatError> {
        sau2::encode_row(&self.to_fields())
    }

    /// Decode stored bytes, refusing any other shape.
    fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let fields = sau2::decode_row(bytes)?;
        if fields.len() != Self::FIELDS {
            return Err(FormatError::invalid(
                Self::FAMILY,
                format!(
                    "a row of {} fields expected, found {}",
                    Self::FIELDS,
                    fields.len()
                ),
            ));
        }
        Self::from_fields(fields)
    }
}

macro_rules! one_field_row {
    ($(#[$doc:meta])* $name:ident, $family:literal, $field:ident: $ty:ty, |$s:ident| $parse:expr, |$v:ident| $show:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $name {
            pub $field: $ty,
        }
        impl Row for $name {
            const FAMILY: &'static str = $family;
            const FIELDS: usize = 1;
            fn to_fields(&self) -> Vec<String> {
                let $v = &self.$field;
                vec![$show]
            }
            fn from_fields(fields: Vec<String>) -> Result<Self, FormatError> {
                let [$s]: [String; 1] = fields.try_into().map_err(|_| FormatError::invalid($family, "one field expected"))?;
                let $s = $s.as_str();
                Ok($name { $field: $parse })
            }
        }
    };
}

one_field_row!(
    /// `meta/pepper-id`: BLAKE3 hex of the pepper.
    PepperIdRow, "meta/pepper-id", pepper_id: [u8; 32],
    |s| digest("meta/pepper-id", s)?, |v| hex::encode(v));
one_field_row!(
    /// `meta/trust-domain`.
    TrustDomainRow, "meta/trust-domain", trust_domain: String,
    |s| { check_trust_domain(s)?; s.to_owned() }, |v| v.clone());
one_field_row!(
    /// `meta/incarnation`: new for each init, migrate and restore.
    IncarnationRow, "meta/incarnation", incarnation: Id,
    |s| id("meta/incarnation", s)?, |v| v.hex());
one_field_row!(
    /// `meta/revision`: advanced by every applied administrative change, logout and restore.
    RevisionRow, "meta/revision", revision: u64,
    |s| parse_u64("meta/revision", s)?, |v| v.to_string());
one_field_row!(
    /// `meta/audit-sequence`: the sequence number of the newest audit row (0: none yet).
    AuditSequenceRow, "meta/audit-sequence", sequence: u64,
    |s| parse_u64("meta/audit-sequence", s)?, |v| v.to_string());
one_field_row!(
    /// `user-ids/ID`.
    UserIdRow, "user-ids", username: String,
    |s| { check_name("user-ids.username", s)?; s.to_owned() }, |v| v.clone());
one_field_row!(
    /// `server-ids/ID`.
    ServerIdRow, "server-ids", name: String,
    |s| { check_name("server-ids.name", s)?; s.to_owned() }, |v| v.clone());
one_field_row!(
    /// `credential-keys/KEY_ID`: a public key is registered at most once.
    CredentialKeyRow, "credential-keys", credential: Id,
    |s| id("credential-keys.credential", s)?, |v| v.hex());
one_field_row!(
    /// `credential-certs/CRED`: the credential certificate PEM.
    CredentialCertRow, "credential-certs", pem: String,
    |s| { check_pem("credential-certs.pem", s, "CERTIFICATE")?; s.to_owned() }, |v| v.clone());
one_field_row!(
    /// `user-credentials/USERNAME/CRED`, `server-credentials/SERVERNAME/CRED`.
    SubjectCredentialRow, "subject-credentials", created_ms: u64,
    |s| parse_u64("subject-credentials.created ms", s)?, |v| v.to_string());
one_field_row!(
    /// `grants/NAMESPACE/REPOSITORY/USER_ID`.
    GrantRow, "grants", role: Role,
    |s| Role::parse(s)?, |v| v.as_str().to_owned());
one_field_row!(
    /// `namespace-admins/…`, `namespace-readers/…`, `delegates/…`.
    NamespaceMemberRow, "namespace-members", username: String,
    |s| { check_name("namespace-members.username", s)?; s.to_owned() }, |v| v.clone());

/// Check a trust domain: 1 to 253 bytes, no `/`, whitespace or control characters.
pub fn check_trust_domain(s: &str) -> Result<(), FormatError> {
    if s.is_empty()
        || s.len() > 253
        || s.chars()
            .any(|c| c == '/' || c.is_whitespace() || c.is_control())
    {
        return Err(FormatError::invalid(
            "trust domain",
            format!(
                "{} must be 1 to 253 bytes without '/', whitespace or control characters",
                scribe_format::echo::echo(s)
            ),
        ));
    }
    Ok(())
}

fn check_pem(what: &'static str, s: &str, label: &str) -> Result<(), FormatError> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    if !s.starts_with(&begin) || !s.trim_end().ends_with(&end) {
        return Err(FormatError::invalid(
            what,
            format!("not a {label} PEM block"),
        ));
    }
    Ok(())
}

/// `ca/credential/NNNN`, `ca/access/NNNN`: a CA certificate and its key.
#[derive(Clone, PartialEq, Eq)]
pub struct CaRow {
    pub certificate_pem: String,
    pub private_key_pem: String,
}

impl fmt::Debug for CaRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaRow")
            .field("certificate_pem", &self.certificate_pem)
            .field("private_key_pem", &"<redacted>")
            .finish()
    }
}

impl Row for CaRow {
    const FAMILY: &'static str = "ca";
    const FIELDS: usize = 2;
    fn to_fields(&self) -> Vec<String> {
        vec![self.certificate_pem.clone(), self.private_key_pem.clone()]
    }
    fn from_fields(f: Vec<String>) -> Result<Self, FormatError> {
        let [cert, key] = take::<2>(f, "ca")?;
        check_pem("ca.certificate", &cert, "CERTIFICATE")?;
        check_pem("ca.private key", &key, "PRIVATE KEY")?;
        Ok(CaRow {
            certificate_pem: cert,
            private_key_pem: key,
        })
    }
}

fn take<const N: usize>(f: Vec<String>, what: &'static str) -> Result<[String; N], FormatError> {
    let n = f.len();
    f.try_into()
        .map_err(|_| FormatError::invalid(what, format!("a row of {N} fields expected, found {n}")))
}

/// A user: person or service account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserKind {
    Person,
    Service,
}

/// `users/USERNAME`: `[id, name, enabled, administrator, person or service]`.
/// `name` is the username (the key's last part).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserRow {
    pub id: Id,
    pub name: String,
    pub enabled: bool,
    pub administrator: bool,
    pub kind: UserKind,
}

impl Row for UserRow {
    const FAMILY: &'static str = "users";
    const FIELDS: usize = 5;
    fn to_fields(&self) -> Vec<String> {
        vec![
            self.id.hex(),
            self.name.clone(),
            bool_text(self.enabled),
            bool_text(self.administrator),
            match self.kind {
                UserKind::Person => "person",
                UserKind::Service => "service",
            }
            .to_owned(),
        ]
    }
    fn from_fields(f: Vec<String>) -> Result<Self, FormatError> {
        let [uid, name, enabled, admin, kind] = take::<5>(f, "users")?;
        check_name("users.name", &name)?;
        Ok(UserRow {
            id: id("users.id", &uid)?,
            name,
            enabled: parse_bool("users.enabled", &enabled)?,
            administrator: parse_bool("users.administrator", &admin)?,
            kind: match kind.as_str() {
                "person" => UserKind::Person,
                "service" => UserKind::Service,
                _ => {
                    return Err(FormatError::invalid(
                        "users.kind",
                        format!("expected person or service, found {kind:?}"),
                    ))
                }
            },
        })
    }
}

/// `passwords/USERNAME`: `[PHC string, generation]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PasswordRow {
    pub phc: String,
    pub generation: u64,
}

impl Row for PasswordRow {
    const FAMILY: &'static str = "passwords";
    const FIELDS: usize = 2;
    fn to_fields(&self) -> Vec<String> {
        vec![self.phc.clone(), self.generation.to_string()]
    }
    fn from_fields(f: Vec<String>) -> Result<Self, FormatError> {
        let [phc, generation] = take::<2>(f, "passwords")?;
        if !phc.starts_with("$argon2id$") {
            return Err(FormatError::invalid(
                "passwords.phc",
                "not an argon2id PHC string",
            ));
        }
        Ok(PasswordRow {
            phc,
            generation: parse_u64("passwords.generation", &generation)?,
        })
    }
}

/// `servers/NAME`: `[id, name, enabled, namespace]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerRow {
    pub id: Id,
    pub name: String,
    pub enabled: bool,
    pub namespace: String,
}

impl Row for ServerRow {
    const FAMILY: &'static str = "servers";
    const FIELDS: usize = 4;
    fn to_fields(&self) -> Vec<String> {
        vec![
            self.id.hex(),
            self.name.clone(),
            bool_text(self.enabled),
            self.namespace.clone(),
        ]
    }
    fn from_fields(f: Vec<String>) -> Result<Self, FormatError> {
        let [sid, name, enabled, namespace] = take::<4>(f, "servers")?;
        check_name("servers.name", &name)?;
        check_name("servers.namespace", &namespace)?;
        Ok(ServerRow {
            id: id("servers.id", &sid)?,
            name,
            enabled: parse_bool("servers.enabled", &enabled)?,
            namespace,
        })
    }
}

/// The nine credential kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CredentialKind {
    User,
    Session,
    Automation,
    AutomationWrite,
    AutomationMaintain,
    AutomationAdmin,
    ServiceReader,
    ServiceWriter,
    Server,
}

impl CredentialKind {
    /// Every kind, in the specification's order.
    pub const ALL: [CredentialKind; 9] = [
        CredentialKind::User,
        CredentialKind::Session,
        CredentialKind::Automation,
        CredentialKind::AutomationWrite,
        CredentialKind::AutomationMaintain,
        CredentialKind::AutomationAdmin,
        CredentialKind::ServiceReader,
        CredentialKind::ServiceWriter,
        CredentialKind::Server,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::User => "user",
            CredentialKind::Session => "session",
            CredentialKind::Automation => "automation",
            CredentialKind::AutomationWrite => "automation-write",
            CredentialKind::AutomationMaintain => "automation-maintain",
            CredentialKind::AutomationAdmin => "automation-admin",
            CredentialKind::ServiceReader => "service-reader",
            CredentialKind::ServiceWriter => "service-writer",
            CredentialKind::Server => "server",
        }
    }

    pub fn parse(s: &str) -> Result<CredentialKind, FormatError> {
        CredentialKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| FormatError::invalid("credentials.kind", format!("unknown kind {s:?}")))
    }

    /// `automation`, `automation-write`, `automation-maintain`, `automation-admin`.
    pub fn is_automation(self) -> bool {
        matches!(
            self,
            CredentialKind::Automation
                | CredentialKind::AutomationWrite
                | CredentialKind::AutomationMaintain
                | CredentialKind::AutomationAdmin
        )
    }
}

/// The only credential key algorithm.
pub const ALGORITHM_P256: &str = "p256";

/// An expiry that never comes (the bootstrap administrator's).
pub const NEVER_EXPIRES: u64 = u64::MAX;

/// `credentials/CRED`: `[kind, subject, expires ms, enabled, label, key id,
/// algorithm, created ms, parent, generation]`, all ten always present.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialRow {
    pub kind: CredentialKind,
    /// The username, or the server name for kind `server`.
    pub subject: String,
    pub expires_ms: u64,
    pub enabled: bool,
    pub label: String,
    pub key_id: KeyId,
    pub created_ms: u64,
    /// Only on a derived automation credential.
    pub parent: Option<Id>,
    /// Always on `session` and `automation*`; on `user` exactly when
    /// administrator sign-in issued it; never on the others.
    pub generation: Option<u64>,
}

impl CredentialRow {
    /// Check the combinations the specification allows.
    pub fn check(&self) -> Result<(), FormatError> {
        check_name("credentials.subject", &self.subject)?;
        if self.label.len() > 256 || self.label.chars().any(char::is_control) {
            return Err(FormatError::invalid(
                "credentials.label",
                "at most 256 bytes without control characters",
            ));
        }
        if self.parent.is_some() && !self.kind.is_automation() {
            return Err(FormatError::invalid(
                "credentials.parent",
                format!(
                    "set only on a derived automation credential, not on {}",
                    self.kind.as_str()
                ),
            ));
        }
        let generation_required = self.kind == CredentialKind::Session || self.kind.is_automation();
        let generation_allowed = generation_required || self.kind == CredentialKind::User;
        match (
            self.generation.is_some(),
            generation_required,
            generation_allowed,
        ) {
            (false, true, _) => Err(FormatError::invalid(
                "credentials.generation",
                format!("always set on {}", self.kind.as_str()),
            )),
            (true, _, false) => Err(FormatError::invalid(
                "credentials.generation",
                format!("never set on {}", self.kind.as_str()),
            )),
            _ => Ok(()),
        }
    }
}

impl Row for CredentialRow {
    const FAMILY: &'static str = "credentials";
    const FIELDS: usize = 10;
    fn to_fields(&self) -> Vec<String> {
        vec![
            self.kind.as_str().to_owned(),
            self.subject.clone(),
            self.expires_ms.to_string(),
            bool_text(self.enabled),
            self.label.clone(),
            self.key_id.hex(),
            ALGORITHM_P256.to_owned(),
            self.created_ms.to_string(),
            opt_text(&self.parent),
            opt_text(&self.generation),
        ]
    }
    fn from_fields(f: Vec<String>) -> Result<Self, FormatError> {
        let [kind, subject, expires, enabled, label, key_id, algorithm, created, parent, generation] =
            take::<10>(f, "credentials")?;
        if algorithm != ALGORITHM_P256 {
            return Err(FormatError::invalid(
                "credentials.algorithm",
                format!("always p256, found {algorithm:?}"),
            ));
        }
        let row = CredentialRow {
            kind: CredentialKind::parse(&kind)?,
            subject,
            expires_ms: parse_u64("credentials.expires ms", &expires)?,
            enabled: parse_bool("credentials.enabled", &enabled)?,
            label,
            key_id: KeyId::parse(&key_id).map_err(|_| {
                FormatError::invalid(
                    "credentials.key id",
                    format!("expected 64 lowercase hex digits, found {key_id:?}"),
                )
            })?,
            created_ms: parse_u64("credentials.created ms", &created)?,
            parent: opt_id("credentials.parent", &parent)?,
            generation: if generation.is_empty() {
                None
            } else {
                Some(parse_u64("credentials.generation", &generation)?)
            },
        };
        row.check()?;
        Ok(row)
    }
}

/// A repository role of `grants/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Reader,
    Writer,
    Maintainer,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Writer => "writer",
            Role::Maintainer => "maintainer",
            Role::Admin => "admin",
        }
    }
    pub fn parse(s: &str) -> Result<Role, FormatError> {
        match s {
            "reader" => Ok(Role::Reader),
            "writer" => Ok(Role::Writer),
            "maintainer" => Ok(Role::Maintainer),
            "admin" => Ok(Role::Admin),
            _ => Err(FormatError::invalid(
                "grants.role",
                format!("unknown role {}", scribe_format::echo::echo(s)),
            )),
        }
    }
}

/// `visibility/NAMESPACE/REPOSITORY`: `[public or private, visibility revision]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VisibilityRow {
    pub public: bool,
    pub revision: u64,
}

impl Row for VisibilityRow {
    const FAMILY: &'static str = "visibility";
    const FIELDS: usize = 2;
    fn to_fields(&self) -> Vec<String> {
        vec![
            if self.public { "public" } else { "private" }.to_owned(),
            self.revision.to_string(),
        ]
    }
    fn from_fields(f: Vec<String>) -> Result<Self, FormatError> {
        let [vis, revision] = take::<2>(f, "visibility")?;
        let public = match vis.as_str() {
            "public" => true,
            "private" => false,
            _ => {
                return Err(FormatError::invalid(
                    "visibility",
                    format!("expected public or private, found {vis:?}"),
                ))
            }
        };
        Ok(VisibilityRow {
            public,
            revision: parse_u64("visibility.revision", &revision)?,
        })
    }
}

/// `sessions/OP`: a `login` or `admin-login` outcome `[user id, intent
/// digest, ok, expires ms, credential]`. A refused login has `ok` false and
/// empty expiry and credential (and an empty user id for an unknown user);
/// an accepted one has all five set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionOutcomeRow {
    pub user: Option<Id>,
    pub intent: [u8; 32],
    /// `Some((expires ms, credential))` when the login succeeded.
    pub issued: Option<(u64, Id)>,
}

impl Row for SessionOutcomeRow {
    const FAMILY: &'static str = "sessions";
    const FIELDS: usize = 5;
    fn to_fields(&self) -> Vec<String> {
        let (expires, cred) = match self.issued {
            Some((e, c)) => (e.to_string(), c.hex()),
            None => (String::new(), String::new()),
        };
        vec![
            opt_text(&self.user),
            hex::encode(self.intent),
            bool_text(self.issued.is_some()),
            expires,
            cred,
        ]
    }
    fn from_fields(f: Vec<String>) -> Result<Self, FormatError> {
        let [user, intent, ok, expires, cred] = take::<5>(f, "sessions")?;
        let user = opt_id("sessions.user id", &user)?;
        let intent = digest("sessions.intent digest", &intent)?;
        let issued = if parse_bool("sessions.ok", &ok)? {
            if user.is_none() {
                return Err(FormatError::invalid(
                    "sessions.user id",
                    "set on an accepted login",
                ));
            }
            Some((
                parse_u64("sessions.expires ms", &expires)?,
                id("sessions.credential", &cred)?,
            ))
        } else {
            if !expires.is_empty() || !cred.is_empty() {
                return Err(FormatError::invalid(
                    "sessions",
                    "a refused login has no expiry and no credential",
                ));
            }
            None
        };
        Ok(SessionOutcomeRow {
            user,
            intent,
            issued,
        })
    }
}

/// `automation/OP`: `[user id, intent digest, expires ms, credential]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutomationOutcomeRow {
    pub user: Id,
    pub intent: [u8; 32],
    pub expires_ms: u64,
    pub credential: Id,
}

impl Row for AutomationOutcomeRow {
    const FAMILY: &'static str = "automation";
    const FIELDS: usize = 4;
    fn to_fields(&self) -> Vec<String> {
        vec![
            self.user.hex(),
            hex::encode(self.intent),
            self.expires_ms.to_string(),
            self.credential.hex(),
        ]
    }
    fn from_fields(f: Vec<String>) -> Result<Self, FormatError> {
        let [user, intent, expires, cred] = take::<4>(f, "automation")?;
        Ok(AutomationOutcomeRow {
            user: id("automation.user id", &user)?,
            intent: digest("automation.intent digest", &intent)?,
            expires_ms: parse_u64("automation.expires ms", &expires)?,
            credential: id("automation.credential", &cred)?,
        })
    }
}

/// `derive/OP`: `[parent credential, intent digest, credential]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeriveOutcomeRow {
    pub parent: Id,
    pub intent: [u8; 32],
    pub credential: Id,
}

impl Row for DeriveOutcomeRow {
    const FAMILY: &'static str = "derive";
    const FIELDS: usize = 3;
    fn to_fields(&self) -> Vec<String> {
        vec![
            self.parent.hex(),
            hex::encode(self.intent),
            self.credential.hex(),
        ]
    }
    fn from_fields(f: Vec<String>) -> Result<Self, FormatError> {
        let [parent, intent, cred] = take::<3>(f, "derive")?;
        Ok(DeriveOutcomeRow {
            parent: id("derive.parent", &parent)?,
            intent: digest("derive.intent digest", &intent)?,
            credential: id("derive.credential", &cred)?,
        })
    }
}

/// `audit/SEQ`: `[unix ms, actor user id, command, operation id, ok or
/// rejected, arguments]`. The actor is empty when the caller was not
/// authenticated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRow {
    pub unix_ms: u64,
    pub actor: Option<Id>,
    pub command: String,
    pub operation: Id,
    pub ok: bool,
    /// Rendered by [`crate::audit::render`]: at most 1,024 bytes.
    pub arguments: String,
}

impl Row for AuditRow {
    const FAMILY: &'static str = "audit";
    const FIELDS: usize = 6;
    fn to_fields(&self) -> Vec<String> {
        vec![
            self.unix_ms.to_string(),
            opt_text(&self.actor),
            self.command.clone(),
            self.operation.hex(),
            if self.ok { "ok" } else { "rejected" }.to_owned(),
            self.arguments.clone(),
        ]
    }
    fn from_fields(f: Vec<String>) -> Result<Self, FormatError> {
        let [ms, actor, command, op, ok, arguments] = take::<6>(f, "audit")?;
        if command.is_empty()
            || command.len() > 64
            || command.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(FormatError::invalid(
                "audit.command",
                format!("not a command word: {command:?}"),
            ));
        }
        if arguments.len() > crate::audit::MAX_ARGUMENT_BYTES {
            return Err(FormatError::LimitExceeded {
                what: "audit.arguments",
                limit: crate::audit::MAX_ARGUMENT_BYTES as u64,
                actual: arguments.len() as u64,
            });
        }
        Ok(AuditRow {
            unix_ms: parse_u64("audit.unix ms", &ms)?,
            actor: opt_id("audit.actor", &actor)?,
            command,
            operation: id("audit.operation id", &op)?,
            ok: match ok.as_str() {
                "ok" => true,
                "rejected" => false,
                _ => {
                    return Err(FormatError::invalid(
                        "audit.outcome",
                        format!("expected ok or rejected, found {ok:?}"),
                    ))
                }
            },
            arguments,
        })
    }
}

/// `operations/OP`: `[16] actor user id ‖ [32] intent digest ‖ SAU2 result`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationRow {
    pub actor: Id,
    pub intent: [u8; 32],
    pub result: Sau2Result,
}

impl OperationRow {
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&self.actor.0);
        out.extend_from_slice(&self.intent);
        out.extend_from_slice(&self.result.encode()?);
        Ok(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<OperationRow, FormatError> {
        let mut r = scribe_format::bytes::Reader::new(bytes);
        let actor = Id(r.array("operations.actor")?);
        let intent = r.array("operations.intent digest")?;
        let result = Sau2Result::decode(r.rest())?;
        Ok(OperationRow {
            actor,
            intent,
            result,
        })
    }
}

/// The two certificate authorities (`ca/credential/`, `ca/access/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CaFamily {
    /// Signs credential certificates (users, sessions, automation, servers).
    Credential,
    /// Signs the auth service's own TLS serving certificates.
    Access,
}

impl CaFamily {
    pub fn as_str(self) -> &'static str {
        match self {
            CaFamily::Credential => "credential",
            CaFamily::Access => "access",
        }
    }
}

/// One key of `auth_v1`, by family.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    PepperId,
    TrustDomain,
    Incarnation,
    Revision,
    AuditSequence,
    Ca {
        family: CaFamily,
        index: u16,
    },
    User(String),
    UserId(Id),
    Password(String),
    Server(String),
    ServerId(Id),
    Credential(Id),
    CredentialKey(KeyId),
    CredentialCert(Id),
    UserCredential {
        username: String,
        credential: Id,
    },
    ServerCredential {
        server: String,
        credential: Id,
    },
    Grant {
        namespace: String,
        repository: String,
        user: Id,
    },
    NamespaceAdmin {
        namespace: String,
        user: Id,
    },
    NamespaceReader {
        namespace: String,
        user: Id,
    },
    Delegate {
        namespace: String,
        user: Id,
    },
    Visibility {
        namespace: String,
        repository: String,
    },
    Session(Id),
    Automation(Id),
    Derive(Id),
    Operation(Id),
    Audit(u64),
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::PepperId => f.write_str("meta/pepper-id"),
            Key::TrustDomain => f.write_str("meta/trust-domain"),
            Key::Incarnation => f.write_str("meta/incarnation"),
            Key::Revision => f.write_str("meta/revision"),
            Key::AuditSequence => f.write_str("meta/audit-sequence"),
            Key::Ca { family, index } => write!(f, "ca/{}/{index:04}", family.as_str()),
            Key::User(u) => write!(f, "users/{u}"),
            Key::UserId(i) => write!(f, "user-ids/{i}"),
            Key::Password(u) => write!(f, "passwords/{u}"),
            Key::Server(s) => write!(f, "servers/{s}"),
            Key::ServerId(i) => write!(f, "server-ids/{i}"),
            Key::Credential(c) => write!(f, "credentials/{c}"),
            Key::CredentialKey(k) => write!(f, "credential-keys/{k}"),
            Key::CredentialCert(c) => write!(f, "credential-certs/{c}"),
            Key::UserCredential {
                username,
                credential,
            } => write!(f, "user-credentials/{username}/{credential}"),
            Key::ServerCredential { server, credential } => {
                write!(f, "server-credentials/{server}/{credential}")
            }
            Key::Grant {
                namespace,
                repository,
                user,
            } => write!(f, "grants/{namespace}/{repository}/{user}"),
            Key::NamespaceAdmin { namespace, user } => {
                write!(f, "namespace-admins/{namespace}/{user}")
            }
            Key::NamespaceReader { namespace, user } => {
                write!(f, "namespace-readers/{namespace}/{user}")
            }
            Key::Delegate { namespace, user } => write!(f, "delegates/{namespace}/{user}"),
            Key::Visibility {
                namespace,
                repository,
            } => write!(f, "visibility/{namespace}/{repository}"),
            Key::Session(o) => write!(f, "sessions/{o}"),
            Key::Automation(o) => write!(f, "automation/{o}"),
            Key::Derive(o) => write!(f, "derive/{o}"),
            Key::Operation(o) => write!(f, "operations/{o}"),
            Key::Audit(seq) => write!(f, "audit/{seq:020}"),
        }
    }
}

impl Key {
    /// Parse a stored key, refusing any key of no family.
    pub fn parse(s: &str) -> Result<Key, FormatError> {
        let bad = || FormatError::invalid("auth_v1 key", format!("no key family matches {s:?}"));
        let parts: Vec<&str> = s.split('/').collect();
        let name = |what: &'static str, n: &str| -> Result<String, FormatError> {
            check_name(what, n)?;
            Ok(n.to_owned())
        };
        let key =
            match parts.as_slice() {
                ["meta", "pepper-id"] => Key::PepperId,
                ["meta", "trust-domain"] => Key::TrustDomain,
                ["meta", "incarnation"] => Key::Incarnation,
                ["meta", "revision"] => Key::Revision,
                ["meta", "audit-sequence"] => Key::AuditSequence,
                ["ca", family, index] => {
                    let family = match *family {
                        "credential" => CaFamily::Credential,
                        "access" => CaFamily::Access,
                        _ => return Err(bad()),
                    };
                    if index.len() != 4 || !index.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(FormatError::invalid(
                            "ca key",
                            format!("index must be 4 digits: {s:?}"),
                        ));
                    }
                    Key::Ca {
                        family,
                        index: index.parse().map_err(|_| bad())?,
                    }
                }
                ["users", u] => Key::User(name("users key", u)?),
                ["user-ids", i] => Key::UserId(id("user-ids key", i)?),
                ["passwords", u] => Key::Password(name("passwords key", u)?),
                ["servers", n] => Key::Server(name("servers key", n)?),
                ["server-ids", i] => Key::ServerId(id("server-ids key", i)?),
                ["credentials", c] => Key::Credential(id("credentials key", c)?),
                ["credential-keys", k] => Key::CredentialKey(KeyId::parse(k)?),
                ["credential-certs", c] => Key::CredentialCert(id("credential-certs key", c)?),
                ["user-credentials", u, c] => Key::UserCredential {
                    username: name("user-credentials key", u)?,
                    credential: id("user-credentials key", c)?,
                },
                ["server-credentials", n, c] => Key::ServerCredential {
                    server: name("server-credentials key", n)?,
                    credential: id("server-credentials key", c)?,
                },
                ["grants", ns, repo, u] => Key::Grant {
                    namespace: name("grants key", ns)?,
                    repository: name("grants key", repo)?,
                    user: id("grants key", u)?,
                },
                ["namespace-admins", ns, u] => Key::NamespaceAdmin {
                    namespace: name("namespace-admins key", ns)?,
                    user: id("namespace-admins key", u)?,
                },
                ["namespace-readers", ns, u] => Key::NamespaceReader {
                    namespace: name("namespace-readers key", ns)?,
                    user: id("namespace-readers key", u)?,
                },
                ["delegates", ns, u] => Key::Delegate {
                    namespace: name("delegates key", ns)?,
                    user: id("delegates key", u)?,
                },
                ["visibility", ns, repo] => Key::Visibility {
                    namespace: name("visibility key", ns)?,
                    repository: name("visibility key", repo)?,
                },
                ["sessions", o] => Key::Session(id("sessions key", o)?),
                ["automation", o] => Key::Automation(id("automation key", o)?),
                ["derive", o] => Key::Derive(id("derive key", o)?),
                ["operations", o] => Key::Operation(id("operations key", o)?),
                ["audit", seq] => {
                    if seq.len() != 20 || !seq.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(FormatError::invalid(
                            "audit key",
                            format!("sequence must be 20 digits: {s:?}"),
                        ));
                    }
                    Key::Audit(seq.parse().map_err(|_| {
                        FormatError::invalid("audit key", format!("beyond u64: {s:?}"))
                    })?)
                }
                _ => return Err(bad()),
            };
        Ok(key)
    }

    /// Decode `bytes` as the row of this key's family, refusing any other
    /// shape (and, for rows that repeat their key, any disagreement).
    pub fn check_row(&self, bytes: &[u8]) -> Result<(), FormatError> {
        match self {
            Key::PepperId => {
                PepperIdRow::decode(bytes)?;
            }
            Key::TrustDomain => {
                TrustDomainRow::decode(bytes)?;
            }
            Key::Incarnation => {
                IncarnationRow::decode(bytes)?;
            }
            Key::Revision => {
                RevisionRow::decode(bytes)?;
            }
            Key::AuditSequence => {
                AuditSequenceRow::decode(bytes)?;
            }
            Key::Ca { .. } => {
                CaRow::decode(bytes)?;
            }
            Key::User(u) => {
                if UserRow::decode(bytes)?.name != *u {
                    return Err(FormatError::invalid("users.name", "differs from the key"));
                }
            }
            Key::UserId(_) => {
                UserIdRow::decode(bytes)?;
            }
            Key::Password(_) => {
                PasswordRow::decode(bytes)?;
            }
            Key::Server(n) => {
                if ServerRow::decode(bytes)?.name != *n {
                    return Err(FormatError::invalid("servers.name", "differs from the key"));
                }
            }
            Key::ServerId(_) => {
                ServerIdRow::decode(bytes)?;
            }
            Key::Credential(_) => {
                CredentialRow::decode(bytes)?;
            }
            Key::CredentialKey(_) => {
                CredentialKeyRow::decode(bytes)?;
            }
            Key::CredentialCert(_) => {
                CredentialCertRow::decode(bytes)?;
            }
            Key::UserCredential { .. } | Key::ServerCredential { .. } => {
                SubjectCredentialRow::decode(bytes)?;
            }
            Key::Grant { .. } => {
                GrantRow::decode(bytes)?;
            }
            Key::NamespaceAdmin { .. } | Key::NamespaceReader { .. } | Key::Delegate { .. } => {
                NamespaceMemberRow::decode(bytes)?;
            }
            Key::Visibility { .. } => {
                VisibilityRow::decode(bytes)?;
            }
            Key::Session(_) => {
                SessionOutcomeRow::decode(bytes)?;
            }
            Key::Automation(_) => {
                AutomationOutcomeRow::decode(bytes)?;
            }
            Key::Derive(_) => {
                DeriveOutcomeRow::decode(bytes)?;
            }
            Key::Operation(_) => {
                OperationRow::decode(bytes)?;
            }
            Key::Audit(_) => {
                AuditRow::decode(bytes)?;
            }
        }
        Ok(())
    }
}
