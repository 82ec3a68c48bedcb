mod support;

mod concurrent;
mod embedded;
mod get_many;
mod hostile;
mod migrate;
mod ops;
mod process;
mod staged;
mod tls;
