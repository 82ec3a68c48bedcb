mod support;

mod concurrent;
mod embedded;
mod hostile;
mod ops;
mod process;
mod tls;
