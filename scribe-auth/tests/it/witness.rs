//! The revision witness: rollback protection.

use scribe_auth::audit::AuditArg;
use scribe_auth::files::Witness;
use scribe_auth::rows::UserKind;
use scribe_auth::{AuthError, Id};

use super::support::*;

#[test]
fn an_older_database_copied_back_is_refused() {
    let fx = Fixture::new();
    let (dir, report) = fx.init();
    drop(dir);
    let old = std::fs::read(fx.data.join("auth.redb")).unwrap();
    let mut dir = fx.open().unwrap();
    let args = [AuditArg::word("mallory")];
    dir.add_user(
        &request(report.admin_id, "user-add", &args),
        "mallory",
        true,
        UserKind::Person,
        None,
    )
    .unwrap();
    assert_eq!(dir.revision(), 2);
    drop(dir);
    assert_eq!(
        std::fs::read_to_string(&fx.witness).unwrap(),
        format!("{} 2\n", report.incarnation)
    );
    std::fs::write(fx.data.join("auth.redb"), &old).unwrap();
    match fx.open() {
        Err(
            e @ AuthError::RolledBack {
                database: 1,
                witness: 2,
                ..
            },
        ) => {
            assert_eq!(e.code(), scribe_format::ErrorCode::AuthUnavailable)
        }
        other => panic!("expected RolledBack, got {other:?}"),
    }
    // The witness is untouched by the refusal.
    assert_eq!(
        std::fs::read_to_string(&fx.witness).unwrap(),
        format!("{} 2\n", report.incarnation)
    );
}

#[test]
fn a_database_ahead_of_the_witness_rewrites_it() {
    let fx = Fixture::new();
    let (dir, report) = fx.init();
    drop(dir);
    let old_witness = std::fs::read(&fx.witness).unwrap();
    let mut dir = fx.open().unwrap();
    dir.add_user(
        &request(report.admin_id, "user-add", &[]),
        "u",
        false,
        UserKind::Person,
        None,
    )
    .unwrap();
    drop(dir);
    // An interrupted witness write: the database is at 2, the witness at 1.
    std::fs::write(&fx.witness, old_witness).unwrap();
    let dir = fx.open().unwrap();
    assert_eq!(dir.revision(), 2);
    assert_eq!(
        Witness::read(&fx.witness).unwrap().unwrap(),
        Witness {
            incarnation: report.incarnation,
            revision: 2
        }
    );
    assert!(!fx.path("witness.next").exists());
}

#[test]
fn a_missing_malformed_or_foreign_witness_is_refused() {
    let fx = Fixture::new();
    let (dir, report) = fx.init();
    drop(dir);
    for (text, why) in [
        (format!("{} 1", report.incarnation), "no newline"),
        (format!("{} 01\n", report.incarnation), "leading zero"),
        (format!("{}  1\n", report.incarnation), "two spaces"),
        (
            format!("{} 1\n", report.incarnation.hex().to_uppercase()),
            "uppercase",
        ),
        ("\n".to_owned(), "empty"),
    ] {
        std::fs::write(&fx.witness, &text).unwrap();
        assert!(
            matches!(fx.open(), Err(AuthError::WitnessMalformed { .. })),
            "{why}"
        );
    }
    std::fs::write(&fx.witness, format!("{} 1\n", Id::random())).unwrap();
    assert!(matches!(
        fx.open(),
        Err(AuthError::WitnessIncarnation { .. })
    ));
    std::fs::remove_file(&fx.witness).unwrap();
    assert!(matches!(fx.open(), Err(AuthError::WitnessMissing { .. })));
    std::fs::write(&fx.witness, format!("{} 1\n", report.incarnation)).unwrap();
    fx.open().unwrap();
}
