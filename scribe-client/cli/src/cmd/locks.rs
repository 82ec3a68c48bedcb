//! `scribe lock|unlock|locks`: server-enforced file locks.

use scribe_client::workflow::locks;
use scribe_format::ErrorCode;

use crate::ctx::{self, Ctx};
use crate::error::{CliError, CliResult};
use crate::ui::{utc, Json};

pub fn lock(ctx: &Ctx, args: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    if paths.iter().any(|p| p.is_empty()) {
        return Err(CliError::new(
            ErrorCode::Usage,
            "name files to lock, not the workspace root",
        ));
    }
    // #18 item 9: a path this workspace neither tracks nor has opened for
    // add is not locked (it would hold a name nothing carries).
    let unknown: Vec<String> = {
        let read = o.ws.read()?;
        let mut out = Vec::new();
        for p in &paths {
            if read.baseline(p)?.is_none() && read.opened(p)?.is_none() {
                out.push(p.clone());
            }
        }
        out
    };
    if !unknown.is_empty() {
        return Err(CliError::new(
            ErrorCode::NotFound,
            format!("{} path(s) are not files of this workspace", unknown.len()),
        )
        .paths(unknown)
        .hint(
            "lock files that are synced here or opened for add (`scribe status`, `scribe add`)",
        ));
    }
    for l in locks::lock(&ctx.lib, &o, paths)? {
        ctx.out.line(format_args!("locked {}", l.path))?;
    }
    Ok(())
}

pub fn unlock(ctx: &Ctx, args: Vec<String>, force: bool) -> CliResult {
    let o = ctx::open(ctx)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    if force {
        let me = o.meta.workspace_id;
        let released = locks::unlock_force(&ctx.lib, &o, paths).map_err(|e| {
            let code = e.code();
            let err = CliError::from(e);
            if code == ErrorCode::Forbidden {
                err.hint("breaking another user's lock needs the maintainer or admin role on the repository")
            } else {
                err
            }
        })?;
        for l in released {
            if l.workspace == me {
                ctx.out.line(format_args!("unlocked {}", l.path))?;
            } else {
                ctx.out.line(format_args!(
                    "unlocked {} (held by {}, workspace {})",
                    l.path,
                    l.author,
                    l.workspace.to_hex()
                ))?;
            }
        }
        return Ok(());
    }
    let released = locks::unlock(&ctx.lib, &o, paths.clone()).map_err(|e| {
        let code = e.code();
        let err = CliError::from(e);
        if code == ErrorCode::LockedByOther {
            err.hint(
                "`scribe locks` shows who holds it; ask them to unlock, or (maintainers and \
                 administrators) break it with `scribe unlock --force PATH`",
            )
        } else {
            err
        }
    })?;
    for l in &released.released {
        ctx.out.line(format_args!("unlocked {}", l.path))?;
    }
    for b in &released.forgotten {
        let how = match &b.held_by {
            Some(_) => "; that lock was not touched",
            None => "",
        };
        ctx.out.line(format_args!(
            "forgot your broken lock on {} ({}{how})",
            b.path,
            super::files::broken_now(b)
        ))?;
    }
    // A path that held no lock of this workspace is said, not passed over
    // as if it had been unlocked.
    let mut none = locks::not_released(&paths, &released.released);
    none.retain(|p| !released.forgotten.iter().any(|b| b.path == *p));
    if !none.is_empty() {
        return Err(locks::not_locked(none).into());
    }
    Ok(())
}

pub fn locks(ctx: &Ctx) -> CliResult {
    let o = ctx::open_for_reading(ctx)?;
    let all = locks::list(&ctx.lib, &o)?;
    // Locks taken here that someone broke: the listing no longer shows
    // them as this workspace's. With --json they are entries of their own
    // (`state: "broken"`, after the server's locks, which are `"held"`),
    // so a script reading the array sees them without parsing stderr.
    let broken = locks::broken(&o, &all)?;
    if ctx.out.json {
        let held = all.iter().map(|l| {
            Json::obj(vec![
                ("path", Json::str(&l.path)),
                ("owner", Json::str(&l.author)),
                ("workspace", Json::str(l.workspace.to_hex())),
                ("mine", Json::Bool(l.workspace == o.meta.workspace_id)),
                ("acquired_ms", Json::Num(l.acquired_ms)),
                ("generation", Json::Num(l.generation)),
                ("state", Json::str("held")),
                ("held_by", Json::Null),
            ])
        });
        let lost = broken.iter().map(|b| {
            Json::obj(vec![
                ("path", Json::str(&b.path)),
                ("owner", Json::str(&o.meta.author)),
                ("workspace", Json::str(o.meta.workspace_id.to_hex())),
                ("mine", Json::Bool(false)),
                ("acquired_ms", Json::Null),
                ("generation", Json::Num(b.generation)),
                ("state", Json::str("broken")),
                (
                    "held_by",
                    b.held_by.as_deref().map_or(Json::Null, Json::str),
                ),
            ])
        });
        return ctx.out.json(&Json::Arr(held.chain(lost).collect()));
    }
    for b in &broken {
        ctx.out.line(format!(
            "Your lock on {} was broken by another workspace ({}): `scribe lock {}` takes it \
             again once it is released; `scribe unlock {}` forgets it",
            b.path,
            super::files::broken_now(b),
            b.path,
            b.path
        ))?;
    }
    if all.is_empty() && broken.is_empty() {
        ctx.out.line("No locks")?;
    }
    for l in &all {
        ctx.out.line(format_args!(
            "{}  {}  workspace {}{}  {}",
            l.path,
            l.author,
            &l.workspace.to_hex()[..12],
            if l.workspace == o.meta.workspace_id {
                " (this one)"
            } else {
                ""
            },
            utc(l.acquired_ms)
        ))?;
    }
    Ok(())
}
