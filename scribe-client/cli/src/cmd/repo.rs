//! `scribe repo create|list`.

use scribe_client::workflow::repo;

use crate::ctx::Ctx;
use crate::error::CliResult;
use crate::ui::{utc, Json};

pub fn create(ctx: &Ctx, name: &str, server: &str) -> CliResult {
    super::workspace::check_url(server)?;
    let r = repo::create(&ctx.lib, server, name)?;
    ctx.out.line(&r.name)?;
    ctx.out
        .status(format!("created repository {} ({})", r.name, r.id.to_hex()));
    Ok(())
}

pub fn list(ctx: &Ctx, server: &str) -> CliResult {
    super::workspace::check_url(server)?;
    let repos = repo::list(&ctx.lib, server)?;
    if ctx.out.json {
        return ctx.out.json(&Json::Arr(
            repos
                .iter()
                .map(|r| {
                    Json::obj(vec![
                        ("name", Json::str(&r.name)),
                        ("id", Json::str(r.id.to_hex())),
                        ("head", Json::Num(r.head)),
                        ("created_ms", Json::Num(r.created_ms)),
                    ])
                })
                .collect(),
        ));
    }
    for r in &repos {
        ctx.out.line(format_args!(
            "{:<24} head {:<6} created {}",
            r.name,
            r.head,
            utc(r.created_ms)
        ))?;
    }
    Ok(())
}
