//! `rebuild-locator`: recreate `locator.redb` offline from packs and loose
//! files, indexing only bytes that match the identity they claim.

use std::fs::File;
use std::path::Path;

use redb::{Database, Durability, ReadableTable};
use scribe_format::envelope;
use scribe_format::ObjectId;

use crate::error::{db_err, io_err, Result};
use crate::layout::{self, sync_dir};
use crate::locator::{self, ContentRow, Location, CONTENT_TABLE, LOCATOR_TABLE};
use crate::pack::{self, ENTRY_HEADER_LEN, PACK_HEADER_LEN};
use crate::store::{create_pack, max_payload, refuse_pending_marker, write_meta, FIRST_PACK_ID};
use crate::store_descriptor;

/// What a rebuild indexed and refused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RebuildReport {
    pub packed_indexed: u64,
    pub loose_indexed: u64,
    /// `(location, reason)` of every entry or file not indexed.
    pub rejected: Vec<(String, String)>,
    pub open_pack: u32,
    pub committed_len: u64,
}

impl std::fmt::Display for RebuildReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "locator rebuilt: {} packed and {} loose objects indexed, open pack {} at {} bytes",
            self.packed_indexed, self.loose_indexed, self.open_pack, self.committed_len
        )?;
        if !self.rejected.is_empty() {
            write!(f, "; {} entries not indexed:", self.rejected.len())?;
            for (location, reason) in &self.rejected {
                write!(f, "\n  {location}: {reason}")?;
            }
        }
        Ok(())
    }
}

/// Rebuild the locator of the (closed) store at `dir`. The new database is
/// written as `locator.redb.rebuild`, committed durably, flushed, then
/// renamed over `locator.redb`.
pub fn rebuild_locator(dir: impl AsRef<Path>) -> Result<RebuildReport> {
    let dir = dir.as_ref();
    refuse_pending_marker(dir)?;
    store_descriptor::read(&dir.join(layout::DESCRIPTOR))?;
    let db_path = dir.join(layout::LOCATOR);
    // Refuse while another handle has the store open.
    if db_path.exists() {
        if let Err(redb::DatabaseError::DatabaseAlreadyOpen) = Database::open(&db_path) {
            return Err(db_err(&db_path)(redb::DatabaseError::DatabaseAlreadyOpen));
        }
    }
    let new_path = dir.join(format!("{}.rebuild", layout::LOCATOR));
    if new_path.exists() {
        std::fs::remove_file(&new_path).map_err(io_err(&new_path))?;
    }
    let mut report = RebuildReport::default();
    let db = Database::create(&new_path).map_err(db_err(&new_path))?;
    let mut txn = db.begin_write().map_err(db_err(&new_path))?;
    txn.set_durability(Durability::Immediate)
        .map_err(db_err(&new_path))?;
    let packs = layout::list_packs(dir)?;
    let mut last: Option<(u32, u64)> = None;
    // Content index rows of every verified manifest (a cache, regenerated).
    let mut content: Vec<ContentRow> = Vec::new();
    {
        let mut table = txn.open_table(LOCATOR_TABLE).map_err(db_err(&new_path))?;
        for (id, path) in &packs {
            let f = File::open(path).map_err(io_err(path))?;
            let len = f.metadata().map_err(io_err(path))?.len();
            let mut header = [0u8; PACK_HEADER_LEN as usize];
            let header_ok = crate::platform::read_exact_at(&f, &mut header, 0)
                .map_err(|e| e.to_string())
                .and_then(|_| pack::check_pack_header(&header, *id));
            if let Err(reason) = header_ok {
                report.rejected.push((path.display().to_string(), reason));
                continue;
            }
            let mut pos = PACK_HEADER_LEN;
            let mut buf = Vec::new();
            while pos < len {
                let here = format!("{} offset {pos}", path.display());
                if len - pos < ENTRY_HEADER_LEN as u64 {
                    report
                        .rejected
                        .push((here, "torn entry header at the end".into()));
                    break;
                }
                let mut head = [0u8; ENTRY_HEADER_LEN];
                crate::platform::read_exact_at(&f, &mut head, pos).map_err(io_err(path))?;
                let (key, env_len) = match pack::parse_entry_header(&head) {
                    Ok(h) => h,
                    Err(reason) => {
                        report
                            .rejected
                            .push((here, format!("{reason}; rest of pack skipped")));
                        break;
                    }
                };
                let entry_len = ENTRY_HEADER_LEN as u64 + env_len;
                if env_len > len - pos - ENTRY_HEADER_LEN as u64 {
                    report.rejected.push((here, "torn entry at the end".into()));
                    break;
                }
                buf.resize(env_len as usize, 0);
                crate::platform::read_exact_at(&f, &mut buf, pos + ENTRY_HEADER_LEN as u64)
                    .map_err(io_err(path))?;
                let verdict = ObjectId::from_bytes(&key)
                    .map_err(|e| e.to_string())
                    .and_then(|oid| {
                        envelope::decode_verified(&buf, &oid, max_payload(oid.kind))
                            .map(|payload| {
                                content.extend(content_row(&oid, &payload));
                                oid
                            })
                            .map_err(|e| e.to_string())
                    });
                match verdict {
                    Ok(oid) => {
                        if table
                            .get(&oid.to_bytes())
                            .map_err(db_err(&new_path))?
                            .is_none()
                        {
                            let loc = Location::Packed {
                                pack: *id,
                                offset: pos,
                                entry_len,
                            };
                            table
                                .insert(&oid.to_bytes(), loc.encode().as_slice())
                                .map_err(db_err(&new_path))?;
                            report.packed_indexed += 1;
                        }
                    }
                    Err(reason) => report.rejected.push((here, reason)),
                }
                pos += entry_len;
            }
            last = Some((*id, pos.min(len)));
        }
        for (oid, path) in layout::list_loose(dir)? {
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                Err(e) => {
                    report
                        .rejected
                        .push((path.display().to_string(), e.to_string()));
                    continue;
                }
            };
            match envelope::decode_verified(&bytes, &oid, max_payload(oid.kind)) {
                Ok(payload) => {
                    content.extend(content_row(&oid, &payload));
                    if table
                        .get(&oid.to_bytes())
                        .map_err(db_err(&new_path))?
                        .is_none()
                    {
                        let loc = Location::Loose {
                            envelope_len: bytes.len() as u64,
                        };
                        table
                            .insert(&oid.to_bytes(), loc.encode().as_slice())
                            .map_err(db_err(&new_path))?;
                        report.loose_indexed += 1;
                    }
                }
                Err(e) => report
                    .rejected
                    .push((path.display().to_string(), e.to_string())),
            }
        }
    }
    let (open_pack, committed) = match (last, packs.last()) {
        (Some((id, end)), Some((hi, _))) if id == *hi => (id, end),
        (_, Some((hi, _))) => {
            // The highest pack is unreadable: start a fresh one above it.
            let next = hi + 1;
            create_pack(dir, next)?;
            (next, PACK_HEADER_LEN)
        }
        (_, None) => {
            create_pack(dir, FIRST_PACK_ID)?;
            (FIRST_PACK_ID, PACK_HEADER_LEN)
        }
    };
    if !content.is_empty() {
        let mut t = txn.open_table(CONTENT_TABLE).map_err(db_err(&new_path))?;
        for (k, v) in &content {
            t.insert(k, v).map_err(db_err(&new_path))?;
        }
    }
    write_meta(&new_path, &txn, open_pack, committed)?;
    txn.commit().map_err(db_err(&new_path))?;
    drop(db);
    File::open(&new_path)
        .and_then(|f| f.sync_all())
        .map_err(io_err(&new_path))?;
    std::fs::rename(&new_path, &db_path).map_err(io_err(&db_path))?;
    sync_dir(dir)?;
    report.open_pack = open_pack;
    report.committed_len = committed;
    Ok(report)
}

/// The content index row of a verified manifest of more than one profile
/// minimum (smaller files are one chunk and need no index).
fn content_row(oid: &ObjectId, payload: &[u8]) -> Option<ContentRow> {
    if oid.kind != scribe_format::ObjectKind::Manifest {
        return None;
    }
    let m = scribe_format::manifest::Manifest::decode(payload).ok()?;
    if m.chunking_profile != scribe_format::manifest::PROFILE_FASTCDC_2020
        || m.total_size <= u64::from(scribe_format::limits::CHUNK_MIN_BYTES)
    {
        return None;
    }
    Some(locator::content_row(
        m.total_size,
        &m.file_content_id,
        &scribe_format::ManifestId(oid.digest),
    ))
}
