mod support;

mod accept;
mod archive;
mod backup;
mod combine;
mod consolidate;
mod crash;
mod doctor;
mod footprint;
mod journal;
mod migration;
mod model;
mod reclaim;
mod root;
mod workspaces;
