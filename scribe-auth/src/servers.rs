//! Storage servers (`docs/auth.md#storage-servers`): `server-register`
//! (an administrator registers a scribe-server and the service issues its
//! certificate), and the two verbs a registered server calls with its
//! `server` credential: `resolve` (who a presented client certificate is
//! and what they hold in the server's namespace) and `revision` (the auth
//! state's incarnation and revision, for cache invalidation).
//!
//! A server's certificate is signed by the highest `ca/access` CA (the CA
//! clients already trust for the auth service itself), so a signed-in
//! client trusts every registered server without another file; it carries
//! serverAuth (the server serves TLS with it, SANs = its host names and
//! addresses) and clientAuth (it authenticates the server to this
//! service, which therefore trusts the access CAs for client certificates
//! too; only a certificate stored under `credential-certs/` is accepted).

use rcgen::{
    DistinguishedName, DnType, ExtendedKeyUsagePurpose, Ia5String, IsCa, KeyUsagePurpose, SanType,
    SerialNumber,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use scribe_format::sau2::{Sau2Request, Sau2Result};
use scribe_format::ErrorCode;

use crate::audit::AuditArg;
use crate::ca::{cert_err, credential_uri, to_time, P256PublicKey, Signer};
use crate::dir::{AdminError, AdminRequest, AuthDir, Refusal};
use crate::error::AuthError;
use crate::ids::{Id, KeyId};
use crate::rows::*;
use crate::service::{certificate_serial, internal, refusal, Service};

/// Most host names or addresses one server certificate names.
pub const MAX_HOSTS: usize = 32;

impl Signer {
    /// A storage server's certificate: subject `CN=<server name>,
    /// O=<trust domain>, OU=server`, serial = the credential id, SANs = every
    /// host (DNS name or IP address) and the URI
    /// `scribe-credential://<trust domain>/<credential id>`, serverAuth and
    /// clientAuth, valid from `created_ms` with no end (revoked by disabling
    /// the credential or the server).
    pub fn issue_server(
        &self,
        public_key: &P256PublicKey,
        credential: Id,
        name: &str,
        hosts: &[String],
        created_ms: u64,
    ) -> Result<String, AuthError> {
        let mut params = rcgen::CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        dn.push(DnType::OrganizationName, self.trust_domain.as_str());
        dn.push(
            DnType::OrganizationalUnitName,
            CredentialKind::Server.as_str(),
        );
        params.distinguished_name = dn;
        for h in hosts {
            params
                .subject_alt_names
                .push(match h.parse::<std::net::IpAddr>() {
                    Ok(ip) => SanType::IpAddress(ip),
                    Err(_) => SanType::DnsName(Ia5String::try_from(h.as_str()).map_err(cert_err)?),
                });
        }
        params.subject_alt_names.push(SanType::URI(
            Ia5String::try_from(credential_uri(&self.trust_domain, credential))
                .map_err(cert_err)?,
        ));
        params.serial_number = Some(SerialNumber::from(credential.0.to_vec()));
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        params.not_before = to_time(created_ms.saturating_sub(3_600_000))?;
        Ok(params
            .signed_by(public_key, &self.cert, &self.key)
            .map_err(cert_err)?
            .pem())
    }
}

/// A host name or address for a certificate: an IP address, or a DNS name
/// of letters, digits, `-` and `.` (1 to 253 bytes).
fn check_host(h: &str) -> Result<(), Refusal> {
    if h.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    let ok = !h.is_empty()
        && h.len() <= 253
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(Refusal::new(
            ErrorCode::Usage,
            format!(
                "{} is not a host name or IP address",
                scribe_format::echo::echo(h)
            ),
        ))
    }
}

/// The credential a verified client certificate names, checked like every
/// caller: the serial names a credential whose stored certificate is
/// exactly this one, enabled and unexpired.
fn presented(dir: &AuthDir, der: &[u8]) -> Result<Option<(Id, CredentialRow)>, AuthError> {
    let Some(credential) = certificate_serial(der) else {
        return Ok(None);
    };
    let Some(row) = dir.get::<CredentialRow>(&Key::Credential(credential))? else {
        return Ok(None);
    };
    let Some(stored) = dir.get::<CredentialCertRow>(&Key::CredentialCert(credential))? else {
        return Ok(None);
    };
    let same = CertificateDer::from_pem_slice(stored.pem.as_bytes())
        .map(|c| c.as_ref() == der)
        .unwrap_or(false);
    Ok(same.then_some((credential, row)))
}

fn usable(row: &CredentialRow, now_ms: u64) -> bool {
    row.enabled && (row.expires_ms == NEVER_EXPIRES || row.expires_ms > now_ms)
}

/// The registered, enabled server a `server` credential belongs to.
fn server_caller(dir: &AuthDir, client_cert: Option<&[u8]>) -> Result<ServerRow, Sau2Result> {
    let Some(der) = client_cert else {
        return Err(refusal(
            ErrorCode::Unauthenticated,
            "this verb needs a server credential certificate",
        ));
    };
    let (_, row) = presented(dir, der)
        .map_err(internal)?
        .ok_or_else(|| refusal(ErrorCode::Unauthenticated, "the credential is not known"))?;
    if row.kind != CredentialKind::Server {
        return Err(refusal(
            ErrorCode::Forbidden,
            "only a registered storage server may use this verb",
        ));
    }
    if !usable(&row, crate::now_ms()) {
        return Err(refusal(
            ErrorCode::Unauthenticated,
            "the server credential is disabled or expired",
        ));
    }
    dir.get::<ServerRow>(&Key::Server(row.subject.clone()))
        .map_err(internal)?
        .filter(|s| s.enabled)
        .ok_or_else(|| {
            refusal(
                ErrorCode::Unauthenticated,
                "the server is disabled or removed",
            )
        })
}

fn revision_row(dir: &AuthDir) -> Vec<String> {
    vec![
        "revision".to_owned(),
        dir.incarnation().hex(),
        dir.revision().to_string(),
    ]
}

/// `revision` (server credential): `[[incarnation, revision]]`.
pub fn revision(svc: &Service, client_cert: Option<&[u8]>) -> Sau2Result {
    let dir = svc.read_dir();
    if let Err(r) = server_caller(&dir, client_cert) {
        return r;
    }
    Sau2Result::Rows(vec![vec![
        dir.incarnation().hex(),
        dir.revision().to_string(),
    ]])
}

/// The commands a storage server may record with `server-audit`.
pub const SERVER_AUDIT_COMMANDS: &[&str] = &["lock-force-release"];

/// `server-audit USER_ID COMMAND ARGS...` (server credential, #18 item 1):
/// a registered storage server records an action it allowed `USER_ID` to
/// take there that concerns other users (a forced lock release), as an
/// `ok` audit row whose first argument is the server's name. Only the
/// commands of [`SERVER_AUDIT_COMMANDS`]; the server calls it before it
/// acts and refuses the action when the row cannot be written.
pub fn server_audit(svc: &Service, req: &Sau2Request, client_cert: Option<&[u8]>) -> Sau2Result {
    let server = {
        let dir = svc.read_dir();
        match server_caller(&dir, client_cert) {
            Ok(s) => s,
            Err(r) => return r,
        }
    };
    let (user, command, rest) = match req.arguments.as_slice() {
        [u, c, rest @ ..] => (u, c, rest),
        _ => {
            return refusal(
                ErrorCode::Usage,
                "server-audit takes USER_ID COMMAND [ARGUMENTS...]",
            )
        }
    };
    let Ok(user) = Id::parse(user) else {
        return refusal(ErrorCode::Usage, "the user id is not 32 hex digits");
    };
    let Some(command) = SERVER_AUDIT_COMMANDS
        .iter()
        .find(|c| **c == command.as_str())
    else {
        return refusal(
            ErrorCode::Usage,
            format!("server-audit records only {SERVER_AUDIT_COMMANDS:?}"),
        );
    };
    let mut args = vec![AuditArg::word(&server.name)];
    args.extend(rest.iter().map(|a| AuditArg::word(a)));
    let now = crate::now_ms();
    let r = svc.write_dir().transact(|tx| {
        tx.audit(now, Some(user), command, Id(req.operation), true, &args)?;
        Ok(())
    });
    match r {
        Err(e) => internal(e),
        Ok(Err(r)) => refusal(r.code, r.message),
        Ok(Ok(())) => Sau2Result::Rows(Vec::new()),
    }
}

/// `resolve CERTIFICATE_HEX` (server credential): who the client
/// certificate (DER, lowercase hex) is, in the calling server's namespace.
/// Rows, all read under one lock (one consistent revision):
///
/// - `["revision", INCARNATION, REVISION]`, always first;
/// - `["credential", ID, KIND, ENABLED, EXPIRES_MS]` when the certificate
///   is exactly a stored credential's (absent: unknown, forged or removed);
/// - `["user", USER_ID, USERNAME, ENABLED, ADMINISTRATOR]` for a user's
///   credential whose user exists;
/// - `["namespace-admin"]`, `["namespace-reader"]` when the user is one;
/// - `["grant", REPOSITORY, ROLE]` per grant of the user in the namespace;
/// - `["visibility", REPOSITORY, public|private]` per visibility row of the
///   namespace.
pub fn resolve(svc: &Service, req: &Sau2Request, client_cert: Option<&[u8]>) -> Sau2Result {
    let dir = svc.read_dir();
    let server = match server_caller(&dir, client_cert) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let [cert_hex] = match <[String; 1]>::try_from(req.arguments.clone()) {
        Ok(a) => a,
        Err(_) => {
            return refusal(
                ErrorCode::Usage,
                "resolve takes CERTIFICATE (the client certificate, DER as hex)",
            )
        }
    };
    let Ok(der) = hex::decode(&cert_hex) else {
        return refusal(ErrorCode::Usage, "the certificate is not hex");
    };
    match resolve_rows(&dir, &server.namespace, &der) {
        Ok(rows) => Sau2Result::Rows(rows),
        Err(e) => internal(e),
    }
}

fn resolve_rows(dir: &AuthDir, namespace: &str, der: &[u8]) -> Result<Vec<Vec<String>>, AuthError> {
    let mut rows = vec![revision_row(dir)];
    let Some((credential, row)) = presented(dir, der)? else {
        return Ok(rows);
    };
    rows.push(vec![
        "credential".into(),
        credential.hex(),
        row.kind.as_str().into(),
        bool_word(row.enabled).into(),
        row.expires_ms.to_string(),
    ]);
    if row.kind == CredentialKind::Server {
        return Ok(rows);
    }
    let Some(user) = dir.get::<UserRow>(&Key::User(row.subject.clone()))? else {
        return Ok(rows);
    };
    rows.push(vec![
        "user".into(),
        user.id.hex(),
        user.name.clone(),
        bool_word(user.enabled).into(),
        bool_word(user.administrator).into(),
    ]);
    let uid = user.id;
    if dir
        .get::<NamespaceMemberRow>(&Key::NamespaceAdmin {
            namespace: namespace.to_owned(),
            user: uid,
        })?
        .is_some()
    {
        rows.push(vec!["namespace-admin".into()]);
    }
    if dir
        .get::<NamespaceMemberRow>(&Key::NamespaceReader {
            namespace: namespace.to_owned(),
            user: uid,
        })?
        .is_some()
    {
        rows.push(vec!["namespace-reader".into()]);
    }
    for (key, bytes) in dir.scan_prefix(&format!("grants/{namespace}/"))? {
        let Ok(Key::Grant {
            repository, user, ..
        }) = Key::parse(&key)
        else {
            continue;
        };
        if user != uid {
            continue;
        }
        let grant = GrantRow::decode(&bytes).map_err(|e| AuthError::corrupt(&key, e))?;
        rows.push(vec!["grant".into(), repository, grant.role.as_str().into()]);
    }
    for (key, bytes) in dir.scan_prefix(&format!("visibility/{namespace}/"))? {
        let Ok(Key::Visibility { repository, .. }) = Key::parse(&key) else {
            continue;
        };
        let v = VisibilityRow::decode(&bytes).map_err(|e| AuthError::corrupt(&key, e))?;
        rows.push(vec![
            "visibility".into(),
            repository,
            if v.public { "public" } else { "private" }.into(),
        ]);
    }
    Ok(rows)
}

fn bool_word(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

/// `server-register NAME NAMESPACE SPKI_HEX [HOST]...` (a global
/// administrator signed in with `admin-login`, as for `user-add`):
/// a `servers/NAME` row (new id, enabled) and a `server` credential for
/// the server's own P-256 key with a certificate signed by the access CA.
/// Answers `[[server id, credential id, certificate PEM, credential CA
/// PEM(s), access CA PEM(s), trust domain, incarnation, revision]]`. An
/// audited administrative change (advances the revision; the operation id
/// replays).
pub fn register(
    svc: &Service,
    req: &Sau2Request,
    body: &[u8],
    client_cert: Option<&[u8]>,
) -> Sau2Result {
    let caller = match svc.caller(client_cert) {
        Ok(c) => c,
        Err(r) => return r,
    };
    // A global administrative power, like `user-add`: an administrator
    // signed in for administration (`scribe login --admin`, a `user`
    // credential), not an administrator's everyday `session` and no
    // automation credential. Decided here so that nothing is signed for a
    // caller without it; the refusal is recorded inside the change below
    // (a `rejected` audit row, like every refused administrative verb).
    let allowed = crate::admin::require_global(&caller, "server-register");
    if req.arguments.len() < 3 || req.arguments.len() > 3 + MAX_HOSTS {
        return refusal(
            ErrorCode::Usage,
            format!(
                "server-register takes NAME NAMESPACE PUBLIC_KEY and at most {MAX_HOSTS} hosts"
            ),
        );
    }
    let (name, namespace, spki_hex) = (&req.arguments[0], &req.arguments[1], &req.arguments[2]);
    let hosts: Vec<String> = req.arguments[3..].to_vec();
    for (what, v) in [("server name", name), ("namespace", namespace)] {
        if let Err(e) = check_name(what, v) {
            return refusal(ErrorCode::Usage, e.to_string());
        }
    }
    for h in &hosts {
        if let Err(r) = check_host(h) {
            return refusal(r.code, r.message);
        }
    }
    let Ok(spki) = hex::decode(spki_hex) else {
        return refusal(ErrorCode::Usage, "the public key is not hex");
    };
    let key_id = match KeyId::of_p256_spki_der(&spki) {
        Ok(k) => k,
        Err(e) => return refusal(ErrorCode::Usage, e.to_string()),
    };
    let public = match P256PublicKey::from_spki_der(&spki) {
        Ok(p) => p,
        Err(e) => return internal(e),
    };
    let mut dir = svc.write_dir();
    let now_ms = crate::now_ms();
    let credential = Id::random();
    let cert = match &allowed {
        Err(_) => String::new(),
        Ok(()) => match dir
            .signer(CaFamily::Access)
            .and_then(|s| s.issue_server(&public, credential, name, &hosts, now_ms))
        {
            Ok(c) => c,
            Err(e) => return internal(e),
        },
    };
    let anchors = match (
        dir.trust_anchor_pem(CaFamily::Credential),
        dir.trust_anchor_pem(CaFamily::Access),
    ) {
        (Ok(c), Ok(a)) => (c, a),
        (Err(e), _) | (_, Err(e)) => return internal(e),
    };
    let intent = dir.intent_digest(body);
    let mut args = vec![
        AuditArg::word(name),
        AuditArg::word(namespace),
        AuditArg::key(key_id),
    ];
    args.extend(hosts.iter().map(|h| AuditArg::word(h)));
    let admin = AdminRequest {
        actor: caller.user.id,
        operation: Id(req.operation),
        intent,
        command: "server-register",
        arguments: &args,
        now_ms,
    };
    let trust_domain = dir.trust_domain().to_owned();
    let incarnation = dir.incarnation().hex();
    let revision_before = dir.revision();
    let r = dir.administer(&admin, |tx| {
        allowed?;
        if tx.contains(&Key::Server(name.clone()))? {
            return Err(AdminError::Refused(Refusal::new(
                ErrorCode::AlreadyExists,
                format!(
                    "a server named {} is registered already",
                    scribe_format::echo::echo(name)
                ),
            )));
        }
        let id = Id::random();
        tx.put(
            &Key::Server(name.clone()),
            &ServerRow {
                id,
                name: name.clone(),
                enabled: true,
                namespace: namespace.clone(),
            },
        )?;
        tx.put(&Key::ServerId(id), &ServerIdRow { name: name.clone() })?;
        let row = CredentialRow {
            kind: CredentialKind::Server,
            subject: name.clone(),
            expires_ms: NEVER_EXPIRES,
            enabled: true,
            label: "server-register".into(),
            key_id,
            created_ms: now_ms,
            parent: None,
            generation: None,
        };
        tx.insert_credential(credential, &row, &cert)?;
        Ok(vec![vec![
            id.hex(),
            credential.hex(),
            cert.clone(),
            anchors.0.clone(),
            anchors.1.clone(),
            trust_domain.clone(),
            incarnation.clone(),
            // The revision this change makes.
            (revision_before + 1).to_string(),
        ]])
    });
    r.unwrap_or_else(internal)
}
