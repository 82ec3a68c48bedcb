mod auth;
mod migrate;
mod poisoned;
mod process;
mod tls;
