//! End-to-end tests of the `scribe` binary.

mod support;

mod crash;
mod daily;
mod debug_path;
mod help;
mod moves;
mod output;
mod quickstart;
mod receipt;
mod restore;
mod transfer;
mod views;
