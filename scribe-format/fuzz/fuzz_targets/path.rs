//! Path validation and folding never panic; folding is idempotent on valid
//! paths.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scribe_format::path;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        if path::validate(s).is_ok() {
            let key = path::collision_key(s);
            let folded = path::fold::fold(s);
            assert_eq!(path::fold::fold(&folded), folded);
            assert!(!key.is_empty());
        }
        let _ = path::validate_file_path(s);
    }
});
