mod support;

mod concurrent;
mod credential;
mod embedded;
mod get_many;
mod hostile;
mod ops;
mod staged;
mod tls;
mod workflow;
