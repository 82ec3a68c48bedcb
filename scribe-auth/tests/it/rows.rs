//! Golden bytes of sample rows, and strict decoders.

use scribe_auth::rows::*;
use scribe_auth::{Id, KeyId};
use scribe_format::sau2::{self, Sau2Result};
use scribe_format::ErrorCode;

const ID: Id = Id([0xab; 16]);
const ID_HEX: &str = "abababababababababababababababab";

fn row_bytes(fields: &[&str]) -> Vec<u8> {
    // u16 0 ‖ u16 1 ‖ u16 n ‖ n × str16, by hand.
    let mut out = vec![0, 0, 1, 0];
    out.extend_from_slice(&(fields.len() as u16).to_le_bytes());
    for f in fields {
        out.extend_from_slice(&(f.len() as u16).to_le_bytes());
        out.extend_from_slice(f.as_bytes());
    }
    out
}

#[test]
fn golden_user_row() {
    let row = UserRow {
        id: ID,
        name: "alice".into(),
        enabled: true,
        administrator: false,
        kind: UserKind::Person,
    };
    let bytes = row.encode().unwrap();
    assert_eq!(
        bytes,
        row_bytes(&[ID_HEX, "alice", "true", "false", "person"])
    );
    assert_eq!(&bytes[..8], &[0, 0, 1, 0, 5, 0, 32, 0]);
    assert_eq!(UserRow::decode(&bytes).unwrap(), row);
    Key::User("alice".into()).check_row(&bytes).unwrap();
    // The name must be the key's.
    assert!(Key::User("bob".into()).check_row(&bytes).is_err());
}

#[test]
fn golden_credential_row() {
    let row = CredentialRow {
        kind: CredentialKind::AutomationWrite,
        subject: "ci".into(),
        expires_ms: 1_800_000_000_000,
        enabled: true,
        label: "nightly build".into(),
        key_id: KeyId([0x01; 32]),
        created_ms: 1_700_000_000_000,
        parent: Some(ID),
        generation: Some(3),
    };
    let key_hex = "01".repeat(32);
    assert_eq!(
        row.encode().unwrap(),
        row_bytes(&[
            "automation-write",
            "ci",
            "1800000000000",
            "true",
            "nightly build",
            &key_hex,
            "p256",
            "1700000000000",
            ID_HEX,
            "3"
        ])
    );
    assert_eq!(CredentialRow::decode(&row.encode().unwrap()).unwrap(), row);
}

#[test]
fn golden_meta_audit_and_operation_rows() {
    assert_eq!(
        RevisionRow { revision: 42 }.encode().unwrap(),
        [0, 0, 1, 0, 1, 0, 2, 0, b'4', b'2']
    );
    let audit = AuditRow {
        unix_ms: 5,
        actor: Some(ID),
        command: "user-add".into(),
        operation: Id([0; 16]),
        ok: false,
        arguments: "alice key:00".into(),
    };
    assert_eq!(
        audit.encode().unwrap(),
        row_bytes(&[
            "5",
            ID_HEX,
            "user-add",
            &"0".repeat(32),
            "rejected",
            "alice key:00"
        ])
    );
    assert_eq!(Key::Audit(7).to_string(), "audit/00000000000000000007");
    assert_eq!(
        Key::Ca {
            family: CaFamily::Access,
            index: 2
        }
        .to_string(),
        "ca/access/0002"
    );
    let op = OperationRow {
        actor: ID,
        intent: [0x11; 32],
        result: Sau2Result::error(ErrorCode::Forbidden, "no"),
    };
    let mut expected = vec![0xab; 16];
    expected.extend_from_slice(&[0x11; 32]);
    expected.extend_from_slice(&[0x2c, 0x01, 2, 0, b'n', b'o']);
    assert_eq!(op.encode().unwrap(), expected);
    assert_eq!(OperationRow::decode(&expected).unwrap(), op);
    // A truncated prefix or trailing bytes are refused.
    assert!(OperationRow::decode(&expected[..40]).is_err());
    let mut trailing = expected.clone();
    trailing.push(0);
    assert!(OperationRow::decode(&trailing).is_err());
}

fn credential_fields() -> Vec<String> {
    [
        "session",
        "alice",
        "10",
        "true",
        "",
        &"0a".repeat(32),
        "p256",
        "1",
        "",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn decode_credential(fields: &[String]) -> Result<CredentialRow, scribe_format::FormatError> {
    CredentialRow::decode(&sau2::encode_row(fields).unwrap())
}

#[test]
fn credential_decoder_refuses_every_other_shape() {
    assert!(decode_credential(&credential_fields()).is_ok());
    let mut short = credential_fields();
    short.pop();
    assert!(decode_credential(&short).is_err(), "nine fields");
    let mut long = credential_fields();
    long.push(String::new());
    assert!(decode_credential(&long).is_err(), "eleven fields");
    let cases: &[(usize, &str, &str)] = &[
        (0, "admin", "unknown kind"),
        (0, "Session", "kinds are lowercase"),
        (2, "010", "leading zero"),
        (2, "-1", "sign"),
        (2, "18446744073709551616", "beyond u64"),
        (3, "yes", "boolean words"),
        (5, &"0A".repeat(32), "uppercase key id"),
        (5, &"0a".repeat(31), "short key id"),
        (6, "p384", "algorithm"),
        (8, ID_HEX, "parent on a session"),
        (9, "", "session without generation"),
        (1, "a/b", "subject with a slash"),
    ];
    for (index, value, why) in cases {
        let mut f = credential_fields();
        f[*index] = value.to_string();
        assert!(decode_credential(&f).is_err(), "{why}");
    }
    // Every one of the nine kinds, with the generation rules.
    for kind in CredentialKind::ALL {
        let mut f = credential_fields();
        f[0] = kind.as_str().into();
        let generation_required = kind == CredentialKind::Session || kind.is_automation();
        let generation_allowed = generation_required || kind == CredentialKind::User;
        f[9] = "1".into();
        assert_eq!(
            decode_credential(&f).is_ok(),
            generation_allowed,
            "{kind:?} with generation"
        );
        f[9] = String::new();
        assert_eq!(
            decode_credential(&f).is_ok(),
            !generation_required,
            "{kind:?} without"
        );
        f[9] = if generation_allowed {
            "1".into()
        } else {
            String::new()
        };
        f[8] = ID_HEX.into();
        assert_eq!(
            decode_credential(&f).is_ok(),
            kind.is_automation(),
            "{kind:?} with parent"
        );
    }
    assert_eq!(CredentialKind::ALL.len(), 9);
}

#[test]
fn other_decoders_are_strict() {
    let bad: &[(Key, &[&str])] = &[
        (Key::User("a".into()), &[ID_HEX, "a", "true", "false"]),
        (
            Key::User("a".into()),
            &[ID_HEX, "a", "true", "false", "robot"],
        ),
        (
            Key::User("a".into()),
            &[&ID_HEX.to_uppercase(), "a", "true", "false", "person"],
        ),
        (Key::Password("a".into()), &["$argon2i$x", "1"]),
        (Key::Password("a".into()), &["$argon2id$x", "0x1"]),
        (Key::Server("s".into()), &[ID_HEX, "s", "true"]),
        (
            Key::Grant {
                namespace: "n".into(),
                repository: "r".into(),
                user: ID,
            },
            &["owner"],
        ),
        (
            Key::Visibility {
                namespace: "n".into(),
                repository: "r".into(),
            },
            &["hidden", "1"],
        ),
        (
            Key::Session(ID),
            &[ID_HEX, &"00".repeat(32), "false", "5", ""],
        ),
        (
            Key::Session(ID),
            &["", &"00".repeat(32), "true", "5", ID_HEX],
        ),
        (
            Key::Automation(ID),
            &[ID_HEX, &"00".repeat(31), "5", ID_HEX],
        ),
        (Key::Derive(ID), &[ID_HEX, &"00".repeat(32)]),
        (Key::Audit(1), &["1", "", "user add", ID_HEX, "ok", ""]),
        (
            Key::Audit(1),
            &["1", "", "user-add", ID_HEX, "accepted", ""],
        ),
        (Key::Revision, &["01"]),
        (Key::Revision, &["1", "2"]),
        (Key::Incarnation, &["abc"]),
        (
            Key::Ca {
                family: CaFamily::Credential,
                index: 1,
            },
            &["-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"],
        ),
    ];
    for (key, fields) in bad {
        let bytes = sau2::encode_row(fields).unwrap();
        assert!(key.check_row(&bytes).is_err(), "{key} {fields:?}");
    }
    let good: &[(Key, &[&str])] = &[
        (Key::Server("s".into()), &[ID_HEX, "s", "false", "studio"]),
        (
            Key::Grant {
                namespace: "n".into(),
                repository: "r".into(),
                user: ID,
            },
            &["maintainer"],
        ),
        (
            Key::Visibility {
                namespace: "n".into(),
                repository: "r".into(),
            },
            &["public", "4"],
        ),
        (Key::Session(ID), &["", &"00".repeat(32), "false", "", ""]),
        (
            Key::Session(ID),
            &[ID_HEX, &"00".repeat(32), "true", "5", ID_HEX],
        ),
        (
            Key::Automation(ID),
            &[ID_HEX, &"00".repeat(32), "5", ID_HEX],
        ),
        (Key::Derive(ID), &[ID_HEX, &"00".repeat(32), ID_HEX]),
        (
            Key::NamespaceAdmin {
                namespace: "n".into(),
                user: ID,
            },
            &["alice"],
        ),
        (
            Key::UserCredential {
                username: "a".into(),
                credential: ID,
            },
            &["0"],
        ),
        (Key::AuditSequence, &["0"]),
    ];
    for (key, fields) in good {
        let bytes = sau2::encode_row(fields).unwrap();
        key.check_row(&bytes)
            .unwrap_or_else(|e| panic!("{key} {fields:?}: {e}"));
        assert_eq!(Key::parse(&key.to_string()).unwrap(), *key);
    }
    // A value that is not one success row is refused for every family.
    let err = Sau2Result::error(ErrorCode::Forbidden, "x")
        .encode()
        .unwrap();
    assert!(Key::Revision.check_row(&err).is_err());
    assert!(Key::Revision.check_row(&[0, 0, 1]).is_err());
}

#[test]
fn keys_of_no_family_are_refused() {
    for key in [
        "audit/1",
        "audit/000000000000000000001",
        "ca/credential/1",
        "ca/other/0001",
        "users/a/b",
        "users/",
        "credentials/ABABABABABABABABABABABABABABABAB",
        "meta/other",
        "unknown/x",
        "grants/n/r",
        "",
    ] {
        assert!(Key::parse(key).is_err(), "{key:?}");
    }
}
