mod cli;
mod codec;
mod facade;
mod lifecycle;
mod people;
mod query;
mod support;
mod tools;
