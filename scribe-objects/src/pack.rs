//! Pack file framing (specification section 6.1).
//!
//! ```text
//! header (16 bytes): "SCPK" | u16 version = 1 | u32 pack id | u16 reserved = 0 | u32 flags = 0
//! entry (repeated):  "SCPE" | [33] object key | u64 envelope length | envelope bytes
//! ```
//!
//! Entry length = 45 + envelope length. Packs are append-only; only the
//! highest-numbered pack is open for appends.

use scribe_format::bytes::{Put, Reader};
use scribe_format::ObjectId;

pub const PACK_MAGIC: [u8; 4] = *b"SCPK";
pub const PACK_VERSION: u16 = 1;
pub const PACK_HEADER_LEN: u64 = 16;
pub const ENTRY_MAGIC: [u8; 4] = *b"SCPE";
/// Offsets inside an entry header.
pub const ENTRY_KEY_OFFSET: usize = 4;
pub const ENTRY_LEN_OFFSET: usize = ENTRY_KEY_OFFSET + ObjectId::LEN;
pub const ENTRY_HEADER_LEN: usize = ENTRY_LEN_OFFSET + 8;

const _: () = assert!(ENTRY_HEADER_LEN == 45);

pub fn pack_header(id: u32) -> [u8; PACK_HEADER_LEN as usize] {
    let mut v = Vec::with_capacity(16);
    v.put_bytes(&PACK_MAGIC);
    v.put_u16(PACK_VERSION);
    v.put_u32(id);
    v.put_u16(0);
    v.put_u32(0);
    let mut out = [0u8; 16];
    out.copy_from_slice(&v);
    out
}

/// Check a pack header; returns a reason on refusal.
pub fn check_pack_header(bytes: &[u8; 16], expected_id: u32) -> Result<(), String> {
    let mut r = Reader::new(bytes);
    let e = |e: scribe_format::FormatError| e.to_string();
    if r.array::<4>("pack magic").map_err(e)? != PACK_MAGIC {
        return Err("bad pack magic".into());
    }
    let version = r.u16("pack version").map_err(e)?;
    if version != PACK_VERSION {
        return Err(format!("unsupported pack version {version}"));
    }
    let id = r.u32("pack id").map_err(e)?;
    if id != expected_id {
        return Err(format!(
            "header names pack {id:08x}, file is {expected_id:08x}"
        ));
    }
    let reserved = r.u16("pack reserved").map_err(e)?;
    let flags = r.u32("pack flags").map_err(e)?;
    if reserved != 0 || flags != 0 {
        return Err("nonzero reserved or flags".into());
    }
    Ok(())
}

pub fn entry_header(id: &ObjectId, envelope_len: u64) -> [u8; ENTRY_HEADER_LEN] {
    let mut out = [0u8; ENTRY_HEADER_LEN];
    out[..4].copy_from_slice(&ENTRY_MAGIC);
    out[ENTRY_KEY_OFFSET..ENTRY_LEN_OFFSET].copy_from_slice(&id.to_bytes());
    out[ENTRY_LEN_OFFSET..].copy_from_slice(&envelope_len.to_le_bytes());
    out
}

/// Parse an entry header: (object key bytes, envelope length).
pub fn parse_entry_header(bytes: &[u8; ENTRY_HEADER_LEN]) -> Result<([u8; 33], u64), String> {
    if bytes[..4] != ENTRY_MAGIC {
        return Err("bad entry magic".into());
    }
    let mut key = [0u8; 33];
    key.copy_from_slice(&bytes[ENTRY_KEY_OFFSET..ENTRY_LEN_OFFSET]);
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[ENTRY_LEN_OFFSET..]);
    Ok((key, u64::from_le_bytes(len)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use scribe_format::ObjectKind;

    #[test]
    fn header_bytes() {
        let h = pack_header(0x01020304);
        assert_eq!(&h, b"SCPK\x01\x00\x04\x03\x02\x01\x00\x00\x00\x00\x00\x00");
        assert!(check_pack_header(&h, 0x01020304).is_ok());
        assert!(check_pack_header(&h, 5).is_err());
        let id = ObjectId::new(ObjectKind::Chunk, [9; 32]);
        let e = entry_header(&id, 300);
        assert_eq!(&e[..4], b"SCPE");
        assert_eq!(e[4], 1);
        assert_eq!(parse_entry_header(&e).unwrap(), (id.to_bytes(), 300));
    }
}
