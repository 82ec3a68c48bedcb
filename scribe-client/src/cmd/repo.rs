//! `scribe repo create|list`.

use crate::ctx::Ctx;
use crate::error::CliResult;
use crate::out::{utc, Json};
use crate::remote::connect;

pub fn create(ctx: &Ctx, name: &str, server: &str) -> CliResult {
    let mut c = connect(server, true)?;
    let r = c.repo_create(name)?;
    println!("{}", r.name);
    ctx.out
        .status(format!("created repository {} ({})", r.name, r.id.to_hex()));
    Ok(())
}

pub fn list(ctx: &Ctx, server: &str) -> CliResult {
    let mut c = connect(server, false)?;
    let repos = c.repo_list()?;
    if ctx.out.json {
        println!(
            "{}",
            Json::Arr(
                repos
                    .iter()
                    .map(|r| Json::obj(vec![
                        ("name", Json::str(&r.name)),
                        ("id", Json::str(r.id.to_hex())),
                        ("head", Json::Num(r.head)),
                        ("created_ms", Json::Num(r.created_ms)),
                    ]))
                    .collect()
            )
        );
        return Ok(());
    }
    for r in &repos {
        println!(
            "{:<24} head {:<6} created {}",
            r.name,
            r.head,
            utc(r.created_ms)
        );
    }
    Ok(())
}
