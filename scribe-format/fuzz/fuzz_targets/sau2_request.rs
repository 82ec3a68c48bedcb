//! SAU2 request decoding never panics; a decoded request re-encodes to the
//! same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scribe_format::sau2::Sau2Request;

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = Sau2Request::decode(data) {
        assert_eq!(req.encode().expect("a decoded request encodes"), data);
    }
});
