//! What the table says it holds ([`applied_state`]): the positions the newest tidemark commit
//! of its current snapshot's ancestry recorded in its summary.

use iceberg::table::Table;

use crate::provenance::{PROP_JOURNAL_ID, PROP_LAST_POSITION, PROP_MANIFEST_DIGEST, PROP_MANIFEST_SEQUENCE};

/// What the table says it holds: the newest tidemark commit in the current snapshot's ancestry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppliedState {
    pub position: u64,
    pub manifest_sequence: u64,
    pub manifest_digest: String,
    pub journal_id: Option<String>,
}

pub fn applied_state(table: &Table) -> AppliedState {
    let meta = table.metadata();
    let mut snapshot = meta.current_snapshot().cloned();
    while let Some(s) = snapshot {
        let props = &s.summary().additional_properties;
        if let Some(p) = props.get(PROP_LAST_POSITION).and_then(|v| v.parse().ok()) {
            return AppliedState {
                position: p,
                manifest_sequence: props
                    .get(PROP_MANIFEST_SEQUENCE)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
                manifest_digest: props.get(PROP_MANIFEST_DIGEST).cloned().unwrap_or_default(),
                journal_id: props.get(PROP_JOURNAL_ID).cloned(),
            };
        }
        snapshot = s.parent_snapshot_id().and_then(|id| meta.snapshot_by_id(id).cloned());
    }
    AppliedState::default()
}
