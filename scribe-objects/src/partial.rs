//! Import against a base revision whose chunks live elsewhere.
//!
//! A workspace that *synced* a large file never stored its chunks in its
//! cache (they stream from the server straight into the working file). When
//! that file is edited, a plain import would store every chunk of the new
//! version locally: a 1 MiB edit of a 1 GiB file would write 1 GiB into the
//! cache. [`ObjectStore::import_file_against`] chunks the edited file the
//! same way (FastCDC-2020, profile 1, identical cut points and ids) but
//! stores only the chunks that are **not** in the base revision's manifest
//! (the ones the server already holds), plus the new manifest. The manifest
//! may therefore name chunks this store lacks; every reader of such a
//! manifest must fetch them elsewhere (the server) or from the working file
//! (see `docs/workspace.md`, "Freeze against the base").

use std::collections::HashSet;
use std::fs::File;
use std::path::Path;

use fastcdc::v2020::{Normalization, StreamCDC};
use scribe_format::limits::{CHUNK_AVG_BYTES, CHUNK_MAX_BYTES, CHUNK_MIN_BYTES, MAX_FILE_SIZE};
use scribe_format::{ChunkId, FileContentId, ManifestId, ObjectId, ObjectKind};

use crate::batch::PutOutcome;
use crate::error::{io_err, Result, StoreError};
use crate::import::ImportedFile;
use crate::manifest_bytes::{self, ManifestChunk};
use crate::store::ObjectStore;

/// What [`ObjectStore::import_file_against`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartialImport {
    /// The new version: its manifest (stored) and every chunk it names.
    pub file: ImportedFile,
    /// Chunks named by the manifest but left out of this store because the
    /// base revision has them (they are elsewhere, e.g. on the server).
    pub left_out: Vec<ManifestChunk>,
    /// Bytes of those chunks.
    pub left_out_bytes: u64,
}

/// The chunk at `index` of a manifest: its offset in the file and length.
pub fn chunk_offset(chunks: &[ManifestChunk], index: usize) -> Option<(u64, u32)> {
    let c = chunks.get(index)?;
    let offset = chunks[..index].iter().map(|c| u64::from(c.len)).sum();
    Some((offset, c.len))
}

fn chunk_id(data: &[u8]) -> ChunkId {
    let mut h = blake3::Hasher::new();
    if data.len() >= 1 << 17 {
        h.update_rayon(data);
    } else {
        h.update(data);
    }
    ChunkId(*h.finalize().as_bytes())
}

impl ObjectStore {
    /// Import the file at `path` as a new version of a file whose previous
    /// version's chunks are `base` (held elsewhere): chunks in `base` are
    /// named by the manifest but not stored; the others (unless already
    /// present) and the manifest are stored in one publication. With an
    /// empty `base` this stores exactly what [`ObjectStore::import_file`]
    /// stores. The chunking, ids and manifest are identical to a plain
    /// import of the same bytes.
    pub fn import_file_against(
        &self,
        path: impl AsRef<Path>,
        base: &HashSet<ChunkId>,
    ) -> Result<PartialImport> {
        let path = path.as_ref();
        let f = File::open(path).map_err(io_err(path))?;
        let len = f.metadata().map_err(io_err(path))?.len();
        if len > MAX_FILE_SIZE {
            return Err(StoreError::FileTooLarge {
                path: path.to_path_buf(),
                size: len,
                limit: MAX_FILE_SIZE,
            });
        }
        let batch = self.batch();
        let cdc = StreamCDC::with_level_and_seed(
            std::io::BufReader::with_capacity(1 << 20, f),
            CHUNK_MIN_BYTES as usize,
            CHUNK_AVG_BYTES as usize,
            CHUNK_MAX_BYTES as usize,
            Normalization::Level1,
            0,
        );
        let mut file_hash = blake3::Hasher::new();
        let mut chunks = Vec::new();
        let mut left_out = Vec::new();
        let mut left_out_bytes = 0u64;
        let mut new_bytes = 0u64;
        let mut size = 0u64;
        for item in cdc {
            let chunk = item.map_err(|e| match e {
                fastcdc::v2020::Error::IoError(source) => StoreError::Io {
                    path: path.to_path_buf(),
                    source,
                },
                other => StoreError::Io {
                    path: path.to_path_buf(),
                    source: std::io::Error::other(other.to_string()),
                },
            })?;
            let data = chunk.data;
            size += data.len() as u64;
            if size > MAX_FILE_SIZE {
                return Err(StoreError::FileTooLarge {
                    path: path.to_path_buf(),
                    size,
                    limit: MAX_FILE_SIZE,
                });
            }
            // The file hash is sequential; the chunk id runs beside it.
            let (_, id) = rayon::join(|| file_hash.update(&data), || chunk_id(&data));
            let mc = ManifestChunk {
                id,
                len: data.len() as u32,
            };
            chunks.push(mc);
            if base.contains(&id) {
                left_out.push(mc);
                left_out_bytes += data.len() as u64;
                continue;
            }
            if let PutOutcome::Written { envelope_len } =
                batch.put_with_id(ObjectId::chunk(id), &data)?
            {
                new_bytes += envelope_len;
            }
        }
        let content_id = FileContentId(*file_hash.finalize().as_bytes());
        let payload = manifest_bytes::encode(size, &content_id, &chunks).map_err(|e| {
            StoreError::InvalidInput {
                id: ObjectId::new(ObjectKind::Manifest, [0; 32]),
                reason: e.to_string(),
            }
        })?;
        let mid = ObjectId::manifest(ManifestId::of_payload(&payload));
        if let PutOutcome::Written { envelope_len } = batch.put_with_id(mid, &payload)? {
            new_bytes += envelope_len;
        }
        batch.commit()?;
        Ok(PartialImport {
            file: ImportedFile {
                manifest_id: ManifestId(mid.digest),
                content_id,
                size,
                chunks,
                new_bytes_stored: new_bytes,
                via_content_index: false,
            },
            left_out,
            left_out_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreOptions;

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    fn stored_bytes(dir: &Path) -> u64 {
        let mut total = 0;
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let m = e.metadata().unwrap();
            total += if m.is_dir() {
                stored_bytes(&e.path())
            } else {
                m.len()
            };
        }
        total
    }

    #[test]
    fn same_manifest_as_a_plain_import_storing_only_new_chunks() {
        let tmp = tempfile::tempdir().unwrap();
        let full = ObjectStore::create(tmp.path().join("full"), StoreOptions::default()).unwrap();
        let part = ObjectStore::create(tmp.path().join("part"), StoreOptions::default()).unwrap();
        let mut bytes = noise(24 << 20, 5);
        let file = tmp.path().join("big.bin");
        std::fs::write(&file, &bytes).unwrap();
        let v1 = full.import_file(&file).unwrap();
        assert!(v1.chunks.len() >= 3, "{} chunks", v1.chunks.len());
        // Edit 64 KiB in the middle.
        let at = bytes.len() / 2;
        bytes[at..at + 65536].copy_from_slice(&noise(65536, 9));
        std::fs::write(&file, &bytes).unwrap();
        let base: HashSet<ChunkId> = v1.chunks.iter().map(|c| c.id).collect();
        let before = stored_bytes(&tmp.path().join("part"));
        let p = part.import_file_against(&file, &base).unwrap();
        let grew = stored_bytes(&tmp.path().join("part")) - before;
        let v2 = full.import_file(&file).unwrap();
        assert_eq!(p.file.manifest_id, v2.manifest_id);
        assert_eq!(p.file.content_id, FileContentId::of(&bytes));
        assert_eq!(p.file.chunks, v2.chunks);
        assert_eq!(p.file.size, bytes.len() as u64);
        // Only the re-cut chunks around the edit were stored.
        let new: Vec<_> = p
            .file
            .chunks
            .iter()
            .filter(|c| !base.contains(&c.id))
            .collect();
        assert!(!new.is_empty() && new.len() < p.file.chunks.len());
        let new_len: u64 = new.iter().map(|c| u64::from(c.len)).sum();
        assert_eq!(p.left_out_bytes + new_len, bytes.len() as u64);
        assert!(
            grew < new_len + (1 << 20),
            "grew {grew}, new chunks {new_len}"
        );
        for c in &p.file.chunks {
            let has = part.contains(&ObjectId::chunk(c.id)).unwrap();
            assert_eq!(has, !base.contains(&c.id), "chunk {}", c.id);
        }
        // The manifest is stored and decodes to the same chunk list.
        assert_eq!(
            part.manifest(&p.file.manifest_id).unwrap().chunks,
            v2.chunks
        );
        // chunk_offset locates each chunk in the file.
        for (i, c) in p.file.chunks.iter().enumerate() {
            let (off, len) = chunk_offset(&p.file.chunks, i).unwrap();
            assert_eq!(len, c.len);
            let slice = &bytes[off as usize..off as usize + len as usize];
            assert_eq!(ChunkId(*blake3::hash(slice).as_bytes()), c.id);
        }
        assert!(chunk_offset(&p.file.chunks, p.file.chunks.len()).is_none());
    }

    #[test]
    fn empty_and_small_files_match_a_plain_import() {
        let tmp = tempfile::tempdir().unwrap();
        let a = ObjectStore::create(tmp.path().join("a"), StoreOptions::default()).unwrap();
        let b = ObjectStore::create(tmp.path().join("b"), StoreOptions::default()).unwrap();
        for (i, n) in [0usize, 1, 1000, 1 << 20].into_iter().enumerate() {
            let f = tmp.path().join(format!("f{i}"));
            std::fs::write(&f, noise(n, i as u64 + 1)).unwrap();
            let plain = a.import_file(&f).unwrap();
            let p = b.import_file_against(&f, &HashSet::new()).unwrap();
            assert_eq!(p.file.manifest_id, plain.manifest_id, "{n} bytes");
            assert_eq!(p.file.chunks, plain.chunks);
            assert!(p.left_out.is_empty());
            for c in &p.file.chunks {
                assert!(b.contains(&ObjectId::chunk(c.id)).unwrap());
            }
        }
    }

    #[test]
    fn a_missing_file_is_a_named_io_error() {
        let tmp = tempfile::tempdir().unwrap();
        let s = ObjectStore::create(tmp.path().join("s"), StoreOptions::default()).unwrap();
        let err = s
            .import_file_against(tmp.path().join("absent"), &HashSet::new())
            .unwrap_err();
        assert!(matches!(err, StoreError::Io { .. }), "{err:?}");
    }
}
