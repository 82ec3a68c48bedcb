//! Views: the `view` meta value and the `view-change` transition record.

use scribe_format::bytes::{Put, Reader};
use scribe_format::limits::{MAX_PATH_BYTES, MAX_VIEW_PREFIXES};
use scribe_format::FormatError;

use super::check_count;

/// Longest view profile name.
const MAX_PROFILE_NAME: usize = 64;

/// `u16 count ‖ (str16)*`, as `view` and `tags` are stored.
pub fn encode_str16_list(items: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    out.put_u16(items.len() as u16);
    for item in items {
        out.put_bytes16(item.as_bytes());
    }
    out
}

/// Decode a `u16 count ‖ (str16)*` list of at most `max_items` items of at
/// most `max_len` bytes each.
pub fn decode_str16_list(
    bytes: &[u8],
    max_items: usize,
    max_len: usize,
) -> Result<Vec<String>, FormatError> {
    let mut r = Reader::new(bytes);
    let items = read_list(&mut r, max_items, max_len)?;
    r.finish("str16 list")?;
    Ok(items)
}

fn read_list(
    r: &mut Reader<'_>,
    max_items: usize,
    max_len: usize,
) -> Result<Vec<String>, FormatError> {
    let count = r.u16("list count")?;
    if usize::from(count) > max_items {
        return Err(FormatError::LimitExceeded {
            what: "list count",
            limit: max_items as u64,
            actual: count.into(),
        });
    }
    check_count("list", count.into(), r.remaining(), 2)?;
    (0..count)
        .map(|_| r.str16("list item", max_len).map(str::to_string))
        .collect()
}

/// Validate, sort, deduplicate and strip redundant child inclusions from a
/// view selection. An empty result selects the entire repository.
pub fn normalize_view(prefixes: &[String]) -> Result<Vec<String>, FormatError> {
    let mut sorted: Vec<String> = Vec::with_capacity(prefixes.len());
    for p in prefixes {
        let p = p.trim_end_matches('/');
        scribe_format::path::validate(p)?;
        sorted.push(p.to_string());
    }
    sorted.sort();
    sorted.dedup();
    let mut out: Vec<String> = Vec::with_capacity(sorted.len());
    for p in sorted {
        // Sorted order puts "a" before "a/b"; a child of the last kept
        // prefix is redundant. ("a-b" sorts between "a" and "a/b", so
        // compare against every kept ancestor candidate, not only the last.)
        let redundant = out
            .iter()
            .rev()
            .take_while(|kept| p.as_bytes() >= kept.as_bytes())
            .any(|kept| {
                p.starts_with(kept.as_str()) && p.as_bytes().get(kept.len()) == Some(&b'/')
            });
        if !redundant {
            out.push(p);
        }
    }
    if out.len() > MAX_VIEW_PREFIXES {
        return Err(FormatError::LimitExceeded {
            what: "view prefixes",
            limit: MAX_VIEW_PREFIXES as u64,
            actual: out.len() as u64,
        });
    }
    Ok(out)
}

/// `view-change`: a view transition committed before planning.
///
/// ```text
/// u8 1 ‖ u64 pinned target change ‖ [16] repository incarnation
/// ‖ str16 profile name (empty = none; ≤ 64 bytes) ‖ u16 inclusion count ‖ str16 prefix × count
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewChange {
    pub target_change: u64,
    pub incarnation: [u8; 16],
    pub profile: String,
    /// Normalized prefixes (see [`normalize_view`]).
    pub prefixes: Vec<String>,
}

impl ViewChange {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_u8(1);
        out.put_u64(self.target_change);
        out.put_bytes(&self.incarnation);
        out.put_bytes16(self.profile.as_bytes());
        out.extend_from_slice(&encode_str16_list(&self.prefixes));
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(bytes);
        let version = r.u8("view-change version")?;
        if version != 1 {
            return Err(FormatError::UnsupportedVersion {
                what: "view-change",
                version: version.into(),
            });
        }
        let target_change = r.u64("view-change target")?;
        let incarnation = r.array("view-change incarnation")?;
        let profile = r
            .str16("view-change profile", MAX_PROFILE_NAME)?
            .to_string();
        let prefixes = read_list(&mut r, MAX_VIEW_PREFIXES, MAX_PATH_BYTES)?;
        r.finish("view-change")?;
        if normalize_view(&prefixes)? != prefixes {
            return Err(FormatError::invalid(
                "view-change prefixes",
                "not a normalized selection (sorted, unique, no redundant children)",
            ));
        }
        Ok(ViewChange {
            target_change,
            incarnation,
            profile,
            prefixes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn normalize_sorts_dedups_and_strips_children() {
        assert_eq!(
            normalize_view(&s(&["b", "a/b/c", "a", "a-b", "a/", "b/x"])).unwrap(),
            s(&["a", "a-b", "b"])
        );
        assert_eq!(
            normalize_view(&s(&["art/x", "artwork"])).unwrap(),
            s(&["art/x", "artwork"])
        );
        assert!(normalize_view(&s(&["../x"])).is_err());
        assert!(normalize_view(&s(&[""])).is_err());
        assert!(normalize_view(&[]).unwrap().is_empty());
    }

    #[test]
    fn view_change_round_trip_and_refusals() {
        let vc = ViewChange {
            target_change: 42,
            incarnation: [7; 16],
            profile: "artists".into(),
            prefixes: s(&["art", "levels/one"]),
        };
        let b = vc.encode();
        let mut want = vec![1];
        want.extend_from_slice(&42u64.to_le_bytes());
        want.extend_from_slice(&[7; 16]);
        want.extend_from_slice(&7u16.to_le_bytes());
        want.extend_from_slice(b"artists");
        want.extend_from_slice(&2u16.to_le_bytes());
        want.extend_from_slice(&3u16.to_le_bytes());
        want.extend_from_slice(b"art");
        want.extend_from_slice(&10u16.to_le_bytes());
        want.extend_from_slice(b"levels/one");
        assert_eq!(b, want);
        assert_eq!(ViewChange::decode(&b).unwrap(), vc);
        for cut in 0..b.len() {
            assert!(ViewChange::decode(&b[..cut]).is_err());
        }
        let mut long = b.clone();
        long.push(0);
        assert!(ViewChange::decode(&long).is_err());
        let unsorted = ViewChange {
            prefixes: s(&["b", "a"]),
            ..vc
        };
        assert!(ViewChange::decode(&unsorted.encode()).is_err());
    }
}
