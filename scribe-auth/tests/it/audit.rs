//! Audit rows: arguments rendered and truncated; a password never appears.

use scribe_auth::audit::{self, AuditArg, MAX_ARGUMENT_BYTES, WITHHELD};
use scribe_auth::rows::*;
use scribe_auth::{KeyId, Password};

use super::support::*;

#[test]
fn arguments_are_joined_truncated_and_keys_shown_by_id() {
    let k = KeyId([0xcd; 32]);
    assert_eq!(
        audit::render(&[
            AuditArg::word("alice"),
            AuditArg::key(k),
            AuditArg::word("--admin")
        ]),
        format!("alice key:{} --admin", "cd".repeat(32))
    );
    let long = "é".repeat(1000);
    let r = audit::render(&[AuditArg::word("xy"), AuditArg::word(&long)]);
    assert_eq!(
        r.len(),
        MAX_ARGUMENT_BYTES - 1,
        "cut at a character boundary"
    );
    assert!(r.starts_with("xy é"));
}

#[test]
fn a_password_never_appears_in_the_audit_or_the_database() {
    let fx = Fixture::new();
    let (mut dir, report) = fx.init();
    let second = "second secret password";
    let third = "third secret password";
    let p2 = Password::new(second.into()).unwrap();
    dir.add_user(
        &request(report.admin_id, "user-add", &[AuditArg::word("carol")]),
        "carol",
        false,
        UserKind::Person,
        Some(&p2),
    )
    .unwrap();
    // A careless caller that puts the password into the arguments: the
    // transaction that hashed it withholds them.
    let p3 = Password::new(third.into()).unwrap();
    let args = [AuditArg::word("carol"), AuditArg::word(p3.expose())];
    dir.set_password(
        &request(report.admin_id, "user-set-password", &args),
        "carol",
        &p3,
    )
    .unwrap();
    assert!(dir.check_password("carol", &p3).unwrap());
    let audit_rows: Vec<AuditRow> = dir
        .scan_prefix("audit/")
        .unwrap()
        .iter()
        .map(|(_, v)| AuditRow::decode(v).unwrap())
        .collect();
    assert_eq!(audit_rows.len(), 3);
    assert_eq!(audit_rows[0].command, "init");
    assert_eq!(audit_rows[1].arguments, "carol");
    assert_eq!(audit_rows[2].arguments, WITHHELD);
    assert_eq!(
        dir.get::<AuditSequenceRow>(&Key::AuditSequence)
            .unwrap()
            .unwrap()
            .sequence,
        3
    );
    let pepper = std::fs::read(&fx.pepper).unwrap();
    drop(dir);
    let file = std::fs::read(fx.data.join("auth.redb")).unwrap();
    for secret in [
        ADMIN_PASSWORD.as_bytes(),
        second.as_bytes(),
        third.as_bytes(),
        &pepper[..],
    ] {
        assert!(
            !file.windows(secret.len()).any(|w| w == secret),
            "{:?} found in auth.redb",
            String::from_utf8_lossy(secret)
        );
    }
}
