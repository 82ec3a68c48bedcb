mod auth;
mod migrate;
mod poisoned;
mod process;
mod repair;
mod team;
mod tier;
mod tls;
