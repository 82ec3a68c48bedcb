mod support;

mod concurrent;
mod credential;
mod embedded;
mod get_many;
mod hostile;
mod hostile_server;
mod limits;
mod ops;
mod staged;
mod tls;
mod trust;
mod workflow;

// The server process of `Transport::Process`: this test binary, run again.
scribe_testkit::server_process_entry!();
