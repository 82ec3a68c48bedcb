mod support;

mod embedded;
mod hostile;
mod ops;
mod process;
mod tls;
