//! Change set v1 (specification section 4.2): the entries one submission
//! changes, keeps, or moves.
//!
//! ```text
//! u16 version = 1
//! u32 entry count                       (≤ 4,000,000)
//! repeat, strictly ascending by path bytes, no duplicates:
//!   str16 canonical path
//!   u8  action: 1 add, 2 edit, 3 delete, 4 keep
//!   u64 expected base change
//!   if action is 1 or 2:
//!     [32] manifest id, [32] file content id, u64 size, u8 mode (0 regular, 1 executable)
//!   u8  move present (0 or 1)
//!   if move present: str16 source canonical path, u64 source change
//! ```
//!
//! Structural rules checked by both [`ChangeSet::encode`] and
//! [`ChangeSet::decode`] (each named by a constant of [`rule`], which is the
//! `what` of the [`FormatError::Invalid`] that reports it):
//!
//! * at most 4,000,000 entries, strictly ascending unique path bytes;
//! * every path and move source is canonical (section 5);
//! * add and edit carry file state, delete and keep do not; an add's
//!   expected base is 0, an edit's and a delete's is nonzero, a keep's is any;
//! * a file-state path whose last component folds to `.scribe` is refused;
//! * size ≤ 1 PiB, mode 0 or 1;
//! * `moved_from` only on an add; its source is a delete entry of the same
//!   change set whose expected base equals the (nonzero) source change; each
//!   source feeds one destination; source ≠ destination. A keep is therefore
//!   never a move endpoint.
//!
//! Not checked here: a keep is legal only in a submission that carries a
//! merge parent or a cherry-pick source. That is a property of the
//! submission, not of these bytes; acceptance enforces it (rejecting with
//! `malformed`) using [`ChangeSet::has_keeps`].

use std::collections::HashSet;

use crate::bytes::{Put, Reader};
use crate::echo::echo;
use crate::error::FormatError;
use crate::id::{ChangeSetId, FileContentId, ManifestId};
use crate::limits::{MAX_CHANGE_SET_ENTRIES, MAX_FILE_SIZE, MAX_PATH_BYTES};
use crate::path;

/// The change set version written and read.
pub const VERSION: u16 = 1;
/// Length of the header: version and entry count.
pub const HEADER_LEN: usize = 2 + 4;
/// The smallest possible entry: a one-byte path, an action, a base and an
/// absent move (`2 + 1 + 1 + 8 + 1`). Used to bound the declared count by
/// the remaining input before allocating.
pub const MIN_ENTRY_LEN: usize = 13;
/// Length of an encoded [`FileState`].
pub const FILE_STATE_LEN: usize = 32 + 32 + 8 + 1;

/// Names of the change set rules, used as the `what` of the errors that
/// enforce them.
pub mod rule {
    pub const VERSION: &str = "change set version";
    pub const ENTRY_COUNT: &str = "change set entry count";
    pub const ORDER: &str = "change set entries strictly ascending by path";
    pub const PATH: &str = "change set canonical path";
    pub const ACTION: &str = "change set action";
    pub const STATE: &str = "change set file state matches the action";
    pub const BASE: &str = "change set expected base matches the action";
    pub const SCRIBE_NAME: &str = "change set file state named .scribe";
    pub const SIZE: &str = "change set file size";
    pub const MODE: &str = "change set file mode";
    pub const MOVE_FLAG: &str = "change set move present";
    pub const MOVE_ON_ADD: &str = "change set move only on an add";
    pub const MOVE_SOURCE_PATH: &str = "change set move source path";
    pub const MOVE_SELF: &str = "change set move source differs from destination";
    pub const MOVE_PAIRED_DELETE: &str = "change set move source is a paired delete";
    pub const MOVE_SOURCE_CHANGE: &str = "change set move source change";
    pub const MOVE_ONE_DESTINATION: &str = "change set move source feeds one destination";
}

/// What an entry does to its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Action {
    Add = 1,
    Edit = 2,
    Delete = 3,
    Keep = 4,
}

impl Action {
    pub const ALL: [Action; 4] = [Action::Add, Action::Edit, Action::Delete, Action::Keep];

    pub const fn byte(self) -> u8 {
        self as u8
    }

    pub fn from_byte(byte: u8) -> Result<Action, FormatError> {
        match byte {
            1 => Ok(Action::Add),
            2 => Ok(Action::Edit),
            3 => Ok(Action::Delete),
            4 => Ok(Action::Keep),
            v => Err(FormatError::InvalidValue {
                what: rule::ACTION,
                value: v.into(),
                reason: "actions are 1 add, 2 edit, 3 delete, 4 keep",
            }),
        }
    }

    /// Whether entries with this action carry a [`FileState`].
    pub const fn carries_state(self) -> bool {
        matches!(self, Action::Add | Action::Edit)
    }

    pub const fn name(self) -> &'static str {
        match self {
            Action::Add => "add",
            Action::Edit => "edit",
            Action::Delete => "delete",
            Action::Keep => "keep",
        }
    }
}

/// A file's executable bit; the only mode Scribe records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(u8)]
pub enum Mode {
    #[default]
    Regular = 0,
    Executable = 1,
}

impl Mode {
    pub const fn byte(self) -> u8 {
        self as u8
    }

    pub fn from_byte(byte: u8) -> Result<Mode, FormatError> {
        match byte {
            0 => Ok(Mode::Regular),
            1 => Ok(Mode::Executable),
            v => Err(FormatError::InvalidValue {
                what: rule::MODE,
                value: v.into(),
                reason: "modes are 0 regular, 1 executable",
            }),
        }
    }
}

/// The state an add or edit gives its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileState {
    pub manifest: ManifestId,
    pub content: FileContentId,
    pub size: u64,
    pub mode: Mode,
}

/// Where an explicitly moved add came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MoveSource {
    pub path: String,
    pub change: u64,
}

/// One entry of a change set.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    pub path: String,
    pub action: Action,
    pub expected_base: u64,
    pub state: Option<FileState>,
    pub moved_from: Option<MoveSource>,
}

impl Entry {
    /// An add of a new path (expected base 0).
    pub fn add(path: impl Into<String>, state: FileState) -> Entry {
        Entry {
            path: path.into(),
            action: Action::Add,
            expected_base: 0,
            state: Some(state),
            moved_from: None,
        }
    }

    /// An edit of a path last changed at `base`.
    pub fn edit(path: impl Into<String>, base: u64, state: FileState) -> Entry {
        Entry {
            path: path.into(),
            action: Action::Edit,
            expected_base: base,
            state: Some(state),
            moved_from: None,
        }
    }

    /// A delete of a path last changed at `base`.
    pub fn delete(path: impl Into<String>, base: u64) -> Entry {
        Entry {
            path: path.into(),
            action: Action::Delete,
            expected_base: base,
            state: None,
            moved_from: None,
        }
    }

    /// A keep of the target's state at `base` (0: the path is absent).
    pub fn keep(path: impl Into<String>, base: u64) -> Entry {
        Entry {
            path: path.into(),
            action: Action::Keep,
            expected_base: base,
            state: None,
            moved_from: None,
        }
    }

    /// This entry as the destination of a move from `source` at `change`.
    pub fn moved_from(mut self, source: impl Into<String>, change: u64) -> Entry {
        self.moved_from = Some(MoveSource {
            path: source.into(),
            change,
        });
        self
    }

    fn encoded_len(&self) -> usize {
        2 + self.path.len()
            + 1
            + 8
            + self.state.map_or(0, |_| FILE_STATE_LEN)
            + 1
            + self.moved_from.as_ref().map_or(0, |m| 2 + m.path.len() + 8)
    }
}

/// An owned change set v1.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ChangeSet {
    pub entries: Vec<Entry>,
}

impl ChangeSet {
    pub fn new(entries: Vec<Entry>) -> ChangeSet {
        ChangeSet { entries }
    }

    /// Whether any entry is a keep. Keeps are legal only in a submission
    /// with a merge parent or a cherry-pick source; acceptance checks that.
    pub fn has_keeps(&self) -> bool {
        self.entries.iter().any(|e| e.action == Action::Keep)
    }

    /// Entries other than keeps: the commit record's entry count.
    pub fn counted_entries(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.action != Action::Keep)
            .count()
    }

    /// The entry for `path`, if any (entries are sorted, so this is a
    /// binary search; meaningful only on a validated change set).
    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.entries
            .binary_search_by(|e| e.path.as_bytes().cmp(path.as_bytes()))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// Check every structural rule (see the module documentation).
    pub fn validate(&self) -> Result<(), FormatError> {
        let refs: Vec<EntryRef<'_>> = self.entries.iter().map(Entry::to_ref).collect();
        validate_entries(&refs)
    }

    /// The canonical payload; refuses a change set that breaks a rule.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        self.validate()?;
        let len = HEADER_LEN + self.entries.iter().map(Entry::encoded_len).sum::<usize>();
        let mut out = Vec::with_capacity(len);
        out.put_u16(VERSION);
        out.put_u32(self.entries.len() as u32);
        for entry in &self.entries {
            out.put_bytes16(entry.path.as_bytes());
            out.put_u8(entry.action.byte());
            out.put_u64(entry.expected_base);
            if let Some(state) = &entry.state {
                out.put_bytes(state.manifest.as_bytes());
                out.put_bytes(state.content.as_bytes());
                out.put_u64(state.size);
                out.put_u8(state.mode.byte());
            }
            match &entry.moved_from {
                None => out.put_u8(0),
                Some(source) => {
                    out.put_u8(1);
                    out.put_bytes16(source.path.as_bytes());
                    out.put_u64(source.change);
                }
            }
        }
        Ok(out)
    }

    /// Decode and validate a payload (see [`ChangeSetRef::decode`]).
    pub fn decode(bytes: &[u8]) -> Result<ChangeSet, FormatError> {
        ChangeSetRef::decode(bytes).map(|set| set.to_change_set())
    }

    /// `blake3("scribe:changeset:v1\0" ‖ payload)`; refuses an invalid set.
    pub fn id(&self) -> Result<ChangeSetId, FormatError> {
        Ok(ChangeSetId::of_payload(&self.encode()?))
    }
}

/// A validated change set borrowed from its payload bytes: paths are
/// `&str` slices of the input, so decoding allocates one small
/// [`EntryRef`] per entry and no strings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeSetRef<'a> {
    bytes: &'a [u8],
    entries: Vec<EntryRef<'a>>,
}

/// One entry of a [`ChangeSetRef`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EntryRef<'a> {
    pub path: &'a str,
    pub action: Action,
    pub expected_base: u64,
    pub state: Option<FileState>,
    pub moved_from: Option<MoveSourceRef<'a>>,
}

/// A borrowed [`MoveSource`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MoveSourceRef<'a> {
    pub path: &'a str,
    pub change: u64,
}

impl Entry {
    /// Borrow as an [`EntryRef`].
    pub fn to_ref(&self) -> EntryRef<'_> {
        EntryRef {
            path: &self.path,
            action: self.action,
            expected_base: self.expected_base,
            state: self.state,
            moved_from: self.moved_from.as_ref().map(|m| MoveSourceRef {
                path: &m.path,
                change: m.change,
            }),
        }
    }
}

impl EntryRef<'_> {
    /// Copy into an owned [`Entry`].
    pub fn to_entry(&self) -> Entry {
        Entry {
            path: self.path.to_owned(),
            action: self.action,
            expected_base: self.expected_base,
            state: self.state,
            moved_from: self.moved_from.map(|m| MoveSource {
                path: m.path.to_owned(),
                change: m.change,
            }),
        }
    }
}

impl<'a> ChangeSetRef<'a> {
    /// Decode and validate a payload.
    ///
    /// The declared entry count is checked against the limit and against
    /// the remaining input (at least [`MIN_ENTRY_LEN`] bytes per entry)
    /// before anything is allocated.
    pub fn decode(bytes: &'a [u8]) -> Result<ChangeSetRef<'a>, FormatError> {
        let mut r = Reader::new(bytes);
        let version = r.u16(rule::VERSION)?;
        if version != VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: rule::VERSION,
                version: version.into(),
            });
        }
        let count = r.u32(rule::ENTRY_COUNT)?;
        if count > MAX_CHANGE_SET_ENTRIES {
            return Err(FormatError::LimitExceeded {
                what: rule::ENTRY_COUNT,
                limit: MAX_CHANGE_SET_ENTRIES.into(),
                actual: count.into(),
            });
        }
        let needed = u64::from(count) * MIN_ENTRY_LEN as u64;
        if needed > r.remaining() as u64 {
            return Err(FormatError::Truncated {
                what: rule::ENTRY_COUNT,
                needed,
                available: r.remaining() as u64,
            });
        }
        // The count is bounded by the input, but an entry is larger in
        // memory than its smallest encoding: grow with what actually parses.
        let mut entries = Vec::with_capacity((count as usize).min(4096));
        for _ in 0..count {
            entries.push(read_entry(&mut r)?);
        }
        r.finish("change set")?;
        validate_entries(&entries)?;
        Ok(ChangeSetRef { bytes, entries })
    }

    /// The entries, ascending by path bytes.
    pub fn entries(&self) -> &[EntryRef<'a>] {
        &self.entries
    }

    /// The payload bytes this view was decoded from.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Whether any entry is a keep (see [`ChangeSet::has_keeps`]).
    pub fn has_keeps(&self) -> bool {
        self.entries.iter().any(|e| e.action == Action::Keep)
    }

    /// The entry for `path`, if any.
    pub fn get(&self, path: &str) -> Option<&EntryRef<'a>> {
        find(&self.entries, path).map(|i| &self.entries[i])
    }

    /// The identity of the payload.
    pub fn id(&self) -> ChangeSetId {
        ChangeSetId::of_payload(self.bytes)
    }

    /// Copy into an owned [`ChangeSet`].
    pub fn to_change_set(&self) -> ChangeSet {
        ChangeSet {
            entries: self.entries.iter().map(EntryRef::to_entry).collect(),
        }
    }
}

fn find(entries: &[EntryRef<'_>], path: &str) -> Option<usize> {
    entries
        .binary_search_by(|e| e.path.as_bytes().cmp(path.as_bytes()))
        .ok()
}

fn validate_entries(entries: &[EntryRef<'_>]) -> Result<(), FormatError> {
    if entries.len() > MAX_CHANGE_SET_ENTRIES as usize {
        return Err(FormatError::LimitExceeded {
            what: rule::ENTRY_COUNT,
            limit: MAX_CHANGE_SET_ENTRIES.into(),
            actual: entries.len() as u64,
        });
    }
    let scribe_key = path::collision_key(".scribe");
    let mut previous: Option<&str> = None;
    for (index, entry) in entries.iter().enumerate() {
        check_entry(index, entry, &scribe_key)?;
        if let Some(prev) = previous {
            if prev.as_bytes() >= entry.path.as_bytes() {
                return Err(FormatError::invalid(
                    rule::ORDER,
                    if prev == entry.path {
                        format!("entry {index}: duplicate path {}", echo(entry.path))
                    } else {
                        format!(
                            "entry {index}: path {} does not sort after {}",
                            echo(entry.path),
                            echo(prev)
                        )
                    },
                ));
            }
        }
        previous = Some(entry.path);
    }
    check_moves(entries)
}

/// Move pairing; runs after the order check, so lookups can bisect.
fn check_moves(entries: &[EntryRef<'_>]) -> Result<(), FormatError> {
    let mut used = HashSet::new();
    for (index, entry) in entries.iter().enumerate() {
        let Some(source) = &entry.moved_from else {
            continue;
        };
        let Some(source_index) = find(entries, source.path) else {
            return Err(FormatError::invalid(
                rule::MOVE_PAIRED_DELETE,
                format!(
                    "entry {index} ({}) moves from {}, which has no entry in the change set",
                    echo(entry.path),
                    echo(source.path)
                ),
            ));
        };
        let paired = &entries[source_index];
        if paired.action != Action::Delete {
            return Err(FormatError::invalid(
                rule::MOVE_PAIRED_DELETE,
                format!(
                    "entry {index} ({}) moves from {}, whose entry is a {}, not a delete",
                    echo(entry.path),
                    echo(source.path),
                    paired.action.name()
                ),
            ));
        }
        if paired.expected_base != source.change {
            return Err(FormatError::invalid(
                rule::MOVE_SOURCE_CHANGE,
                format!(
                    "entry {index} ({}) moves from {} at change {}, but its delete expects base {}",
                    echo(entry.path),
                    echo(source.path),
                    source.change,
                    paired.expected_base
                ),
            ));
        }
        if !used.insert(source_index) {
            return Err(FormatError::invalid(
                rule::MOVE_ONE_DESTINATION,
                format!(
                    "entry {index} ({}) moves from {}, which already feeds another destination",
                    echo(entry.path),
                    echo(source.path)
                ),
            ));
        }
    }
    Ok(())
}

fn read_entry<'a>(r: &mut Reader<'a>) -> Result<EntryRef<'a>, FormatError> {
    let path = r.str16("change set path", MAX_PATH_BYTES)?;
    let action = Action::from_byte(r.u8(rule::ACTION)?)?;
    let expected_base = r.u64("change set expected base")?;
    let state = if action.carries_state() {
        let manifest = ManifestId(r.array("change set manifest id")?);
        let content = FileContentId(r.array("change set file content id")?);
        let size = r.u64(rule::SIZE)?;
        let mode = Mode::from_byte(r.u8(rule::MODE)?)?;
        Some(FileState {
            manifest,
            content,
            size,
            mode,
        })
    } else {
        None
    };
    let moved_from = if r.flag(rule::MOVE_FLAG)? {
        let path = r.str16(rule::MOVE_SOURCE_PATH, MAX_PATH_BYTES)?;
        let change = r.u64("change set move source change")?;
        Some(MoveSourceRef { path, change })
    } else {
        None
    };
    Ok(EntryRef {
        path,
        action,
        expected_base,
        state,
        moved_from,
    })
}

fn check_entry(index: usize, entry: &EntryRef<'_>, scribe_key: &[u8]) -> Result<(), FormatError> {
    let at = || format!("entry {index} ({})", echo(entry.path));
    path::validate(entry.path)
        .map_err(|e| FormatError::invalid(rule::PATH, format!("{}: not canonical: {e}", at())))?;
    let action = entry.action.name();
    match (entry.action.carries_state(), &entry.state) {
        (true, None) => {
            return Err(FormatError::invalid(
                rule::STATE,
                format!("{}: an {action} must carry file state", at()),
            ))
        }
        (false, Some(_)) => {
            return Err(FormatError::invalid(
                rule::STATE,
                format!("{}: a {action} carries no file state", at()),
            ))
        }
        _ => {}
    }
    match entry.action {
        Action::Add if entry.expected_base != 0 => {
            return Err(FormatError::invalid(
                rule::BASE,
                format!(
                    "{}: an add's expected base must be 0, not {}",
                    at(),
                    entry.expected_base
                ),
            ))
        }
        Action::Edit | Action::Delete if entry.expected_base == 0 => {
            return Err(FormatError::invalid(
                rule::BASE,
                format!("{}: a {action}'s expected base must be nonzero", at()),
            ))
        }
        _ => {}
    }
    if let Some(state) = &entry.state {
        let last = entry.path.rsplit('/').next().unwrap_or(entry.path);
        if last.eq_ignore_ascii_case(".scribe") || path::collision_key(last) == scribe_key {
            return Err(FormatError::invalid(
                rule::SCRIBE_NAME,
                format!(
                    "{}: a file may not be named .scribe (the name is always a directory)",
                    at()
                ),
            ));
        }
        if state.size > MAX_FILE_SIZE {
            return Err(FormatError::LimitExceeded {
                what: rule::SIZE,
                limit: MAX_FILE_SIZE,
                actual: state.size,
            });
        }
    }
    if let Some(source) = &entry.moved_from {
        if entry.action != Action::Add {
            return Err(FormatError::invalid(
                rule::MOVE_ON_ADD,
                format!(
                    "{}: a {action} cannot carry a move source; only an add can",
                    at()
                ),
            ));
        }
        path::validate(source.path).map_err(|e| {
            FormatError::invalid(
                rule::MOVE_SOURCE_PATH,
                format!(
                    "{}: move source {} not canonical: {e}",
                    at(),
                    echo(source.path)
                ),
            )
        })?;
        if source.path == entry.path {
            return Err(FormatError::invalid(
                rule::MOVE_SELF,
                format!("{}: moves from itself", at()),
            ));
        }
        if source.change == 0 {
            return Err(FormatError::invalid(
                rule::MOVE_SOURCE_CHANGE,
                format!("{}: the move source change must be nonzero", at()),
            ));
        }
    }
    Ok(())
}
