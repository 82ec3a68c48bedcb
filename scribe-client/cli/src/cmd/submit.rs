//! `scribe submit`: the workflow is `scribe_client::workflow::submit`.

use scribe_client::workflow::submit::{self, SubmitArgs, Submitted};
use scribe_format::ErrorCode;

use crate::ctx::{self, Ctx};
use crate::error::{CliError, CliResult};
use crate::ui::{size, Json};

pub fn run(ctx: &Ctx, message: Option<String>, keep_locks: bool, paths: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let link = o.link(&ctx.lib)?;
    let (pending, opened) = {
        let read = o.ws.read()?;
        (!read.pending_all()?.is_empty(), read.any_opened()?)
    };
    let message = message.unwrap_or_default();
    if !pending && !opened {
        // Nothing to submit says so, message or not (it used to ask for
        // a message first, as if that were what was missing).
        let err = CliError::new(ErrorCode::EmptySubmission, "nothing is opened");
        // Files changed without `add`/`edit`/`delete` (saved over, exported
        // new) are what the artist meant to submit: the hint names them and
        // the command that opens them. A status walk, on this path only.
        let changed: Vec<String> = scribe_workspace::open::status(&o.ws)
            .map(|s| s.unopened.iter().map(|c| c.path().to_string()).collect())
            .unwrap_or_default();
        if changed.is_empty() {
            return Err(err);
        }
        let shown: Vec<&str> = changed.iter().take(3).map(String::as_str).collect();
        return Err(err.hint(format!(
            "{} file(s) changed here but not opened ({}{}): `scribe reconcile` opens them \
             (`scribe status` lists them), or open some with `scribe add`, `scribe edit` or \
             `scribe delete`",
            changed.len(),
            shown.join(", "),
            if changed.len() > shown.len() {
                ", ..."
            } else {
                ""
            }
        )));
    }
    if !pending && message.trim().is_empty() {
        return Err(CliError::new(ErrorCode::Usage, "a submit needs a message")
            .hint("scribe submit -m \"what changed\""));
    }
    let paths = ctx::paths(ctx, &o.ws, &paths)?;
    // Files others added under a directory this submit moves away stay
    // where they are: said once the moves are submitted.
    let newcomers = scribe_workspace::moves::newcomers(&o.ws)?;
    let s = submit::submit(
        &o,
        &link,
        SubmitArgs {
            message,
            keep_locks,
            paths,
        },
    )?;
    print(ctx, &s)?;
    let still: Vec<_> = scribe_workspace::moves::pending(&o.ws)?
        .into_iter()
        .map(|i| i.operation)
        .collect();
    for (i, found) in newcomers {
        if !still.contains(&i.operation) {
            ctx.out.status(format!(
                "Note: {} file(s) added under {} by others after you moved it stay there \
                 (the move carried only your files): {}{}",
                found.len(),
                i.source,
                found.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
                if found.len() > 5 { ", ..." } else { "" }
            ));
        }
    }
    // The cache is bounded: past its bound, what the server now holds is
    // dropped (never failing the submit that already succeeded).
    drop(link);
    match scribe_client::workflow::workspace::prune_cache_if_over(&ctx.lib, &o) {
        Ok(Some(p)) => ctx.out.status(crate::cmd::workspace::pruned_line(&p)),
        Ok(None) => {}
        Err(e) => ctx.out.status(format!("workspace cache not pruned: {e}")),
    }
    Ok(())
}

pub fn print(ctx: &Ctx, s: &Submitted) -> CliResult {
    if ctx.out.json {
        ctx.out.json(&Json::obj(vec![
            ("change", Json::Num(s.change)),
            ("files", Json::Num(s.files as u64)),
            ("uploaded_objects", Json::Num(s.uploaded_objects as u64)),
            ("uploaded_bytes", Json::Num(s.uploaded_bytes)),
        ]))?;
    } else {
        ctx.out.line(format_args!("change {}", s.change))?;
    }
    ctx.out.status(format!(
        "submitted change {}: {} file(s), uploaded {} object(s) ({}) in {:.2} s",
        s.change,
        s.files,
        s.uploaded_objects,
        size(s.uploaded_bytes),
        s.secs
    ));
    Ok(())
}
