mod auth;
mod migrate;
mod process;
mod tls;
