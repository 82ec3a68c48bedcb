//! Repositories: create and list.

use scribe_format::wire::message as m;

use crate::error::Result;
use crate::link::connect;
use crate::Context;

/// Create repository `name` on `server` (a path `server` gets a new data
/// root if it holds none).
pub fn create(ctx: &Context, server: &str, name: &str) -> Result<m::RepoInfo> {
    Ok(connect(server, true, ctx)?.repo_create(name)?)
}

/// Every repository of `server`.
pub fn list(ctx: &Context, server: &str) -> Result<Vec<m::RepoInfo>> {
    Ok(connect(server, false, ctx)?.repo_list()?)
}
