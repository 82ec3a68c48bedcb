//! Offline repository administration: `scribe-server repo rename` and
//! `scribe-server repo delete` (docs/deploy.md#renaming-and-deleting-a-repository).
//!
//! Both need the data root to themselves (its `LOCK`, as every offline
//! command: refused while it is served). On a data root bound to an auth
//! service (`auth-init`), the repository's grants and visibility, which
//! the auth service keys by repository *name*, change first, through an
//! administrator's credential (`repository-rename` / `repository-forget`):
//! a failure there changes nothing here, and a failure after it leaves a
//! repository nobody but administrators may use until the command is run
//! again (it fails closed, never open).

use std::path::{Path, PathBuf};

use scribe_format::echo::echo;
use scribe_format::{ErrorCode, RepositoryId};
use scribe_metadata::MetadataError;

use crate::admin::{open_without_stores, AdminError, Report};
use crate::team::{requires_auth, sau2::Sau2Client, AuthFiles};

#[cfg(feature = "tier")]
pub use tiered::TierProvider;
#[cfg(feature = "tier")]
use tiered::{bucket_plan, collect_root, open_tier, prepare, resume, roots_being_deleted};
#[cfg(not(feature = "tier"))]
pub use untiered::TierProvider;
#[cfg(not(feature = "tier"))]
use untiered::{bucket_plan, collect_root, open_tier, prepare, resume, roots_being_deleted};

/// An administrator's credential for the auth service: certificate chain
/// and PKCS#8 private key, PEM.
pub type AdminCredential = (String, String);

/// What `repo delete` is asked.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// `--yes`: delete (without it, only say what would happen).
    pub yes: bool,
    /// `--confirm`: the repository's name or id typed again.
    pub confirm: Option<String>,
}

fn refused(code: ErrorCode, message: impl Into<String>) -> AdminError {
    AdminError::Refused {
        code,
        message: message.into(),
    }
}

fn meta(name: &str) -> impl Fn(MetadataError) -> AdminError + '_ {
    move |source| match source.code() {
        ErrorCode::NotFound => AdminError::NoRepository(name.to_owned()),
        code @ (ErrorCode::AlreadyExists | ErrorCode::Malformed | ErrorCode::Usage) => {
            refused(code, source.to_string())
        }
        _ => AdminError::Metadata {
            repo: name.to_owned(),
            source,
        },
    }
}

/// The auth client for a bound data root (`None` when not bound), with the
/// administrator's credential; refused without one.
fn auth_client(
    data: &Path,
    admin: Option<&AdminCredential>,
    what: &str,
) -> Result<Option<(Sau2Client, String)>, AdminError> {
    if !requires_auth(data).map_err(|e| AdminError::Team(e.to_string()))? {
        return Ok(None);
    }
    let files = AuthFiles::load(data).map_err(|e| AdminError::Team(e.to_string()))?;
    let Some((cert, key)) = admin else {
        return Err(refused(
            ErrorCode::Unauthenticated,
            format!(
                "{} is bound to the auth service at {} (namespace {}), which keys grants and \
                 visibility by repository name: {what} changes them there too and needs an \
                 administrator's credential (sign in with `scribe login --admin`, or give \
                 --credential or SCRIBE_CREDENTIAL)",
                data.display(),
                files.settings.auth,
                files.settings.namespace
            ),
        ));
    };
    let client = Sau2Client::new(&files.settings.auth, &files.access_ca_pem, (cert, key))
        .map_err(|e| AdminError::Team(e.0))?;
    Ok(Some((client, files.settings.namespace)))
}

fn auth_call(
    client: &Sau2Client,
    verb: &str,
    args: Vec<String>,
) -> Result<Vec<String>, AdminError> {
    let rows = client
        .rows(verb, args)
        .map_err(|f| refused(f.code, f.message))?;
    rows.into_iter()
        .next()
        .ok_or_else(|| AdminError::Team(format!("{verb}: one row expected")))
}

/// Rename repository `old` to `new`: its grants and visibility on the auth
/// service (when bound), then the catalog and the repository's descriptor.
/// The id, history, workspaces' registrations and object store stay.
pub fn rename(
    data: &Path,
    old: &str,
    new: &str,
    reuse_name: bool,
    admin: Option<&AdminCredential>,
) -> Result<(RepositoryId, Report), AdminError> {
    let root = open_without_stores(data)?;
    let id = root.repository_id(old).map_err(meta(old))?;
    if !scribe_format::limits::is_repository_name(new) {
        return Err(refused(
            ErrorCode::Malformed,
            format!(
                "repository name {} must be 1..=128 bytes without `/`, `\\` or control characters",
                echo(new)
            ),
        ));
    }
    if root.repository_id(new).is_ok() {
        return Err(refused(
            ErrorCode::AlreadyExists,
            format!("repository {} exists", echo(new)),
        ));
    }
    // A name another repository had: refused before the auth service is
    // asked (the catalog's own check below would come after it).
    if !reuse_name {
        root.check_name_reusable(new, Some(id), "repo rename")
            .map_err(meta(new))?;
    }
    let mut report = Report::default();
    if let Some((client, namespace)) = auth_client(data, admin, "a rename")? {
        let row = auth_call(
            &client,
            "repository-rename",
            vec![namespace.clone(), old.to_owned(), new.to_owned()],
        )?;
        report.notes.push(format!(
            "auth: {} grant(s){} of {namespace}/{} moved to {namespace}/{}",
            row.get(3).map(String::as_str).unwrap_or("?"),
            if row.get(4).map(String::as_str) == Some("true") {
                " and the visibility"
            } else {
                ""
            },
            echo(old),
            echo(new)
        ));
    }
    root.rename_repository(old, new, reuse_name)
        .map_err(meta(old))?;
    report.notes.push(format!(
        "renamed repository {} to {} (id {id}); a workspace of it follows with `scribe workspace \
         set-server URL` (its server's URL, as `scribe info` shows it)",
        echo(old),
        echo(new)
    ));
    Ok((id, report))
}

/// What `repo delete` did.
#[derive(Debug)]
pub struct Deletion {
    /// What was (or, without `--yes`, would be) done.
    pub report: Report,
    /// With `--yes`: where `repos/<id>/` went (`None` when an interrupted
    /// earlier run had moved it). Without: `None`.
    pub moved_to: Option<PathBuf>,
    pub deleted: bool,
}

/// Delete repository `name` (with `--yes` and a matching `--confirm`;
/// without `--yes`, only report what would happen).
///
/// On a data root with tier state (`tier/tier.redb`) the bucket is named
/// by `provider` (`--tier`; refused without it) and the repository's
/// whole history in the bucket goes too (nokv-bridge `root_delete.rs`):
/// a publication that had started is finished first (its blocks may be
/// in the bucket), changes never uploaded are dropped, the tier record
/// marks the root before the local directory moves, and then every
/// reference the repository held is released and its revisions
/// collected, its index records and recovery journal deleted, a deletion
/// record left for restores. Killed anywhere, the same command finishes
/// it (after the move, the repository is found by its mark in the tier
/// record, by name or id). `pause` is the binary's fault-injection hook
/// (`repo-delete-moved`: after the local move, before the bucket).
pub fn delete(
    data: &Path,
    name: &str,
    opts: &DeleteOptions,
    admin: Option<&AdminCredential>,
    provider: Option<TierProvider>,
    pause: &dyn Fn(&str),
) -> Result<Deletion, AdminError> {
    let root = open_without_stores(data)?;
    let tier = open_tier(data, &root, name, provider)?;
    let id = match root.repository_id(name) {
        Ok(id) => id,
        Err(e) if e.code() == ErrorCode::NotFound => {
            // A deletion killed after its local move: the tier record's
            // mark names it (by name or id).
            let marked = match &tier {
                Some(t) => roots_being_deleted(data, t)?
                    .into_iter()
                    .find(|(r, n)| n == name || hex::encode(r).eq_ignore_ascii_case(name)),
                None => None,
            };
            return match (marked, &tier) {
                (Some((r, n)), Some(t)) => resume(data, t, RepositoryId(r), &n, opts),
                _ => Err(meta(name)(e)),
            };
        }
        Err(e) => return Err(meta(name)(e)),
    };
    if let Some(t) = &tier {
        let earlier = roots_being_deleted(data, t)?
            .into_iter()
            .find(|(r, n)| n == name && *r != id.0);
        if let Some((r, _)) = earlier {
            let r = hex::encode(r);
            return Err(refused(
                ErrorCode::Refused,
                format!(
                    "the deletion of an earlier repository named {} (id {r}) has not finished; \
                     finish it first: `scribe-server repo delete --data {} {r} --yes --confirm {r} \
                     --tier ...`; nothing deleted",
                    echo(name),
                    data.display()
                ),
            ));
        }
    }
    let dir = data.join("repos").join(id.to_hex());
    let mut plan = Report::default();
    plan.notes.push(format!(
        "repository {} (id {id}): {} ({} byte(s)) would move to {}/<id>-<unix ms>/; its catalog \
         entry{} would go",
        echo(name),
        dir.display(),
        dir_bytes(&dir),
        data.join(scribe_metadata::root::DELETED_DIR).display(),
        if requires_auth(data).unwrap_or(false) {
            ", grants and visibility"
        } else {
            ""
        }
    ));
    if let Some(t) = &tier {
        plan.notes.push(bucket_plan(data, t, &root, id, name)?);
    }
    if !opts.yes {
        plan.notes.push(format!(
            "nothing deleted: run again with --yes --confirm {id} (or --confirm {})",
            echo(name)
        ));
        return Ok(Deletion {
            report: plan,
            moved_to: None,
            deleted: false,
        });
    }
    confirmed(opts, name, id)?;
    let mut report = Report::default();
    if let Some(t) = &tier {
        prepare(data, t, &root, id, name, &mut report)?;
    }
    if let Some((client, namespace)) = auth_client(data, admin, "a deletion")? {
        let row = auth_call(
            &client,
            "repository-forget",
            vec![namespace.clone(), name.to_owned()],
        )?;
        report.notes.push(format!(
            "auth: {} grant(s){} of {namespace}/{} removed",
            row.get(2).map(String::as_str).unwrap_or("?"),
            if row.get(3).map(String::as_str) == Some("true") {
                " and the visibility"
            } else {
                ""
            },
            echo(name)
        ));
    }
    let (id, moved_to) = root.delete_repository(name).map_err(meta(name))?;
    report.notes.push(match &moved_to {
        Some(p) => format!(
            "deleted repository {} (id {id}): its data is in {} until you remove it",
            echo(name),
            p.display()
        ),
        None => format!(
            "deleted repository {} (id {id}): its data had been moved by an earlier run (see {})",
            echo(name),
            data.join(scribe_metadata::root::DELETED_DIR).display()
        ),
    });
    pause("repo-delete-moved");
    if let Some(t) = &tier {
        collect_root(data, t, id, name, &mut report)?;
    }
    Ok(Deletion {
        report,
        moved_to,
        deleted: true,
    })
}

pub(crate) fn confirmed(
    opts: &DeleteOptions,
    name: &str,
    id: RepositoryId,
) -> Result<(), AdminError> {
    match opts.confirm.as_deref() {
        Some(c) if c == name || c.eq_ignore_ascii_case(&id.to_hex()) => Ok(()),
        Some(c) => Err(refused(
            ErrorCode::Usage,
            format!(
                "--confirm {} is neither the repository's name nor its id {id}; nothing deleted",
                echo(c)
            ),
        )),
        None => Err(refused(
            ErrorCode::Usage,
            format!(
                "--yes needs --confirm with the repository's name or its id {id} typed again; \
                 nothing deleted"
            ),
        )),
    }
}

/// The bucket's part of a deletion (`src/tier.rs`, nokv-bridge
/// `root_delete.rs`).
#[cfg(feature = "tier")]
mod tiered {
    use std::path::Path;
    use std::sync::Arc;

    use nokv_bridge::tier::Provider;
    pub(super) use nokv_bridge::tier::Tier;
    use scribe_format::echo::echo;
    use scribe_format::{ErrorCode, RepositoryId};

    use super::{meta, refused, DeleteOptions, Deletion};
    use crate::admin::{AdminError, Report};
    use crate::tier::tier_admin_err;

    /// The bucket `repo delete --tier` names.
    pub type TierProvider = Arc<dyn Provider>;

    pub(super) fn roots_being_deleted(
        data: &Path,
        t: &Tier,
    ) -> Result<Vec<([u8; 16], String)>, AdminError> {
        t.roots_being_deleted().map_err(|e| tier_admin_err(data, e))
    }

    /// Before the local move: a publication that had started is finished
    /// (its blocks are in the bucket under a revision the record does not
    /// hold yet; finished, the collection knows them; the rest of the
    /// backlog was never uploaded and goes with the repository), then the
    /// tier record marks the root.
    pub(super) fn prepare(
        data: &Path,
        t: &Tier,
        root: &scribe_metadata::DataRoot,
        id: RepositoryId,
        name: &str,
        report: &mut Report,
    ) -> Result<(), AdminError> {
        if let Some(change) = crate::tier::finish_started_publication(data, t, root, id, name)? {
            report.notes.push(format!(
                "tier: finished the started publication of change {change} (its blocks were \
                 in the bucket), to collect it with the rest"
            ));
        }
        t.mark_root_deleted(&id.0, name)
            .map_err(|e| tier_admin_err(data, e))
    }

    /// The tier record of a data root with tier state, opened on `provider`
    /// (`--tier`); `None` without tier state; refused when there is state and
    /// no bucket was named.
    pub(super) fn open_tier(
        data: &Path,
        root: &scribe_metadata::DataRoot,
        name: &str,
        provider: Option<TierProvider>,
    ) -> Result<Option<Tier>, AdminError> {
        let path = crate::tier::dir(data).join("tier.redb");
        if !path.exists() {
            return Ok(None);
        }
        let Some(provider) = provider else {
            return Err(refused(
                ErrorCode::Usage,
                format!(
                    "{} has S3 tier state ({}): the bucket holds repository {}'s history, which a \
                     deletion gives up too; name the bucket as `serve` does (--tier \
                     s3://BUCKET[/PREFIX] --tier-endpoint URL, keys in AWS_ACCESS_KEY_ID and \
                     AWS_SECRET_ACCESS_KEY); nothing deleted",
                    data.display(),
                    path.display(),
                    echo(name)
                ),
            ));
        };
        crate::tier::open_record(data, root.incarnation(), provider)
            .map(Some)
            .map_err(|e| tier_admin_err(data, e))
    }

    /// What the bucket's part of a deletion would do.
    pub(super) fn bucket_plan(
        data: &Path,
        t: &Tier,
        root: &scribe_metadata::DataRoot,
        id: RepositoryId,
        name: &str,
    ) -> Result<String, AdminError> {
        let revs: Vec<_> = t
            .revisions()
            .map_err(|e| tier_admin_err(data, e))?
            .into_values()
            .filter(|r| r.root == id.0 && r.state != nokv_bridge::tier::Lifecycle::Deleted)
            .collect();
        let through = t
            .uploaded_through(&id.0)
            .map_err(|e| tier_admin_err(data, e))?;
        // A run killed between the directory's move and the catalog's
        // transaction left the catalog naming a repository whose
        // directory is aside: no head to compare with (and nothing can
        // have been published since).
        let head = if data.join("repos").join(id.to_hex()).is_dir() {
            root.open_repository(id)
                .and_then(|r| r.head())
                .map_err(meta(name))?
        } else {
            through
        };
        Ok(format!(
            "tier: its {} revision(s) ({} byte(s)) in the bucket would be collected (chunks \
             the local store gave back to the bucket are destroyed with them), its index \
             records and recovery journal deleted, a deletion record left for `restore \
             --from-tier`{}",
            revs.len(),
            revs.iter().map(|r| r.bytes).sum::<u64>(),
            if head > through {
                format!(
                    "; changes {}..={head}, not in the bucket yet, would be dropped",
                    through + 1
                )
            } else {
                String::new()
            }
        ))
    }

    /// The bucket's part (after the local move): collect the root and report.
    pub(super) fn collect_root(
        data: &Path,
        t: &Tier,
        id: RepositoryId,
        name: &str,
        report: &mut Report,
    ) -> Result<(), AdminError> {
        // The repository is gone here: an error now must say so and how
        // to finish, not only what failed.
        // Its journals shipped before a restore are under the shards of
        // the roots this one was restored from.
        let earlier = crate::tier::restored_from_shards(data, t.provider()).map_err(|e| {
            refused(
                ErrorCode::TierUnavailable,
                format!(
                    "repository {} (id {id}) is deleted here, but its history in the bucket is \
                     not given up yet: the roots this one was restored from: {e}; run \
                     `scribe-server repo delete --data {} {id} --yes --confirm {id} --tier ...` \
                     again to finish it",
                    echo(name),
                    data.display()
                ),
            )
        })?;
        let d = t.finish_root_deletion(&id.0, &earlier).map_err(|e| {
            let code = match &e {
                nokv_bridge::tier::TierError::Provider(p) if p.is_retryable() => {
                    ErrorCode::TierUnavailable
                }
                _ => ErrorCode::Refused,
            };
            refused(
                code,
                format!(
                    "repository {} (id {id}) is deleted here, but its history in the bucket is \
                     not given up yet: {}; nothing is lost: run `scribe-server repo delete \
                     --data {} {id} --yes --confirm {id} --tier ...` again once the bucket \
                     answers to finish it",
                    echo(name),
                    tier_admin_err(data, e),
                    data.display()
                ),
            )
        })?;
        report.notes.push(format!(
            "tier: {} reference(s) released, {} early upload(s) given up; gc: {} revision(s) \
             claimed, {} deleted ({} block(s)); {} index and journal object(s) deleted",
            d.released,
            d.staged,
            d.collected.claimed,
            d.collected.deleted,
            d.collected.blocks_deleted,
            d.metadata_deleted
        ));
        for u in &d.unfinished {
            report.problems.push(format!(
                "{} (id {id}): {u}; run the same `repo delete` again to finish the bucket's part",
                echo(name)
            ));
        }
        Ok(())
    }

    /// A deletion killed after its local move: the bucket's part.
    pub(super) fn resume(
        data: &Path,
        t: &Tier,
        id: RepositoryId,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deletion, AdminError> {
        if !opts.yes {
            let mut report = Report::default();
            report.notes.push(format!(
                "repository {} (id {id}) was deleted here, but the deletion of its history in the \
                 bucket has not finished; run again with --yes --confirm {id} to finish it",
                echo(name)
            ));
            return Ok(Deletion {
                report,
                moved_to: None,
                deleted: false,
            });
        }
        super::confirmed(opts, name, id)?;
        let mut report = Report::default();
        report.notes.push(format!(
            "repository {} (id {id}): its local data had been moved by an earlier run (see {}); \
             finishing its deletion in the bucket",
            echo(name),
            data.join(scribe_metadata::root::DELETED_DIR).display()
        ));
        collect_root(data, t, id, name, &mut report)?;
        Ok(Deletion {
            report,
            moved_to: None,
            deleted: true,
        })
    }
}

/// Without the tier feature: a data root with tier state is refused.
#[cfg(not(feature = "tier"))]
mod untiered {
    use std::path::Path;

    use scribe_format::echo::echo;
    use scribe_format::{ErrorCode, RepositoryId};

    use super::{refused, DeleteOptions, Deletion};
    use crate::admin::{AdminError, Report};

    /// This build has no tier: never a value.
    pub enum Tier {}
    /// This build has no tier: never a value.
    pub enum TierProvider {}

    pub(super) fn open_tier(
        data: &Path,
        _root: &scribe_metadata::DataRoot,
        name: &str,
        _provider: Option<TierProvider>,
    ) -> Result<Option<Tier>, AdminError> {
        let path = data.join("tier").join("tier.redb");
        if !path.exists() {
            return Ok(None);
        }
        Err(refused(
            ErrorCode::Refused,
            format!(
                "{} has S3 tier state ({}): deleting repository {} gives its history in the \
                 bucket up too, which this build (without the `tier` feature) cannot do; use \
                 the `scribe-server` binary",
                data.display(),
                path.display(),
                echo(name)
            ),
        ))
    }

    pub(super) fn roots_being_deleted(
        _: &Path,
        t: &Tier,
    ) -> Result<Vec<([u8; 16], String)>, AdminError> {
        match *t {}
    }

    pub(super) fn prepare(
        _: &Path,
        t: &Tier,
        _: &scribe_metadata::DataRoot,
        _: RepositoryId,
        _: &str,
        _: &mut Report,
    ) -> Result<(), AdminError> {
        match *t {}
    }

    pub(super) fn bucket_plan(
        _: &Path,
        t: &Tier,
        _: &scribe_metadata::DataRoot,
        _: RepositoryId,
        _: &str,
    ) -> Result<String, AdminError> {
        match *t {}
    }

    pub(super) fn collect_root(
        _: &Path,
        t: &Tier,
        _: RepositoryId,
        _: &str,
        _: &mut Report,
    ) -> Result<(), AdminError> {
        match *t {}
    }

    pub(super) fn resume(
        _: &Path,
        t: &Tier,
        _: RepositoryId,
        _: &str,
        _: &DeleteOptions,
    ) -> Result<Deletion, AdminError> {
        match *t {}
    }
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// Retire repository `name` (kept, read-only: every write is refused with
/// `repository_retired`, naming `contact`), or with `retire` false bring
/// it back. Offline, as rename: the serving process reads retirements when
/// it opens the data root.
pub fn set_retired(
    data: &Path,
    name: &str,
    retire: bool,
    contact: &str,
) -> Result<Report, AdminError> {
    let root = open_without_stores(data)?;
    let (id, changed) = root
        .set_retired(name, retire, contact)
        .map_err(meta(name))?;
    let mut report = Report::default();
    report.notes.push(match (retire, changed) {
        (true, _) => format!(
            "retired repository {} (id {id}): kept read-only; writes are refused naming {}",
            echo(name),
            if contact.is_empty() {
                "the server's operator".to_owned()
            } else {
                echo(contact).to_string()
            }
        ),
        (false, true) => format!("repository {} (id {id}) is writable again", echo(name)),
        (false, false) => format!(
            "repository {} (id {id}) was not retired; nothing changed",
            echo(name)
        ),
    });
    Ok(report)
}
