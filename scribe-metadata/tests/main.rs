//! The one integration test binary of scribe-metadata.

mod main {
    mod accept;
    pub mod common;
    mod crash;
    mod doctor;
    mod model;
    mod root;
    mod workspaces;
}
