mod support;

mod auth;
mod process;
mod tls;
