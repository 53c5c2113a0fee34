//! Step 3: the new table, created afresh (same ownership rules as the seed), or the committed
//! one of this recovery.

use std::collections::HashMap;

use iceberg::table::Table;

use crate::apply::{PROP_JOURNAL_ID, PROP_LAST_POSITION};
use crate::catalog::CatalogHandle;
use crate::recover::seed::{PROP_RECOVERY_ID, PROP_REFUSED, PROP_SOURCE_SNAPSHOT, PROP_STEP};
use crate::recover::snapshot::TrustedSnapshot;
use crate::recover::{RecoverError, RecoverOptions};
use crate::table::{self, parse_ident};

/// The new table, created afresh, or the committed one of this recovery at `h` (`true`).
pub(super) async fn prepare_target(
    handle: &CatalogHandle,
    opts: &RecoverOptions,
    snap: &TrustedSnapshot,
    journal_id: &str,
    h: u64,
) -> Result<(Table, bool), RecoverError> {
    let into = &opts.into;
    let ident = parse_ident(into)?;
    let iceberg = |context: String| {
        move |e: iceberg::Error| RecoverError::Iceberg {
            context,
            message: e.to_string(),
        }
    };
    if handle
        .catalog()
        .table_exists(&ident)
        .await
        .map_err(iceberg(format!("look up {into}")))?
    {
        let existing = table::load_table(handle, into).await?;
        let meta = existing.metadata();
        let owner = meta.properties().get(PROP_RECOVERY_ID).cloned();
        let ours = owner.as_deref() == Some(opts.recovery_id.as_str());
        let refused_attempt = meta.properties().contains_key(PROP_REFUSED)
            && meta.snapshots().any(|s| {
                let p = &s.summary().additional_properties;
                p.get(PROP_SOURCE_SNAPSHOT) == Some(&snap.snapshot_id.to_string())
                    && p.get(PROP_JOURNAL_ID).map(String::as_str) == Some(journal_id)
            });
        if !ours && !refused_attempt {
            return Err(RecoverError::TargetExists {
                table: into.to_string(),
                owner,
            });
        }
        let committed = meta.snapshots().any(|s| {
            let p = &s.summary().additional_properties;
            p.get(PROP_STEP).map(String::as_str) == Some("replay")
                && p.get(PROP_LAST_POSITION).map(String::as_str) == Some(h.to_string().as_str())
        });
        if ours && committed && !meta.properties().contains_key(PROP_REFUSED) {
            return Ok((existing, true));
        }
        // Anything else of this recovery is unconfirmed (one commit makes it whole): start fresh.
        handle
            .catalog()
            .drop_table(&ident)
            .await
            .map_err(iceberg(format!("drop unconfirmed recovery table {into}")))?;
    }
    let props = HashMap::from([(PROP_RECOVERY_ID.to_string(), opts.recovery_id.clone())]);
    let t = table::create_table_like(handle, into, &snap.metadata, &snap.schema, props).await?;
    // The job's files carry column names, not Iceberg field ids: the default name mapping lets
    // every Iceberg reader (Java, PyIceberg, iceberg-rust) resolve them.
    let mapping = name_mapping(t.metadata().current_schema());
    let props = HashMap::from([("schema.name-mapping.default".to_string(), mapping)]);
    let t = table::commit_properties(handle, &t, props).await?;
    Ok((t, false))
}

/// The Iceberg name mapping (`schema.name-mapping.default`) of a flat schema.
fn name_mapping(schema: &iceberg::spec::Schema) -> String {
    let fields: Vec<serde_json::Value> = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| serde_json::json!({"field-id": f.id, "names": [f.name]}))
        .collect();
    serde_json::Value::Array(fields).to_string()
}
