//! Shipping a metadata recovery archive (a `.recovery` directory of
//! `.journal` segments and `HEAD`, seed 004 "Independent archive") to the
//! bucket as immutable objects, and fetching it back (issue #20,
//! disaster recovery; `docs/nokv-bridge.md`).
//!
//! Under `nokv/recovery/{shard:08x}/{name}/`:
//!
//! * `{segment:020}/{start:016x}-{end:016x}`: bytes `start..end` of that
//!   segment file (published bytes only: up to HEAD's offset in HEAD's
//!   segment; never rewritten, so a key always names the same bytes);
//! * `head/{step:016x}`: step `1, 2, …` of the shipping: the 112 HEAD bytes
//!   it covers, `u32 LE` piece count, and per piece `u64 LE` segment,
//!   start, length. Written after its pieces, so every step names pieces
//!   that are in the bucket.
//!
//! The steps are numbered densely from 1 and never deleted, so a fetch
//! finds the last by probing with `head` (no listing: object listing is
//! never the truth). `tier_recovery` in `tier.redb` keeps per archive the
//! last step and the (segment, offset) it covered.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use bytes::Bytes;
use redb::{Durability, ReadableDatabase};
use scribe_format::recovery::{segment_file_name, ArchiveHead, HEAD_LEN};

use super::provider::{Provider, ProviderError, Put};
use super::state;
use super::tier::Tier;
use super::TierError;

/// What one [`Tier::ship_archive`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shipped {
    /// The step written (0: nothing new to ship).
    pub step: u64,
    pub segment: u64,
    pub offset: u64,
    pub bytes: u64,
}

fn io(path: &Path, e: std::io::Error) -> TierError {
    TierError::Local {
        id: path.display().to_string(),
        detail: e.to_string(),
    }
}

impl Tier {
    fn recovery_prefix(&self, name: &str) -> String {
        format!("nokv/recovery/{:08x}/{name}", self.journal_shard)
    }

    /// The last step shipped for archive `name` and the (segment, offset)
    /// it covered.
    pub fn recovery_cursor(&self, name: &str) -> Result<(u64, u64, u64), TierError> {
        let tx = self.db.begin_read().map_err(self.st())?;
        let t = tx.open_table(state::RECOVERY).map_err(self.st())?;
        let Some(v) = t.get(name).map_err(self.st())? else {
            return Ok((0, 1, 0));
        };
        let b = v.value();
        if b.len() != 24 {
            return Err(TierError::corrupt(
                &self.path,
                "a tier_recovery row is not 24 bytes",
            ));
        }
        let u = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        Ok((u(0), u(8), u(16)))
    }

    fn set_recovery_cursor(&self, name: &str, c: (u64, u64, u64)) -> Result<(), TierError> {
        let mut v = Vec::with_capacity(24);
        for n in [c.0, c.1, c.2] {
            v.extend_from_slice(&n.to_le_bytes());
        }
        let mut tx = self.db.begin_write().map_err(self.st())?;
        tx.set_durability(Durability::Immediate)
            .map_err(self.st())?;
        tx.open_table(state::RECOVERY)
            .map_err(self.st())?
            .insert(name, v.as_slice())
            .map_err(self.st())?;
        tx.commit().map_err(self.st())?;
        Ok(())
    }

    /// Ship what archive `dir` published since the last step, as `name`
    /// (see the module docs). An archive without `HEAD` ships nothing.
    pub fn ship_archive(&self, name: &str, dir: &Path) -> Result<Shipped, TierError> {
        let head_path = dir.join("HEAD");
        let head_bytes = match std::fs::read(&head_path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Shipped::default()),
            Err(e) => return Err(io(&head_path, e)),
        };
        let head = ArchiveHead::decode(&head_bytes).map_err(|e| TierError::Local {
            id: head_path.display().to_string(),
            detail: e.to_string(),
        })?;
        let (step, seg, off) = self.recovery_cursor(name)?;
        if head.segment == 0 || (step > 0 && (head.segment, head.offset) == (seg, off)) {
            return Ok(Shipped::default());
        }
        let prefix = self.recovery_prefix(name);
        let mut pieces = Vec::new();
        let mut total = 0u64;
        for s in seg.max(1)..=head.segment {
            let path = dir.join(segment_file_name(s));
            let bytes = std::fs::read(&path).map_err(|e| io(&path, e))?;
            let start = if s == seg { off } else { 0 };
            let end = if s == head.segment {
                head.offset
            } else {
                bytes.len() as u64
            };
            if end as usize > bytes.len() {
                return Err(TierError::Local {
                    id: path.display().to_string(),
                    detail: format!("{} bytes, HEAD names {end}", bytes.len()),
                });
            }
            if end <= start {
                continue;
            }
            let key = format!("{prefix}/{s:020}/{start:016x}-{end:016x}");
            let body = Bytes::copy_from_slice(&bytes[start as usize..end as usize]);
            match self.provider.put_if_absent(&key, body)? {
                Put::Created | Put::AlreadyPresent => {}
            }
            pieces.push((s, start, end - start));
            total += end - start;
        }
        let mut body = head_bytes.clone();
        body.extend_from_slice(&(pieces.len() as u32).to_le_bytes());
        for (s, start, len) in &pieces {
            for n in [*s, *start, *len] {
                body.extend_from_slice(&n.to_le_bytes());
            }
        }
        let next = step + 1;
        let key = format!("{prefix}/head/{next:016x}");
        match self.provider.put_if_absent(&key, Bytes::from(body)) {
            Ok(_) => {}
            // A step written before a crash, with an older HEAD: take it
            // as shipped and continue from what it covered.
            Err(ProviderError::Conflict { .. }) => {
                let old = self.provider.get(&key)?;
                let h = ArchiveHead::decode(&old[..HEAD_LEN.min(old.len())]).map_err(|e| {
                    TierError::Damaged {
                        key: key.clone(),
                        offset: 0,
                        detail: e.to_string(),
                    }
                })?;
                self.set_recovery_cursor(name, (next, h.segment, h.offset))?;
                return Ok(Shipped::default());
            }
            Err(e) => return Err(e.into()),
        }
        self.set_recovery_cursor(name, (next, head.segment, head.offset))?;
        Ok(Shipped {
            step: next,
            segment: head.segment,
            offset: head.offset,
            bytes: total,
        })
    }

    /// Rebuild archive `name` from the bucket into the empty directory
    /// `to` (segments and `HEAD` of the last step). Returns the last step.
    /// The caller verifies it (`scribe_metadata::archive::verify`).
    pub fn fetch_archive(&self, name: &str, to: &Path) -> Result<u64, TierError> {
        fetch_archive(&*self.provider, self.journal_shard, name, to)
    }

    /// Ship `bytes` as the data root's file `name` (its descriptor, the
    /// block shard) under `nokv/recovery/{journal shard}/{name}`,
    /// create-if-absent. `false` when the bucket already holds other
    /// bytes there (the file changed since it shipped, e.g. a repository
    /// rename): the first version stays; the caller logs it and goes on
    /// (a changed descriptor must not stop the journals from shipping).
    pub fn ship_root_file(&self, name: &str, bytes: &[u8]) -> Result<bool, TierError> {
        let key = self.recovery_prefix(name);
        match self
            .provider
            .put_if_absent(&key, Bytes::copy_from_slice(bytes))
        {
            Ok(_) => Ok(true),
            Err(ProviderError::Conflict { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

/// The key of version `n` (from 1) of root file `key` after its first
/// (which is `key` itself): keys are never reused, so a file that
/// changes after it shipped ships again under the next version.
fn version_key(key: &str, n: u64) -> String {
    format!("{key}.v/{n:016x}")
}

impl Tier {
    /// Ship data root file `name` so the bucket's newest version is these
    /// bytes: the first version at `…/{name}`, each later one at
    /// `…/{name}.v/{n:016x}` (dense from 1, create-if-absent). Returns the
    /// version that holds them (0: the first); shipping the same bytes
    /// again writes nothing.
    pub fn ship_root_file_version(&self, name: &str, bytes: &[u8]) -> Result<u64, TierError> {
        let key = self.recovery_prefix(name);
        match self
            .provider
            .put_if_absent(&key, Bytes::copy_from_slice(bytes))
        {
            Ok(_) => return Ok(0),
            Err(ProviderError::Conflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        // A concurrent writer of the next version: look again, a few times.
        for _ in 0..4 {
            let n = super::index::last_dense(|i| {
                Ok(self.provider.head(&version_key(&key, i))?.is_some())
            })?;
            let newest = if n == 0 {
                self.provider.get(&key)?
            } else {
                self.provider.get(&version_key(&key, n))?
            };
            if newest.as_ref() == bytes {
                return Ok(n);
            }
            match self
                .provider
                .put_if_absent(&version_key(&key, n + 1), Bytes::copy_from_slice(bytes))
            {
                Ok(_) => return Ok(n + 1),
                Err(ProviderError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(TierError::state(
            &self.path,
            format!("{key}: other writers keep shipping new versions"),
        ))
    }
}

/// The newest version of data root file `name` shipped under
/// `journal_shard` ([`Tier::ship_root_file_version`]), if it is there.
pub fn fetch_root_file(
    provider: &dyn Provider,
    journal_shard: u32,
    name: &str,
) -> Result<Option<Bytes>, TierError> {
    let key = format!("nokv/recovery/{journal_shard:08x}/{name}");
    let first = match provider.get(&key) {
        Ok(b) => b,
        Err(ProviderError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let n = super::index::last_dense(|i| Ok(provider.head(&version_key(&key, i))?.is_some()))?;
    if n == 0 {
        return Ok(Some(first));
    }
    Ok(Some(provider.get(&version_key(&key, n))?))
}

/// The journal shards with shipped recovery journals (one per data root
/// incarnation that served with this bucket). Listing is used only to
/// find them; what is restored is checked by content, never by listing.
pub fn journal_shards(provider: &dyn Provider) -> Result<Vec<u32>, TierError> {
    let mut out: Vec<u32> = provider
        .list_dirs("nokv/recovery")?
        .iter()
        .filter(|d| d.len() == 8)
        .filter_map(|d| u32::from_str_radix(d, 16).ok())
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// Whether archive `name` under `journal_shard` has shipped its first
/// step (`…/{name}/head/0000000000000001`). A data root killed before
/// its first step shipped holds nothing a restore could rebuild.
pub fn archive_shipped(
    provider: &dyn Provider,
    journal_shard: u32,
    name: &str,
) -> Result<bool, TierError> {
    let key = format!("nokv/recovery/{journal_shard:08x}/{name}/head/{:016x}", 1);
    Ok(provider.head(&key)?.is_some())
}

/// Rebuild archive `name` shipped under `journal_shard` into the empty
/// directory `to` ([`Tier::fetch_archive`]).
pub fn fetch_archive(
    provider: &dyn Provider,
    journal_shard: u32,
    name: &str,
    to: &Path,
) -> Result<u64, TierError> {
    {
        let prefix = format!("nokv/recovery/{journal_shard:08x}/{name}");
        let exists = |n: u64| -> Result<bool, TierError> {
            Ok(provider.head(&format!("{prefix}/head/{n:016x}"))?.is_some())
        };
        // The last step: double until absent, then bisect.
        let last = super::index::last_dense(exists)?;
        std::fs::create_dir_all(to).map_err(|e| io(to, e))?;
        let mut head = Vec::new();
        for n in 1..=last {
            let key = format!("{prefix}/head/{n:016x}");
            let body = provider.get(&key)?;
            let bad = |detail: &str| TierError::Damaged {
                key: key.clone(),
                offset: 0,
                detail: detail.to_string(),
            };
            if body.len() < HEAD_LEN + 4 {
                return Err(bad("shorter than a HEAD and a piece count"));
            }
            let count = u32::from_le_bytes(body[HEAD_LEN..HEAD_LEN + 4].try_into().expect("4"));
            if body.len() != HEAD_LEN + 4 + 24 * count as usize {
                return Err(bad("its length does not match its piece count"));
            }
            for i in 0..count as usize {
                let at = HEAD_LEN + 4 + 24 * i;
                let u =
                    |k: usize| u64::from_le_bytes(body[at + k..at + k + 8].try_into().expect("8"));
                let (s, start, len) = (u(0), u(8), u(16));
                let end = start
                    .checked_add(len)
                    .ok_or_else(|| bad("a piece overflows"))?;
                let piece = provider.get(&format!("{prefix}/{s:020}/{start:016x}-{end:016x}"))?;
                if piece.len() as u64 != len {
                    return Err(bad("a piece has another length"));
                }
                let path = to.join(segment_file_name(s));
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .write(true)
                    .truncate(false)
                    .open(&path)
                    .map_err(|e| io(&path, e))?;
                f.seek(SeekFrom::Start(start)).map_err(|e| io(&path, e))?;
                f.write_all(&piece).map_err(|e| io(&path, e))?;
                f.sync_all().map_err(|e| io(&path, e))?;
            }
            head = body[..HEAD_LEN].to_vec();
        }
        if last > 0 {
            let p = to.join("HEAD");
            std::fs::write(&p, &head).map_err(|e| io(&p, e))?;
        }
        Ok(last)
    }
}

/// The digest sealing a copy of data root file `name` holding `bytes`
/// ([`Tier::ship_sealed_root_file`]): BLAKE3 over the name and the bytes,
/// so a damaged copy, or one put under another file's name, is refused.
fn root_file_seal(name: &str, bytes: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(b"scribe data root file\n");
    h.update(name.as_bytes());
    h.update(b"\n");
    h.update(bytes);
    *h.finalize().as_bytes()
}

impl Tier {
    /// Ship data root file `name` as [`Tier::ship_root_file_version`]
    /// does (immutable versions, the newest one the file), each version
    /// sealed: the bytes, then 32 bytes of BLAKE3 over the name and the
    /// bytes, which [`fetch_sealed_root_file`] checks. For the data root's
    /// own notes that no journal frames (`former-names`,
    /// `retired-repositories`).
    pub fn ship_sealed_root_file(&self, name: &str, bytes: &[u8]) -> Result<u64, TierError> {
        let mut body = bytes.to_vec();
        body.extend_from_slice(&root_file_seal(name, bytes));
        self.ship_root_file_version(name, &body)
    }
}

/// The newest version of sealed data root file `name` shipped under
/// `journal_shard` ([`Tier::ship_sealed_root_file`]), its seal checked:
/// `None` when it was never shipped; a version whose seal does not match
/// is [`TierError::Damaged`] with its key.
pub fn fetch_sealed_root_file(
    provider: &dyn Provider,
    journal_shard: u32,
    name: &str,
) -> Result<Option<Vec<u8>>, TierError> {
    let Some(body) = fetch_root_file(provider, journal_shard, name)? else {
        return Ok(None);
    };
    let key = format!("nokv/recovery/{journal_shard:08x}/{name}");
    let damaged = |detail: &str| TierError::Damaged {
        key: format!("{key} (newest version)"),
        offset: 0,
        detail: detail.to_string(),
    };
    let Some(at) = body.len().checked_sub(32) else {
        return Err(damaged("shorter than its seal"));
    };
    let (bytes, seal) = body.split_at(at);
    if root_file_seal(name, bytes) != seal {
        return Err(damaged(
            "its seal (BLAKE3 of the name and the bytes) does not match: damaged or not this file",
        ));
    }
    Ok(Some(bytes.to_vec()))
}
