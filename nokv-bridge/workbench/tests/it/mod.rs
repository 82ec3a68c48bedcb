mod cli;
mod codec;
mod facade;
mod lifecycle;
mod people;
mod support;
mod tools;
