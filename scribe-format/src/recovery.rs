//! Metadata recovery journal profile 2 and the independent archive's byte
//! formats (seed 004, "Metadata recovery journal profile 2" and
//! "Independent archive and consolidated recovery bases").
//!
//! | item | layout |
//! |---|---|
//! | [`Record`] | `u8 1 ‖ u8 opcode ‖ payload`, opcodes 1..=5 |
//! | [`ColumnType`] | 1 bytes, 2 UTF-8, 3 `[16]`, 4 u64 LE |
//! | `.scrj` segment ([`SegmentWriter`], [`SegmentReader`]) | `SCRJ ‖ u16 1 ‖ identity[16] ‖ u64 after ‖ u64 end ‖ (u64 seq ‖ u32 len ‖ record)* ‖ blake3[32]` |
//! | [`ArchiveHead`] | 112-byte `HEAD` cursor |
//! | [`Frame`] | `u64 len ‖ prev chain[32] ‖ SCRJ payload ‖ chain[32]` |
//!
//! Decoders never panic and refuse with a named [`RecoveryError`]; readers
//! check every length against its limit before allocating.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use crate::bytes::{Put, Reader};
use crate::error::{ErrorCode, FormatError};

/// Record version word.
pub const RECORD_VERSION: u8 = 1;
/// Segment version word.
pub const SEGMENT_VERSION: u16 = 1;
/// Segment magic.
pub const SEGMENT_MAGIC: &[u8; 4] = b"SCRJ";
/// Longest table name, in bytes.
pub const MAX_NAME: usize = 256;
/// Longest key, in bytes.
pub const MAX_KEY: usize = 1 << 20;
/// Longest value, in bytes.
pub const MAX_VALUE: usize = 16 << 20;
/// Longest valid record: a put with the longest name, key and value.
pub const MAX_RECORD: usize = 2 + 2 + MAX_NAME + 4 + MAX_KEY + 4 + MAX_VALUE;
/// Bytes of a segment header (`SCRJ`, version, identity, after, end).
pub const SEGMENT_HEADER: usize = 4 + 2 + 16 + 8 + 8;
/// Bytes of the smallest segment (header and digest).
pub const MIN_SEGMENT: usize = SEGMENT_HEADER + 32;

/// `scribe_recovery_identity_v1`: `u8` 0 -> `[u8; 16]`.
pub const TABLE_IDENTITY: &str = "scribe_recovery_identity_v1";
/// `scribe_recovery_records_v1`: `u64` sequence -> record bytes.
pub const TABLE_RECORDS: &str = "scribe_recovery_records_v1";
/// `scribe_recovery_position`: `u8` 0 end, 1 floor -> `u64`.
pub const TABLE_POSITION: &str = "scribe_recovery_position";
/// `scribe_recovery_types`: table name -> `[key type, value type]`.
pub const TABLE_TYPES: &str = "scribe_recovery_types";
/// The reserved recovery table names.
pub const RESERVED_TABLES: [&str; 4] = [TABLE_IDENTITY, TABLE_RECORDS, TABLE_POSITION, TABLE_TYPES];

/// Archive cursor magic.
pub const HEAD_MAGIC: &[u8; 8] = b"SCRARC1\0";
/// Bytes of an archive cursor.
pub const HEAD_LEN: usize = 112;
/// Domain of a frame's chain digest.
pub const FRAME_DOMAIN: &[u8] = b"scribe:recovery-frame:v1\0";
/// An archive segment is rolled once it reaches this size.
pub const SEGMENT_ROLL_BYTES: u64 = 32 << 20;

/// Why recovery bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecoveryError {
    /// Truncation, a limit, bad magic, an unsupported version, a malformed
    /// string or trailing bytes.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// An opcode other than 1..=5.
    #[error("recovery record: unknown opcode {0}")]
    UnknownOpcode(u8),
    /// A column type other than 1..=4.
    #[error("recovery record: unknown column type {0}")]
    UnknownType(u8),
    /// A table name of zero bytes.
    #[error("recovery record: empty table name")]
    EmptyName,
    /// A record that names a recovery table.
    #[error("recovery record: table {0:?} is reserved")]
    ReservedTable(String),
    /// A key or value whose width its declared type does not allow.
    #[error(
        "recovery record: {table}: {column} of {actual} bytes where its type needs {expected}"
    )]
    InvalidWidth {
        table: String,
        column: &'static str,
        expected: u64,
        actual: u64,
    },
    /// A UTF-8 key or value that is not UTF-8.
    #[error("recovery record: {table}: {column} is not UTF-8")]
    MalformedString { table: String, column: &'static str },
    /// A put or remove on a table never declared.
    #[error("recovery record: table {0:?} is not declared")]
    UndeclaredTable(String),
    /// A declaration with types other than the table's.
    #[error("recovery record: table {table:?} is declared as {old:?}, redeclared as {new:?}")]
    TypeConflict {
        table: String,
        old: (u8, u8),
        new: (u8, u8),
    },
    /// A digest that does not match its bytes.
    #[error("{what}: checksum mismatch")]
    Checksum { what: &'static str },
    /// `after > end` in a segment header.
    #[error("recovery segment: after {after} is beyond end {end}")]
    CursorOrder { after: u64, end: u64 },
    /// A record whose sequence is not the next one.
    #[error("recovery segment: sequence {found} where {expected} was expected")]
    SequenceGap { expected: u64, found: u64 },
    /// A cursor that is not a commit boundary (an incomplete transaction).
    #[error(
        "recovery journal: incomplete transaction: sequence {sequence} is not a commit boundary"
    )]
    IncompleteTransaction { sequence: u64 },
    /// A segment or cursor of another database.
    #[error("recovery journal: identity {found} where {expected} was expected")]
    IdentityMismatch { expected: String, found: String },
    /// A segment that does not start where the previous one ended.
    #[error("recovery journal: segment starts after {found}, expected after {expected}")]
    SegmentGap { expected: u64, found: u64 },
    /// A malformed archive cursor.
    #[error("archive HEAD: {0}")]
    InvalidHead(&'static str),
    /// A frame whose previous chain digest is not the chain it follows.
    #[error("archive frame: previous chain digest does not match")]
    ChainMismatch,
    /// A logical base entry out of place: a record other than a
    /// declaration or a put, a table declared twice, a put outside its
    /// table, or rows not in the table's key order.
    #[error("logical base: table {table:?}: {what}")]
    InvalidBase { table: String, what: &'static str },
    /// Reading failed.
    #[error("{what}: {reason}")]
    Io { what: &'static str, reason: String },
}

impl RecoveryError {
    /// The registry code of this refusal.
    pub fn code(&self) -> ErrorCode {
        match self {
            RecoveryError::Format(e) => e.code(),
            RecoveryError::Io { .. } => ErrorCode::Internal,
            RecoveryError::Checksum { .. }
            | RecoveryError::IdentityMismatch { .. }
            | RecoveryError::SegmentGap { .. }
            | RecoveryError::SequenceGap { .. }
            | RecoveryError::ChainMismatch => ErrorCode::Corrupt,
            _ => ErrorCode::Malformed,
        }
    }
}

type Result<T> = std::result::Result<T, RecoveryError>;

/// A key or value type of a journaled table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ColumnType {
    /// 1: a byte string (`&[u8]`).
    Bytes,
    /// 2: a UTF-8 string (`&str`).
    Utf8,
    /// 3: a fixed 16-byte identifier (`[u8; 16]`).
    Id16,
    /// 4: a little-endian u64.
    U64,
}

impl ColumnType {
    /// The type byte.
    pub fn byte(self) -> u8 {
        match self {
            ColumnType::Bytes => 1,
            ColumnType::Utf8 => 2,
            ColumnType::Id16 => 3,
            ColumnType::U64 => 4,
        }
    }

    /// The type of a type byte.
    pub fn from_byte(b: u8) -> Result<ColumnType> {
        Ok(match b {
            1 => ColumnType::Bytes,
            2 => ColumnType::Utf8,
            3 => ColumnType::Id16,
            4 => ColumnType::U64,
            other => return Err(RecoveryError::UnknownType(other)),
        })
    }

    /// Refuse `bytes` this type cannot hold.
    pub fn check(self, table: &str, column: &'static str, bytes: &[u8]) -> Result<()> {
        let width = |expected: u64| {
            if bytes.len() as u64 == expected {
                Ok(())
            } else {
                Err(RecoveryError::InvalidWidth {
                    table: table.to_owned(),
                    column,
                    expected,
                    actual: bytes.len() as u64,
                })
            }
        };
        match self {
            ColumnType::Bytes => Ok(()),
            ColumnType::Utf8 => {
                std::str::from_utf8(bytes)
                    .map(|_| ())
                    .map_err(|_| RecoveryError::MalformedString {
                        table: table.to_owned(),
                        column,
                    })
            }
            ColumnType::Id16 => width(16),
            ColumnType::U64 => width(8),
        }
    }
}

/// One journal record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// Opcode 1: a table opened with its key and value types.
    Declare {
        name: String,
        key: ColumnType,
        value: ColumnType,
    },
    /// Opcode 2: a row written.
    Put {
        name: String,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// Opcode 3: a row removed.
    Remove { name: String, key: Vec<u8> },
    /// Opcode 4: a table deleted.
    Drop { name: String },
    /// Opcode 5: the end of one committed transaction.
    Commit,
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(RecoveryError::EmptyName);
    }
    if name.len() > MAX_NAME {
        return Err(FormatError::LimitExceeded {
            what: "recovery record.table name",
            limit: MAX_NAME as u64,
            actual: name.len() as u64,
        }
        .into());
    }
    if RESERVED_TABLES.contains(&name) {
        return Err(RecoveryError::ReservedTable(name.to_owned()));
    }
    Ok(())
}

pub(crate) fn check_len(what: &'static str, len: usize, limit: usize) -> Result<()> {
    if len > limit {
        return Err(FormatError::LimitExceeded {
            what,
            limit: limit as u64,
            actual: len as u64,
        }
        .into());
    }
    Ok(())
}

/// Append a declaration record to `out`.
pub fn encode_declare(
    out: &mut Vec<u8>,
    name: &str,
    key: ColumnType,
    value: ColumnType,
) -> Result<()> {
    check_name(name)?;
    out.put_u8(RECORD_VERSION);
    out.put_u8(1);
    out.put_bytes16(name.as_bytes());
    out.put_u8(key.byte());
    out.put_u8(value.byte());
    Ok(())
}

/// Append a put record to `out`.
pub fn encode_put(out: &mut Vec<u8>, name: &str, key: &[u8], value: &[u8]) -> Result<()> {
    check_name(name)?;
    check_len("recovery record.key", key.len(), MAX_KEY)?;
    check_len("recovery record.value", value.len(), MAX_VALUE)?;
    out.put_u8(RECORD_VERSION);
    out.put_u8(2);
    out.put_bytes16(name.as_bytes());
    out.put_bytes32(key);
    out.put_bytes32(value);
    Ok(())
}

/// Whether `rec` is exactly the put record [`encode_put`] appends for
/// `name`, `key` and `value`: compared in place, nothing allocated (a
/// record encoded ahead of its transaction is checked against the row it
/// is written with).
pub fn is_put_record(rec: &[u8], name: &str, key: &[u8], value: &[u8]) -> bool {
    let (n, k, v) = (name.as_bytes(), key, value);
    if rec.len() != 2 + 2 + n.len() + 4 + k.len() + 4 + v.len()
        || n.len() > usize::from(u16::MAX)
        || k.len() > u32::MAX as usize
        || v.len() > u32::MAX as usize
    {
        return false;
    }
    let (head, rest) = rec.split_at(4);
    let (name_part, rest) = rest.split_at(n.len());
    let (klen, rest) = rest.split_at(4);
    let (key_part, rest) = rest.split_at(k.len());
    let (vlen, value_part) = rest.split_at(4);
    head[..2] == [RECORD_VERSION, 2]
        && head[2..] == (n.len() as u16).to_le_bytes()
        && name_part == n
        && klen == (k.len() as u32).to_le_bytes()
        && key_part == k
        && vlen == (v.len() as u32).to_le_bytes()
        && value_part == v
}

/// Append a remove record to `out`.
pub fn encode_remove(out: &mut Vec<u8>, name: &str, key: &[u8]) -> Result<()> {
    check_name(name)?;
    check_len("recovery record.key", key.len(), MAX_KEY)?;
    out.put_u8(RECORD_VERSION);
    out.put_u8(3);
    out.put_bytes16(name.as_bytes());
    out.put_bytes32(key);
    Ok(())
}

/// Append a drop-table record to `out`.
pub fn encode_drop(out: &mut Vec<u8>, name: &str) -> Result<()> {
    check_name(name)?;
    out.put_u8(RECORD_VERSION);
    out.put_u8(4);
    out.put_bytes16(name.as_bytes());
    Ok(())
}

/// Append a commit boundary to `out`.
pub fn encode_commit(out: &mut Vec<u8>) {
    out.put_u8(RECORD_VERSION);
    out.put_u8(5);
}

impl Record {
    /// The canonical bytes.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        match self {
            Record::Declare { name, key, value } => encode_declare(&mut out, name, *key, *value)?,
            Record::Put { name, key, value } => encode_put(&mut out, name, key, value)?,
            Record::Remove { name, key } => encode_remove(&mut out, name, key)?,
            Record::Drop { name } => encode_drop(&mut out, name)?,
            Record::Commit => encode_commit(&mut out),
        }
        Ok(out)
    }

    /// Decode one record, refusing anything but its canonical bytes.
    pub fn decode(bytes: &[u8]) -> Result<Record> {
        let mut r = Reader::new(bytes);
        let version = r.u8("recovery record.version")?;
        if version != RECORD_VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: "recovery record",
                version: version.into(),
            }
            .into());
        }
        let opcode = r.u8("recovery record.opcode")?;
        let name = |r: &mut Reader| -> Result<String> {
            let n = r.str16("recovery record.table name", MAX_NAME)?;
            check_name(n)?;
            Ok(n.to_owned())
        };
        let rec = match opcode {
            1 => {
                let name = name(&mut r)?;
                let key = ColumnType::from_byte(r.u8("recovery record.key type")?)?;
                let value = ColumnType::from_byte(r.u8("recovery record.value type")?)?;
                Record::Declare { name, key, value }
            }
            2 => {
                let name = name(&mut r)?;
                let key = r.bytes32("recovery record.key", MAX_KEY)?.to_vec();
                let value = r.bytes32("recovery record.value", MAX_VALUE)?.to_vec();
                Record::Put { name, key, value }
            }
            3 => {
                let name = name(&mut r)?;
                let key = r.bytes32("recovery record.key", MAX_KEY)?.to_vec();
                Record::Remove { name, key }
            }
            4 => Record::Drop {
                name: name(&mut r)?,
            },
            5 => Record::Commit,
            other => return Err(RecoveryError::UnknownOpcode(other)),
        };
        r.finish("recovery record")?;
        Ok(rec)
    }

    /// Check that `bytes` is one canonical record (the same refusals as
    /// [`Record::decode`]) without copying its key or value.
    pub fn validate(bytes: &[u8]) -> Result<()> {
        let mut r = Reader::new(bytes);
        let version = r.u8("recovery record.version")?;
        if version != RECORD_VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: "recovery record",
                version: version.into(),
            }
            .into());
        }
        let opcode = r.u8("recovery record.opcode")?;
        if opcode != 5 {
            if !(1..=4).contains(&opcode) {
                return Err(RecoveryError::UnknownOpcode(opcode));
            }
            check_name(r.str16("recovery record.table name", MAX_NAME)?)?;
        }
        match opcode {
            1 => {
                ColumnType::from_byte(r.u8("recovery record.key type")?)?;
                ColumnType::from_byte(r.u8("recovery record.value type")?)?;
            }
            2 => {
                r.bytes32("recovery record.key", MAX_KEY)?;
                r.bytes32("recovery record.value", MAX_VALUE)?;
            }
            3 => {
                r.bytes32("recovery record.key", MAX_KEY)?;
            }
            _ => {}
        }
        r.finish("recovery record")?;
        Ok(())
    }

    /// The table this record names, if any.
    pub fn table(&self) -> Option<&str> {
        match self {
            Record::Declare { name, .. }
            | Record::Put { name, .. }
            | Record::Remove { name, .. }
            | Record::Drop { name } => Some(name),
            Record::Commit => None,
        }
    }
}

/// Declared types of the journaled tables, followed across records: refuses
/// puts and removes on undeclared tables, widths and strings their types do
/// not allow, and conflicting redeclarations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeCheck {
    types: BTreeMap<String, (ColumnType, ColumnType)>,
    /// Records since the last commit boundary.
    pending: u64,
}

impl TypeCheck {
    /// Start from the types a database already recorded.
    pub fn with_types(types: BTreeMap<String, (ColumnType, ColumnType)>) -> TypeCheck {
        TypeCheck { types, pending: 0 }
    }

    /// The declared types.
    pub fn types(&self) -> &BTreeMap<String, (ColumnType, ColumnType)> {
        &self.types
    }

    /// Records since the last commit boundary (0 at a boundary).
    pub fn pending(&self) -> u64 {
        self.pending
    }

    /// Check `rec` and follow it.
    pub fn apply(&mut self, rec: &Record) -> Result<()> {
        match rec {
            Record::Declare { name, key, value } => {
                if let Some(old) = self.types.get(name) {
                    if *old != (*key, *value) {
                        return Err(RecoveryError::TypeConflict {
                            table: name.clone(),
                            old: (old.0.byte(), old.1.byte()),
                            new: (key.byte(), value.byte()),
                        });
                    }
                }
                self.types.insert(name.clone(), (*key, *value));
            }
            Record::Put { name, key, value } => {
                let (kt, vt) = self.lookup(name)?;
                kt.check(name, "key", key)?;
                vt.check(name, "value", value)?;
            }
            Record::Remove { name, key } => {
                let (kt, _) = self.lookup(name)?;
                kt.check(name, "key", key)?;
            }
            Record::Drop { name } => {
                self.lookup(name)?;
                self.types.remove(name);
            }
            Record::Commit => {
                self.pending = 0;
                return Ok(());
            }
        }
        self.pending += 1;
        Ok(())
    }

    fn lookup(&self, name: &str) -> Result<(ColumnType, ColumnType)> {
        self.types
            .get(name)
            .copied()
            .ok_or_else(|| RecoveryError::UndeclaredTable(name.to_owned()))
    }
}

/// A segment's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    pub identity: [u8; 16],
    pub after: u64,
    pub end: u64,
}

impl SegmentHeader {
    fn encode(&self) -> [u8; SEGMENT_HEADER] {
        let mut out = Vec::with_capacity(SEGMENT_HEADER);
        out.put_bytes(SEGMENT_MAGIC);
        out.put_u16(SEGMENT_VERSION);
        out.put_bytes(&self.identity);
        out.put_u64(self.after);
        out.put_u64(self.end);
        let mut a = [0u8; SEGMENT_HEADER];
        a.copy_from_slice(&out);
        a
    }
}

/// Writes one `.scrj` segment: the header, each record in sequence, then
/// the digest. Refuses a sequence out of order or a count that does not
/// reach `end`.
pub struct SegmentWriter<W: Write> {
    w: W,
    hasher: blake3::Hasher,
    header: SegmentHeader,
    next: u64,
    last_commit: bool,
    written: u64,
}

pub(crate) fn io_err(what: &'static str) -> impl Fn(std::io::Error) -> RecoveryError {
    move |e| RecoveryError::Io {
        what,
        reason: e.to_string(),
    }
}

impl<W: Write> SegmentWriter<W> {
    /// Start a segment for `after + 1 ..= end`.
    pub fn new(mut w: W, header: SegmentHeader) -> Result<Self> {
        if header.after > header.end {
            return Err(RecoveryError::CursorOrder {
                after: header.after,
                end: header.end,
            });
        }
        let bytes = header.encode();
        w.write_all(&bytes).map_err(io_err("recovery segment"))?;
        let mut hasher = blake3::Hasher::new();
        hasher.update(&bytes);
        Ok(SegmentWriter {
            w,
            hasher,
            header,
            next: header.after + 1,
            last_commit: true,
            written: bytes.len() as u64,
        })
    }

    /// Append the record `sequence` (which must be the next one).
    pub fn record(&mut self, sequence: u64, record: &[u8]) -> Result<()> {
        if sequence != self.next || sequence > self.header.end {
            return Err(RecoveryError::SequenceGap {
                expected: self.next,
                found: sequence,
            });
        }
        check_len("recovery segment.record", record.len(), MAX_RECORD)?;
        let mut head = [0u8; 12];
        head[..8].copy_from_slice(&sequence.to_le_bytes());
        head[8..].copy_from_slice(&(record.len() as u32).to_le_bytes());
        for part in [&head[..], record] {
            self.w.write_all(part).map_err(io_err("recovery segment"))?;
            self.hasher.update(part);
        }
        self.written += 12 + record.len() as u64;
        self.last_commit = record == [RECORD_VERSION, 5];
        self.next += 1;
        Ok(())
    }

    /// Write the digest; returns the writer, the digest and the segment's
    /// length in bytes.
    pub fn finish(mut self) -> Result<(W, [u8; 32], u64)> {
        if self.next != self.header.end + 1 {
            return Err(RecoveryError::SequenceGap {
                expected: self.next,
                found: self.header.end + 1,
            });
        }
        if !self.last_commit {
            return Err(RecoveryError::IncompleteTransaction {
                sequence: self.header.end,
            });
        }
        let digest: [u8; 32] = self.hasher.finalize().into();
        self.w
            .write_all(&digest)
            .map_err(io_err("recovery segment"))?;
        Ok((self.w, digest, self.written + 32))
    }
}

/// Encode a whole segment from `(sequence, record bytes)` pairs.
pub fn encode_segment(header: SegmentHeader, records: &[(u64, Vec<u8>)]) -> Result<Vec<u8>> {
    let mut w = SegmentWriter::new(Vec::new(), header)?;
    for (seq, rec) in records {
        w.record(*seq, rec)?;
    }
    Ok(w.finish()?.0)
}

/// Streams one `.scrj` segment: hashes while reading, holds one record at a
/// time, checks sequences, that the last record is a commit boundary, the
/// digest and that nothing follows it.
pub struct SegmentReader<R: Read> {
    r: R,
    hasher: blake3::Hasher,
    header: SegmentHeader,
    next: u64,
    offset: u64,
    done: bool,
    digest: [u8; 32],
}

pub(crate) fn read_exact<R: Read>(r: &mut R, buf: &mut [u8], what: &'static str) -> Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(FormatError::Truncated {
                    what,
                    needed: (buf.len() - got) as u64,
                    available: 0,
                }
                .into())
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err(what)(e)),
        }
    }
    Ok(())
}

impl<R: Read> SegmentReader<R> {
    /// Read and check the header.
    pub fn new(mut r: R) -> Result<Self> {
        let mut head = [0u8; SEGMENT_HEADER];
        read_exact(&mut r, &mut head, "recovery segment.header")?;
        let mut rd = Reader::new(&head);
        if rd.take(4, "recovery segment.magic")? != SEGMENT_MAGIC {
            return Err(FormatError::BadMagic {
                what: "recovery segment",
            }
            .into());
        }
        let version = rd.u16("recovery segment.version")?;
        if version != SEGMENT_VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: "recovery segment",
                version: version.into(),
            }
            .into());
        }
        let identity = rd.array("recovery segment.identity")?;
        let after = rd.u64("recovery segment.after")?;
        let end = rd.u64("recovery segment.end")?;
        if after > end {
            return Err(RecoveryError::CursorOrder { after, end });
        }
        let mut hasher = blake3::Hasher::new();
        hasher.update(&head);
        Ok(SegmentReader {
            r,
            hasher,
            header: SegmentHeader {
                identity,
                after,
                end,
            },
            next: after + 1,
            offset: SEGMENT_HEADER as u64,
            done: false,
            digest: [0; 32],
        })
    }

    /// The header.
    pub fn header(&self) -> SegmentHeader {
        self.header
    }

    /// Bytes read so far (where a refusal applies).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The verified digest (after the last record was returned).
    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// The next record and its sequence, or `None` after the verified end.
    pub fn next_record(&mut self) -> Result<Option<(u64, Record)>> {
        if self.done {
            return Ok(None);
        }
        if self.next > self.header.end {
            self.finish()?;
            return Ok(None);
        }
        let mut head = [0u8; 12];
        read_exact(&mut self.r, &mut head, "recovery segment.record header")?;
        let seq = u64::from_le_bytes(head[..8].try_into().unwrap_or_default());
        let len = u32::from_le_bytes(head[8..].try_into().unwrap_or_default()) as usize;
        if seq != self.next {
            return Err(RecoveryError::SequenceGap {
                expected: self.next,
                found: seq,
            });
        }
        check_len("recovery segment.record", len, MAX_RECORD)?;
        let mut body = vec![0u8; len];
        read_exact(&mut self.r, &mut body, "recovery segment.record")?;
        let rec = Record::decode(&body)?;
        if seq == self.header.end && rec != Record::Commit {
            return Err(RecoveryError::IncompleteTransaction { sequence: seq });
        }
        self.hasher.update(&head);
        self.hasher.update(&body);
        self.offset += 12 + len as u64;
        self.next += 1;
        Ok(Some((seq, rec)))
    }

    fn finish(&mut self) -> Result<()> {
        let mut digest = [0u8; 32];
        read_exact(&mut self.r, &mut digest, "recovery segment.digest")?;
        let want: [u8; 32] = self.hasher.finalize().into();
        if digest != want {
            return Err(RecoveryError::Checksum {
                what: "recovery segment",
            });
        }
        self.offset += 32;
        let mut extra = [0u8; 1];
        match self.r.read(&mut extra) {
            Ok(0) => {}
            Ok(_) => {
                return Err(FormatError::TrailingBytes {
                    what: "recovery segment",
                    count: 1,
                }
                .into())
            }
            Err(e) => return Err(io_err("recovery segment")(e)),
        }
        self.digest = digest;
        self.done = true;
        Ok(())
    }

    /// Read to the verified end, collecting the records.
    pub fn read_all(mut self) -> Result<(SegmentHeader, Vec<(u64, Record)>)> {
        let mut out = Vec::new();
        while let Some(r) = self.next_record()? {
            out.push(r);
        }
        Ok((self.header, out))
    }
}

/// Decode a whole segment held in memory.
pub fn decode_segment(bytes: &[u8]) -> Result<(SegmentHeader, Vec<(u64, Record)>)> {
    SegmentReader::new(bytes)?.read_all()
}

/// The archive's `HEAD` cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveHead {
    pub identity: [u8; 16],
    /// Segment number (0 only at the zero position).
    pub segment: u64,
    /// Published bytes of that segment.
    pub offset: u64,
    /// Journal end (a commit boundary) covered by the published frames.
    pub end: u64,
    /// Chain digest of the last published frame.
    pub chain: [u8; 32],
}

impl ArchiveHead {
    /// The zero position of `identity` at `end`.
    pub fn zero(identity: [u8; 16], end: u64) -> ArchiveHead {
        ArchiveHead {
            identity,
            segment: 0,
            offset: 0,
            end,
            chain: [0; 32],
        }
    }

    /// The 112 canonical bytes.
    pub fn encode(&self) -> [u8; HEAD_LEN] {
        let mut out = Vec::with_capacity(HEAD_LEN);
        out.put_bytes(HEAD_MAGIC);
        out.put_bytes(&self.identity);
        out.put_u64(self.segment);
        out.put_u64(self.offset);
        out.put_u64(self.end);
        out.put_bytes(&self.chain);
        let sum = blake3::hash(&out);
        out.put_bytes(sum.as_bytes());
        let mut a = [0u8; HEAD_LEN];
        a.copy_from_slice(&out);
        a
    }

    /// Decode exactly 112 bytes.
    pub fn decode(bytes: &[u8]) -> Result<ArchiveHead> {
        let mut r = Reader::new(bytes);
        if r.take(8, "archive HEAD.magic")? != HEAD_MAGIC {
            return Err(FormatError::BadMagic {
                what: "archive HEAD",
            }
            .into());
        }
        let identity = r.array("archive HEAD.identity")?;
        let segment = r.u64("archive HEAD.segment")?;
        let offset = r.u64("archive HEAD.offset")?;
        let end = r.u64("archive HEAD.end")?;
        let chain: [u8; 32] = r.array("archive HEAD.chain")?;
        let sum: [u8; 32] = r.array("archive HEAD.checksum")?;
        r.finish("archive HEAD")?;
        if blake3::hash(&bytes[..80]).as_bytes() != &sum {
            return Err(RecoveryError::Checksum {
                what: "archive HEAD",
            });
        }
        if segment == 0 && (offset != 0 || chain != [0; 32]) {
            return Err(RecoveryError::InvalidHead(
                "segment 0 is only the zero position (zero offset and chain)",
            ));
        }
        if segment != 0 && (offset == 0 || chain == [0; 32]) {
            return Err(RecoveryError::InvalidHead(
                "a published position has a nonzero offset and chain digest",
            ));
        }
        Ok(ArchiveHead {
            identity,
            segment,
            offset,
            end,
            chain,
        })
    }
}

/// The file name of archive segment `n`.
pub fn segment_file_name(n: u64) -> String {
    format!("{n:020}.journal")
}

/// The segment number of an archive file name (`None` for other names).
pub fn parse_segment_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".journal")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The chain digest of a frame.
pub fn chain_digest(previous: &[u8; 32], length: u64, payload_checksum: &[u8; 32]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(FRAME_DOMAIN);
    h.update(previous);
    h.update(&length.to_le_bytes());
    h.update(payload_checksum);
    h.finalize().into()
}

/// One archive frame, decoded from a segment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    pub previous: [u8; 32],
    /// The SCRJ payload (not yet decoded).
    pub payload: &'a [u8],
    pub chain: [u8; 32],
}

/// Bytes of a frame around its payload.
pub const FRAME_OVERHEAD: u64 = 8 + 32 + 32;

/// The 40 bytes before a frame's payload: its length and the previous
/// chain digest (writers stream the payload after it, then the chain).
pub fn frame_header(previous: &[u8; 32], payload_len: u64) -> [u8; 40] {
    let mut out = [0u8; 40];
    out[..8].copy_from_slice(&payload_len.to_le_bytes());
    out[8..].copy_from_slice(previous);
    out
}

impl<'a> Frame<'a> {
    /// Encode a frame following `previous` around a complete SCRJ payload.
    pub fn encode(previous: &[u8; 32], payload: &[u8]) -> Result<(Vec<u8>, [u8; 32])> {
        if payload.len() < MIN_SEGMENT {
            return Err(FormatError::Truncated {
                what: "archive frame.payload",
                needed: (MIN_SEGMENT - payload.len()) as u64,
                available: 0,
            }
            .into());
        }
        let sum: [u8; 32] = payload[payload.len() - 32..].try_into().unwrap_or_default();
        let chain = chain_digest(previous, payload.len() as u64, &sum);
        let mut out = Vec::with_capacity(payload.len() + FRAME_OVERHEAD as usize);
        out.put_u64(payload.len() as u64);
        out.put_bytes(previous);
        out.put_bytes(payload);
        out.put_bytes(&chain);
        Ok((out, chain))
    }

    /// Decode the frame at the start of `bytes`; returns it and its length.
    /// Checks the chain digest against the payload's trailing checksum and
    /// `previous` against `expected_previous`; the payload itself is
    /// checked by [`SegmentReader`].
    pub fn decode(bytes: &'a [u8], expected_previous: &[u8; 32]) -> Result<(Frame<'a>, usize)> {
        let mut r = Reader::new(bytes);
        let len = r.u64("archive frame.length")?;
        let previous: [u8; 32] = r.array("archive frame.previous chain")?;
        if len < MIN_SEGMENT as u64 || len > r.remaining() as u64 {
            return Err(FormatError::Truncated {
                what: "archive frame.payload",
                needed: len,
                available: r.remaining() as u64,
            }
            .into());
        }
        let payload = r.take(len as usize, "archive frame.payload")?;
        let chain: [u8; 32] = r.array("archive frame.chain")?;
        if &previous != expected_previous {
            return Err(RecoveryError::ChainMismatch);
        }
        let sum: [u8; 32] = payload[payload.len() - 32..].try_into().unwrap_or_default();
        if chain_digest(&previous, len, &sum) != chain {
            return Err(RecoveryError::Checksum {
                what: "archive frame",
            });
        }
        Ok((
            Frame {
                previous,
                payload,
                chain,
            },
            r.position(),
        ))
    }
}

/// Feed arbitrary bytes to every decoder of this module; panics only if a
/// decoder panics or a decoded value does not re-encode to its bytes (the
/// entry point of the `recovery` fuzz target).
#[doc(hidden)]
pub fn fuzz_decoders(data: &[u8]) {
    assert_eq!(Record::validate(data).is_ok(), Record::decode(data).is_ok());
    if let Ok(rec) = Record::decode(data) {
        assert_eq!(rec.encode().expect("a decoded record re-encodes"), data);
        let mut tc = TypeCheck::default();
        let _ = tc.apply(&rec);
    }
    if let Ok((header, records)) = decode_segment(data) {
        let pairs: Vec<(u64, Vec<u8>)> = records
            .iter()
            .map(|(s, r)| (*s, r.encode().expect("re-encodes")))
            .collect();
        assert_eq!(encode_segment(header, &pairs).expect("re-encodes"), data);
        let mut tc = TypeCheck::default();
        for (_, r) in &records {
            if tc.apply(r).is_err() {
                break;
            }
        }
    }
    if let Ok(head) = ArchiveHead::decode(data) {
        assert_eq!(head.encode().as_slice(), data);
    }
    let prev = data.get(8..40).and_then(|s| <[u8; 32]>::try_from(s).ok());
    if let Some(prev) = prev {
        if let Ok((frame, used)) = Frame::decode(data, &prev) {
            let (bytes, chain) = Frame::encode(&frame.previous, frame.payload).expect("re-encodes");
            assert_eq!(chain, frame.chain);
            assert_eq!(bytes, &data[..used]);
        }
    }
    if let Ok(s) = std::str::from_utf8(data) {
        if let Some(n) = parse_segment_file_name(s) {
            assert_eq!(segment_file_name(n), s);
        }
    }
}
