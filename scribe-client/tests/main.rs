//! End-to-end tests of the `scribe` binary.

mod support;

mod crash;
mod daily;
mod debug_path;
mod help;
mod quickstart;
mod transfer;
mod views;
