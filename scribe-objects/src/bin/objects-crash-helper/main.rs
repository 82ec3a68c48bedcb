//! Test helper for the SIGKILL crash test: publishes deterministic batches
//! into a store and appends each acknowledged batch number to a file after
//! its commit returns. The test kills this process at random moments.
//!
//! Usage: `objects-crash-helper <store dir> <ack file> <first batch>`

use std::io::Write;

use scribe_objects::ObjectStore;

mod payloads;
use payloads::batch_payloads;

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
    for b in first.. {
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
