//! Positional reads, the one file-system call the store needs that differs
//! between operating systems (and a read into a vector's spare room, which
//! Unix can do without zeroing it first). Readers share one open file per pack, so
//! reads must not move a shared cursor: Unix has `pread`, Windows
//! `ReadFile` with an offset (`seek_read`, which does move the cursor, but
//! every read here names its offset, so that is harmless).

use std::fs::File;
use std::io;

/// Read up to `buf.len()` bytes at `offset`.
pub fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(file, buf, offset)
    }
}

/// Read exactly `buf.len()` bytes at `offset`.
pub fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match read_at(file, buf, offset) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file ends before the bytes its index names",
                ))
            }
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Read once into `buf`'s spare capacity (at least one byte of it), its
/// length extended by the bytes read; 0 at the end of the file. Unix reads
/// straight into the unused room; elsewhere it is zeroed first.
pub fn read_spare(file: &File, buf: &mut Vec<u8>) -> io::Result<usize> {
    debug_assert!(buf.len() < buf.capacity());
    #[cfg(unix)]
    {
        Ok(rustix::io::read(file, rustix::buffer::spare_capacity(buf))?)
    }
    #[cfg(not(unix))]
    {
        use std::io::Read;
        let start = buf.len();
        buf.resize(buf.capacity(), 0);
        let r = (&mut &*file).read(&mut buf[start..]);
        buf.truncate(start + *r.as_ref().unwrap_or(&0));
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_at_offsets_and_reports_short_files() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"0123456789").unwrap();
        let mut buf = [0u8; 4];
        read_exact_at(&f, &mut buf, 3).unwrap();
        assert_eq!(&buf, b"3456");
        let err = read_exact_at(&f, &mut buf, 8).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
