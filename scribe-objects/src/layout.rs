//! Paths of the store layout (specification section 6) and flush helpers.
//!
//! ```text
//! <store>/SCRIBE_FORMAT
//! <store>/locator.redb
//! <store>/loose/<hh>/<kk><digest hex>   hh = first digest byte, kk = kind, 2 hex digits each
//! <store>/packs/<pack id, 8 hex>.pack
//! <store>/staging/                      quarantine temporaries (same filesystem)
//! ```

use std::fs::File;
use std::path::{Path, PathBuf};

use scribe_format::{ObjectId, ObjectKind};

use crate::error::{io_err, Result};

pub const DESCRIPTOR: &str = "SCRIBE_FORMAT";
pub const LOCATOR: &str = "locator.redb";
pub const LOOSE: &str = "loose";
pub const PACKS: &str = "packs";
pub const STAGING: &str = "staging";

pub fn pack_name(id: u32) -> String {
    format!("{id:08x}.pack")
}

pub fn pack_path(store: &Path, id: u32) -> PathBuf {
    store.join(PACKS).join(pack_name(id))
}

/// Parse `<8 hex>.pack`.
pub fn parse_pack_name(name: &str) -> Option<u32> {
    let hex = name.strip_suffix(".pack")?;
    if hex.len() != 8
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    u32::from_str_radix(hex, 16).ok()
}

pub fn loose_shard(store: &Path, id: &ObjectId) -> PathBuf {
    store.join(LOOSE).join(format!("{:02x}", id.digest[0]))
}

pub fn loose_name(id: &ObjectId) -> String {
    format!("{:02x}{}", id.kind.byte(), hex::encode(id.digest))
}

pub fn loose_path(store: &Path, id: &ObjectId) -> PathBuf {
    loose_shard(store, id).join(loose_name(id))
}

/// Parse a loose file name inside shard `hh`.
pub fn parse_loose_name(shard: &str, name: &str) -> Option<ObjectId> {
    if name.len() != 66 || shard.len() != 2 {
        return None;
    }
    let kind = u8::from_str_radix(&name[..2], 16).ok()?;
    let kind = ObjectKind::from_byte(kind).ok()?;
    let mut digest = [0u8; 32];
    hex::decode_to_slice(&name[2..], &mut digest).ok()?;
    if name[2..].bytes().any(|b| b.is_ascii_uppercase()) || format!("{:02x}", digest[0]) != shard {
        return None;
    }
    Some(ObjectId::new(kind, digest))
}

/// Flush a directory so the entries created or renamed in it are durable.
///
/// On Unix a directory's entries are made durable by fsync of the directory.
/// Windows cannot open a directory as a file without backup semantics and
/// NTFS journals its metadata, so there this is a no-op.
pub fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)
            .and_then(|f| f.sync_all())
            .map_err(io_err(dir))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// List packs as (id, path), ascending by id; other files are ignored.
pub fn list_packs(store: &Path) -> Result<Vec<(u32, PathBuf)>> {
    let dir = store.join(PACKS);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(io_err(&dir))? {
        let entry = entry.map_err(io_err(&dir))?;
        if let Some(id) = entry.file_name().to_str().and_then(parse_pack_name) {
            out.push((id, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// List loose objects as (id, path).
pub fn list_loose(store: &Path) -> Result<Vec<(ObjectId, PathBuf)>> {
    let dir = store.join(LOOSE);
    let mut out = Vec::new();
    for shard in std::fs::read_dir(&dir).map_err(io_err(&dir))? {
        let shard = shard.map_err(io_err(&dir))?;
        let Some(shard_name) = shard.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !shard.path().is_dir() {
            continue;
        }
        for f in std::fs::read_dir(shard.path()).map_err(io_err(shard.path()))? {
            let f = f.map_err(io_err(shard.path()))?;
            if let Some(id) = f
                .file_name()
                .to_str()
                .and_then(|n| parse_loose_name(&shard_name, n))
            {
                out.push((id, f.path()));
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(pack_name(0x1a), "0000001a.pack");
        assert_eq!(parse_pack_name("0000001a.pack"), Some(0x1a));
        assert_eq!(parse_pack_name("0000001A.pack"), None);
        assert_eq!(parse_pack_name("1a.pack"), None);
        let id = ObjectId::new(ObjectKind::Manifest, [0xab; 32]);
        let p = loose_path(Path::new("/s"), &id);
        assert_eq!(
            p,
            PathBuf::from(format!("/s/loose/ab/02{}", "ab".repeat(32)))
        );
        assert_eq!(parse_loose_name("ab", &loose_name(&id)), Some(id));
        assert_eq!(parse_loose_name("ac", &loose_name(&id)), None);
    }
}
