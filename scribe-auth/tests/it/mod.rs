mod support;

mod admin;
mod audit;
mod crash;
mod directory;
mod rows;
mod servers;
mod service;
mod witness;
