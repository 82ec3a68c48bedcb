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
    for l in locks::lock(&ctx.lib, &o, paths)? {
        ctx.out.line(format_args!("locked {}", l.path))?;
    }
    Ok(())
}

pub fn unlock(ctx: &Ctx, args: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    for l in locks::unlock(&ctx.lib, &o, paths)? {
        ctx.out.line(format_args!("unlocked {}", l.path))?;
    }
    Ok(())
}

pub fn locks(ctx: &Ctx) -> CliResult {
    let o = ctx::open(ctx)?;
    let all = locks::list(&ctx.lib, &o)?;
    if ctx.out.json {
        return ctx.out.json(&Json::Arr(
            all.iter()
                .map(|l| {
                    Json::obj(vec![
                        ("path", Json::str(&l.path)),
                        ("owner", Json::str(&l.author)),
                        ("workspace", Json::str(l.workspace.to_hex())),
                        ("mine", Json::Bool(l.workspace == o.meta.workspace_id)),
                        ("acquired_ms", Json::Num(l.acquired_ms)),
                        ("generation", Json::Num(l.generation)),
                    ])
                })
                .collect(),
        ));
    }
    if all.is_empty() {
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
