mod support;

mod admin;
mod auth;
mod cache;
mod crash;
mod daily;
mod daily_use;
mod dead_server;
mod debug_path;
mod echoes;
mod full_disk;
mod help;
mod hints;
mod moves;
mod output;
mod quickstart;
mod read_only;
mod receipt;
mod restore;
mod state_damage;
mod symlinks;
mod team;
mod transfer;
mod views;

// The server process of `Transport::Process`: this test binary, run again.
scribe_testkit::server_process_entry!();
