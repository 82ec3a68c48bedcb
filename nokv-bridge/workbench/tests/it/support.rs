//! A Workbench over a fresh Scribe data root (scribe-testkit's `Env`).

use nokv_workbench::scribe::ScribeStore;
use nokv_workbench::Workbench;
use scribe_client::{Client, ClientOptions};
use scribe_testkit::env::{Env, Transport, REPO};
use serde_json::Value;

pub fn client(env: &Env) -> Client {
    match env.transport() {
        Transport::InProcess => Client::in_process(env.service().clone()),
        _ => scribe_client::connect(env.url(), &ClientOptions::default()).expect("connect"),
    }
}

pub fn workbench(env: &Env) -> Workbench<ScribeStore> {
    let store = ScribeStore::over(client(env), REPO, "bot").expect("open the agent root");
    Workbench::new(store, "bot").with_clock(|| 1_700_000_000_000)
}

/// The successful result of a call.
pub fn ok(wb: &mut Workbench<ScribeStore>, tool: &str, input: Value) -> Value {
    wb.call(tool, &input)
        .unwrap_or_else(|e| panic!("{tool} {input}: {e}"))
}

/// The error code of a failing call.
pub fn err(wb: &mut Workbench<ScribeStore>, tool: &str, input: Value) -> nokv_workbench::WbError {
    match wb.call(tool, &input) {
        Ok(v) => panic!("{tool} {input} succeeded: {v}"),
        Err(e) => e,
    }
}
