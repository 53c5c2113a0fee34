//! More of the merge-on-read cases (a child of `deletes_tests`, whose helpers it uses): the row
//! count `history record` gives for a table with delete files, and a position delete file whose
//! metadata names neither its data file nor `file_path` bounds.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_record_counts_the_rows_a_reader_sees() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = site(dir.path()).await;
    let t = table_with_deletes(&j, &handle).await;
    let rec = crate::dr::history::record(&handle, None).await.unwrap();
    let orders = rec.tables.iter().find(|x| x.table == TABLE).unwrap();
    assert_eq!(
        orders.row_count,
        scanned_versions(&t).await.len() as u64,
        "6 rows written, o-2 deleted by position and o-4 by equality"
    );
    assert_eq!(orders.row_count, 4);
}

/// The delete files live in the table's current snapshot.
async fn delete_files(t: &Table) -> usize {
    let list = t.metadata().current_snapshot().unwrap().manifest_list();
    let name = t.identifier().to_string();
    let files = crate::table::files::snapshot_files(t.file_io(), &name, list, &|p| p.to_string());
    files.await.unwrap().deletes.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_position_delete_without_path_bounds_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = site(dir.path()).await;
    let text: String = (1..=4).map(|i| ev(i, &format!("o-{i}"), 1)).collect();
    append_text(&j, &text).await;
    apply_all(&j, &handle, &SeededIds::new(1)).await;
    let t = table::load_table(&handle, TABLE).await.unwrap();
    let del = position_delete_file(&t, &[locate(&t, "o-2").await], 1, false).await;
    assert!(del.lower_bounds().is_empty() && del.referenced_data_file().is_none());
    let t = commit_delete_files(&handle, &t, vec![del], stamp(1)).await.unwrap();
    assert_eq!(delete_files(&t).await, 1);

    // A new key only: the data file the delete names stays, and so does the delete.
    append_text(&j, &ev(5, "o-5", 1)).await;
    crate::apply::tests::apply_all_accepting(&j, &handle, &SeededIds::new(2)).await;
    let t = table::load_table(&handle, TABLE).await.unwrap();
    assert_eq!(delete_files(&t).await, 1);
    assert_eq!(summary(&t)["total-delete-files"], "1", "{:?}", summary(&t));

    // An update of o-1 rewrites that file with its live rows: the delete names no live file.
    append_text(&j, &ev(6, "o-1", 2)).await;
    apply_all(&j, &handle, &SeededIds::new(3)).await;
    let t = table::load_table(&handle, TABLE).await.unwrap();
    let keys: Vec<String> = scanned_versions(&t).await.into_keys().collect();
    assert_eq!(keys, ["o-1", "o-3", "o-4", "o-5"], "o-2 stays deleted");
    let s = summary(&t);
    assert_eq!(s["total-delete-files"], "0", "the spent delete is dropped: {s:?}");
    assert_eq!(delete_files(&t).await, 0);
    assert_eq!(s["removed-delete-files"], "1", "{s:?}");
}
