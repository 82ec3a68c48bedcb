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
/// without `--yes`, only report what would happen and return `None`). A
/// data root with tier state is refused: its bucket holds objects of the
/// repository that nothing would collect.
pub fn delete(
    data: &Path,
    name: &str,
    opts: &DeleteOptions,
    admin: Option<&AdminCredential>,
) -> Result<Deletion, AdminError> {
    let root = open_without_stores(data)?;
    let id = root.repository_id(name).map_err(meta(name))?;
    let tier = data.join("tier").join("tier.redb");
    if tier.exists() {
        return Err(refused(
            ErrorCode::Refused,
            format!(
                "{} has S3 tier state ({}): the bucket holds objects of repository {} that \
                 deleting it would leave for nothing to collect; deleting a repository of a \
                 tiered data root is not supported (docs/deploy.md#renaming-and-deleting-a-repository)",
                data.display(),
                tier.display(),
                echo(name)
            ),
        ));
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
    match opts.confirm.as_deref() {
        Some(c) if c == name || c.eq_ignore_ascii_case(&id.to_hex()) => {}
        Some(c) => {
            return Err(refused(
                ErrorCode::Usage,
                format!(
                "--confirm {} is neither the repository's name nor its id {id}; nothing deleted",
                echo(c)
            ),
            ))
        }
        None => {
            return Err(refused(
                ErrorCode::Usage,
                format!(
                    "--yes needs --confirm with the repository's name or its id {id} typed again; \
                     nothing deleted"
                ),
            ))
        }
    }
    let mut report = Report::default();
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
    Ok(Deletion {
        report,
        moved_to,
        deleted: true,
    })
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
