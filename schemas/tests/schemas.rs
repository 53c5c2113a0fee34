//! The checked-in JSON Schemas under `schemas/json/` must equal the schemas of the Rust types, and
//! sample objects must validate against the checked-in files. After a deliberate format change,
//! regenerate with `TIDEMARK_BLESS=1 cargo test -p tidemark-schemas` and review the diff.

use std::path::PathBuf;

use schemars::schema_for;
use serde_json::{Value, json};
use tidemark_schemas::*;

fn all_schemas() -> Vec<(&'static str, Value)> {
    vec![
        ("event", serde_json::to_value(schema_for!(OrderEvent)).unwrap()),
        ("table-spec", serde_json::to_value(schema_for!(TableSpec)).unwrap()),
        (
            "journal-header",
            serde_json::to_value(schema_for!(JournalHeader)).unwrap(),
        ),
        ("manifest", serde_json::to_value(schema_for!(Manifest)).unwrap()),
        ("checkpoint", serde_json::to_value(schema_for!(Checkpoint)).unwrap()),
        (
            "applier-summary",
            serde_json::to_value(schema_for!(ApplierSummary)).unwrap(),
        ),
        ("resolution", serde_json::to_value(schema_for!(Resolution)).unwrap()),
        ("route", serde_json::to_value(schema_for!(Route)).unwrap()),
        (
            "verify-report",
            serde_json::to_value(schema_for!(VerifyReport)).unwrap(),
        ),
        (
            "status-report",
            serde_json::to_value(schema_for!(StatusReport)).unwrap(),
        ),
        (
            "append-report",
            serde_json::to_value(schema_for!(AppendReport)).unwrap(),
        ),
        (
            "store-check-report",
            serde_json::to_value(schema_for!(StoreCheckReport)).unwrap(),
        ),
    ]
}

fn schema_path(name: &str) -> PathBuf {
    // The folder at run time (cargo sets it for tests): a binary that a shared build folder kept
    // from a clone elsewhere would otherwise read that clone's schemas.
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into()))
        .join("json")
        .join(format!("{name}.schema.json"))
}

fn load(name: &str) -> Value {
    let path = schema_path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run TIDEMARK_BLESS=1 cargo test -p tidemark-schemas)",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap()
}

#[test]
fn checked_in_schemas_match_the_rust_types() {
    let bless = std::env::var("TIDEMARK_BLESS").is_ok_and(|v| v == "1");
    let mut drift = Vec::new();
    for (name, generated) in all_schemas() {
        let path = schema_path(name);
        if bless {
            std::fs::write(&path, serde_json::to_string_pretty(&generated).unwrap() + "\n").unwrap();
            continue;
        }
        if load(name) != generated {
            drift.push(path.display().to_string());
        }
    }
    assert!(
        drift.is_empty(),
        "schemas differ from the Rust types: {drift:?}; regenerate with TIDEMARK_BLESS=1 and review"
    );
}

fn validate(name: &str, instance: &Value) -> Result<(), String> {
    let schema = load(name);
    let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
    let errors: Vec<String> = validator.iter_errors(instance).map(|e| e.to_string()).collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

fn sample_manifest() -> Manifest {
    Manifest {
        format_version: FORMAT_VERSION,
        journal_id: "j-1".into(),
        sequence: 2,
        previous_digest: Some(format!("sha256:{}", "a".repeat(64))),
        object_key: "events/00000000000000000002-0123456789abcdef.parquet".into(),
        object_version_id: "00000000000000000001".into(),
        object_sha256: format!("sha256:{}", "b".repeat(64)),
        object_size: 1234,
        row_count: 10,
        first_position: 11,
        last_position: 20,
        min_event_time: Some("2026-11-29T08:00:00Z".into()),
        max_event_time: Some("2026-11-29T09:00:00Z".into()),
        writer_id: "w".into(),
        spec_digest: format!("sha256:{}", "c".repeat(64)),
        written_at: "2026-11-29T09:00:01Z".into(),
    }
}

#[test]
fn written_objects_validate_against_the_checked_in_schemas() {
    let manifest = serde_json::to_value(sample_manifest()).unwrap();
    validate("manifest", &manifest).unwrap();
    let checkpoint = serde_json::to_value(Checkpoint {
        format_version: FORMAT_VERSION,
        journal_id: "j-1".into(),
        table_uuid: "4f9b0c1e-0000-0000-0000-000000000000".into(),
        table_name: "shop.orders".into(),
        snapshot_id: 42,
        metadata_location: None,
        position: 20,
        manifest_sequence: 2,
        manifest_digest: format!("sha256:{}", "d".repeat(64)),
        written_at: "2026-11-29T09:00:02Z".into(),
    })
    .unwrap();
    validate("checkpoint", &checkpoint).unwrap();
    // A snapshot summary of another engine's applier (Iceberg keeps other summary fields too).
    let summary = json!({"operation": "overwrite", "tidemark.journal-id": "j-1",
        "tidemark.first-position": "5", "tidemark.last-position": "6", "engine-name": "spark"});
    validate("applier-summary", &summary).unwrap();
    let gap = json!({"tidemark.journal-id": "j-1", "tidemark.first-position": "0", "tidemark.last-position": "6"});
    assert!(validate("applier-summary", &gap).is_err(), "positions start at 1");
    let resolution = serde_json::to_value(Resolution {
        format_version: FORMAT_VERSION,
        journal_id: "j-1".into(),
        key: "o-1".into(),
        version: 3,
        keep_position: 17,
        void_positions: vec![41],
        reason: "the producer re-sent version 3 with a wrong amount".into(),
        written_at: "2026-11-29T09:00:03Z".into(),
    })
    .unwrap();
    validate("resolution", &resolution).unwrap();
    let event = json!({"position": 1, "order_id": "o-1", "order_version": 1, "customer_id": "c-1",
        "status": "placed", "amount": "12.50", "currency": "EUR", "is_deleted": false,
        "event_time": "2026-11-29T08:00:00Z"});
    validate("event", &event).unwrap();
}

#[test]
fn objects_that_break_the_format_are_rejected() {
    let mut manifest = serde_json::to_value(sample_manifest()).unwrap();
    manifest.as_object_mut().unwrap().remove("object_version_id");
    let err = validate("manifest", &manifest).unwrap_err();
    assert!(err.contains("object_version_id"), "{err}");
    let mut manifest = serde_json::to_value(sample_manifest()).unwrap();
    manifest["surprise"] = json!(1);
    assert!(validate("manifest", &manifest).is_err(), "unknown fields are refused");
    let event = json!({"position": -1, "order_id": "o-1"});
    assert!(validate("event", &event).is_err());
}
