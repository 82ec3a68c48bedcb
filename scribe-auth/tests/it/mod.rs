mod support;

mod audit;
mod crash;
mod directory;
mod rows;
mod service;
mod witness;
