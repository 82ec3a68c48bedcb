mod support;

mod audit;
mod crash;
mod directory;
mod rows;
mod witness;
