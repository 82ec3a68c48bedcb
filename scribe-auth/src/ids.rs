//! Ids (user, server, credential, operation): 32 lowercase hex digits of a
//! random 128-bit value. Key ids: the 64-hex BLAKE3 digest of a public key's
//! SubjectPublicKeyInfo DER.

use std::fmt;

use p256::pkcs8::{DecodePublicKey, EncodePublicKey};
use scribe_format::FormatError;

/// A random 128-bit id, shown as 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(pub [u8; 16]);

impl Id {
    /// A fresh random id.
    pub fn random() -> Id {
        let mut b = [0u8; 16];
        getrandom::fill(&mut b).expect("the OS random source is available");
        Id(b)
    }

    /// Parse exactly 32 lowercase hex digits.
    pub fn parse(s: &str) -> Result<Id, FormatError> {
        Ok(Id(parse_lower_hex::<16>(s, "id")?))
    }

    /// The 32 lowercase hex digits.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id({})", self.hex())
    }
}

/// BLAKE3 of a public key's SubjectPublicKeyInfo DER, shown as 64 lowercase hex.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub [u8; 32]);

impl KeyId {
    /// The key id of SubjectPublicKeyInfo DER bytes, as given.
    pub fn of_spki_der(der: &[u8]) -> KeyId {
        KeyId(*blake3::hash(der).as_bytes())
    }

    /// The key id of a P-256 public key in SubjectPublicKeyInfo DER,
    /// checked to be a valid point and re-encoded canonically first.
    pub fn of_p256_spki_der(der: &[u8]) -> Result<KeyId, FormatError> {
        let key = p256::PublicKey::from_public_key_der(der).map_err(|e| {
            FormatError::invalid(
                "public key",
                format!("not a P-256 SubjectPublicKeyInfo: {e}"),
            )
        })?;
        let canonical = key
            .to_public_key_der()
            .map_err(|e| FormatError::invalid("public key", e.to_string()))?;
        Ok(KeyId::of_spki_der(canonical.as_bytes()))
    }

    /// Parse exactly 64 lowercase hex digits.
    pub fn parse(s: &str) -> Result<KeyId, FormatError> {
        Ok(KeyId(parse_lower_hex::<32>(s, "key id")?))
    }

    /// The 64 lowercase hex digits.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({})", self.hex())
    }
}

/// Exactly `2 * N` lowercase hex digits.
pub fn parse_lower_hex<const N: usize>(
    s: &str,
    what: &'static str,
) -> Result<[u8; N], FormatError> {
    if s.len() != 2 * N
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(FormatError::invalid(
            what,
            format!("expected {} lowercase hex digits, found {s:?}", 2 * N),
        ));
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(s, &mut out).map_err(|e| FormatError::invalid(what, e.to_string()))?;
    Ok(out)
}
