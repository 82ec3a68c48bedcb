//! Permanent block identity (seed 003, "Permanent Block Identity"):
//!
//! ```text
//! nokv/artifacts/{logical_shard_id}/{root_id}/{artifact_revision_id}/blocks/{object_index}
//! ```
//!
//! Widths chosen here (the seed fixes the shape and "lowercase fixed-width
//! hexadecimal", not the widths): logical shard 32 bits (8 digits), root
//! and artifact revision 128 bits (32 digits: a Scribe repository id is
//! the root id), object index 64 bits (16 digits). A key never names an
//! endpoint, a bucket, an owner or a workbench, so a bucket can move and
//! the keys stay true. A deployment may put every key under a prefix of
//! its own (configuration, like the endpoint; see [`super::S3Config`]).

use std::fmt;

/// The fixed first part of every block key.
pub const ROOT: &str = "nokv/artifacts";

/// A block's permanent identity. Keys are never reused for other bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockKey {
    pub shard: u32,
    pub root: [u8; 16],
    pub revision: [u8; 16],
    pub index: u64,
}

impl BlockKey {
    pub fn new(shard: u32, root: [u8; 16], revision: [u8; 16], index: u64) -> Self {
        BlockKey {
            shard,
            root,
            revision,
            index,
        }
    }

    /// The key's text (`nokv/artifacts/...`), as stored in the bucket.
    pub fn to_key(&self) -> String {
        self.to_string()
    }

    /// Strict parse: exactly the shape [`BlockKey::to_key`] writes
    /// (lowercase, fixed widths, no extra segments); `None` otherwise.
    pub fn parse(text: &str) -> Option<BlockKey> {
        let rest = text.strip_prefix(ROOT)?.strip_prefix('/')?;
        let mut parts = rest.split('/');
        let shard = parts.next()?;
        let root = parts.next()?;
        let revision = parts.next()?;
        if parts.next()? != "blocks" {
            return None;
        }
        let index = parts.next()?;
        if parts.next().is_some() {
            return None;
        }
        Some(BlockKey {
            shard: u32::from_str_radix(lower_hex(shard, 8)?, 16).ok()?,
            root: id16(root)?,
            revision: id16(revision)?,
            index: u64::from_str_radix(lower_hex(index, 16)?, 16).ok()?,
        })
    }
}

fn lower_hex(s: &str, width: usize) -> Option<&str> {
    (s.len() == width && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))).then_some(s)
}

fn id16(s: &str) -> Option<[u8; 16]> {
    let mut out = [0u8; 16];
    hex::decode_to_slice(lower_hex(s, 32)?, &mut out).ok()?;
    Some(out)
}

impl fmt::Display for BlockKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{ROOT}/{:08x}/{}/{}/blocks/{:016x}",
            self.shard,
            hex::encode(self.root),
            hex::encode(self.revision),
            self.index
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fixed_width_lowercase_and_parse_back() {
        let k = BlockKey::new(0xAB, [0xCD; 16], [0x01; 16], 0x2F);
        let text = k.to_key();
        assert_eq!(
            text,
            "nokv/artifacts/000000ab/cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd/\
             01010101010101010101010101010101/blocks/000000000000002f"
        );
        assert_eq!(BlockKey::parse(&text), Some(k));
    }

    #[test]
    fn parse_refuses_every_other_shape() {
        let good = BlockKey::new(1, [2; 16], [3; 16], 4).to_key();
        assert!(BlockKey::parse(&good).is_some());
        let bad = [
            good.to_uppercase(),
            good.replace("/blocks/", "/block/"),
            format!("{good}/x"),
            format!("x/{good}"),
            good.replacen("00000001", "1", 1),
            good.replace("0000000000000004", "000000000000004"),
            good.replace("0000000000000004", "000000000000000g"),
            good.replace(
                "02020202020202020202020202020202",
                "0202020202020202020202020202020",
            ),
            String::new(),
        ];
        for b in &bad {
            assert_eq!(BlockKey::parse(b), None, "{b:?}");
        }
    }
}
