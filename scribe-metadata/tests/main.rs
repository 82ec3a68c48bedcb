//! The one integration test binary of scribe-metadata (modules under
//! `it/`).

mod it;
