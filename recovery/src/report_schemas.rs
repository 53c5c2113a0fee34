//! The JSON Schemas of the reports the recovery side prints with `--json` live beside the other
//! formats in `schemas/json/`; this test fails when a report type and its checked-in schema drift
//! apart (`TIDEMARK_BLESS=1` regenerates them; review the diff).

use std::path::PathBuf;

use schemars::schema_for;
use serde_json::Value;

fn schemas() -> Vec<(&'static str, Value)> {
    let v = |s| serde_json::to_value(s).expect("schema serializes");
    vec![
        ("apply-report", v(schema_for!(crate::apply::ApplyReport))),
        ("audit-report", v(schema_for!(crate::audit::AuditReport))),
        ("audit-record", v(schema_for!(crate::audit::records::AuditRecord))),
        ("recovery-report", v(schema_for!(crate::recover::RecoveryReport))),
        (
            "validation-report",
            v(schema_for!(crate::recover::validate::ValidationReport)),
        ),
        ("drill-report", v(schema_for!(crate::rehearse::drill::DrillReport))),
        (
            "table-drill-report",
            v(schema_for!(crate::rehearse::table_drill::TableDrillReport)),
        ),
        ("drill-record", v(schema_for!(crate::rehearse::history::DrillRecord))),
        ("fault-report", v(schema_for!(crate::rehearse::fault::FaultReport))),
        ("rebuild-report", v(schema_for!(crate::dr::rebuild::RebuildReport))),
        ("history-record", v(schema_for!(crate::dr::history::HistoryRecord))),
        (
            "history-comparison",
            v(schema_for!(crate::dr::history::HistoryComparison)),
        ),
        ("replica-report", v(schema_for!(crate::dr::replica::ReplicaReport))),
        ("rewrite-report", v(schema_for!(crate::dr::rewrite::RewriteReport))),
        (
            "gameday-report",
            v(schema_for!(crate::rehearse::gameday::GamedayReport)),
        ),
        ("copy-report", v(schema_for!(crate::dr::copy::CopyReport))),
        ("catalog-backup", v(schema_for!(crate::dr::backup::CatalogBackup))),
        ("backup-outcome", v(schema_for!(crate::dr::backup::BackupOutcome))),
        ("catalog-state", v(schema_for!(crate::dr::backup::CatalogState))),
        ("restore-report", v(schema_for!(crate::dr::backup::RestoreReport))),
        ("compact-report", v(schema_for!(crate::apply::compact::CompactReport))),
        ("follower-state", v(schema_for!(crate::dr::follow_state::FollowerState))),
        ("follower-lease", v(schema_for!(crate::dr::lease::LeaseRecord))),
        ("replica-status", v(schema_for!(crate::dr::follow_status::StatusReport))),
        ("promotion", v(schema_for!(crate::dr::failover::Promotion))),
        ("resync-report", v(schema_for!(crate::dr::resync::ResyncReport))),
        ("resync-record", v(schema_for!(crate::dr::resync_record::ResyncRecord))),
        (
            "gameday-failover-report",
            v(schema_for!(crate::rehearse::failover::FailoverGamedayReport)),
        ),
    ]
}

#[test]
fn report_schemas_match_the_rust_types() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schemas/json");
    let bless = std::env::var("TIDEMARK_BLESS").is_ok_and(|v| v == "1");
    let mut drift = Vec::new();
    for (name, generated) in schemas() {
        let path = dir.join(format!("{name}.schema.json"));
        if bless {
            std::fs::write(&path, serde_json::to_string_pretty(&generated).unwrap() + "\n").unwrap();
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if serde_json::from_str::<Value>(&text).unwrap() != generated {
            drift.push(path.display().to_string());
        }
    }
    assert!(
        drift.is_empty(),
        "report schemas differ from the Rust types: {drift:?}; regenerate with TIDEMARK_BLESS=1"
    );
}

#[test]
fn a_validation_report_carries_its_format_version() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schemas/json/validation-report.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let required = schema["required"].as_array().unwrap();
    assert!(required.iter().any(|r| r == "format_version"), "{required:?}");
}
