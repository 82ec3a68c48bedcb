//! Offline object compaction (placeholder, filled below).
use crate::error::Result;
use scribe_format::ObjectId;
use std::path::Path;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactContext {
    pub repository: [u8; 16],
    pub journal_end: u64,
}
#[derive(Clone, Debug, Default)]
pub struct CompactOptions {
    pub incremental: bool,
    pub budget: Option<u64>,
    pub fail_at: Option<CompactFailpoint>,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactFailpoint {
    AfterCopy,
}
#[derive(Clone, Debug, Default)]
pub struct CompactReport {
    pub retained: u64,
}
pub fn compact(
    _dir: &Path,
    _live: impl IntoIterator<Item = ObjectId>,
    _ctx: CompactContext,
    _o: &CompactOptions,
) -> Result<CompactReport> {
    Ok(CompactReport::default())
}
