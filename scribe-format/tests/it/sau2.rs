//! SAU2 results and stored rows (section 7.3; docs/wire-format.md "Auth
//! protocol (SAU2)").

use proptest::prelude::*;
use scribe_format::error::{ErrorCode, FormatError};
use scribe_format::sau2::{self, Sau2Result, MAX_FIELDS, MAX_MESSAGE_BYTES};

#[test]
fn golden_row_and_results() {
    // u16 0 ‖ u16 rows=1 ‖ u16 n=2 ‖ str16 "user" ‖ str16 "é"
    let row = sau2::encode_row(&["user", "é"]).unwrap();
    assert_eq!(
        row,
        [0, 0, 1, 0, 2, 0, 4, 0, b'u', b's', b'e', b'r', 2, 0, 0xc3, 0xa9]
    );
    let empty = Sau2Result::Rows(vec![]).encode().unwrap();
    assert_eq!(empty, [0, 0, 0, 0]);
    let two = Sau2Result::Rows(vec![vec![], vec!["x".into()]])
        .encode()
        .unwrap();
    assert_eq!(two, [0, 0, 2, 0, 0, 0, 1, 0, 1, 0, b'x']);
    let err = Sau2Result::error(ErrorCode::OperationIntentMismatch, "")
        .encode()
        .unwrap();
    assert_eq!(err, [206, 0, 0, 0]);
}

#[test]
fn malformed_results_are_named() {
    // Truncated row count.
    assert!(matches!(
        Sau2Result::decode(&[0, 0, 1]),
        Err(FormatError::Truncated {
            what: "sau2.rows",
            ..
        })
    ));
    // Trailing bytes.
    assert!(matches!(
        Sau2Result::decode(&[0, 0, 0, 0, 9]),
        Err(FormatError::TrailingBytes { .. })
    ));
    // A row claiming more fields than the bound.
    let mut many = vec![0, 0, 1, 0];
    many.extend_from_slice(&((MAX_FIELDS + 1) as u16).to_le_bytes());
    assert!(matches!(
        Sau2Result::decode(&many),
        Err(FormatError::LimitExceeded {
            what: "sau2.row fields",
            ..
        })
    ));
    // 65,535 rows announced, none present: refused without reserving them.
    assert!(matches!(
        Sau2Result::decode(&[0, 0, 0xff, 0xff]),
        Err(FormatError::Truncated { .. })
    ));
    // A message beyond its bound.
    let mut long = vec![1, 0];
    long.extend_from_slice(&((MAX_MESSAGE_BYTES + 1) as u16).to_le_bytes());
    long.resize(long.len() + MAX_MESSAGE_BYTES + 1, b'a');
    assert!(matches!(
        Sau2Result::decode(&long),
        Err(FormatError::LimitExceeded { .. })
    ));
    // Not UTF-8.
    assert!(matches!(
        Sau2Result::decode(&[0, 0, 1, 0, 1, 0, 1, 0, 0xff]),
        Err(FormatError::NotUtf8 { .. })
    ));
}

#[test]
fn stored_rows_are_exactly_one_success_row() {
    let two = Sau2Result::Rows(vec![vec![], vec![]]).encode().unwrap();
    assert!(sau2::decode_row(&two).is_err());
    let err = Sau2Result::error(ErrorCode::Forbidden, "x")
        .encode()
        .unwrap();
    assert!(sau2::decode_row(&err).is_err());
    let three = sau2::encode_row(&["a", "b", "c"]).unwrap();
    assert!(sau2::decode_row_exact::<2>(&three, "t").is_err());
    assert_eq!(
        sau2::decode_row_exact::<3>(&three, "t").unwrap(),
        ["a", "b", "c"]
    );
}

#[test]
fn encoder_refuses_beyond_bounds() {
    let fields = vec![String::new(); MAX_FIELDS + 1];
    assert!(sau2::encode_row(&fields).is_err());
    let big = "a".repeat(70_000);
    assert!(sau2::encode_row(&[big]).is_err());
    assert!(Sau2Result::Error {
        code: 0,
        message: String::new()
    }
    .encode()
    .is_err());
}

fn result_strategy() -> impl Strategy<Value = Sau2Result> {
    prop_oneof![
        proptest::collection::vec(proptest::collection::vec(".{0,20}", 0..12), 0..6)
            .prop_map(Sau2Result::Rows),
        (1u16.., ".{0,40}").prop_map(|(code, message)| Sau2Result::Error { code, message }),
    ]
}

proptest! {
    #[test]
    fn results_round_trip(result in result_strategy()) {
        let bytes = result.encode().unwrap();
        prop_assert_eq!(Sau2Result::decode(&bytes).unwrap(), result);
    }

    #[test]
    fn rows_round_trip(row in proptest::collection::vec(".{0,30}", 0..MAX_FIELDS)) {
        let bytes = sau2::encode_row(&row).unwrap();
        prop_assert_eq!(sau2::decode_row(&bytes).unwrap(), row);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_reencode(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(result) = Sau2Result::decode(&bytes) {
            prop_assert_eq!(result.encode().unwrap(), bytes.clone());
        }
        if let Ok(row) = sau2::decode_row(&bytes) {
            prop_assert_eq!(sau2::encode_row(&row).unwrap(), bytes);
        }
    }
}

mod request {
    use proptest::prelude::*;
    use scribe_format::error::FormatError;
    use scribe_format::sau2::{self, Sau2Request, MAX_ARGUMENTS, MAX_REQUEST_BYTES};

    #[test]
    fn golden_request() {
        let req = Sau2Request {
            operation: [0x11; 16],
            verb: "login".into(),
            arguments: vec!["ann".into(), "é".into()],
        };
        let bytes = req.encode().unwrap();
        let mut want = vec![0x11; 16];
        want.extend_from_slice(&[5, 0, b'l', b'o', b'g', b'i', b'n', 2, 0]);
        want.extend_from_slice(&[3, 0, b'a', b'n', b'n', 2, 0, 0xc3, 0xa9]);
        assert_eq!(bytes, want);
        assert_eq!(Sau2Request::decode(&bytes).unwrap(), req);
        assert_eq!(Sau2Request::body(&bytes), &want[16..]);
        // whoami without arguments: 16 + 2 + 6 + 2 bytes.
        let who = Sau2Request {
            operation: [0; 16],
            verb: "whoami".into(),
            arguments: vec![],
        };
        assert_eq!(who.encode().unwrap().len(), 26);
    }

    #[test]
    fn malformed_requests_are_named() {
        // Truncated operation id.
        assert!(matches!(
            Sau2Request::decode(&[0; 15]),
            Err(FormatError::Truncated { .. })
        ));
        // A verb with an upper-case letter.
        let mut bad = vec![0; 16];
        bad.extend_from_slice(&[1, 0, b'L', 0, 0]);
        assert!(Sau2Request::decode(&bad).is_err());
        // Too many arguments announced.
        let mut many = vec![0; 16];
        many.extend_from_slice(&[1, 0, b'x']);
        many.extend_from_slice(&((MAX_ARGUMENTS + 1) as u16).to_le_bytes());
        assert!(matches!(
            Sau2Request::decode(&many),
            Err(FormatError::LimitExceeded {
                what: "sau2.arguments",
                ..
            })
        ));
        // Trailing bytes.
        let mut trailing = Sau2Request {
            operation: [0; 16],
            verb: "x".into(),
            arguments: vec![],
        }
        .encode()
        .unwrap();
        trailing.push(0);
        assert!(matches!(
            Sau2Request::decode(&trailing),
            Err(FormatError::TrailingBytes { .. })
        ));
        // Oversized input and frames are refused before reading.
        assert!(Sau2Request::decode(&vec![0; MAX_REQUEST_BYTES + 1]).is_err());
        assert!(sau2::frame_length(
            ((MAX_REQUEST_BYTES + 1) as u32).to_le_bytes(),
            MAX_REQUEST_BYTES
        )
        .is_err());
        assert_eq!(
            sau2::frame_length(7u32.to_le_bytes(), MAX_REQUEST_BYTES).unwrap(),
            7
        );
        // The encoder refuses what the decoder refuses.
        assert!(Sau2Request {
            operation: [0; 16],
            verb: String::new(),
            arguments: vec![],
        }
        .encode()
        .is_err());
    }

    proptest! {
        #[test]
        fn requests_round_trip(
            operation in any::<[u8; 16]>(),
            verb in "[a-z0-9-]{1,64}",
            arguments in proptest::collection::vec(".{0,40}", 0..MAX_ARGUMENTS),
        ) {
            let req = Sau2Request { operation, verb, arguments };
            let bytes = req.encode().unwrap();
            prop_assert_eq!(Sau2Request::decode(&bytes).unwrap(), req);
        }

        #[test]
        fn arbitrary_request_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(req) = Sau2Request::decode(&bytes) {
                prop_assert_eq!(req.encode().unwrap(), bytes);
            }
        }
    }
}
