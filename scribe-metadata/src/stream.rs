//! TODO

use crate::error::Result;
use crate::repo::Repository;

impl Repository {
    /// Remove an unaccepted streamed preparation (startup and `recover-submissions`).
    pub fn recover_submissions(&self) -> Result<()> {
        Ok(())
    }
}
