//! `pending` rows: a submission recorded durably before the first request
//! carrying its operation id, replayed with the same id after a crash.

use scribe_format::bytes::{Put, Reader};
use scribe_format::limits::{MAX_AUTHOR_BYTES, MAX_MESSAGE_BYTES, MAX_PATH_BYTES};
use scribe_format::{BranchId, ChangeSetId, FormatError};

use super::{check_count, Fingerprint};

/// The largest change set payload a pending record may carry: 4,000,000
/// entries of the largest possible size would exceed memory anyway; we bound
/// it by what `bytes32` can carry.
const MAX_PAYLOAD: usize = u32::MAX as usize;

/// A merge or cherry-pick being submitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Integration {
    /// 1 merge, 2 cherry-pick.
    pub kind: u8,
    pub source_branch: BranchId,
    pub source_head: u64,
    pub target_head: u64,
    pub base_branch: BranchId,
    pub base: u64,
}

/// A lock the submitter held when the submission was frozen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingLock {
    pub path: String,
    pub generation: u64,
}

/// ```text
/// u8 2 ‖ [16] incarnation ‖ [16] branch id ‖ u8 integration kind (0 none, 1 merge, 2 cherry-pick)
/// ‖ ([16] source branch ‖ u64 source head ‖ u64 target head ‖ [16] base branch ‖ u64 base)?
/// ‖ [32] change set id ‖ bytes32 change set payload ‖ str16 author ‖ str32 message
/// ‖ u8 keep locks ‖ u32 lock count ‖ (str16 path ‖ u64 generation)*
/// ‖ u64 created ms ‖ u32 n ‖ (str16 path ‖ fingerprint 28 bytes)*
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingSubmit {
    pub incarnation: [u8; 16],
    pub branch: BranchId,
    pub integration: Option<Integration>,
    pub change_set_id: ChangeSetId,
    pub change_set: Vec<u8>,
    pub author: String,
    pub message: String,
    pub keep_locks: bool,
    pub locks: Vec<PendingLock>,
    pub created_ms: u64,
    /// The fingerprint of each submitted file when it was frozen, so that
    /// finalization can tell whether the user edited it meanwhile.
    pub fingerprints: Vec<(String, Fingerprint)>,
}

impl PendingSubmit {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128 + self.change_set.len() + self.message.len());
        out.put_u8(2);
        out.put_bytes(&self.incarnation);
        out.put_bytes(&self.branch.0);
        match &self.integration {
            None => out.put_u8(0),
            Some(i) => {
                out.put_u8(i.kind);
                out.put_bytes(&i.source_branch.0);
                out.put_u64(i.source_head);
                out.put_u64(i.target_head);
                out.put_bytes(&i.base_branch.0);
                out.put_u64(i.base);
            }
        }
        out.put_bytes(&self.change_set_id.0);
        out.put_bytes32(&self.change_set);
        out.put_bytes16(self.author.as_bytes());
        out.put_bytes32(self.message.as_bytes());
        out.put_u8(self.keep_locks.into());
        out.put_u32(self.locks.len() as u32);
        for lock in &self.locks {
            out.put_bytes16(lock.path.as_bytes());
            out.put_u64(lock.generation);
        }
        out.put_u64(self.created_ms);
        out.put_u32(self.fingerprints.len() as u32);
        for (path, fp) in &self.fingerprints {
            out.put_bytes16(path.as_bytes());
            fp.write(&mut out);
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(bytes);
        let version = r.u8("pending version")?;
        if version != 2 {
            return Err(FormatError::UnsupportedVersion {
                what: "pending submit",
                version: version.into(),
            });
        }
        let incarnation = r.array("pending incarnation")?;
        let branch = BranchId(r.array("pending branch")?);
        let integration = match r.u8("pending integration kind")? {
            0 => None,
            kind @ (1 | 2) => Some(Integration {
                kind,
                source_branch: BranchId(r.array("pending source branch")?),
                source_head: r.u64("pending source head")?,
                target_head: r.u64("pending target head")?,
                base_branch: BranchId(r.array("pending base branch")?),
                base: r.u64("pending base")?,
            }),
            v => {
                return Err(FormatError::InvalidValue {
                    what: "pending integration kind",
                    value: v.into(),
                    reason: "kinds are 0 none, 1 merge, 2 cherry-pick",
                })
            }
        };
        let change_set_id = ChangeSetId(r.array("pending change set id")?);
        let change_set = r.bytes32("pending change set", MAX_PAYLOAD)?.to_vec();
        if ChangeSetId::of_payload(&change_set) != change_set_id {
            return Err(FormatError::IdentityMismatch {
                what: "pending change set",
                expected: change_set_id.to_hex(),
                actual: ChangeSetId::of_payload(&change_set).to_hex(),
            });
        }
        let author = r.str16("pending author", MAX_AUTHOR_BYTES)?.to_string();
        let message = r.str32("pending message", MAX_MESSAGE_BYTES)?.to_string();
        let keep_locks = r.flag("pending keep locks")?;
        let lock_count = r.u32("pending lock count")?;
        check_count("pending locks", lock_count.into(), r.remaining(), 10)?;
        let mut locks = Vec::with_capacity(lock_count as usize);
        for _ in 0..lock_count {
            let path = r.str16("pending lock path", MAX_PATH_BYTES)?.to_string();
            let generation = r.u64("pending lock generation")?;
            locks.push(PendingLock { path, generation });
        }
        let created_ms = r.u64("pending created ms")?;
        let n = r.u32("pending fingerprint count")?;
        check_count(
            "pending fingerprints",
            n.into(),
            r.remaining(),
            2 + Fingerprint::LEN,
        )?;
        let mut fingerprints = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let path = r
                .str16("pending fingerprint path", MAX_PATH_BYTES)?
                .to_string();
            fingerprints.push((path, Fingerprint::read(&mut r)?));
        }
        r.finish("pending submit")?;
        Ok(PendingSubmit {
            incarnation,
            branch,
            integration,
            change_set_id,
            change_set,
            author,
            message,
            keep_locks,
            locks,
            created_ms,
            fingerprints,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(integration: bool) -> PendingSubmit {
        let payload = b"change set bytes".to_vec();
        PendingSubmit {
            incarnation: [1; 16],
            branch: BranchId([2; 16]),
            integration: integration.then_some(Integration {
                kind: 1,
                source_branch: BranchId([3; 16]),
                source_head: 4,
                target_head: 5,
                base_branch: BranchId([6; 16]),
                base: 7,
            }),
            change_set_id: ChangeSetId::of_payload(&payload),
            change_set: payload,
            author: "ada".into(),
            message: "Hero model, pass 3".into(),
            keep_locks: true,
            locks: vec![PendingLock {
                path: "art/hero.fbx".into(),
                generation: 11,
            }],
            created_ms: 12,
            fingerprints: vec![(
                "art/hero.fbx".into(),
                Fingerprint {
                    size: 1,
                    mtime_s: 2,
                    mtime_ns: 3,
                    recorded_ms: 4,
                    changed: None,
                },
            )],
        }
    }

    #[test]
    fn round_trips_and_refuses_damage() {
        for s in [sample(false), sample(true)] {
            let b = s.encode();
            assert_eq!(PendingSubmit::decode(&b).unwrap(), s);
            for cut in 0..b.len() {
                assert!(PendingSubmit::decode(&b[..cut]).is_err(), "cut {cut}");
            }
            let mut long = b.clone();
            long.push(0);
            assert!(PendingSubmit::decode(&long).is_err());
        }
    }

    #[test]
    fn prefix_layout_is_exact() {
        let b = sample(false).encode();
        assert_eq!(b[0], 2);
        assert_eq!(&b[1..17], &[1; 16]);
        assert_eq!(&b[17..33], &[2; 16]);
        assert_eq!(b[33], 0);
        assert_eq!(&b[34..66], &sample(false).change_set_id.0);
        assert_eq!(&b[66..70], &16u32.to_le_bytes());
    }

    #[test]
    fn refuses_a_payload_that_is_not_its_id() {
        let mut s = sample(false);
        s.change_set_id = ChangeSetId([0; 32]);
        assert!(matches!(
            PendingSubmit::decode(&s.encode()),
            Err(FormatError::IdentityMismatch { .. })
        ));
    }

    #[test]
    fn refuses_unknown_integration_and_version() {
        let mut b = sample(false).encode();
        b[33] = 3;
        assert!(PendingSubmit::decode(&b).is_err());
        let mut b = sample(false).encode();
        b[0] = 1;
        assert!(PendingSubmit::decode(&b).is_err());
    }

    #[test]
    fn hostile_counts_do_not_allocate() {
        let mut s = sample(false);
        s.locks.clear();
        s.fingerprints.clear();
        let mut b = s.encode();
        // lock count sits 16 bytes from the end: u32 locks, u64 created, u32 n
        let at = b.len() - 16;
        b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            PendingSubmit::decode(&b),
            Err(FormatError::Truncated { .. })
        ));
    }
}
