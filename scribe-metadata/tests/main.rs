//! The one integration test binary of scribe-metadata.

mod main {
    pub mod common;
    mod accept;
    mod crash;
    mod doctor;
    mod model;
    mod root;
}
