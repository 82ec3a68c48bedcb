mod support;

mod accept;
mod archive;
mod backup;
mod crash;
mod doctor;
mod journal;
mod model;
mod root;
mod workspaces;
