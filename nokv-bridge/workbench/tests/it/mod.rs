mod cli;
mod codec;
mod facade;
mod support;
mod tools;
