//! The tier record in the bucket: one immutable **index record** per
//! published change, so a fresh machine rebuilds `tier.redb` from the
//! bucket alone (`docs/nokv-bridge.md`, "Disaster recovery").
//!
//! `tier.redb` itself is not journaled: its source of truth for recovery is
//! the bucket. Every publication writes, after its blocks and before the
//! transaction that advances the cursor, the record of what that
//! transaction writes, under
//!
//! ```text
//! nokv/index/{shard:08x}/{root:032x}/{change:016x}-{tag:016x}
//! ```
//!
//! where `tag` is the first 8 bytes of BLAKE3 over the ids of the change's
//! commit objects (in the order given), so the key names exactly one
//! change content: a change number that was published but never reached
//! the shipped journal (a crash under `local`) and is reused by another
//! change after a restore gets another key. A restore knows each change's
//! commit objects from the restored metadata, so it finds every record
//! without listing.
//!
//! Layout (integers little-endian):
//!
//! ```text
//! "SCTI" ‖ u8 1 ‖ [16] root ‖ u64 change
//! ‖ revision (commit) ‖ revision (content)
//! ‖ u64 n ‖ n × [16] commit owners (sealed dependencies)
//! ‖ u64 n ‖ n × (u32 len ‖ UTF-8 path ‖ u64 m ‖ m × [16] owners)
//! ‖ [32] BLAKE3 of everything before
//! revision = u8 0 | u8 1 ‖ [16] id ‖ u64 blocks ‖ u64 bytes ‖ u64 n
//!            ‖ n × ([33] object id ‖ u64 block ‖ u64 offset ‖ u64 length)
//! ```
//!
//! The object id is the object's digest. A record is accepted only when its
//! digest, its root and its change match, and each row lies within its
//! revision's block count; the rows' bytes are checked against their ids
//! whenever they are read (`Tier::read_object`).

use std::collections::BTreeSet;

use scribe_format::ObjectId;

use super::state::ObjectRow;

const MAGIC: &[u8; 4] = b"SCTI";
const VERSION: u8 = 1;

/// A new revision of a publication: id, manifest rows, blocks, bytes.
pub(crate) type NewRevision = ([u8; 16], Vec<(ObjectId, ObjectRow)>, u64, u64);

/// What one publication writes into `tier.redb` (and, encoded, into the
/// bucket as its index record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Publication {
    pub root: [u8; 16],
    pub change: u64,
    pub revision: Option<NewRevision>,
    pub content: Option<NewRevision>,
    pub commit_owners: BTreeSet<[u8; 16]>,
    pub files: Vec<(String, BTreeSet<[u8; 16]>)>,
}

/// The index record key of change `change` of `root` whose commit holds
/// `commit`.
pub(crate) fn key(shard: u32, root: &[u8; 16], change: u64, commit: &[ObjectId]) -> String {
    let mut h = blake3::Hasher::new();
    for id in commit {
        h.update(&id.to_bytes());
    }
    let tag = u64::from_be_bytes(h.finalize().as_bytes()[..8].try_into().expect("8 bytes"));
    format!(
        "nokv/index/{shard:08x}/{}/{change:016x}-{tag:016x}",
        hex::encode(root)
    )
}

fn put_u64(v: &mut Vec<u8>, n: u64) {
    v.extend_from_slice(&n.to_le_bytes());
}

fn put_revision(v: &mut Vec<u8>, r: &Option<NewRevision>) {
    match r {
        None => v.push(0),
        Some((id, rows, blocks, bytes)) => {
            v.push(1);
            v.extend_from_slice(id);
            put_u64(v, *blocks);
            put_u64(v, *bytes);
            put_u64(v, rows.len() as u64);
            for (oid, row) in rows {
                v.extend_from_slice(&oid.to_bytes());
                put_u64(v, row.block);
                put_u64(v, row.offset);
                put_u64(v, row.len);
            }
        }
    }
}

impl Publication {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(MAGIC);
        v.push(VERSION);
        v.extend_from_slice(&self.root);
        put_u64(&mut v, self.change);
        put_revision(&mut v, &self.revision);
        put_revision(&mut v, &self.content);
        put_u64(&mut v, self.commit_owners.len() as u64);
        for o in &self.commit_owners {
            v.extend_from_slice(o);
        }
        put_u64(&mut v, self.files.len() as u64);
        for (path, owners) in &self.files {
            v.extend_from_slice(&(path.len() as u32).to_le_bytes());
            v.extend_from_slice(path.as_bytes());
            put_u64(&mut v, owners.len() as u64);
            for o in owners {
                v.extend_from_slice(o);
            }
        }
        let sum = blake3::hash(&v);
        v.extend_from_slice(sum.as_bytes());
        v
    }

    /// Decode and check a record; the error says what is wrong.
    pub(crate) fn decode(b: &[u8]) -> Result<Publication, String> {
        if b.len() < MAGIC.len() + 1 + 32 {
            return Err(format!("{} bytes: too short for an index record", b.len()));
        }
        let (body, sum) = b.split_at(b.len() - 32);
        if blake3::hash(body).as_bytes() != sum {
            return Err("its BLAKE3 digest does not match its bytes".into());
        }
        let mut r = Reader { b: body, at: 0 };
        if r.take(4)? != MAGIC {
            return Err("not an index record (magic)".into());
        }
        let version = r.take(1)?[0];
        if version != VERSION {
            return Err(format!("index record version {version} is unknown"));
        }
        let root = r.id16()?;
        let change = r.u64()?;
        let revision = r.revision()?;
        let content = r.revision()?;
        let mut commit_owners = BTreeSet::new();
        for _ in 0..r.count(16)? {
            commit_owners.insert(r.id16()?);
        }
        let mut files = Vec::new();
        for _ in 0..r.count(12)? {
            let len = u32::from_le_bytes(r.take(4)?.try_into().expect("4 bytes")) as usize;
            let path = std::str::from_utf8(r.take(len)?)
                .map_err(|_| "a path is not UTF-8".to_string())?
                .to_string();
            let mut owners = BTreeSet::new();
            for _ in 0..r.count(16)? {
                owners.insert(r.id16()?);
            }
            files.push((path, owners));
        }
        if r.at != body.len() {
            return Err(format!("{} bytes after the record", body.len() - r.at));
        }
        Ok(Publication {
            root,
            change,
            revision,
            content,
            commit_owners,
            files,
        })
    }
}

/// The key of the `n`th release record of `root` (1, 2, …, dense).
pub(crate) fn release_key(shard: u32, root: &[u8; 16], n: u64) -> String {
    format!(
        "nokv/index/{shard:08x}/{}/released/{n:016x}",
        hex::encode(root)
    )
}

const RELEASE_MAGIC: &[u8; 4] = b"SCTR";

/// A release record: `"SCTR" ‖ u8 1 ‖ [16] root ‖ u64 n ‖ n × (u64 change
/// ‖ u32 len ‖ UTF-8 path) ‖ [32] BLAKE3 of everything before`: the file
/// revisions one `release_files` gave up.
pub(crate) fn encode_release(root: &[u8; 16], versions: &[(u64, String)]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(RELEASE_MAGIC);
    v.push(VERSION);
    v.extend_from_slice(root);
    put_u64(&mut v, versions.len() as u64);
    for (c, p) in versions {
        put_u64(&mut v, *c);
        v.extend_from_slice(&(p.len() as u32).to_le_bytes());
        v.extend_from_slice(p.as_bytes());
    }
    let sum = blake3::hash(&v);
    v.extend_from_slice(sum.as_bytes());
    v
}

pub(crate) fn decode_release(root: &[u8; 16], b: &[u8]) -> Result<Vec<(u64, String)>, String> {
    if b.len() < 4 + 1 + 16 + 8 + 32 {
        return Err(format!("{} bytes: too short for a release record", b.len()));
    }
    let (body, sum) = b.split_at(b.len() - 32);
    if blake3::hash(body).as_bytes() != sum {
        return Err("its BLAKE3 digest does not match its bytes".into());
    }
    let mut r = Reader { b: body, at: 0 };
    if r.take(4)? != RELEASE_MAGIC || r.take(1)?[0] != VERSION {
        return Err("not a release record of version 1".into());
    }
    if r.id16()? != *root {
        return Err("it is the release record of another root".into());
    }
    let mut out = Vec::new();
    for _ in 0..r.count(12)? {
        let c = r.u64()?;
        let len = u32::from_le_bytes(r.take(4)?.try_into().expect("4 bytes")) as usize;
        let p = std::str::from_utf8(r.take(len)?).map_err(|_| "a path is not UTF-8".to_string())?;
        out.push((c, p.to_string()));
    }
    if r.at != body.len() {
        return Err(format!("{} bytes after the record", body.len() - r.at));
    }
    Ok(out)
}

/// The last `n` for which `exists(n)` holds, for keys written densely from
/// 1 (0: none): doubling, then bisecting.
pub(crate) fn last_dense(
    exists: impl Fn(u64) -> Result<bool, super::TierError>,
) -> Result<u64, super::TierError> {
    let (mut lo, mut hi) = (0u64, 1u64);
    while exists(hi)? {
        lo = hi;
        hi *= 2;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if exists(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.b.len())
            .ok_or_else(|| format!("truncated at byte {}", self.at))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }

    fn id16(&mut self) -> Result<[u8; 16], String> {
        Ok(self.take(16)?.try_into().expect("16"))
    }

    /// A count of items at least `min` bytes each, bounded by what is left.
    fn count(&mut self, min: usize) -> Result<u64, String> {
        let n = self.u64()?;
        if n > ((self.b.len() - self.at) / min.max(1)) as u64 {
            return Err(format!("a count of {n} exceeds the record"));
        }
        Ok(n)
    }

    fn revision(&mut self) -> Result<Option<NewRevision>, String> {
        match self.take(1)?[0] {
            0 => Ok(None),
            1 => {
                let id = self.id16()?;
                let blocks = self.u64()?;
                let bytes = self.u64()?;
                let mut rows = Vec::new();
                for _ in 0..self.count(33 + 24)? {
                    let oid = ObjectId::from_bytes(self.take(33)?)
                        .map_err(|e| format!("an object id does not decode: {e}"))?;
                    let block = self.u64()?;
                    let offset = self.u64()?;
                    let len = self.u64()?;
                    if block >= blocks || offset.checked_add(len).is_none() {
                        return Err(format!(
                            "the row of {oid} names block {block} of {blocks} at {offset}+{len}"
                        ));
                    }
                    rows.push((
                        oid,
                        ObjectRow {
                            revision: id,
                            block,
                            offset,
                            len,
                        },
                    ));
                }
                Ok(Some((id, rows, blocks, bytes)))
            }
            other => Err(format!("revision tag {other} is unknown")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Publication {
        let oid = ObjectId::chunk(scribe_format::ChunkId([5; 32]));
        Publication {
            root: [1; 16],
            change: 7,
            revision: Some(([2; 16], vec![], 0, 0)),
            content: Some((
                [3; 16],
                vec![(
                    oid,
                    ObjectRow {
                        revision: [3; 16],
                        block: 0,
                        offset: 0,
                        len: 9,
                    },
                )],
                1,
                9,
            )),
            commit_owners: [[4; 16]].into_iter().collect(),
            files: vec![("a/b.bin".into(), [[3; 16]].into_iter().collect())],
        }
    }

    #[test]
    fn a_record_round_trips_and_every_damage_is_refused() {
        let p = sample();
        let b = p.encode();
        assert_eq!(Publication::decode(&b).unwrap(), p);
        // Every single-byte change and every truncation is refused, and
        // decoding never panics.
        for i in 0..b.len() {
            let mut d = b.clone();
            d[i] ^= 0x40;
            assert!(Publication::decode(&d).is_err(), "byte {i}");
            assert!(Publication::decode(&b[..i]).is_err(), "length {i}");
        }
        // A well-digested record with a row outside its revision.
        let mut q = sample();
        q.content.as_mut().unwrap().1[0].1.block = 1;
        let e = Publication::decode(&q.encode()).unwrap_err();
        assert!(e.contains("block 1 of 1"), "{e}");
    }

    #[test]
    fn a_release_record_round_trips_and_is_refused_damaged_or_foreign() {
        let v = vec![(3u64, "a.bin".to_string()), (9, "d/é.txt".to_string())];
        let b = encode_release(&[1; 16], &v);
        assert_eq!(decode_release(&[1; 16], &b).unwrap(), v);
        assert!(decode_release(&[2; 16], &b)
            .unwrap_err()
            .contains("another root"));
        for i in 0..b.len() {
            let mut d = b.clone();
            d[i] ^= 0x10;
            assert!(decode_release(&[1; 16], &d).is_err(), "byte {i}");
            assert!(decode_release(&[1; 16], &b[..i]).is_err(), "length {i}");
        }
    }

    #[test]
    fn last_dense_finds_the_last_of_a_dense_run() {
        for last in [0u64, 1, 2, 3, 7, 8, 9, 100] {
            assert_eq!(last_dense(|n| Ok(n >= 1 && n <= last)).unwrap(), last);
        }
    }
}
