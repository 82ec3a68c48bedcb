//! Consolidated recovery bases (seed 004, "Independent archive and
//! consolidated recovery bases"): the logical base a consolidation writes
//! into the archive, and the `BASE` pointer that selects it.
//!
//! | item | layout |
//! |---|---|
//! | logical base `base-<20-digit end>.scrb` ([`BaseWriter`], [`BaseReader`]) | `SCRB ‖ u16 1 ‖ identity[16] ‖ u64 end ‖ (u32 len ‖ record)* ‖ u32 0 ‖ blake3[32]` |
//! | `BASE` ([`BasePointer`]) | archive cursor[112] ‖ base-file digest[32] ‖ blake3[32] of the preceding 144 bytes |
//!
//! A base holds every journaled table as one declaration (opcode 1, the
//! table's recorded types) followed by its rows as puts (opcode 2) in the
//! table's key order (`u64` keys numerically, every other type bytewise).
//! The trailing checksum covers every preceding byte; the base-file digest
//! in `BASE` is the BLAKE3 of the whole file, checksum included.
//!
//! Decoders never panic and refuse with a named [`RecoveryError`]; readers
//! check every length against its limit before allocating.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::io::{Read, Write};

use crate::bytes::{Put, Reader};
use crate::error::FormatError;
use crate::recovery::{
    check_len, encode_declare, encode_put, io_err, read_exact, ArchiveHead, ColumnType, Record,
    RecoveryError, HEAD_LEN, MAX_RECORD,
};

type Result<T> = std::result::Result<T, RecoveryError>;

/// Magic of a logical base.
pub const BASE_MAGIC: &[u8; 4] = b"SCRB";
/// Version word of a logical base.
pub const BASE_VERSION: u16 = 1;
/// `SCRB ‖ u16 ‖ identity[16] ‖ u64 end`.
pub const BASE_HEADER: usize = 4 + 2 + 16 + 8;
/// Length of the `BASE` pointer file.
pub const POINTER_LEN: usize = HEAD_LEN + 32 + 32;
/// File name of the pointer in an archive directory.
pub const POINTER_FILE: &str = "BASE";

/// `base-<20-digit end>.scrb`.
pub fn base_file_name(end: u64) -> String {
    format!("base-{end:020}.scrb")
}

/// The end of a base file name (`None` for other names).
pub fn parse_base_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("base-")?.strip_suffix(".scrb")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A base's header: the database it belongs to and the journal end (a
/// commit boundary) whose state it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseHeader {
    pub identity: [u8; 16],
    pub end: u64,
}

impl BaseHeader {
    fn encode(&self) -> [u8; BASE_HEADER] {
        let mut out = Vec::with_capacity(BASE_HEADER);
        out.put_bytes(BASE_MAGIC);
        out.put_u16(BASE_VERSION);
        out.put_bytes(&self.identity);
        out.put_u64(self.end);
        let mut a = [0u8; BASE_HEADER];
        a.copy_from_slice(&out);
        a
    }
}

fn key_order(t: ColumnType, a: &[u8], b: &[u8]) -> Ordering {
    match t {
        ColumnType::U64 => {
            let n = |s: &[u8]| <[u8; 8]>::try_from(s).map(u64::from_le_bytes).ok();
            n(a).cmp(&n(b))
        }
        _ => a.cmp(b),
    }
}

/// Follows the entries of a base: each table declared once, its rows right
/// after its declaration, checked against its types and strictly in order.
#[derive(Debug, Default)]
struct Order {
    table: Option<(String, ColumnType, ColumnType)>,
    last_key: Option<Vec<u8>>,
    seen: BTreeSet<String>,
}

impl Order {
    fn declare(&mut self, name: &str, key: ColumnType, value: ColumnType) -> Result<()> {
        if !self.seen.insert(name.to_owned()) {
            return Err(RecoveryError::InvalidBase {
                table: name.to_owned(),
                what: "declared twice",
            });
        }
        self.table = Some((name.to_owned(), key, value));
        self.last_key = None;
        Ok(())
    }

    fn put(&mut self, name: &str, key: &[u8], value: &[u8]) -> Result<()> {
        let Some((table, kt, vt)) = &self.table else {
            return Err(RecoveryError::UndeclaredTable(name.to_owned()));
        };
        if table != name {
            return Err(if self.seen.contains(name) {
                RecoveryError::InvalidBase {
                    table: name.to_owned(),
                    what: "a row after another table's declaration",
                }
            } else {
                RecoveryError::UndeclaredTable(name.to_owned())
            });
        }
        kt.check(name, "key", key)?;
        vt.check(name, "value", value)?;
        if let Some(last) = &self.last_key {
            if key_order(*kt, last, key) != Ordering::Less {
                return Err(RecoveryError::InvalidBase {
                    table: name.to_owned(),
                    what: "rows out of key order",
                });
            }
        }
        match &mut self.last_key {
            Some(k) => {
                k.clear();
                k.extend_from_slice(key);
            }
            None => self.last_key = Some(key.to_vec()),
        }
        Ok(())
    }

    fn apply(&mut self, rec: &Record) -> Result<()> {
        match rec {
            Record::Declare { name, key, value } => self.declare(name, *key, *value),
            Record::Put { name, key, value } => self.put(name, key, value),
            other => Err(RecoveryError::InvalidBase {
                table: other.table().unwrap_or_default().to_owned(),
                what: "only declarations and puts belong in a base",
            }),
        }
    }
}

/// Writes one logical base: the header, each table's declaration and rows,
/// the terminator and the checksum. Refuses what [`BaseReader`] refuses.
pub struct BaseWriter<W: Write> {
    w: W,
    hasher: blake3::Hasher,
    order: Order,
    buf: Vec<u8>,
    written: u64,
}

impl<W: Write> BaseWriter<W> {
    /// Start a base of `header.identity` at `header.end`.
    pub fn new(mut w: W, header: BaseHeader) -> Result<Self> {
        let bytes = header.encode();
        w.write_all(&bytes).map_err(io_err("logical base"))?;
        let mut hasher = blake3::Hasher::new();
        hasher.update(&bytes);
        Ok(BaseWriter {
            w,
            hasher,
            order: Order::default(),
            buf: Vec::new(),
            written: bytes.len() as u64,
        })
    }

    /// Declare the next table.
    pub fn declare(&mut self, name: &str, key: ColumnType, value: ColumnType) -> Result<()> {
        self.order.declare(name, key, value)?;
        self.buf.clear();
        encode_declare(&mut self.buf, name, key, value)?;
        self.entry()
    }

    /// One row of the table declared last (rows in key order).
    pub fn put(&mut self, name: &str, key: &[u8], value: &[u8]) -> Result<()> {
        self.order.put(name, key, value)?;
        self.buf.clear();
        encode_put(&mut self.buf, name, key, value)?;
        self.entry()
    }

    fn entry(&mut self) -> Result<()> {
        check_len("logical base.entry", self.buf.len(), MAX_RECORD)?;
        let len = (self.buf.len() as u32).to_le_bytes();
        for part in [&len[..], &self.buf[..]] {
            self.w.write_all(part).map_err(io_err("logical base"))?;
            self.hasher.update(part);
        }
        self.written += 4 + self.buf.len() as u64;
        Ok(())
    }

    /// Write the terminator and checksum; returns the writer, the digest of
    /// the whole file (what `BASE` records) and its length.
    pub fn finish(mut self) -> Result<(W, [u8; 32], u64)> {
        let zero = 0u32.to_le_bytes();
        self.w.write_all(&zero).map_err(io_err("logical base"))?;
        self.hasher.update(&zero);
        let sum: [u8; 32] = self.hasher.finalize().into();
        self.w.write_all(&sum).map_err(io_err("logical base"))?;
        self.hasher.update(&sum);
        Ok((self.w, self.hasher.finalize().into(), self.written + 4 + 32))
    }
}

/// Streams one logical base: hashes while reading, holds one entry at a
/// time, checks order and types, the checksum and that nothing follows.
pub struct BaseReader<R: Read> {
    r: R,
    hasher: blake3::Hasher,
    header: BaseHeader,
    order: Order,
    offset: u64,
    done: bool,
    file_digest: [u8; 32],
}

impl<R: Read> BaseReader<R> {
    /// Read and check the header.
    pub fn new(mut r: R) -> Result<Self> {
        let mut head = [0u8; BASE_HEADER];
        read_exact(&mut r, &mut head, "logical base.header")?;
        let mut rd = Reader::new(&head);
        if rd.take(4, "logical base.magic")? != BASE_MAGIC {
            return Err(FormatError::BadMagic {
                what: "logical base",
            }
            .into());
        }
        let version = rd.u16("logical base.version")?;
        if version != BASE_VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: "logical base",
                version: version.into(),
            }
            .into());
        }
        let identity = rd.array("logical base.identity")?;
        let end = rd.u64("logical base.end")?;
        let mut hasher = blake3::Hasher::new();
        hasher.update(&head);
        Ok(BaseReader {
            r,
            hasher,
            header: BaseHeader { identity, end },
            order: Order::default(),
            offset: BASE_HEADER as u64,
            done: false,
            file_digest: [0; 32],
        })
    }

    /// The header.
    pub fn header(&self) -> BaseHeader {
        self.header
    }

    /// Bytes read so far (where a refusal applies).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The digest of the whole file (after the last entry was returned).
    pub fn file_digest(&self) -> [u8; 32] {
        self.file_digest
    }

    /// The next entry (a declaration or a put), or `None` after the
    /// verified end.
    pub fn next_record(&mut self) -> Result<Option<Record>> {
        if self.done {
            return Ok(None);
        }
        let mut len = [0u8; 4];
        read_exact(&mut self.r, &mut len, "logical base.entry length")?;
        let n = u32::from_le_bytes(len) as usize;
        if n == 0 {
            self.hasher.update(&len);
            self.offset += 4;
            self.finish()?;
            return Ok(None);
        }
        check_len("logical base.entry", n, MAX_RECORD)?;
        let mut body = vec![0u8; n];
        read_exact(&mut self.r, &mut body, "logical base.entry")?;
        let rec = Record::decode(&body)?;
        self.order.apply(&rec)?;
        self.hasher.update(&len);
        self.hasher.update(&body);
        self.offset += 4 + n as u64;
        Ok(Some(rec))
    }

    fn finish(&mut self) -> Result<()> {
        let mut sum = [0u8; 32];
        read_exact(&mut self.r, &mut sum, "logical base.checksum")?;
        let want: [u8; 32] = self.hasher.finalize().into();
        if sum != want {
            return Err(RecoveryError::Checksum {
                what: "logical base",
            });
        }
        self.hasher.update(&sum);
        self.offset += 32;
        let mut extra = [0u8; 1];
        loop {
            match self.r.read(&mut extra) {
                Ok(0) => break,
                Ok(_) => {
                    return Err(FormatError::TrailingBytes {
                        what: "logical base",
                        count: 1,
                    }
                    .into())
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err("logical base")(e)),
            }
        }
        self.file_digest = self.hasher.finalize().into();
        self.done = true;
        Ok(())
    }

    /// Read to the verified end, collecting the entries.
    pub fn read_all(mut self) -> Result<(BaseHeader, Vec<Record>)> {
        let mut out = Vec::new();
        while let Some(r) = self.next_record()? {
            out.push(r);
        }
        Ok((self.header, out))
    }
}

/// Decode a whole base held in memory.
pub fn decode_base(bytes: &[u8]) -> Result<(BaseHeader, Vec<Record>)> {
    BaseReader::new(bytes)?.read_all()
}

/// Encode a whole base from its entries (declarations and puts in order).
pub fn encode_base(header: BaseHeader, entries: &[Record]) -> Result<Vec<u8>> {
    let mut w = BaseWriter::new(Vec::new(), header)?;
    for rec in entries {
        match rec {
            Record::Declare { name, key, value } => w.declare(name, *key, *value)?,
            Record::Put { name, key, value } => w.put(name, key, value)?,
            other => {
                return Err(RecoveryError::InvalidBase {
                    table: other.table().unwrap_or_default().to_owned(),
                    what: "only declarations and puts belong in a base",
                })
            }
        }
    }
    Ok(w.finish()?.0)
}

/// The `BASE` pointer: the archive cursor the base was consolidated at and
/// the digest of the base file it selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BasePointer {
    pub cursor: ArchiveHead,
    pub file_digest: [u8; 32],
}

impl BasePointer {
    /// The 176 canonical bytes.
    pub fn encode(&self) -> [u8; POINTER_LEN] {
        let mut a = [0u8; POINTER_LEN];
        a[..HEAD_LEN].copy_from_slice(&self.cursor.encode());
        a[HEAD_LEN..HEAD_LEN + 32].copy_from_slice(&self.file_digest);
        let sum = blake3::hash(&a[..HEAD_LEN + 32]);
        a[HEAD_LEN + 32..].copy_from_slice(sum.as_bytes());
        a
    }

    /// Decode exactly 176 bytes.
    pub fn decode(bytes: &[u8]) -> Result<BasePointer> {
        let mut r = Reader::new(bytes);
        let cursor = r.take(HEAD_LEN, "archive BASE.cursor")?;
        let file_digest: [u8; 32] = r.array("archive BASE.base digest")?;
        let sum: [u8; 32] = r.array("archive BASE.checksum")?;
        r.finish("archive BASE")?;
        if blake3::hash(&bytes[..HEAD_LEN + 32]).as_bytes() != &sum {
            return Err(RecoveryError::Checksum {
                what: "archive BASE",
            });
        }
        Ok(BasePointer {
            cursor: ArchiveHead::decode(cursor)?,
            file_digest,
        })
    }
}

/// Feed arbitrary bytes to every decoder of this module; panics only if a
/// decoder panics or a decoded value does not re-encode to its bytes (the
/// entry point of the `recovery_base` fuzz target).
#[doc(hidden)]
pub fn fuzz_decoders(data: &[u8]) {
    if let Ok((header, entries)) = decode_base(data) {
        assert_eq!(
            encode_base(header, &entries).expect("a decoded base re-encodes"),
            data
        );
    }
    if let Ok(p) = BasePointer::decode(data) {
        assert_eq!(p.encode().as_slice(), data);
    }
    if let Ok(s) = std::str::from_utf8(data) {
        if let Some(n) = parse_base_file_name(s) {
            assert_eq!(base_file_name(n), s);
        }
    }
}
