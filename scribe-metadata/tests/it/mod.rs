mod support;

mod accept;
mod crash;
mod doctor;
mod model;
mod root;
mod workspaces;
