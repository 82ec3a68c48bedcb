//! Test helper for the SIGKILL crash test: publishes deterministic batches
//! into a store and appends each acknowledged batch number to a file after
//! its commit returns. The test kills this process at random moments.
//!
//! Every third batch is a file import instead: the files of
//! `payloads::import_files(b)` are written to a scratch directory beside
//! the ack file and imported with `import_files` (one publication).
//!
//! Usage: `objects-crash-helper <store dir> <ack file> <first batch>`

use std::io::Write;

use scribe_objects::ObjectStore;

mod payloads;
use payloads::{batch_payloads, import_files, is_import_batch};

fn die(e: impl std::fmt::Display) -> ! {
    eprintln!("Error: {e}");
    std::process::exit(1)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: objects-crash-helper <store dir> <ack file> <first batch>");
        std::process::exit(2);
    }
    let first: u64 = match args[3].parse() {
        Ok(v) => v,
        Err(_) => {
            eprintln!("first batch must be a number");
            std::process::exit(2);
        }
    };
    let store = match ObjectStore::open(&args[1]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("Error: {e}");
            std::process::exit(1);
        }
    };
    let mut ack = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args[2])
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("Error: {e}");
            std::process::exit(1);
        }
    };
    let scratch = std::path::Path::new(&args[2]).with_extension("files");
    if let Err(e) = std::fs::create_dir_all(&scratch) {
        die(e);
    }
    for b in first.. {
        if is_import_batch(b) {
            let mut paths = Vec::new();
            for (i, content) in import_files(b).into_iter().enumerate() {
                let p = scratch.join(format!("f{i}"));
                if let Err(e) = std::fs::write(&p, &content) {
                    die(e);
                }
                paths.push(p);
            }
            if let Err(e) = store.import_files(&paths) {
                die(e);
            }
            if writeln!(ack, "{b}").is_err() {
                std::process::exit(1);
            }
            continue;
        }
        let batch = store.batch();
        for (kind, payload) in batch_payloads(b) {
            if let Err(e) = batch.put(kind, &payload) {
                eprintln!("Error: {e}");
                std::process::exit(1);
            }
        }
        if let Err(e) = batch.commit() {
            eprintln!("Error: {e}");
            std::process::exit(1);
        }
        if writeln!(ack, "{b}").is_err() {
            std::process::exit(1);
        }
    }
}
