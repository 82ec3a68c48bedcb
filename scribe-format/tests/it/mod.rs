mod support;

mod changeset;
mod checkpoint;
mod commit;
mod descriptor;
mod envelope;
mod manifest;
mod path;
mod portable;
mod recovery;
mod recovery_base;
mod sau2;
mod scmx;
mod snapshot;
mod wire;
