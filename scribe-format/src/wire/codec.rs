//! The field codec shared by every wire message.
//!
//! Integers are little endian; `String` is `str16`; [`Text`] is `str32`
//! (at most 1 MiB); [`Bytes`] is `bytes32`; `Vec<T>` is a `u32` count then
//! the items, the count checked against the remaining frame bytes before
//! anything is allocated; `Option<T>` is a strict `u8` 0/1 then the value;
//! `bool` is a strict `u8` 0/1.

use crate::bytes::{Put, Reader};
use crate::error::FormatError;
use crate::id::{
    BranchId, ChangeSetId, ChunkId, CommitId, FileContentId, ManifestId, ObjectId, OperationId,
    RepositoryId, WorkspaceId,
};

/// Largest [`Text`] field.
pub const MAX_TEXT_BYTES: usize = 1 << 20;

/// A value with a wire encoding.
pub trait Wire: Sized {
    fn put(&self, out: &mut Vec<u8>);
    fn get(r: &mut Reader<'_>) -> Result<Self, FormatError>;
    /// The fewest bytes an encoded value takes (bounds `Vec` counts).
    const MIN_LEN: usize;
    /// Whether the value fits its encoding: a string, text, byte field or
    /// list longer than its length prefix (or the decoder's bound) allows
    /// is refused here, by field, rather than cut short by `put` or
    /// refused by the peer as malformed. Senders check before encoding
    /// ([`crate::wire::Request::check`]).
    fn check(&self) -> Result<(), FormatError> {
        Ok(())
    }
}

/// The generic names [`Wire::check`] gives a field; a struct replaces
/// them by its own `Struct.field`.
const GENERIC_FIELDS: [&str; 4] = ["str16", "str32", "bytes32", "list count"];

/// `e` naming `field` when it names only a generic field.
#[doc(hidden)]
pub fn in_field(e: FormatError, field: &'static str) -> FormatError {
    match e {
        FormatError::LimitExceeded {
            what,
            limit,
            actual,
        } if GENERIC_FIELDS.contains(&what) => FormatError::LimitExceeded {
            what: field,
            limit,
            actual,
        },
        other => other,
    }
}

fn within(what: &'static str, len: usize, limit: usize) -> Result<(), FormatError> {
    if len > limit {
        return Err(FormatError::LimitExceeded {
            what,
            limit: limit as u64,
            actual: len as u64,
        });
    }
    Ok(())
}

impl Wire for u8 {
    const MIN_LEN: usize = 1;
    fn put(&self, out: &mut Vec<u8>) {
        out.put_u8(*self)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, FormatError> {
        r.u8("u8")
    }
}

impl Wire for u16 {
    const MIN_LEN: usize = 2;
    fn put(&self, out: &mut Vec<u8>) {
        out.put_u16(*self)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, FormatError> {
        r.u16("u16")
    }
}

impl Wire for u32 {
    const MIN_LEN: usize = 4;
    fn put(&self, out: &mut Vec<u8>) {
        out.put_u32(*self)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, FormatError> {
        r.u32("u32")
    }
}

impl Wire for u64 {
    const MIN_LEN: usize = 8;
    fn put(&self, out: &mut Vec<u8>) {
        out.put_u64(*self)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, FormatError> {
        r.u64("u64")
    }
}

impl Wire for bool {
    const MIN_LEN: usize = 1;
    fn put(&self, out: &mut Vec<u8>) {
        out.put_u8((*self).into())
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, FormatError> {
        r.flag("bool")
    }
}

impl Wire for String {
    const MIN_LEN: usize = 2;
    fn put(&self, out: &mut Vec<u8>) {
        let bytes = self.as_bytes();
        // Senders refuse a longer one by name (`check`); should one reach
        // here anyway it is cut at a character boundary rather than
        // producing a malformed frame.
        let mut end = bytes.len().min(usize::from(u16::MAX));
        while !self.is_char_boundary(end) {
            end -= 1;
        }
        out.put_bytes16(&bytes[..end]);
    }
    fn check(&self) -> Result<(), FormatError> {
        within("str16", self.len(), usize::from(u16::MAX))
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, FormatError> {
        Ok(r.str16("str16", usize::from(u16::MAX))?.to_string())
    }
}

/// A `str32` text field (commit messages, details) of at most 1 MiB.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Text(pub String);

impl Wire for Text {
    const MIN_LEN: usize = 4;
    fn put(&self, out: &mut Vec<u8>) {
        out.put_bytes32(self.0.as_bytes())
    }
    fn check(&self) -> Result<(), FormatError> {
        within("str32", self.0.len(), MAX_TEXT_BYTES)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, FormatError> {
        Ok(Text(r.str32("str32", MAX_TEXT_BYTES)?.to_string()))
    }
}

/// A `bytes32` field; its length is bounded by the frame.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bytes({} bytes)", self.0.len())
    }
}

impl Wire for Bytes {
    const MIN_LEN: usize = 4;
    fn put(&self, out: &mut Vec<u8>) {
        out.put_bytes32(&self.0)
    }
    fn check(&self) -> Result<(), FormatError> {
        within("bytes32", self.0.len(), u32::MAX as usize)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, FormatError> {
        let len = r.u32("bytes32")? as usize;
        Ok(Bytes(r.take(len, "bytes32")?.to_vec()))
    }
}

impl<T: Wire> Wire for Vec<T> {
    const MIN_LEN: usize = 4;
    fn put(&self, out: &mut Vec<u8>) {
        out.put_u32(self.len() as u32);
        for item in self {
            item.put(out);
        }
    }
    fn check(&self) -> Result<(), FormatError> {
        within("list count", self.len(), u32::MAX as usize)?;
        self.iter().try_for_each(Wire::check)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, FormatError> {
        let count = r.u32("list count")? as usize;
        if count.saturating_mul(T::MIN_LEN.max(1)) > r.remaining() {
            return Err(FormatError::Truncated {
                what: "list",
                needed: count.saturating_mul(T::MIN_LEN.max(1)) as u64,
                available: r.remaining() as u64,
            });
        }
        (0..count).map(|_| T::get(r)).collect()
    }
}

impl<T: Wire> Wire for Option<T> {
    const MIN_LEN: usize = 1;
    fn put(&self, out: &mut Vec<u8>) {
        match self {
            None => out.put_u8(0),
            Some(v) => {
                out.put_u8(1);
                v.put(out);
            }
        }
    }
    fn check(&self) -> Result<(), FormatError> {
        self.as_ref().map_or(Ok(()), Wire::check)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, FormatError> {
        if r.flag("option present")? {
            Ok(Some(T::get(r)?))
        } else {
            Ok(None)
        }
    }
}

impl<const N: usize> Wire for [u8; N] {
    const MIN_LEN: usize = N;
    fn put(&self, out: &mut Vec<u8>) {
        out.put_bytes(self)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, FormatError> {
        r.array("fixed bytes")
    }
}

macro_rules! wire_id {
    ($($ty:ident),*) => {$(
        impl Wire for $ty {
            const MIN_LEN: usize = $ty::LEN;
            fn put(&self, out: &mut Vec<u8>) {
                out.put_bytes(&self.0)
            }
            fn get(r: &mut Reader<'_>) -> Result<Self, FormatError> {
                Ok($ty(r.array(stringify!($ty))?))
            }
        }
    )*};
}

wire_id!(
    RepositoryId,
    BranchId,
    WorkspaceId,
    OperationId,
    ChunkId,
    FileContentId,
    ManifestId,
    ChangeSetId,
    CommitId
);

impl Wire for ObjectId {
    const MIN_LEN: usize = ObjectId::LEN;
    fn put(&self, out: &mut Vec<u8>) {
        out.put_bytes(&self.to_bytes())
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, FormatError> {
        ObjectId::from_bytes(r.take(ObjectId::LEN, "object id")?)
    }
}

/// Define a struct whose wire encoding is its fields in order.
macro_rules! wire_struct {
    ($(#[$m:meta])* pub struct $name:ident { $( $(#[$fm:meta])* pub $field:ident : $ty:ty ),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $name { $( $(#[$fm])* pub $field: $ty ),* }

        impl $crate::wire::codec::Wire for $name {
            const MIN_LEN: usize = 0 $( + <$ty as $crate::wire::codec::Wire>::MIN_LEN )*;
            #[allow(unused_variables)]
            fn put(&self, out: &mut Vec<u8>) {
                $( $crate::wire::codec::Wire::put(&self.$field, out); )*
            }
            #[allow(unused_variables)]
            fn get(r: &mut $crate::bytes::Reader<'_>) -> Result<Self, $crate::error::FormatError> {
                Ok($name { $( $field: $crate::wire::codec::Wire::get(r)? ),* })
            }
            fn check(&self) -> Result<(), $crate::error::FormatError> {
                $( $crate::wire::codec::Wire::check(&self.$field).map_err(|e| {
                    $crate::wire::codec::in_field(e, concat!(stringify!($name), ".", stringify!($field)))
                })?; )*
                Ok(())
            }
        }
    };
}
pub(crate) use wire_struct;

/// Encode a value alone.
pub fn to_bytes<T: Wire>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    value.put(&mut out);
    out
}

/// Decode a value that must fill `bytes` exactly.
pub fn from_bytes<T: Wire>(bytes: &[u8], what: &'static str) -> Result<T, FormatError> {
    let mut r = Reader::new(bytes);
    let v = T::get(&mut r)?;
    r.finish(what)?;
    Ok(v)
}
