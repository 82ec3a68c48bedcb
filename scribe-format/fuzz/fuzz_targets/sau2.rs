//! SAU2 result and row decoding never panic; a decoded result re-encodes to
//! the same bytes, and so does a decoded stored row.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scribe_format::sau2::{self, Sau2Result};

fuzz_target!(|data: &[u8]| {
    if let Ok(result) = Sau2Result::decode(data) {
        assert_eq!(result.encode().expect("a decoded result encodes"), data);
    }
    if let Ok(row) = sau2::decode_row(data) {
        assert_eq!(sau2::encode_row(&row).expect("a decoded row encodes"), data);
    }
    let _ = sau2::decode_row_exact::<10>(data, "fuzz.row");
});
