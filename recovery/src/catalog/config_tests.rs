//! Tests of `--catalog` resolution and PyIceberg catalog definitions.

use super::*;

fn none() -> Definitions {
    Definitions::default()
}

const YAML: &str = r#"
catalog:
  local:
    type: sql
    uri: sqlite:////var/lib/tm/catalog.db
    warehouse: file:///var/lib/tm/warehouse
  Prod:
    uri: postgresql+psycopg2://tm:pgSECRET@db.internal:5432/iceberg
    warehouse: s3://lake/warehouse
    s3.endpoint: http://127.0.0.1:9000
  lake:
    type: rest
    uri: https://catalog.example.com/api/catalog
    warehouse: main
    credential: client:restSECRET
  tables:
    type: s3tables
    warehouse: arn:aws:s3tables:us-east-1:111122223333:bucket/shop
"#;

fn defs() -> Definitions {
    Definitions::from_sources(Some(("/home/u/.pyiceberg.yaml", YAML)), Vec::new()).unwrap()
}

#[test]
fn direct_forms() {
    let r = resolve("/tmp/x/c.db", None, None, &none()).unwrap();
    assert_eq!(r.kind, CatalogKind::Sqlite);
    assert_eq!(r.name, DEFAULT_NAME);
    assert_eq!(r.props["warehouse"], "/tmp/x/warehouse");

    // `sqlite:PATH`: the warehouse goes beside the file, not beside a folder named `sqlite:…`.
    let r = resolve("sqlite:/tmp/y/c.db", Some("other"), None, &none()).unwrap();
    assert_eq!((r.kind, r.name.as_str()), (CatalogKind::Sqlite, "other"));
    assert_eq!(r.props["warehouse"], "/tmp/y/warehouse");

    let r = resolve("new.db", None, Some("s3://b/w"), &none()).unwrap();
    assert_eq!(r.kind, CatalogKind::Sqlite);
    assert_eq!(r.props["warehouse"], "s3://b/w");

    let r = resolve("postgresql+psycopg2://u:p@h/db", None, Some("/w"), &none()).unwrap();
    assert_eq!(r.kind, CatalogKind::Postgres);
    assert_eq!(r.props["uri"], "postgresql://u:p@h/db");

    let r = resolve("rest+https://cat.example.com:8443/api", None, None, &none()).unwrap();
    assert_eq!(r.kind, CatalogKind::Rest);
    assert_eq!(r.props["uri"], "https://cat.example.com:8443/api");
    assert_eq!(r.props["type"], "rest");

    let arn = "arn:aws:s3tables:eu-west-1:111122223333:bucket/shop";
    let r = resolve(arn, None, None, &none()).unwrap();
    assert_eq!(r.kind, CatalogKind::S3tables);
    assert_eq!(r.props["warehouse"], arn);
}

#[test]
fn refusals_never_echo_a_secret() {
    let err = resolve("mysql://u:mySECRET@h/db", None, None, &none())
        .unwrap_err()
        .to_string();
    assert!(err.contains("mysql") && !err.contains("mySECRET"), "{err}");
    assert!(matches!(
        resolve("mysql://u:p@h/db", None, None, &none()),
        Err(TableError::InvalidCatalog { .. })
    ));
    let err = resolve("postgres://u:pgSECRET@h/db", None, None, &none())
        .unwrap_err()
        .to_string();
    assert!(err.contains("needs a warehouse") && !err.contains("pgSECRET"), "{err}");
    let err = resolve("https://h/api", None, None, &none()).unwrap_err().to_string();
    assert!(err.contains("rest+https://"), "{err}");
    assert!(resolve("arn:aws:s3:::bucket", None, None, &none()).is_err());
}

#[test]
fn a_bare_word_is_a_defined_name_or_refused() {
    // Today's trap: `--catalog dr` silently created a SQLite file named `dr`.
    let err = resolve("dr", None, None, &defs()).unwrap_err().to_string();
    assert!(err.contains("defined catalogs: lake, local, prod, tables"), "{err}");
    assert!(err.contains("/home/u/.pyiceberg.yaml"), "{err}");
    let err = resolve("dr", None, None, &none()).unwrap_err().to_string();
    assert!(err.contains("no catalogs are defined"), "{err}");
}

#[test]
fn defined_catalogs_resolve_with_pyiceberg_keys() {
    let d = defs();
    let r = resolve("local", None, None, &d).unwrap();
    assert_eq!((r.kind, r.name.as_str()), (CatalogKind::Sqlite, "local"));
    assert_eq!(r.props["uri"], "/var/lib/tm/catalog.db");
    assert_eq!(r.props["warehouse"], "file:///var/lib/tm/warehouse");

    // The type is inferred from the uri, names are case-insensitive, the driver is dropped.
    let r = resolve("PROD", None, None, &d).unwrap();
    assert_eq!((r.kind, r.name.as_str()), (CatalogKind::Postgres, "PROD"));
    assert_eq!(r.props["uri"], "postgresql://tm:pgSECRET@db.internal:5432/iceberg");
    assert_eq!(r.props["s3.endpoint"], "http://127.0.0.1:9000");
    let shown = format!("{r:?}");
    assert!(!shown.contains("pgSECRET"), "{shown}");

    let r = resolve("lake", None, None, &d).unwrap();
    assert_eq!(r.kind, CatalogKind::Rest);
    assert_eq!(r.props["credential"], "client:restSECRET");
    assert_eq!(r.props["warehouse"], "main");

    let r = resolve("tables", None, Some("/not/for/s3tables"), &d).unwrap();
    assert_eq!(r.kind, CatalogKind::S3tables);
    assert_eq!(
        r.props["warehouse"],
        "arn:aws:s3tables:us-east-1:111122223333:bucket/shop"
    );
}

#[test]
fn environment_variables_define_and_overlay() {
    let vars = vec![
        (
            "PYICEBERG_CATALOG__LOCAL__WAREHOUSE".to_string(),
            "/elsewhere".to_string(),
        ),
        (
            "PYICEBERG_CATALOG__DR_SITE__URI".to_string(),
            "sqlite:////dr/c.db".to_string(),
        ),
        (
            "PYICEBERG_CATALOG__DR_SITE__S3__ACCESS_KEY_ID".to_string(),
            "AK".to_string(),
        ),
        ("UNRELATED".to_string(), "x".to_string()),
    ];
    let d = Definitions::from_sources(Some(("/h/.pyiceberg.yaml", YAML)), vars).unwrap();
    assert_eq!(
        resolve("local", None, None, &d).unwrap().props["warehouse"],
        "/elsewhere"
    );
    // PyIceberg: `_` in the name and key is `-`, `__` in the key is `.`.
    let r = resolve("dr-site", None, None, &d).unwrap();
    assert_eq!(r.kind, CatalogKind::Sqlite);
    assert_eq!(r.props["uri"], "/dr/c.db");
    assert_eq!(r.props["s3.access-key-id"], "AK");
    assert_eq!(r.props["warehouse"], "/dr/warehouse");
    assert!(d.sources.iter().any(|s| s.contains("PYICEBERG_CATALOG__")));
}

#[test]
fn a_bad_definition_is_named() {
    let err = Definitions::from_sources(Some(("/h/.pyiceberg.yaml", "catalog: [1, 2]")), Vec::new())
        .unwrap_err()
        .to_string();
    assert!(err.contains("/h/.pyiceberg.yaml"), "{err}");
    let d = Definitions::from_sources(
        Some(("/h/y", "catalog:\n  h:\n    type: hive\n    uri: thrift://x\n")),
        Vec::new(),
    )
    .unwrap();
    let err = resolve("h", None, None, &d).unwrap_err().to_string();
    assert!(err.contains("hive"), "{err}");
}

#[test]
fn a_reference_is_opened_with_the_readers_own_definition() {
    let d = defs();
    let reference = CatalogRef {
        kind: CatalogKind::Postgres,
        uri: "postgresql://tm@db.internal:5432/iceberg".into(),
        warehouse: Some("s3://lake/warehouse".into()),
        name: "prod".into(),
    };
    let r = resolve_ref(&reference, &d);
    assert_eq!(r.props["uri"], "postgresql://tm:pgSECRET@db.internal:5432/iceberg");
    assert_eq!(r.props["s3.endpoint"], "http://127.0.0.1:9000");
    // Another catalog under the same name is not borrowed from.
    let other = CatalogRef {
        uri: "postgresql://tm@elsewhere/iceberg".into(),
        ..reference.clone()
    };
    let r = resolve_ref(&other, &d);
    assert_eq!(r.props["uri"], "postgresql://tm@elsewhere/iceberg");
    assert!(!r.props.contains_key("s3.endpoint"));
    // Without a definition: the reference alone.
    let r = resolve_ref(&reference, &none());
    assert_eq!(r.props["uri"], reference.uri);
    assert_eq!(r.props["warehouse"], "s3://lake/warehouse");
}

/// A route written with `--catalog arn:aws:s3tables:…` records the ARN as its URI and no
/// warehouse; a reader opens the table bucket from it.
#[test]
fn an_s3tables_reference_opens_its_table_bucket() {
    let arn = "arn:aws:s3tables:us-east-1:123456789012:bucket/shop";
    let reference = CatalogRef {
        kind: CatalogKind::S3tables,
        uri: arn.into(),
        warehouse: None,
        name: "tidemark".into(),
    };
    let r = resolve_ref(&reference, &none());
    assert_eq!(r.props["warehouse"], arn);
    assert_eq!(r.props["type"], "s3tables");
}

#[test]
fn warehouse_forms() {
    assert_eq!(normalize_warehouse("/tmp/wh/").unwrap(), "file:///tmp/wh");
    assert_eq!(normalize_warehouse("file:///tmp/wh").unwrap(), "file:///tmp/wh");
    assert_eq!(
        normalize_warehouse("s3://bucket/prefix/").unwrap(),
        "s3://bucket/prefix"
    );
    assert!(normalize_warehouse("s3:///nobucket").is_err());
    assert!(normalize_warehouse("gs://b/p").is_err());
}

#[test]
fn s3_props_from_env() {
    let env: HashMap<&str, &str> = HashMap::from([
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:9000"),
        ("AWS_ACCESS_KEY_ID", "ak"),
        ("AWS_SECRET_ACCESS_KEY", "sk"),
    ]);
    let props = s3_props(|k| env.get(k).map(|v| v.to_string()));
    assert_eq!(props[S3_ENDPOINT], "http://127.0.0.1:9000");
    assert_eq!(props[S3_PATH_STYLE_ACCESS], "true");
    assert_eq!(props[S3_ACCESS_KEY_ID], "ak");
    assert_eq!(props[S3_SECRET_ACCESS_KEY], "sk");
    assert_eq!(props[S3_REGION], "us-east-1");
    assert!(!endpoint_needs_path_style("https://s3.eu-west-1.amazonaws.com"));
    assert!(endpoint_needs_path_style("http://localhost:4566"));
    assert!(endpoint_needs_path_style("http://[::1]:9000/"));
    assert!(s3_props(|_| None).is_empty());
}

#[test]
fn passwords_are_redacted() {
    assert_eq!(
        redact("postgres://me:secret@db:5432/cat"),
        "postgres://me:***@db:5432/cat"
    );
    assert_eq!(redact("postgres://db/cat"), "postgres://db/cat");
    assert_eq!(redact("/tmp/c.db"), "/tmp/c.db");
}
