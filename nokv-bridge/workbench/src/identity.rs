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
