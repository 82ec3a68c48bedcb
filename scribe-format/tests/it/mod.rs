mod support;

mod changeset;
mod commit;
mod descriptor;
mod envelope;
mod manifest;
mod path;
mod portable;
mod recovery;
mod scmx;
mod sau2;
mod snapshot;
mod wire;
