//! [`ObjectReader`]: streaming, verified reads of large objects.

use std::fs::File;
use std::io::{self, Read};
use std::sync::Arc;

use scribe_format::block::{self, BlockHeader, BLOCK_HEADER_LEN};
use scribe_format::envelope::{EnvelopeHeader, CODEC_IDENTITY, HEADER_LEN};
use scribe_format::id::IdentityHasher;
use scribe_format::limits::MAX_BLOCK_BYTES;
use scribe_format::ObjectId;

use crate::error::{Result, StoreError};
use crate::layout;
use crate::locator::Location;
use crate::pack::{self, ENTRY_HEADER_LEN};
use crate::store::{max_payload, ObjectStore};

enum Source {
    Loose(File),
    Pack { file: Arc<File>, pos: u64, end: u64 },
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Source::Loose(f) => f.read(buf),
            Source::Pack { file, pos, end } => {
                let n = ((*end - *pos) as usize).min(buf.len());
                if n == 0 {
                    return Ok(0);
                }
                let got = crate::platform::read_at(file, &mut buf[..n], *pos)?;
                *pos += got as u64;
                Ok(got)
            }
        }
    }
}

/// A `Read` over an object's original payload in bounded memory (at most
/// one 256 KiB block buffered). The identity is checked when the end is
/// reached: the final `read` returns an error (wrapping
/// [`StoreError::CorruptObject`]) instead of `Ok(0)` if any byte was wrong,
/// so a consumer must read to the end before trusting what it received.
pub struct ObjectReader {
    id: ObjectId,
    location: String,
    src: Source,
    header: EnvelopeHeader,
    hasher: Option<IdentityHasher>,
    stored_left: u64,
    original_left: u64,
    block: Vec<u8>,
    block_pos: usize,
    stored_buf: Vec<u8>,
    done: bool,
}

impl ObjectReader {
    /// The object being read.
    pub fn id(&self) -> &ObjectId {
        &self.id
    }

    /// The original payload length.
    pub fn len(&self) -> u64 {
        if self.header.codec == CODEC_IDENTITY {
            self.header.stored_len
        } else {
            self.original_left + (self.block.len() - self.block_pos) as u64
        }
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes this reader holds in its buffers (at most about two blocks,
    /// whatever the object's size).
    pub fn buffered_bytes(&self) -> usize {
        self.block.capacity() + self.stored_buf.capacity()
    }

    fn corrupt(&self, reason: impl Into<String>) -> io::Error {
        io::Error::other(StoreError::CorruptObject {
            id: self.id,
            location: self.location.clone(),
            reason: reason.into(),
        })
    }

    fn hash(&mut self, bytes: &[u8]) -> io::Result<()> {
        if let Some(h) = self.hasher.as_mut() {
            if let Err(e) = h.update(bytes) {
                return Err(self.corrupt(e.to_string()));
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.done = true;
        if self.stored_left != 0 {
            return Err(self.corrupt(format!("{} trailing stored bytes", self.stored_left)));
        }
        let h = self
            .hasher
            .take()
            .ok_or_else(|| self.corrupt("finished twice"))?;
        match h.finish() {
            Ok(actual) if actual == self.id => Ok(()),
            Ok(actual) => Err(self.corrupt(format!("identity mismatch: bytes hash to {actual}"))),
            Err(e) => Err(self.corrupt(e.to_string())),
        }
    }

    fn next_block(&mut self) -> io::Result<()> {
        if self.stored_left < BLOCK_HEADER_LEN as u64 {
            return Err(self.corrupt("truncated block header"));
        }
        let mut hb = [0u8; BLOCK_HEADER_LEN];
        self.src
            .read_exact(&mut hb)
            .map_err(|e| self.corrupt(e.to_string()))?;
        self.stored_left -= BLOCK_HEADER_LEN as u64;
        let bh =
            BlockHeader::parse(hb, MAX_BLOCK_BYTES).map_err(|e| self.corrupt(e.to_string()))?;
        if u64::from(bh.stored_len) > self.stored_left
            || u64::from(bh.original_len) > self.original_left
        {
            return Err(self.corrupt("block overruns the object"));
        }
        self.stored_buf.resize(bh.stored_len as usize, 0);
        let mut stored = std::mem::take(&mut self.stored_buf);
        let r = self.src.read_exact(&mut stored);
        self.stored_buf = stored;
        r.map_err(|e| self.corrupt(e.to_string()))?;
        self.stored_left -= u64::from(bh.stored_len);
        self.block.resize(bh.original_len as usize, 0);
        block::decode_block_into(&bh, &self.stored_buf, &mut self.block)
            .map_err(|e| self.corrupt(e.to_string()))?;
        self.block_pos = 0;
        self.original_left -= u64::from(bh.original_len);
        let b = std::mem::take(&mut self.block);
        let r = self.hash(&b);
        self.block = b;
        r
    }
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.header.codec == CODEC_IDENTITY {
            if self.stored_left == 0 {
                self.finish()?;
                return Ok(0);
            }
            let n = (self.stored_left as usize).min(buf.len());
            let got = self.src.read(&mut buf[..n])?;
            if got == 0 {
                return Err(self.corrupt("truncated payload"));
            }
            self.stored_left -= got as u64;
            self.hash(&buf[..got])?;
            return Ok(got);
        }
        if self.block_pos == self.block.len() {
            if self.original_left == 0 {
                self.finish()?;
                return Ok(0);
            }
            self.next_block()?;
        }
        let n = (self.block.len() - self.block_pos).min(buf.len());
        buf[..n].copy_from_slice(&self.block[self.block_pos..self.block_pos + n]);
        self.block_pos += n;
        Ok(n)
    }
}

impl ObjectStore {
    /// Open a streaming, verified reader of an object's original payload.
    pub fn open_reader(&self, id: &ObjectId) -> Result<ObjectReader> {
        let loc = self.locate(id)?.ok_or(StoreError::NotFound { id: *id })?;
        let location = self.describe(&loc, id);
        let corrupt = |reason: String| StoreError::CorruptObject {
            id: *id,
            location: location.clone(),
            reason,
        };
        let mut src = match loc {
            Location::Loose { envelope_len } => {
                let path = layout::loose_path(&self.dir, id);
                let f = File::open(&path)
                    .map_err(|e| corrupt(format!("cannot open loose file: {e}")))?;
                let len = f.metadata().map_err(|e| corrupt(e.to_string()))?.len();
                if len != envelope_len {
                    return Err(corrupt(format!(
                        "loose file has {len} bytes, locator says {envelope_len}"
                    )));
                }
                Source::Loose(f)
            }
            Location::Packed {
                pack: p,
                offset,
                entry_len,
            } => {
                let file = self.pack_handle(p).map_err(|e| corrupt(e.to_string()))?;
                let mut head = [0u8; ENTRY_HEADER_LEN];
                crate::platform::read_exact_at(&file, &mut head, offset)
                    .map_err(|e| corrupt(format!("cannot read pack entry: {e}")))?;
                let (key, env_len) = pack::parse_entry_header(&head).map_err(corrupt)?;
                if key != id.to_bytes() || env_len + ENTRY_HEADER_LEN as u64 != entry_len {
                    return Err(corrupt("pack entry disagrees with the locator".into()));
                }
                Source::Pack {
                    file,
                    pos: offset + ENTRY_HEADER_LEN as u64,
                    end: offset + entry_len,
                }
            }
        };
        let mut hb = [0u8; HEADER_LEN];
        src.read_exact(&mut hb)
            .map_err(|e| corrupt(format!("truncated envelope: {e}")))?;
        let header = EnvelopeHeader::parse(&hb).map_err(|e| corrupt(e.to_string()))?;
        if header.kind != id.kind {
            return Err(corrupt("envelope kind differs from the object's".into()));
        }
        if header.envelope_len() != loc.envelope_len() {
            return Err(corrupt("envelope length disagrees with the locator".into()));
        }
        let mut stored_left = header.stored_len;
        let mut original_left = 0;
        if header.codec != CODEC_IDENTITY {
            if stored_left < 8 {
                return Err(corrupt("truncated codec-1 length".into()));
            }
            let mut l = [0u8; 8];
            src.read_exact(&mut l).map_err(|e| corrupt(e.to_string()))?;
            stored_left -= 8;
            original_left = u64::from_le_bytes(l);
        }
        let size = if header.codec == CODEC_IDENTITY {
            header.stored_len
        } else {
            original_left
        };
        if size > max_payload(id.kind) {
            return Err(corrupt(format!(
                "payload of {size} bytes exceeds the limit for its kind"
            )));
        }
        Ok(ObjectReader {
            id: *id,
            location,
            src,
            header,
            hasher: Some(IdentityHasher::new(id.kind)),
            stored_left,
            original_left,
            block: Vec::new(),
            block_pos: 0,
            stored_buf: Vec::new(),
            done: false,
        })
    }
}
