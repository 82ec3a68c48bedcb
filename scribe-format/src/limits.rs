//! Limits that are part of the format (specification section 11).
//!
//! Decoders check these before allocating; encoders refuse values beyond them.

/// Maximum canonical path length in bytes.
pub const MAX_PATH_BYTES: usize = 8192;
/// Maximum length of one path component in bytes.
pub const MAX_COMPONENT_BYTES: usize = 255;
/// Maximum file size: 1 PiB.
pub const MAX_FILE_SIZE: u64 = 1 << 50;
/// Maximum chunk length: 16 MiB.
pub const MAX_CHUNK_BYTES: u32 = 16 * 1024 * 1024;
/// Maximum number of chunks in one manifest: 2^30.
pub const MAX_MANIFEST_CHUNKS: u32 = 1 << 30;
/// Maximum number of entries in one change set.
pub const MAX_CHANGE_SET_ENTRIES: u32 = 4_000_000;
/// Maximum author length in bytes.
pub const MAX_AUTHOR_BYTES: usize = 256;
/// Maximum commit message length in bytes: 64 KiB.
pub const MAX_MESSAGE_BYTES: usize = 65_536;
/// Maximum repository name length in bytes.
pub const MAX_REPOSITORY_NAME_BYTES: usize = 128;

/// Whether `name` can name a repository: 1..=[`MAX_REPOSITORY_NAME_BYTES`]
/// bytes, no `/`, `\` or control character, neither `.` nor `..`. The
/// server refuses any other name; a client checks before asking.
pub fn is_repository_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_REPOSITORY_NAME_BYTES
        && !name
            .chars()
            .any(|c| c.is_control() || c == '/' || c == '\\')
        && name != "."
        && name != ".."
}
/// Maximum number of view prefixes of one workspace.
pub const MAX_VIEW_PREFIXES: usize = 256;

/// Largest original length of one codec-1 block (section 3).
pub const MAX_BLOCK_BYTES: u32 = 262_144;
/// Largest decompressed snapshot page body (section 12, schema 3).
pub const MAX_SNAPSHOT_NODE_BODY: u32 = 55_650;
/// Largest full common prefix of a snapshot node (section 12, schema 3).
pub const MAX_NODE_PREFIX_BYTES: usize = 24_576;
/// Largest child count of a snapshot node.
pub const MAX_NODE_CHILDREN: usize = 256;
/// Size of the 1 MiB chunking minimum: files no larger are one chunk.
pub const CHUNK_MIN_BYTES: u32 = 1024 * 1024;
/// FastCDC-2020 average chunk size of profile 1.
pub const CHUNK_AVG_BYTES: u32 = 4 * 1024 * 1024;
/// FastCDC-2020 maximum chunk size of profile 1 (equals [`MAX_CHUNK_BYTES`]).
pub const CHUNK_MAX_BYTES: u32 = MAX_CHUNK_BYTES;
