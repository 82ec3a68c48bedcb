mod support;

mod compact;
mod content_index;
mod corruption;
mod crash;
mod crash_payloads;
mod import;
mod rebuild;
mod recovery;
mod sink;
mod store;
