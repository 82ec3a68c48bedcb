mod auth;
mod migrate;
mod poisoned;
mod process;
mod recovery;
mod repair;
mod tls;
