//! Tool names, strict inputs, schemas and the commit identity.

use nokv_workbench::identity::{canonical_json, commit_identity, manifest_digest_uri};
use nokv_workbench::tools::{parse, schema, TOOLS};
use serde_json::{json, Value};

const NAMES: [&str; 18] = [
    "workbench_create",
    "workbench_put_file",
    "workbench_append",
    "workbench_edit",
    "workbench_list",
    "workbench_stat",
    "workbench_read",
    "workbench_grep",
    "workbench_search",
    "workbench_aggregate",
    "workbench_catalog",
    "workbench_find",
    "workbench_commit",
    "workbench_snapshot",
    "workbench_snapshot_renew",
    "workbench_snapshot_retire",
    "workbench_snapshot_list",
    "workbench_restore",
];

#[test]
fn exactly_the_contract_names() {
    assert_eq!(TOOLS, NAMES);
    assert_eq!(
        parse("workbench_delete", &json!({})).unwrap_err().code,
        "unknown_tool"
    );
}

/// The fields serde expects, from its unknown-field error.
fn accepted_fields(tool: &str) -> Vec<String> {
    let e = parse(tool, &json!({"zz_unknown": 1})).unwrap_err();
    assert_eq!(e.code, "invalid_input");
    assert!(
        e.message.contains("unknown field `zz_unknown`"),
        "{tool}: {}",
        e.message
    );
    let tail = e.message.split("expected ").nth(1).unwrap_or("");
    let mut out: Vec<String> = tail
        .split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_string())
        .collect();
    out.sort();
    out
}

#[test]
fn schemas_are_closed_and_match_the_parsers() {
    for tool in TOOLS {
        let s = schema(tool).unwrap();
        assert_eq!(s["type"], "object");
        assert_eq!(s["additionalProperties"], false, "{tool}");
        let mut props: Vec<String> = s["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        props.sort();
        assert_eq!(
            props,
            accepted_fields(tool),
            "{tool}: schema properties vs parser fields"
        );
        for r in s["required"].as_array().unwrap() {
            assert!(props.contains(&r.as_str().unwrap().to_string()));
        }
    }
}

#[test]
fn bounds_and_types_are_refused_by_name() {
    let bad: &[(&str, Value)] = &[
        ("workbench_list", json!({"id": "w", "limit": 0})),
        ("workbench_list", json!({"id": "w", "limit": 101})),
        (
            "workbench_read",
            json!({"id": "w", "section": "input", "path": "a", "limit": 301}),
        ),
        (
            "workbench_read",
            json!({"id": "w", "section": "input", "path": "a", "offset": -1}),
        ),
        (
            "workbench_grep",
            json!({"id": "w", "pattern": "x", "recursive": true, "patterns": vec!["p"; 17]}),
        ),
        ("workbench_grep", json!({"id": "w", "pattern": "x"})),
        ("workbench_search", json!({"limit": 11})),
        (
            "workbench_search",
            json!({"predicates": [{"field": "size", "op": "between"}]}),
        ),
        (
            "workbench_search",
            json!({"predicates": [{"field": "size", "op": "eq", "value": {"a": 1}}]}),
        ),
        (
            "workbench_search",
            json!({"sort": [{"field": "size", "direction": "up"}]}),
        ),
        (
            "workbench_aggregate",
            json!({"measures": [{"name": "n", "op": "median"}]}),
        ),
        (
            "workbench_commit",
            json!({"id": "w", "manifest": {}, "content_digest_uri": "sha256:ABC"}),
        ),
        (
            "workbench_commit",
            json!({"id": "w", "manifest": [], "content_digest_uri": format!("sha256:{}", "a".repeat(64))}),
        ),
        ("workbench_snapshot", json!({"id": "w", "ttl_days": 91})),
        ("workbench_snapshot", json!({"id": "w", "ttl_days": 0})),
        ("workbench_snapshot", json!({"id": "w", "reason": ""})),
        (
            "workbench_snapshot",
            json!({"id": "w", "reason": "x".repeat(257)}),
        ),
        (
            "workbench_snapshot",
            json!({"id": "w", "metadata": (0..65).map(|i| (format!("k{i}"), json!(i))).collect::<serde_json::Map<_, _>>()}),
        ),
        ("workbench_snapshot_retire", json!({"id": "w"})),
        (
            "workbench_snapshot_retire",
            json!({"id": "w", "snapshot_id": 1, "name": "n"}),
        ),
        ("workbench_snapshot_retire", json!({"id": "w", "name": ""})),
        (
            "workbench_restore",
            json!({"id": "", "destination_id": "d"}),
        ),
        (
            "workbench_restore",
            json!({"id": "w", "destination_id": "d", "at_commit": "abc"}),
        ),
        (
            "workbench_put_file",
            json!({"id": "w", "section": "tmp", "path": "a"}),
        ),
        (
            "workbench_put_file",
            json!({"id": "w", "section": "input", "path": "a", "replace": null}),
        ),
        ("workbench_create", json!("w")),
        (
            "workbench_read",
            json!({"id": "w", "section": "input", "path": "a", "at_snapshot": {"x": 1}}),
        ),
    ];
    for (tool, input) in bad {
        let e = parse(tool, input).unwrap_err();
        assert_eq!(e.code, "invalid_input", "{tool} {input}");
        assert!(!e.retryable);
        // Said in words: no Rust type names, no 2^64 - 1 as a bound.
        for internal in ["SnapRef", "untagged", "18446744073709551615", "..="] {
            assert!(
                !e.message.contains(internal),
                "{tool} {input}: {}",
                e.message
            );
        }
    }
    // Nullable inputs accept null.
    parse(
        "workbench_list",
        &json!({"id": "w", "section": null, "at_snapshot": null}),
    )
    .unwrap();
    parse("workbench_search", &json!({"id": null})).unwrap();
    parse(
        "workbench_snapshot",
        &json!({"id": "w", "name": null, "reason": null, "metadata": null}),
    )
    .unwrap();
}

/// SHA-256 by ring, independent of the library's sha2.
fn sha256(bytes: &[u8]) -> String {
    hex::encode(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

#[test]
fn commit_identity_matches_an_independent_vector() {
    let manifest =
        json!({"z": [3, 1, {"b": true, "a": null}], "a": "ü\"", "m": {"y": 1.5, "x": -2}});
    // Keys sorted recursively, arrays kept, compact; written out by hand.
    let canonical = r#"{"a":"ü\"","m":{"x":-2,"y":1.5},"z":[3,1,{"a":null,"b":true}]}"#;
    assert_eq!(canonical_json(&manifest), canonical);
    let manifest_uri = format!("sha256:{}", sha256(canonical.as_bytes()));
    assert_eq!(
        manifest_digest_uri(manifest.as_object().unwrap()),
        manifest_uri
    );

    let id = "run-7";
    let content = format!("sha256:{}", "0f".repeat(32));
    let mut bytes = b"nokv.workbench.commit_identity.v1\0".to_vec();
    for part in [id, content.as_str(), manifest_uri.as_str()] {
        bytes.extend_from_slice(&(part.len() as u64).to_be_bytes());
        bytes.extend_from_slice(part.as_bytes());
    }
    assert_eq!(bytes[34..42], [0, 0, 0, 0, 0, 0, 0, 5]); // the id's length, big-endian
    assert_eq!(commit_identity(id, &content, &manifest_uri), sha256(&bytes));
}
