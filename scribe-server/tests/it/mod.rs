mod support;

mod process;
mod tls;
