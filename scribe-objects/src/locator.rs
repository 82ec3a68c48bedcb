//! The locator database `locator.redb` (specification section 6.2).
//!
//! ```text
//! table `locator`: [u8; 33] object key -> value
//!   u8 version = 1 | u8 location: 1 loose, 2 packed
//!   loose:  u64 envelope length
//!   packed: u32 pack id | u64 entry offset | u64 entry length
//! table `meta` (&str -> bytes):
//!   `open-pack`               u32 LE pack id
//!   `open-pack-committed-len` u64 LE
//! table `content_manifests` (the content index, a non-normative cache;
//! see `content_index.rs`): [u8; 40] key -> [u8; 32] ManifestId
//!   key = u64 total size (ordered, big endian) | [32] FileContentId
//! ```

use redb::TableDefinition;
use scribe_format::bytes::{Put, Reader};
use scribe_format::{FileContentId, ManifestId};

pub const LOCATOR_TABLE: TableDefinition<&[u8; 33], &[u8]> = TableDefinition::new("locator");
pub const META_TABLE: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
pub const META_OPEN_PACK: &str = "open-pack";
pub const META_OPEN_PACK_LEN: &str = "open-pack-committed-len";

/// The content index (see `content_index.rs`).
pub(crate) const CONTENT_TABLE: TableDefinition<&[u8; 40], &[u8; 32]> =
    TableDefinition::new("content_manifests");

/// A content index row: key and manifest digest.
pub(crate) type ContentRow = ([u8; 40], [u8; 32]);

/// The content index key of a file of `size` bytes with identity `content`.
pub(crate) fn content_key(size: u64, content: &FileContentId) -> [u8; 40] {
    let mut k = [0u8; 40];
    k[..8].copy_from_slice(&size.to_be_bytes());
    k[8..].copy_from_slice(&content.0);
    k
}

/// The content index row naming `manifest` for this content.
pub(crate) fn content_row(size: u64, content: &FileContentId, manifest: &ManifestId) -> ContentRow {
    (content_key(size, content), manifest.0)
}

pub const ROW_VERSION: u8 = 1;
pub const LOC_LOOSE: u8 = 1;
pub const LOC_PACKED: u8 = 2;

/// Where an object's envelope lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    Loose {
        envelope_len: u64,
    },
    Packed {
        pack: u32,
        offset: u64,
        entry_len: u64,
    },
}

impl Location {
    pub fn envelope_len(&self) -> u64 {
        match *self {
            Location::Loose { envelope_len } => envelope_len,
            Location::Packed { entry_len, .. } => entry_len - crate::pack::ENTRY_HEADER_LEN as u64,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(22);
        v.put_u8(ROW_VERSION);
        match *self {
            Location::Loose { envelope_len } => {
                v.put_u8(LOC_LOOSE);
                v.put_u64(envelope_len);
            }
            Location::Packed {
                pack,
                offset,
                entry_len,
            } => {
                v.put_u8(LOC_PACKED);
                v.put_u32(pack);
                v.put_u64(offset);
                v.put_u64(entry_len);
            }
        }
        v
    }

    pub fn decode(bytes: &[u8]) -> Result<Location, String> {
        let mut r = Reader::new(bytes);
        let e = |e: scribe_format::FormatError| e.to_string();
        let version = r.u8("locator row version").map_err(e)?;
        if version != ROW_VERSION {
            return Err(format!("unsupported row version {version}"));
        }
        let loc = match r.u8("locator location").map_err(e)? {
            LOC_LOOSE => Location::Loose {
                envelope_len: r.u64("loose envelope length").map_err(e)?,
            },
            LOC_PACKED => {
                let pack = r.u32("pack id").map_err(e)?;
                let offset = r.u64("entry offset").map_err(e)?;
                let entry_len = r.u64("entry length").map_err(e)?;
                if entry_len
                    < crate::pack::ENTRY_HEADER_LEN as u64
                        + scribe_format::envelope::HEADER_LEN as u64
                {
                    return Err(format!("entry length {entry_len} is too short"));
                }
                if offset < crate::pack::PACK_HEADER_LEN || offset.checked_add(entry_len).is_none()
                {
                    return Err(format!("entry offset {offset} is invalid"));
                }
                Location::Packed {
                    pack,
                    offset,
                    entry_len,
                }
            }
            other => return Err(format!("unknown location {other}")),
        };
        r.finish("locator row").map_err(e)?;
        Ok(loc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_bytes() {
        let l = Location::Loose {
            envelope_len: 0x0102,
        };
        assert_eq!(l.encode(), vec![1, 1, 2, 1, 0, 0, 0, 0, 0, 0]);
        let p = Location::Packed {
            pack: 3,
            offset: 16,
            entry_len: 70,
        };
        let b = p.encode();
        assert_eq!(b.len(), 22);
        assert_eq!(&b[..6], &[1, 2, 3, 0, 0, 0]);
        assert_eq!(Location::decode(&b).unwrap(), p);
        assert!(Location::decode(&b[..21]).is_err());
        assert!(Location::decode(&[2, 1, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(Location::decode(&[1, 3]).is_err());
    }
}
