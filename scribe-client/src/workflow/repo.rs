//! Repositories: create and list.

use scribe_format::wire::message as m;

use scribe_format::ErrorCode;

use crate::error::{Error, Result};
use crate::link::connect;
use crate::Context;

/// Create repository `name` on `server` (a path `server` gets a new data
/// root if it holds none).
/// A name no server would take is refused here, before anything is
/// created (`usage`).
pub fn create(ctx: &Context, server: &str, name: &str) -> Result<m::RepoInfo> {
    if !scribe_format::limits::is_repository_name(name) {
        return Err(Error::new(
            ErrorCode::Usage,
            format!(
                "repository name {} must be 1..=128 bytes without `/`, `\\` or control characters",
                scribe_format::echo::echo(name)
            ),
        ));
    }
    Ok(connect(server, true, ctx)?.repo_create(name)?)
}

/// Every repository of `server`.
pub fn list(ctx: &Context, server: &str) -> Result<Vec<m::RepoInfo>> {
    Ok(connect(server, false, ctx)?.repo_list()?)
}
