//! Test modules.

mod provider;
mod proxy;
mod rgw;
mod tier;
