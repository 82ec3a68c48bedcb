mod support;

mod admin;
mod audit;
mod crash;
mod directory;
mod rows;
mod service;
mod witness;
