//! The S3 scenarios again on SeaweedFS (sandbox/seaweedfs.sh), a second real S3-protocol server
//! beside moto: one that checks SigV4 signatures and validates checksums, and whose conditional
//! writes and versioning are its own implementation. The commands run with `AWS_ENDPOINT_URL`
//! pointed at it ([`Scratch::on_seaweedfs`]); TIDEMARK_SKIP_SEAWEEDFS=1 skips them.

use super::catalogs_remote::{apply_and_fault, ns, rest_definition};
use super::support::*;
use super::{CAPABILITY, NOT_FOUND, applied, journal_round_trip};

#[test]
fn journal_on_seaweedfs() {
    let Some(s) = Scratch::on_seaweedfs() else { return };
    journal_round_trip(&s, &format!("s3://tidemark/e2e-{}", std::process::id()));
}

#[test]
fn store_check_on_seaweedfs_and_an_unversioned_bucket() {
    let Some(s) = Scratch::on_seaweedfs() else { return };
    let r = s
        .run(&["store", "check", "s3://tidemark/check-sw", "--json"])
        .ok()
        .json();
    assert_eq!(r["ok"], true, "{r}");
    s.run(&["store", "check", "s3://tidemark-unversioned/check-sw", "--json"])
        .fails(CAPABILITY, &["versioning"]);
    // Buckets are not created on upload (the sandbox turns that off): a missing one is named.
    s.run(&["journal", "status", "--journal", "s3://no-such-bucket-sw/j"])
        .fails(NOT_FOUND, &["no-such-bucket-sw"]);
}

#[test]
fn a_wrong_secret_is_refused_by_seaweedfs() {
    const ACCESS_DENIED: i32 = 8;
    let Some(s) = Scratch::on_seaweedfs() else { return };
    // SeaweedFS checks the signature: the right key id with a wrong secret is refused.
    s.run_with(
        &[("AWS_SECRET_ACCESS_KEY", "not-the-secret")],
        &["journal", "status", "--journal", "s3://tidemark/x"],
    )
    .fails(ACCESS_DENIED, &["s3://tidemark/x", "check the credentials"]);
}

#[test]
fn apply_and_fault_delete_in_a_seaweedfs_warehouse() {
    let Some(s) = Scratch::on_seaweedfs() else { return };
    let root = format!("s3://tidemark/apply-sw-{}", std::process::id());
    let (journal, warehouse) = (format!("{root}/journal"), format!("{root}/warehouse"));
    let catalog = applied(&s, &journal, Some(&warehouse), 500).catalog;
    let f = Story::new(&s)
        .catalog(&catalog)
        .warehouse(&warehouse)
        .table("shop.orders")
        .bad_delete_json("is_deleted");
    assert_eq!(f["format_version"], 1);
}

#[test]
fn a_to_e_story_drill_on_seaweedfs() {
    let Some(s) = Scratch::on_seaweedfs() else { return };
    s.drill_passes_in_bucket("drill-sw");
}

/// A REST catalog's table bucket read directly (issue 13): `catalog rebuild` and `replica follow`
/// from SeaweedFS's table bucket, which answers 403 to a read of any object name Iceberg does not
/// use, a missing one too. No resync walked this table back, so no resync record is listed
/// beside its metadata files and none is read: the table is rebuilt and followed at the REST
/// catalog's head, never refused or failed over a record that is not there.
#[test]
fn a_rest_table_bucket_is_rebuilt_and_followed_directly() {
    let (Some(mut s), Some(def)) = (Scratch::on_seaweedfs(), rest_definition()) else {
        return;
    };
    s.env.extend(def);
    let namespace = ns("bucket_direct");
    let table = format!("{namespace}.orders");
    let expected = apply_and_fault(&s, "sw", &table);
    let warehouse = format!("s3://{}", std::env::var("TIDEMARK_REST_WAREHOUSE").unwrap());
    // (current snapshot, rows) of the table in `catalog`.
    let held = |catalog: &str, out: &str| {
        let mut args = vec!["--namespace", namespace.as_str()];
        if catalog.ends_with(".db") {
            args.extend(["--warehouse", warehouse.as_str()]);
        }
        let h = s.history(catalog, out, &args);
        let t = &h["tables"][0];
        assert_eq!(t["table"], table.as_str(), "{h}");
        (t["current_snapshot_id"].clone(), t["row_count"].clone())
    };
    let head = held("sw", "h-rest.json");
    assert_eq!(head.1, expected.len(), "{head:?}");

    let rebuilt = s.path_str("rebuilt.db");
    let r = s
        .rebuild(&rebuilt, &warehouse, &["--namespace", &namespace, "--json"])
        .ok()
        .json();
    assert_eq!(r["tables"][0]["status"], "registered", "{r}");
    assert_eq!(held(&rebuilt, "h-rebuilt.json"), head);

    let followed = s.path_str("followed.db");
    let f = s
        .run(&[
            "replica",
            "follow",
            "--warehouse",
            &warehouse,
            "--catalog",
            &followed,
            "--namespace",
            &namespace,
            "--once",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(f["tables"][0]["status"], "ok", "{f}");
    assert_eq!(held(&followed, "h-followed.json"), head);
}
