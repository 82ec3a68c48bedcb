//! The workflows: what each `scribe` command does, as library calls that
//! return typed reports and report progress through the [`Context`].
//!
//! Each takes an [`Opened`] workspace (or a server URL) and, where it talks
//! to the server, the workspace's [`ServerLink`]. Paths are canonical
//! workspace paths; turning a user's arguments into them is the caller's
//! business (`scribe_workspace::open::workspace_path`).
//!
//! [`Context`]: crate::Context
//! [`ServerLink`]: crate::ServerLink

pub mod content;
pub mod files;
pub mod history;
pub mod locks;
pub mod repo;
pub mod stream;
pub mod submit;
pub mod sync;
pub mod view;
pub mod workspace;

use std::path::Path;

use scribe_workspace::{Workspace, WorkspaceMeta};

use crate::error::Result;
use crate::link::ServerLink;
use crate::Context;

/// An open workspace with its binding.
pub struct Opened {
    pub ws: Workspace,
    pub meta: WorkspaceMeta,
}

impl Opened {
    /// The workspace at or above `dir`, opened for writing (its lock held).
    pub fn find(dir: &Path) -> Result<Opened> {
        let root = Workspace::find(dir)?;
        let ws = Workspace::open(&root)?;
        let meta = ws.meta()?;
        Ok(Opened { ws, meta })
    }

    /// The workspace at or above `dir`, opened for reading.
    pub fn find_for_reading(dir: &Path) -> Result<Opened> {
        let root = Workspace::find(dir)?;
        let ws = Workspace::open_for_reading(&root)?;
        let meta = ws.meta()?;
        Ok(Opened { ws, meta })
    }

    /// A connection to this workspace's server, refused when the server's
    /// repository of this workspace's name is another repository (another
    /// id: [`crate::link::check_repository`]).
    pub fn connect(&self, ctx: &Context) -> Result<crate::client::Client> {
        let mut c = crate::link::connect(&self.meta.server, false, ctx)?;
        crate::link::check_repository(
            &mut c,
            &self.meta.repository_name,
            self.meta.repository_id,
            &self.meta.server,
        )?;
        Ok(c)
    }

    /// The link to this workspace's server.
    pub fn link(&self, ctx: &Context) -> Result<ServerLink> {
        Ok(
            ServerLink::new(&self.ws, &self.meta.server, &self.meta.repository_name, ctx)?
                .with_repository_id(self.meta.repository_id),
        )
    }
}
