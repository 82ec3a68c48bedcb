mod support;

mod auth;
mod concurrent;
mod embedded;
mod get_many;
mod hostile;
mod ops;
mod process;
mod staged;
mod tls;
