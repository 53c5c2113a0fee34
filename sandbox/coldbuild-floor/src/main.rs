// Links one item of each dependency so that each is compiled and linked as in the drill.
fn main() {
    let ctx = datafusion::prelude::SessionContext::new();
    let _ = iceberg::NamespaceIdent::new("a".into());
    let _ = std::any::type_name::<iceberg_datafusion::IcebergTableProvider>();
    let _ = std::any::type_name::<iceberg_catalog_sql::SqlCatalog>();
    let _ = std::any::type_name::<sqlx::SqlitePool>();
    let _ = std::any::type_name::<parquet::arrow::ArrowWriter<Vec<u8>>>();
    let _ = arrow::util::pretty::pretty_format_batches(&[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async { let _ = ctx.sql("select 1").await; });
    println!("{}", serde_json::json!({"ok": true}));
    let _ = <clap::Command>::new("x");
}
