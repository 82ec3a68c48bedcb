mod env;
mod workspace;

scribe_testkit::server_process_entry!();
