//! The directory: marker, lock, init, pepper, schema 3, backup and restore, CA.

use scribe_auth::audit::AuditArg;
use scribe_auth::dir::{self, EXPIRY_GRACE_MS};
use scribe_auth::files::{Witness, MARKER};
use scribe_auth::rows::*;
use scribe_auth::{AuthError, Id, InitOptions, KeyId, Password};
use scribe_format::sau2::Sau2Result;

use super::support::*;

#[test]
fn marker_is_exact_and_written_by_init() {
    let fx = Fixture::new();
    let (dir, report) = fx.init();
    let bytes = std::fs::read(fx.data.join("SCRIBE_AUTH")).unwrap();
    assert_eq!(
        bytes,
        b"scribe-auth\nschema=4\nprotocol=2\npassword=argon2id-pepper-v1\n"
    );
    assert_eq!(MARKER.as_bytes(), &bytes[..]);
    assert!(!fx.data.join("SCRIBE_AUTH.next").exists());
    // Witness: `<32 hex> <decimal>\n`, revision 1 after init.
    let w = std::fs::read_to_string(&fx.witness).unwrap();
    assert_eq!(w, format!("{} 1\n", report.incarnation));
    assert_eq!(dir.revision(), 1);
    // meta rows.
    assert_eq!(
        dir.get::<TrustDomainRow>(&Key::TrustDomain)
            .unwrap()
            .unwrap()
            .trust_domain,
        "studio.example"
    );
    let pepper = std::fs::read(&fx.pepper).unwrap();
    assert_eq!(
        dir.get::<PepperIdRow>(&Key::PepperId)
            .unwrap()
            .unwrap()
            .pepper_id,
        *blake3::hash(&pepper).as_bytes()
    );
    assert_eq!(dir.verify().unwrap(), 15);
}

#[test]
fn bootstrap_administrator_never_expires() {
    let fx = Fixture::new();
    let (dir, report) = fx.init();
    let user: UserRow = dir.get(&Key::User("admin".into())).unwrap().unwrap();
    assert!(user.administrator && user.enabled);
    assert_eq!(user.id, report.admin_id);
    let raw = dir
        .scan_prefix(&format!("credentials/{}", report.admin_credential))
        .unwrap();
    let fields = scribe_format::sau2::decode_row(&raw[0].1).unwrap();
    assert_eq!(fields[0], "user");
    assert_eq!(fields[1], "admin");
    assert_eq!(fields[2], "18446744073709551615");
    assert_eq!(fields[6], "p256");
    assert_eq!(fields[8], "");
    assert_eq!(fields[9], "");
    // The key id is BLAKE3 of the credential key's SubjectPublicKeyInfo DER.
    let key = rcgen::KeyPair::from_pem(&report.admin_private_key_pem).unwrap();
    assert_eq!(fields[5], KeyId::of_spki_der(&key.public_key_der()).hex());
    assert_eq!(
        KeyId::of_p256_spki_der(&key.public_key_der())
            .unwrap()
            .hex(),
        fields[5]
    );
    // Index rows exist.
    assert!(dir
        .get::<SubjectCredentialRow>(&Key::UserCredential {
            username: "admin".into(),
            credential: report.admin_credential
        })
        .unwrap()
        .is_some());
    assert!(dir
        .get::<CredentialCertRow>(&Key::CredentialCert(report.admin_credential))
        .unwrap()
        .is_some());
    // The password verifies; another does not; unknown users never do.
    let good = Password::new(ADMIN_PASSWORD.into()).unwrap();
    let bad = Password::new("not the password".into()).unwrap();
    assert!(dir.check_password("admin", &good).unwrap());
    assert!(!dir.check_password("admin", &bad).unwrap());
    assert!(!dir.check_password("nobody", &good).unwrap());
    let stored: PasswordRow = dir.get(&Key::Password("admin".into())).unwrap().unwrap();
    assert!(stored.phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
    assert_eq!(stored.generation, 1);
}

#[test]
fn generated_password_is_returned_once_and_verifies() {
    let fx = Fixture::new();
    let (dir, report) = scribe_auth::AuthDir::init(InitOptions {
        data: fx.data.clone(),
        pepper_file: fx.pepper.clone(),
        witness_file: fx.witness.clone(),
        trust_domain: "t".into(),
        admin_username: "root".into(),
        admin_password: None,
        now_ms: NOW,
    })
    .unwrap();
    let p = report.generated_password.as_ref().unwrap();
    assert_eq!(p.expose().len(), 24);
    assert!(dir.check_password("root", p).unwrap());
    assert_eq!(format!("{p:?}"), "Password(<redacted>)");
}

#[test]
fn init_twice_is_refused() {
    let fx = Fixture::new();
    let (dir, _) = fx.init();
    drop(dir);
    // Same witness: refused before anything else.
    let again = scribe_auth::AuthDir::init(InitOptions {
        data: fx.path("other"),
        pepper_file: fx.pepper.clone(),
        witness_file: fx.witness.clone(),
        trust_domain: "t".into(),
        admin_username: "admin".into(),
        admin_password: None,
        now_ms: NOW,
    });
    assert!(
        matches!(again, Err(AuthError::WitnessExists { .. })),
        "{again:?}"
    );
    assert!(!fx.path("other").exists());
    // Same directory, new witness: refused, nothing changed.
    let before = std::fs::read(fx.data.join("auth.redb")).unwrap();
    let again = scribe_auth::AuthDir::init(InitOptions {
        data: fx.data.clone(),
        pepper_file: fx.pepper.clone(),
        witness_file: fx.path("witness2"),
        trust_domain: "t".into(),
        admin_username: "admin".into(),
        admin_password: None,
        now_ms: NOW,
    });
    assert!(
        matches!(again, Err(AuthError::AlreadyInitialized { .. })),
        "{again:?}"
    );
    assert_eq!(std::fs::read(fx.data.join("auth.redb")).unwrap(), before);
    assert!(!fx.path("witness2").exists());
    fx.open().unwrap();
}

#[test]
fn a_second_opener_is_refused_while_the_lock_is_held() {
    let fx = Fixture::new();
    let (dir, _) = fx.init();
    let second = fx.open();
    match second {
        Err(AuthError::Locked { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
        other => panic!("expected Locked, got {other:?}"),
    }
    assert!(matches!(
        dir::ca_cert(&fx.data, CaFamily::Credential),
        Err(AuthError::Locked { .. })
    ));
    assert!(matches!(
        dir::backup(&fx.data, &fx.path("bk")),
        Err(AuthError::Locked { .. })
    ));
    assert_eq!(
        AuthError::Locked {
            path: fx.data.clone(),
            pid: None
        }
        .code(),
        scribe_format::ErrorCode::Busy
    );
    drop(dir);
    fx.open().unwrap();
}

/// `bytes` into `path`, readable by its owner only (as `init` writes a
/// pepper).
fn write_private(path: &std::path::Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}

/// A pepper other users may read or write is refused by name, with the
/// chmod that fixes it; its owner's group may read it.
#[cfg(unix)]
#[test]
fn a_pepper_other_users_can_read_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    drop(fx.init());
    let mode =
        |m: u32| std::fs::set_permissions(&fx.pepper, std::fs::Permissions::from_mode(m)).unwrap();
    assert_eq!(
        std::fs::metadata(&fx.pepper).unwrap().permissions().mode() & 0o777,
        0o600,
        "init writes it private"
    );
    for m in [0o644, 0o604, 0o602, 0o666] {
        mode(m);
        let r = fx.open();
        match &r {
            Err(e @ AuthError::PepperExposed { mode, .. }) => {
                assert_eq!(*mode, m);
                assert_eq!(e.code(), scribe_format::ErrorCode::Refused);
                let text = e.to_string();
                assert!(
                    text.contains("readable by other users")
                        && text.contains(&format!("chmod 600 {}", fx.pepper.display())),
                    "{text}"
                );
            }
            other => panic!("{m:o}: {other:?}"),
        }
    }
    // What the operator sees: `serve` stops at once, saying so.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_scribe-auth"))
        .arg("serve")
        .arg("--data")
        .arg(&fx.data)
        .arg("--pepper-file")
        .arg(&fx.pepper)
        .arg("--witness-file")
        .arg(&fx.witness)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("readable by other users (mode 0666)") && err.contains("chmod 600"),
        "{err}"
    );
    for m in [0o640, 0o600, 0o400] {
        mode(m);
        drop(fx.open().unwrap_or_else(|e| panic!("{m:o}: {e}")));
    }
}

#[test]
fn wrong_pepper_is_refused() {
    let fx = Fixture::new();
    drop(fx.init());
    let other = fx.path("other-pepper");
    write_private(&other, &[9u8; 32]);
    let r = scribe_auth::AuthDir::open(&fx.data, &other, &fx.witness);
    assert!(matches!(r, Err(AuthError::PepperMismatch { .. })), "{r:?}");
    // A pepper too short is named as such.
    write_private(&other, &[9u8; 8]);
    let r = scribe_auth::AuthDir::open(&fx.data, &other, &fx.witness);
    assert!(matches!(r, Err(AuthError::PepperInvalid { .. })), "{r:?}");
    fx.open().unwrap();
}

#[test]
fn schema_3_is_refused_at_startup_and_migrate_explains() {
    let fx = Fixture::new();
    drop(fx.init());
    std::fs::write(
        fx.data.join("SCRIBE_AUTH"),
        "scribe-auth\nschema=3\nprotocol=1\n",
    )
    .unwrap();
    let r = fx.open();
    match &r {
        Err(e @ AuthError::NeedsMigration { .. }) => {
            assert!(e.to_string().contains("scribe-auth migrate"), "{e}")
        }
        other => panic!("expected NeedsMigration, got {other:?}"),
    }
    let m = dir::migrate(&fx.data);
    assert!(
        matches!(m, Err(AuthError::MigrationUnavailable(_))),
        "{m:?}"
    );
    // Anything else is an unsupported marker; no marker is not a directory.
    std::fs::write(fx.data.join("SCRIBE_AUTH"), "scribe-auth\nschema=5\n").unwrap();
    assert!(matches!(
        fx.open(),
        Err(AuthError::UnsupportedMarker { .. })
    ));
    std::fs::remove_file(fx.data.join("SCRIBE_AUTH")).unwrap();
    assert!(matches!(
        fx.open(),
        Err(AuthError::NotAnAuthDirectory { .. })
    ));
}

#[test]
fn backup_and_restore_give_a_new_incarnation() {
    let fx = Fixture::new();
    let (mut dir, report) = fx.init();
    let args = [AuditArg::word("alice")];
    let r = dir
        .add_user(
            &request(report.admin_id, "user-add", &args),
            "alice",
            false,
            UserKind::Person,
            None,
        )
        .unwrap();
    assert!(matches!(r, Sau2Result::Rows(_)));
    assert_eq!(dir.revision(), 2);
    let rows_before = dir.scan_prefix("").unwrap();
    drop(dir);

    let bk = fx.path("backup");
    let copied = dir::backup(&fx.data, &bk).unwrap();
    assert_eq!(copied, rows_before.len());
    assert_eq!(
        std::fs::read(bk.join("SCRIBE_AUTH")).unwrap(),
        MARKER.as_bytes()
    );
    let names: Vec<_> = std::fs::read_dir(&bk)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    for name in &names {
        assert!(
            ["auth.redb", "SCRIBE_AUTH", "LOCK"].contains(&name.as_str()),
            "{name}"
        );
    }
    // A backup into an existing backup is refused.
    assert!(matches!(
        dir::backup(&fx.data, &bk),
        Err(AuthError::AlreadyInitialized { .. })
    ));

    // Restore into a new directory: new incarnation, revision + 1, witness rewritten.
    let restored_dir = fx.path("restored");
    let restored = dir::restore(&restored_dir, &bk, &fx.pepper, &fx.witness).unwrap();
    assert_ne!(restored.incarnation(), report.incarnation);
    assert_eq!(restored.revision(), 3);
    assert_eq!(
        std::fs::read_to_string(&fx.witness).unwrap(),
        format!("{} 3\n", restored.incarnation())
    );
    assert_eq!(
        restored
            .get::<IncarnationRow>(&Key::Incarnation)
            .unwrap()
            .unwrap()
            .incarnation,
        restored.incarnation()
    );
    let rows_after = restored.scan_prefix("").unwrap();
    assert_eq!(rows_after.len(), rows_before.len());
    for ((ka, va), (kb, vb)) in rows_before.iter().zip(&rows_after) {
        assert_eq!(ka, kb);
        if ka != "meta/incarnation" && ka != "meta/revision" {
            assert_eq!(va, vb, "{ka}");
        }
    }
    let good = Password::new(ADMIN_PASSWORD.into()).unwrap();
    assert!(restored.check_password("admin", &good).unwrap());
    drop(restored);
    // The old directory now names an incarnation the witness does not.
    assert!(matches!(
        fx.open(),
        Err(AuthError::WitnessIncarnation { .. })
    ));
    scribe_auth::AuthDir::open(&restored_dir, &fx.pepper, &fx.witness).unwrap();
    // Restore with another pepper is refused before anything is written.
    let other = fx.path("other-pepper");
    write_private(&other, &[1u8; 40]);
    let r = dir::restore(&fx.path("r2"), &bk, &other, &fx.path("w2"));
    assert!(matches!(r, Err(AuthError::PepperMismatch { .. })), "{r:?}");
    assert!(!fx.path("w2").exists());
}

#[test]
fn ca_cert_prints_every_trusted_certificate_of_the_family() {
    let fx = Fixture::new();
    let (dir, report) = fx.init();
    let ca: CaRow = dir
        .get(&Key::Ca {
            family: CaFamily::Credential,
            index: 1,
        })
        .unwrap()
        .unwrap();
    assert!(ca
        .private_key_pem
        .starts_with("-----BEGIN PRIVATE KEY-----"));
    assert!(!format!("{ca:?}").contains("PRIVATE"));
    // The bootstrap credential certificate is signed by that CA (issuer = CA subject).
    let access: CaRow = dir
        .get(&Key::Ca {
            family: CaFamily::Access,
            index: 1,
        })
        .unwrap()
        .unwrap();
    assert_ne!(access.certificate_pem, ca.certificate_pem);
    assert!(report
        .admin_certificate_pem
        .starts_with("-----BEGIN CERTIFICATE-----"));
    drop(dir);
    let pem = dir::ca_cert(&fx.data, CaFamily::Credential).unwrap();
    assert_eq!(pem, ca.certificate_pem);
    let pem = dir::ca_cert(&fx.data, CaFamily::Access).unwrap();
    assert_eq!(pem, access.certificate_pem);
}

#[test]
fn expiry_sweep_deletes_a_credential_with_its_rows_one_day_after_expiry() {
    let fx = Fixture::new();
    let (mut dir, report) = fx.init();
    let mut creds = Vec::new();
    for (i, expires) in [
        NOW - EXPIRY_GRACE_MS - 1, // expired more than a day ago: swept
        NOW - EXPIRY_GRACE_MS,     // exactly a day ago: swept
        NOW - EXPIRY_GRACE_MS + 1, // less than a day ago: kept
        NOW + 1_000,               // not expired: kept
    ]
    .into_iter()
    .enumerate()
    {
        let cred = Id::random();
        let key_id = KeyId([i as u8 + 1; 32]);
        let row = CredentialRow {
            kind: CredentialKind::Session,
            subject: "admin".into(),
            expires_ms: expires,
            enabled: true,
            label: format!("s{i}"),
            key_id,
            created_ms: NOW - 10 * EXPIRY_GRACE_MS,
            parent: None,
            generation: Some(1),
        };
        let args = [AuditArg::key(key_id)];
        let r = dir
            .administer(&request(report.admin_id, "session-issue", &args), |tx| {
                tx.insert_credential(
                    cred,
                    &row,
                    "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
                )?;
                Ok(vec![vec![cred.hex()]])
            })
            .unwrap();
        assert!(matches!(r, Sau2Result::Rows(_)), "{r:?}");
        creds.push((cred, key_id));
    }
    let audit_before = dir.scan_prefix("audit/").unwrap();
    let ops_before = dir.scan_prefix("operations/").unwrap();
    let revision = dir.revision();
    let removed = dir.sweep_expired(NOW).unwrap();
    assert_eq!(removed.len(), 2);
    for (i, (cred, key_id)) in creds.iter().enumerate() {
        let present = i >= 2;
        assert_eq!(removed.contains(cred), !present);
        assert_eq!(
            dir.scan_prefix(&format!("credentials/{cred}"))
                .unwrap()
                .len(),
            present as usize
        );
        assert_eq!(
            dir.scan_prefix(&format!("credential-keys/{key_id}"))
                .unwrap()
                .len(),
            present as usize
        );
        assert_eq!(
            dir.scan_prefix(&format!("credential-certs/{cred}"))
                .unwrap()
                .len(),
            present as usize
        );
        assert_eq!(
            dir.scan_prefix(&format!("user-credentials/admin/{cred}"))
                .unwrap()
                .len(),
            present as usize
        );
    }
    // The bootstrap credential never expires; audit and outcomes are never pruned.
    assert!(
        dir.scan_prefix(&format!("credentials/{}", report.admin_credential))
            .unwrap()
            .len()
            == 1
    );
    assert_eq!(dir.sweep_expired(u64::MAX).unwrap().len(), 2);
    assert!(
        dir.scan_prefix(&format!("credentials/{}", report.admin_credential))
            .unwrap()
            .len()
            == 1
    );
    assert_eq!(dir.scan_prefix("audit/").unwrap(), audit_before);
    assert_eq!(dir.scan_prefix("operations/").unwrap(), ops_before);
    assert_eq!(dir.revision(), revision);
    dir.verify().unwrap();
}

#[test]
fn a_public_key_is_registered_at_most_once() {
    let fx = Fixture::new();
    let (mut dir, report) = fx.init();
    let admin_cred: CredentialRow = dir
        .get(&Key::Credential(report.admin_credential))
        .unwrap()
        .unwrap();
    let mut row = admin_cred.clone();
    row.label = "again".into();
    let revision = dir.revision();
    let r = dir
        .administer(&request(report.admin_id, "credential-add", &[]), |tx| {
            tx.insert_credential(
                Id::random(),
                &row,
                "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n",
            )?;
            Ok(vec![])
        })
        .unwrap();
    assert_eq!(
        r.error_code(),
        Some(scribe_format::ErrorCode::AlreadyExists)
    );
    assert_eq!(dir.revision(), revision, "a refusal changes nothing");
    // The refusal is audited.
    let audit = dir.scan_prefix("audit/").unwrap();
    let last = AuditRow::decode(&audit.last().unwrap().1).unwrap();
    assert!(!last.ok);
    assert_eq!(last.command, "credential-add");
}

#[test]
fn replayed_operation_returns_the_recorded_outcome() {
    let fx = Fixture::new();
    let (mut dir, report) = fx.init();
    let args = [AuditArg::word("bob")];
    let req = request(report.admin_id, "user-add", &args);
    let first = dir
        .add_user(&req, "bob", false, UserKind::Service, None)
        .unwrap();
    let revision = dir.revision();
    let again = dir
        .add_user(&req, "bob", false, UserKind::Service, None)
        .unwrap();
    assert_eq!(first, again);
    assert_eq!(dir.revision(), revision);
    let mut other = request(report.admin_id, "user-add", &args);
    other.operation = req.operation;
    other.intent = [8; 32];
    let mismatch = dir
        .add_user(&other, "bob", false, UserKind::Service, None)
        .unwrap();
    assert_eq!(
        mismatch.error_code(),
        Some(scribe_format::ErrorCode::OperationIntentMismatch)
    );
    let Witness { revision: w, .. } = Witness::read(&fx.witness).unwrap().unwrap();
    assert_eq!(w, revision);
}

/// `auth.redb` holds the CA private keys (docs/auth.md): a backup made with
/// a common umask (022) under a shared `/backup`, and the directory a
/// restore makes, must not be readable by other users.
#[cfg(unix)]
#[test]
fn backup_and_restore_write_the_database_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let (dir, _report) = fx.init();
    drop(dir);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let bk = fx.path("backup");
    dir::backup(&fx.data, &bk).unwrap();
    assert_eq!(mode(&bk.join("auth.redb")), 0o600, "the backup's auth.redb");
    let restored_dir = fx.path("restored");
    drop(dir::restore(&restored_dir, &bk, &fx.pepper, &fx.witness).unwrap());
    assert_eq!(
        mode(&restored_dir.join("auth.redb")),
        0o600,
        "the restored auth.redb"
    );
    assert_eq!(mode(&fx.data.join("auth.redb")), 0o600, "init's auth.redb");
}
