//! The one integration test binary of scribe-objects (modules under
//! `it/`).

mod it;
