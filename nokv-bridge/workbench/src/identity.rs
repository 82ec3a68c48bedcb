//! Exact-byte identities: the manifest digest and commit identity of the
//! contract, and the request identity a mutating call's Scribe operation
//! id is derived from.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Compact JSON of `v` with object keys sorted recursively (by the bytes
/// of their UTF-8 form) and array order kept; strings and numbers as
/// serde_json writes them.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// `sha256:` and the hex SHA-256 of `manifest`'s canonical JSON.
pub fn manifest_digest_uri(manifest: &Map<String, Value>) -> String {
    let bytes = canonical_json(&Value::Object(manifest.clone()));
    format!("sha256:{}", hex::encode(Sha256::digest(bytes.as_bytes())))
}

/// The commit identity: hex SHA-256 of `nokv.workbench.commit_identity.v1`,
/// NUL, then for the workbench id, the content digest URI and the manifest
/// digest URI: the length as a big-endian u64 and the UTF-8 bytes.
pub fn commit_identity(id: &str, content_digest_uri: &str, manifest_digest_uri: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"nokv.workbench.commit_identity.v1\0");
    for part in [id, content_digest_uri, manifest_digest_uri] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(h.finalize())
}

/// The identity of a mutating request: BLAKE3 (keyed by domain) of the
/// agent root, the workbench incarnation, the tool name and the
/// request's canonical JSON, each length-prefixed. Two calls have the same
/// identity exactly when they are the same request to the same
/// incarnation.
pub fn request_identity(root: &str, incarnation: u64, tool: &str, input: &Value) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key("nokv-workbench request identity v1");
    let body = canonical_json(input);
    for part in [
        root.as_bytes(),
        &incarnation.to_be_bytes(),
        tool.as_bytes(),
        body.as_bytes(),
    ] {
        h.update(&(part.len() as u64).to_be_bytes());
        h.update(part);
    }
    *h.finalize().as_bytes()
}

/// The first number literal of the JSON text `text` that parsing would not
/// keep exactly: an integer beyond 64 bits, or a number with more
/// precision than a double holds (`0.10000000000000001` becomes `0.1`).
/// Such a number would make the stored manifest, and its digest, differ
/// from what the caller sent, so calls carrying one are refused.
pub fn lossy_number(text: &str) -> Option<&str> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut in_string = false;
    while i < b.len() {
        let c = b[i];
        if in_string {
            match c {
                b'\\' => i += 2,
                b'"' => {
                    in_string = false;
                    i += 1
                }
                _ => i += 1,
            }
            continue;
        }
        match c {
            b'"' => {
                in_string = true;
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                i += 1;
                while i < b.len() && matches!(b[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                {
                    i += 1;
                }
                let lit = &text[start..i];
                if !kept_exactly(lit) {
                    return Some(lit);
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// Whether serde_json keeps the number literal `lit` exactly.
fn kept_exactly(lit: &str) -> bool {
    if !lit.contains(['.', 'e', 'E']) {
        return lit.parse::<i64>().is_ok() || lit.parse::<u64>().is_ok();
    }
    match lit.parse::<f64>() {
        Ok(f) if f.is_finite() => decimal(lit) == decimal(&Value::from(f).to_string()),
        // Not a number serde_json accepts: its own parse error says so.
        _ => true,
    }
}

/// The significant digits and the decimal exponent of a number literal.
fn decimal(lit: &str) -> Option<(String, i64)> {
    let lit = lit.trim_start_matches('-');
    let (mantissa, exp) = match lit.find(['e', 'E']) {
        Some(at) => (&lit[..at], lit[at + 1..].parse::<i64>().ok()?),
        None => (lit, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int}{frac}");
    let lead = digits.len() - digits.trim_start_matches('0').len();
    let sig = digits.trim_matches('0');
    if sig.is_empty() {
        return Some((String::new(), 0));
    }
    // The value is 0.sig × 10^e with e counted from the first digit.
    let e = exp + int.len() as i64 - lead as i64;
    Some((sig.to_string(), e))
}

#[cfg(test)]
mod lossy_tests {
    use super::lossy_number;

    #[test]
    fn numbers_a_double_or_64_bits_cannot_hold_are_found_outside_strings() {
        for kept in [
            r#"{"a": 1, "b": -9223372036854775808, "c": 18446744073709551615}"#,
            r#"{"a": 0.1, "b": 1.5e-7, "c": 1e30, "d": -0.0, "e": 2.50, "f": 1E+2}"#,
            r#"{"s": "123456789012345678901234567890 and 0.10000000000000001", "t": "\"9\""}"#,
        ] {
            assert_eq!(lossy_number(kept), None, "{kept}");
        }
        for (text, lit) in [
            (
                r#"{"n": 123456789012345678901234567890}"#,
                "123456789012345678901234567890",
            ),
            (r#"[18446744073709551616]"#, "18446744073709551616"),
            (
                r#"{"x": "\\", "f": 0.10000000000000001}"#,
                "0.10000000000000001",
            ),
            (
                r#"{"m": -99999999999999999999.5}"#,
                "-99999999999999999999.5",
            ),
        ] {
            assert_eq!(lossy_number(text), Some(lit), "{text}");
        }
    }
}
