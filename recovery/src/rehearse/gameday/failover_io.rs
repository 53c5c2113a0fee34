//! The failover game day's own I/O ([`crate::rehearse::failover`]): the hostile replication
//! and the rows of a table, for its checks.

use tidemark_journal::store::{self, PutMode};

use crate::catalog::CatalogHandle;
use crate::table::{self, read::read_table};

/// The hostile replication: objects of `from` that `to` lacks, metadata JSON first (newest
/// first), then manifests, then (with `data`) data files; one object at a time.
pub(crate) async fn replicate(from: &str, to: &str, data: bool) -> Result<usize, String> {
    let (src, dst) = (
        store::open(from).await.map_err(|e| e.to_string())?,
        store::open_or_create(to).await.map_err(|e| e.to_string())?,
    );
    let have: std::collections::HashSet<String> = store::list_all(dst.as_ref(), "")
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|o| o.key)
        .collect();
    let mut todo: Vec<String> = store::list_all(src.as_ref(), "")
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|o| o.key)
        .filter(|k| !have.contains(k) && (data || !k.contains("/data/")))
        .collect();
    let rank = |k: &str| u8::from(!k.ends_with(".metadata.json")) + u8::from(!k.ends_with(".avro"));
    todo.sort_by(|a, b| rank(a).cmp(&rank(b)).then(b.cmp(a)));
    for k in &todo {
        let body = src.get(k, None).await.map_err(|e| e.to_string())?.body;
        dst.put(k, body, PutMode::Overwrite).await.map_err(|e| e.to_string())?;
    }
    Ok(todo.len())
}

/// Every row of the table's current snapshot, formatted, sorted.
pub(crate) async fn rows(handle: &CatalogHandle, name: &str) -> Result<Vec<String>, String> {
    use arrow::util::display::{ArrayFormatter, FormatOptions};
    let t = table::load_table(handle, name).await.map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for b in read_table(&t).await.map_err(|e| e.to_string())? {
        let fmts: Vec<ArrayFormatter> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &FormatOptions::default()))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        for i in 0..b.num_rows() {
            out.push(
                fmts.iter()
                    .map(|f| f.value(i).to_string())
                    .collect::<Vec<_>>()
                    .join("|"),
            );
        }
    }
    out.sort();
    Ok(out)
}
