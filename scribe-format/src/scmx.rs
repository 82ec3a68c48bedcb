//! The metadata export container `.scmx` (seed 004 section 10):
//!
//! ```text
//! "SCMX" | u16 version = 1 | [16] repository id | u32 table count |
//! per table: str16 name, u64 row count, (bytes32 key, bytes32 value)* |
//! [32] blake3 of everything before it
//! ```
//!
//! Integers are little endian. Both directions stream: [`ScmxWriter`]
//! hashes as it writes and [`ScmxReader`] holds one row at a time. The
//! reader enforces the import limits before allocating (at most 64 tables,
//! 64-byte names, 1 MiB keys, 16 MiB values), refuses a name that is not
//! UTF-8, a digest that does not match and bytes after the digest, and
//! every refusal names the byte offset where it applies.

use std::io::{Read, Write};

use crate::ErrorCode;

/// The first four bytes.
pub const MAGIC: &[u8; 4] = b"SCMX";
/// The version this build writes and reads.
pub const VERSION: u16 = 1;
/// Most tables an import accepts.
pub const MAX_TABLES: u32 = 64;
/// Longest table name an import accepts, in bytes.
pub const MAX_NAME: usize = 64;
/// Largest key an import accepts.
pub const MAX_KEY: usize = 1 << 20;
/// Largest value an import accepts.
pub const MAX_VALUE: usize = 16 << 20;
/// Bytes before the first table: magic, version, repository id, count.
pub const HEADER_LEN: u64 = 4 + 2 + 16 + 4;

/// What was wrong, without where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScmxProblem {
    #[error("the file ends inside {what} ({needed} more bytes needed)")]
    Truncated { what: &'static str, needed: u64 },
    #[error("not a metadata export (magic {0:02x?}, expected \"SCMX\")")]
    BadMagic([u8; 4]),
    #[error("export version {0} (this build reads 1)")]
    UnsupportedVersion(u16),
    #[error("{count} tables (at most {MAX_TABLES})")]
    TooManyTables { count: u32 },
    #[error("table name of {len} bytes (at most {MAX_NAME})")]
    NameTooLong { len: usize },
    #[error("empty table name")]
    EmptyName,
    #[error("table name is not UTF-8")]
    NameNotUtf8,
    #[error("key of {len} bytes (at most {MAX_KEY})")]
    KeyTooLarge { len: u64 },
    #[error("value of {len} bytes (at most {MAX_VALUE})")]
    ValueTooLarge { len: u64 },
    #[error("the trailing BLAKE3 digest does not match the bytes before it")]
    DigestMismatch,
    #[error("bytes after the trailing digest")]
    TrailingBytes,
    #[error("{0}")]
    Io(String),
    /// Writer misuse (the encoder refuses to write a file that would not decode).
    #[error("{0}")]
    Usage(&'static str),
}

/// A refusal of `.scmx` bytes: what, and the byte offset where it applies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at byte {offset}: {problem}")]
pub struct ScmxError {
    pub offset: u64,
    pub problem: ScmxProblem,
}

impl ScmxError {
    /// The registry code of this refusal.
    pub fn code(&self) -> ErrorCode {
        match self.problem {
            ScmxProblem::Truncated { .. }
            | ScmxProblem::BadMagic(_)
            | ScmxProblem::EmptyName
            | ScmxProblem::NameNotUtf8
            | ScmxProblem::TrailingBytes
            | ScmxProblem::Usage(_) => ErrorCode::Malformed,
            ScmxProblem::UnsupportedVersion(_) => ErrorCode::UnsupportedVersion,
            ScmxProblem::TooManyTables { .. }
            | ScmxProblem::NameTooLong { .. }
            | ScmxProblem::KeyTooLarge { .. }
            | ScmxProblem::ValueTooLarge { .. } => ErrorCode::LimitExceeded,
            ScmxProblem::DigestMismatch => ErrorCode::Corrupt,
            ScmxProblem::Io(_) => ErrorCode::Internal,
        }
    }
}

pub type Result<T> = std::result::Result<T, ScmxError>;

/// Streams an export: header, then each table's name and row count
/// followed by exactly that many rows, then [`ScmxWriter::finish`].
pub struct ScmxWriter<W: Write> {
    w: W,
    hasher: blake3::Hasher,
    offset: u64,
    tables_left: u32,
    rows_left: u64,
}

impl<W: Write> ScmxWriter<W> {
    /// Write the header of an export of `tables` tables of `repository`.
    pub fn new(w: W, repository: [u8; 16], tables: u32) -> Result<Self> {
        let mut s = ScmxWriter {
            w,
            hasher: blake3::Hasher::new(),
            offset: 0,
            tables_left: tables,
            rows_left: 0,
        };
        s.put(MAGIC)?;
        s.put(&VERSION.to_le_bytes())?;
        s.put(&repository)?;
        s.put(&tables.to_le_bytes())?;
        Ok(s)
    }

    fn put(&mut self, b: &[u8]) -> Result<()> {
        self.hasher.update(b);
        self.w.write_all(b).map_err(|e| ScmxError {
            offset: self.offset,
            problem: ScmxProblem::Io(e.to_string()),
        })?;
        self.offset += b.len() as u64;
        Ok(())
    }

    fn misuse(&self, what: &'static str) -> ScmxError {
        ScmxError {
            offset: self.offset,
            problem: ScmxProblem::Usage(what),
        }
    }

    /// Start the next table.
    pub fn table(&mut self, name: &str, rows: u64) -> Result<()> {
        if self.rows_left != 0 {
            return Err(self.misuse("the previous table has rows left"));
        }
        if self.tables_left == 0 {
            return Err(self.misuse("more tables than the header announced"));
        }
        if name.is_empty() || name.len() > MAX_NAME {
            return Err(self.misuse("table names are 1 to 64 bytes"));
        }
        self.tables_left -= 1;
        self.rows_left = rows;
        self.put(&(name.len() as u16).to_le_bytes())?;
        self.put(name.as_bytes())?;
        self.put(&rows.to_le_bytes())
    }

    /// Write one row of the current table.
    pub fn row(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if self.rows_left == 0 {
            return Err(self.misuse("more rows than the table announced"));
        }
        if key.len() > MAX_KEY || value.len() > MAX_VALUE {
            return Err(self.misuse("a key or value beyond the import limits"));
        }
        self.rows_left -= 1;
        self.put(&(key.len() as u32).to_le_bytes())?;
        self.put(key)?;
        self.put(&(value.len() as u32).to_le_bytes())?;
        self.put(value)
    }

    /// Write the trailing digest; returns the writer, the digest and the
    /// total length.
    pub fn finish(mut self) -> Result<(W, [u8; 32], u64)> {
        if self.rows_left != 0 || self.tables_left != 0 {
            return Err(self.misuse("fewer tables or rows than announced"));
        }
        let digest: [u8; 32] = *self.hasher.finalize().as_bytes();
        self.w.write_all(&digest).map_err(|e| ScmxError {
            offset: self.offset,
            problem: ScmxProblem::Io(e.to_string()),
        })?;
        self.offset += 32;
        Ok((self.w, digest, self.offset))
    }
}

/// One table's header as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableHeader {
    pub name: String,
    pub rows: u64,
    /// Byte offset of the table's name length.
    pub offset: u64,
}

/// Streams an export: [`ScmxReader::new`] reads the header, then
/// [`next_table`](ScmxReader::next_table) and [`next_row`](ScmxReader::next_row)
/// walk the tables, and [`finish`](ScmxReader::finish) checks the digest
/// and the end of the input. Nothing read before `finish` returned is
/// verified: callers publish only after it.
pub struct ScmxReader<R: Read> {
    r: R,
    hasher: blake3::Hasher,
    offset: u64,
    repository: [u8; 16],
    tables_left: u32,
    rows_left: u64,
}

impl<R: Read> ScmxReader<R> {
    /// Read and check the header.
    pub fn new(r: R) -> Result<Self> {
        let mut s = ScmxReader {
            r,
            hasher: blake3::Hasher::new(),
            offset: 0,
            repository: [0; 16],
            tables_left: 0,
            rows_left: 0,
        };
        let mut magic = [0u8; 4];
        s.take(&mut magic, "the magic")?;
        if &magic != MAGIC {
            return Err(s.at(0, ScmxProblem::BadMagic(magic)));
        }
        let mut v = [0u8; 2];
        s.take(&mut v, "the version")?;
        let version = u16::from_le_bytes(v);
        if version != VERSION {
            return Err(s.at(4, ScmxProblem::UnsupportedVersion(version)));
        }
        let mut id = [0u8; 16];
        s.take(&mut id, "the repository id")?;
        s.repository = id;
        let mut c = [0u8; 4];
        s.take(&mut c, "the table count")?;
        let count = u32::from_le_bytes(c);
        if count > MAX_TABLES {
            return Err(s.at(22, ScmxProblem::TooManyTables { count }));
        }
        s.tables_left = count;
        Ok(s)
    }

    fn at(&self, offset: u64, problem: ScmxProblem) -> ScmxError {
        ScmxError { offset, problem }
    }

    /// Read exactly `buf.len()` bytes (hashed); a short read names where
    /// the input ended.
    fn take(&mut self, buf: &mut [u8], what: &'static str) -> Result<()> {
        let mut got = 0;
        while got < buf.len() {
            match self.r.read(&mut buf[got..]) {
                Ok(0) => {
                    return Err(self.at(
                        self.offset + got as u64,
                        ScmxProblem::Truncated {
                            what,
                            needed: (buf.len() - got) as u64,
                        },
                    ))
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(self.at(self.offset + got as u64, ScmxProblem::Io(e.to_string())))
                }
            }
        }
        self.hasher.update(buf);
        self.offset += buf.len() as u64;
        Ok(())
    }

    fn take_u32(&mut self, what: &'static str) -> Result<u32> {
        let mut b = [0u8; 4];
        self.take(&mut b, what)?;
        Ok(u32::from_le_bytes(b))
    }

    /// The exported repository's id.
    pub fn repository(&self) -> [u8; 16] {
        self.repository
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next table's header, or `None` after the last. Refused while the
    /// current table has rows left.
    pub fn next_table(&mut self) -> Result<Option<TableHeader>> {
        if self.rows_left != 0 {
            return Err(self.at(
                self.offset,
                ScmxProblem::Usage("the current table has rows left"),
            ));
        }
        if self.tables_left == 0 {
            return Ok(None);
        }
        let at = self.offset;
        let mut l = [0u8; 2];
        self.take(&mut l, "a table name length")?;
        let len = u16::from_le_bytes(l) as usize;
        if len > MAX_NAME {
            return Err(self.at(at, ScmxProblem::NameTooLong { len }));
        }
        if len == 0 {
            return Err(self.at(at, ScmxProblem::EmptyName));
        }
        let mut name = vec![0u8; len];
        self.take(&mut name, "a table name")?;
        let name =
            String::from_utf8(name).map_err(|_| self.at(at + 2, ScmxProblem::NameNotUtf8))?;
        let mut r = [0u8; 8];
        self.take(&mut r, "a row count")?;
        self.tables_left -= 1;
        self.rows_left = u64::from_le_bytes(r);
        Ok(Some(TableHeader {
            name,
            rows: self.rows_left,
            offset: at,
        }))
    }

    /// The current table's next row into `key` and `value` (replacing
    /// their contents), or `false` after its last row.
    pub fn next_row(&mut self, key: &mut Vec<u8>, value: &mut Vec<u8>) -> Result<bool> {
        if self.rows_left == 0 {
            return Ok(false);
        }
        let at = self.offset;
        let klen = self.take_u32("a key length")? as u64;
        if klen > MAX_KEY as u64 {
            return Err(self.at(at, ScmxProblem::KeyTooLarge { len: klen }));
        }
        key.clear();
        key.resize(klen as usize, 0);
        self.take(key, "a key")?;
        let vat = self.offset;
        let vlen = self.take_u32("a value length")? as u64;
        if vlen > MAX_VALUE as u64 {
            return Err(self.at(vat, ScmxProblem::ValueTooLarge { len: vlen }));
        }
        value.clear();
        value.resize(vlen as usize, 0);
        self.take(value, "a value")?;
        self.rows_left -= 1;
        Ok(true)
    }

    /// After the last table: read the digest, compare it and require the
    /// end of the input. Returns the digest and the total length.
    pub fn finish(mut self) -> Result<([u8; 32], u64)> {
        if self.rows_left != 0 || self.tables_left != 0 {
            return Err(self.at(
                self.offset,
                ScmxProblem::Usage("tables or rows are left to read"),
            ));
        }
        let expected: [u8; 32] = *self.hasher.finalize().as_bytes();
        let at = self.offset;
        let mut digest = [0u8; 32];
        self.take(&mut digest, "the trailing digest")?;
        if digest != expected {
            return Err(self.at(at, ScmxProblem::DigestMismatch));
        }
        let mut one = [0u8; 1];
        loop {
            match self.r.read(&mut one) {
                Ok(0) => break,
                Ok(_) => return Err(self.at(self.offset, ScmxProblem::TrailingBytes)),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.at(self.offset, ScmxProblem::Io(e.to_string()))),
            }
        }
        Ok((digest, self.offset))
    }
}

/// One table's rows, raw key and value bytes in order.
pub type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// A whole export in memory (tests, fixtures, the fuzz target).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Export {
    pub repository: [u8; 16],
    pub tables: Vec<(String, Rows)>,
}

impl Export {
    /// Encode with [`ScmxWriter`].
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut w = ScmxWriter::new(Vec::new(), self.repository, self.tables.len() as u32)?;
        for (name, rows) in &self.tables {
            w.table(name, rows.len() as u64)?;
            for (k, v) in rows {
                w.row(k, v)?;
            }
        }
        Ok(w.finish()?.0)
    }

    /// Decode with [`ScmxReader`] (row counts are trusted only as far as
    /// rows are present: nothing is preallocated from them).
    pub fn decode(bytes: &[u8]) -> Result<Export> {
        let mut r = ScmxReader::new(bytes)?;
        let mut out = Export {
            repository: r.repository(),
            tables: Vec::new(),
        };
        while let Some(t) = r.next_table()? {
            let mut rows = Vec::new();
            let (mut k, mut v) = (Vec::new(), Vec::new());
            while r.next_row(&mut k, &mut v)? {
                rows.push((std::mem::take(&mut k), std::mem::take(&mut v)));
            }
            out.tables.push((t.name, rows));
        }
        r.finish()?;
        Ok(out)
    }
}

/// The entry point of the `scmx` fuzz target and of its property test:
/// decoding never panics, and whatever decodes re-encodes to the same bytes.
#[doc(hidden)]
pub fn fuzz_decoder(data: &[u8]) {
    if let Ok(e) = Export::decode(data) {
        assert_eq!(e.encode().expect("a decoded export re-encodes"), data);
    }
}
