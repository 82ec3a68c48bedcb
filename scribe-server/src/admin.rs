//! Offline administration.
