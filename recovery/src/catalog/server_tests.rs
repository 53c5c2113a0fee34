//! The REST and S3 Tables backends against real servers: the catalog conformance suite
//! ([`super::conformance`]) on SeaweedFS's Iceberg REST catalog and on moto's S3 Tables, and
//! what the suite cannot inject through the contract: replies really lost on the wire (a proxy
//! that drops them, or a reply the SDK cannot parse), 5xx, refused credentials, SeaweedFS's
//! broken register (a known server gap) and S3 Tables' pointer swap.
//!
//! Servers: `bash sandbox/test.sh` starts them (sandbox/seaweedfs.sh, sandbox/s3tables.sh) and
//! exports TIDEMARK_REST_URI, TIDEMARK_REST_WAREHOUSE, TIDEMARK_REST_CREDENTIAL,
//! TIDEMARK_SEAWEED_S3_ENDPOINT, TIDEMARK_S3TABLES_ENDPOINT, TIDEMARK_S3TABLES_ARN and
//! TIDEMARK_S3TABLES_LOSSY_ENDPOINT. A missing server fails the tests; TIDEMARK_SKIP_SEAWEEDFS=1
//! and TIDEMARK_SKIP_S3TABLES=1 skip them explicitly.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::conformance::{self, commit_rows};
use super::{CatalogHandle, rest, s3tables};
use crate::ids::{Ids, RandomIds};
use crate::table::{self, TableError};
use tidemark_journal::spec::CompiledSpec;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the tests with `bash sandbox/test.sh`, or skip them (see the module doc)")
    })
}

fn skipped(var: &str) -> bool {
    let skip = std::env::var(var).is_ok_and(|v| v == "1");
    if skip {
        eprintln!("skipped ({var}=1)");
    }
    skip
}

/// The S3 keys of the environment (the sandbox's, which both servers accept).
fn s3_keys(props: &mut HashMap<String, String>) {
    props.insert("s3.access-key-id".into(), env("AWS_ACCESS_KEY_ID"));
    props.insert("s3.secret-access-key".into(), env("AWS_SECRET_ACCESS_KEY"));
    props.insert("s3.region".into(), "us-east-1".into());
}

/// SeaweedFS's REST catalog as a PyIceberg definition would give it, or `None` when skipped.
pub(crate) fn rest_props() -> Option<HashMap<String, String>> {
    if skipped("TIDEMARK_SKIP_SEAWEEDFS") {
        return None;
    }
    let mut props = HashMap::from([
        ("uri".to_string(), env("TIDEMARK_REST_URI")),
        ("warehouse".to_string(), env("TIDEMARK_REST_WAREHOUSE")),
        ("credential".to_string(), env("TIDEMARK_REST_CREDENTIAL")),
        ("s3.endpoint".to_string(), env("TIDEMARK_SEAWEED_S3_ENDPOINT")),
        // SeaweedFS 4.48's register does not work (see `a_broken_register_is_caught`).
        (rest::REGISTER_PROP.to_string(), "false".to_string()),
    ]);
    s3_keys(&mut props);
    Some(props)
}

/// moto's S3 Tables (through the sandbox's proxy), or `None` when skipped.
pub(crate) fn s3tables_props() -> Option<HashMap<String, String>> {
    if skipped("TIDEMARK_SKIP_S3TABLES") {
        return None;
    }
    let endpoint = env("TIDEMARK_S3TABLES_ENDPOINT");
    let mut props = HashMap::from([
        ("warehouse".to_string(), env("TIDEMARK_S3TABLES_ARN")),
        ("s3tables.endpoint".to_string(), endpoint.clone()),
        ("s3.endpoint".to_string(), endpoint),
    ]);
    s3_keys(&mut props);
    Some(props)
}

fn file_io_props(props: &HashMap<String, String>) -> HashMap<String, String> {
    props
        .iter()
        .filter(|(k, _)| k.starts_with("s3."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

pub(crate) async fn rest_handle(props: &HashMap<String, String>) -> CatalogHandle {
    CatalogHandle::new(
        rest::open("sw", props, &HashMap::new()).await.unwrap(),
        file_io_props(props),
    )
}

pub(crate) async fn s3tables_handle(props: &HashMap<String, String>) -> CatalogHandle {
    CatalogHandle::new(s3tables::open("st", props).await.unwrap(), file_io_props(props))
}

/// A namespace name no other run on the same server uses (S3 Tables' rules: lowercase,
/// digits and `_`, starting with a letter).
pub(crate) fn unique_ns(purpose: &str) -> String {
    let id = RandomIds.uuid().simple().to_string();
    format!("{purpose}_{}", &id[..16])
}

async fn fresh_table(handle: &CatalogHandle, ns: &str) -> iceberg::table::Table {
    table::create_or_load_table(handle, &format!("{ns}.orders"), &CompiledSpec::orders())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_rest_backend_conforms_on_seaweedfs() {
    let Some(props) = rest_props() else { return };
    let handle = rest_handle(&props).await;
    let caps = handle.capabilities();
    assert!(!caps.register && !caps.swap_pointer, "{caps:?}");
    // Every check but create_load_list, which SeaweedFS fails on a known server gap (below).
    let ns = unique_ns("rest");
    conformance::namespaces(&handle, &format!("{ns}_ns")).await;
    conformance::commit_an_overwrite(&handle, &format!("{ns}_ow")).await;
    conformance::a_stale_commit_is_a_conflict(&handle, &format!("{ns}_stale")).await;
    conformance::racing_committers_have_one_winner(&handle, &format!("{ns}_race"), 8).await;
    conformance::a_lost_reply_is_resolved_by_reload(&handle, &format!("{ns}_lost")).await;
    conformance::register_where_capable(&handle, &format!("{ns}_reg")).await;
}

/// SeaweedFS 4.48 answers a create of an existing table with that table (same uuid, same
/// metadata file) instead of 409: the conformance suite's "create twice is refused" fails on
/// it. Nothing is lost (the table is left as it was), which this checks; the rest of
/// create_load_list is checked here too. When this test fails because the second create was
/// refused, SeaweedFS fixed it: run the whole suite (`conformance::run_all`) above.
#[tokio::test]
async fn seaweedfs_accepts_a_second_create_as_the_same_table() {
    let Some(props) = rest_props() else { return };
    let handle = rest_handle(&props).await;
    let ns = unique_ns("dup");
    let name = format!("{ns}.orders");
    let created = fresh_table(&handle, &ns).await;
    let loaded = table::load_table(&handle, &name).await.unwrap();
    assert_eq!(loaded.metadata().uuid(), created.metadata().uuid());
    let listed = handle
        .catalog()
        .list_tables(created.identifier().namespace())
        .await
        .unwrap();
    assert_eq!(listed, vec![created.identifier().clone()]);
    assert_eq!(
        handle.metadata_pointer(created.identifier()).await.unwrap().as_deref(),
        loaded.metadata_location()
    );
    let again = table::create_table_with_properties(&handle, &name, &CompiledSpec::orders(), HashMap::new())
        .await
        .expect("SeaweedFS 4.48 accepts the second create (if refused now, the gap is fixed)");
    assert_eq!(again.metadata().uuid(), created.metadata().uuid());
    assert_eq!(again.metadata_location(), created.metadata_location());
    let now = table::load_table(&handle, &name).await.unwrap();
    assert_eq!(
        now.metadata().uuid(),
        created.metadata().uuid(),
        "the second create replaced the table"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_s3tables_backend_conforms_on_moto() {
    let Some(props) = s3tables_props() else { return };
    let handle = s3tables_handle(&props).await;
    let caps = handle.capabilities();
    assert!(!caps.register && caps.swap_pointer, "{caps:?}");
    conformance::run_all(&handle, &unique_ns("st")).await;
}

/// What a reference, `Debug` and an error may show of a catalog: never a secret.
fn assert_no_secret(text: &str, props: &HashMap<String, String>) {
    for key in ["credential", "token", "s3.secret-access-key"] {
        if let Some(secret) = props.get(key).map(|v| v.rsplit(':').next().unwrap_or(v)) {
            assert!(secret.len() < 4 || !text.contains(secret), "{key} leaked into: {text}");
        }
    }
}

#[tokio::test]
async fn refused_rest_credentials_are_named_without_the_secret() {
    let Some(mut props) = rest_props() else { return };
    let handle = rest_handle(&props).await;
    let shown = format!("{:?} {:?} {:?}", handle.reference(), handle.backend(), handle.catalog());
    assert_no_secret(&shown, &props);
    assert!(!shown.contains("test:test"), "{shown}");

    props.insert("credential".into(), "test:wrong-secret-value".into());
    let err = rest::open("sw", &props, &HashMap::new()).await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TableError::CatalogUnreachable { .. }), "{err:?}");
    assert!(msg.contains("401") && msg.contains(&props["uri"]), "{msg}");
    assert_no_secret(&msg, &props);
    assert!(!msg.contains("wrong-secret-value"), "{msg}");
}

#[tokio::test]
async fn a_rest_token_is_used_as_given() {
    let Some(mut props) = rest_props() else { return };
    let (id, secret) = props["credential"].split_once(':').unwrap();
    let form = [
        ("grant_type", "client_credentials"),
        ("client_id", id),
        ("client_secret", secret),
        ("scope", "catalog"),
    ];
    let reply: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/v1/oauth/tokens", props["uri"]))
        .form(&form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = reply["access_token"].as_str().unwrap().to_string();
    props.remove("credential");
    props.insert("token".into(), token.clone());
    let handle = rest_handle(&props).await;
    handle.catalog().list_namespaces(None).await.unwrap();
    assert!(!format!("{:?}", handle.backend()).contains(&token));
    // Without either, the server refuses (its /v1/config is public, its namespaces are not).
    props.remove("token");
    let anonymous = rest_handle(&props).await;
    let err = anonymous.catalog().list_namespaces(None).await.unwrap_err();
    assert!(err.to_string().contains("403"), "{err}");
}

/// An empty `token` (`PYICEBERG_CATALOG__X__TOKEN=`) is no token, as in PyIceberg: the
/// credential is exchanged as if it were absent, and no empty `Bearer` header is sent.
#[tokio::test]
async fn an_empty_rest_token_is_unset() {
    let Some(mut props) = rest_props() else { return };
    props.insert("token".into(), String::new());
    let handle = rest_handle(&props).await;
    handle.catalog().list_namespaces(None).await.unwrap();
    // The same through a definition read from the environment.
    let vars = [
        ("PYICEBERG_CATALOG__SW__TYPE", "rest"),
        ("PYICEBERG_CATALOG__SW__TOKEN", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()));
    let defs = super::config::Definitions::from_sources(None, vars).unwrap();
    let mut defined = defs.get("sw").unwrap().clone();
    defined.extend(
        props
            .iter()
            .filter(|(k, _)| *k != "token")
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    assert_eq!(defined.get("token").map(String::as_str), Some(""));
    rest_handle(&defined)
        .await
        .catalog()
        .list_namespaces(None)
        .await
        .unwrap();
}

/// SeaweedFS 4.48's register answers 200, then the table loads as something else. The backend
/// catches it after the fact and says what to configure; the sandbox's definition declares it
/// (`tidemark.register: false`) so that commands refuse before changing anything. When this
/// test fails because the register worked, SeaweedFS fixed it: drop the declaration.
#[tokio::test]
async fn a_broken_register_is_caught() {
    let Some(mut props) = rest_props() else { return };
    props.remove(rest::REGISTER_PROP);
    let handle = rest_handle(&props).await;
    assert!(
        handle.capabilities().register,
        "the spec's default endpoints include register"
    );
    let ns = unique_ns("reg");
    let t0 = fresh_table(&handle, &ns).await;
    let t1 = commit_rows(&handle, &t0, 1, &[]).await.unwrap();
    let location = t1.metadata_location().unwrap().to_string();
    let copy = iceberg::TableIdent::from_strs([ns.as_str(), "registered"]).unwrap();
    let err = handle.backend().register(&copy, &location).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("register endpoint does not work") && msg.contains(rest::REGISTER_PROP),
        "{msg}"
    );

    props.insert(rest::REGISTER_PROP.into(), "false".into());
    let declared = rest_handle(&props).await;
    let other = iceberg::TableIdent::from_strs([ns.as_str(), "refused"]).unwrap();
    let err = declared.register_table(&other, &location).await.unwrap_err();
    assert!(matches!(err, TableError::MissingCapability { .. }), "{err}");
    assert_eq!(declared.metadata_pointer(&other).await.unwrap(), None);
}

/// What the proxy does to a commit request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Forward it, then close the connection without the reply.
    DropReply,
    /// Answer 503 without forwarding it.
    Unavailable,
}

/// A one-request-per-connection HTTP proxy in front of the REST catalog that forwards every
/// request except commits (`POST …/tables/<name>`), which suffer `fault`. Returns its address
/// and the number of commits it saw.
fn faulty_proxy(upstream: SocketAddr, fault: Fault) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let commits = Arc::new(AtomicUsize::new(0));
    let seen = commits.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let seen = seen.clone();
            std::thread::spawn(move || relay(client, upstream, fault, &seen));
        }
    });
    (addr, commits)
}

fn relay(mut client: TcpStream, upstream: SocketAddr, fault: Fault, commits: &AtomicUsize) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap_or(0))
        })
        .unwrap_or(0);
    while buf.len() < head_end + 4 + length {
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let is_commit = method == "POST" && path.contains("/tables/");
    if is_commit {
        commits.fetch_add(1, Ordering::SeqCst);
        if fault == Fault::Unavailable {
            let _ =
                client.write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            return;
        }
    }
    // One request per connection: the upstream closes after its reply, which ends the relay.
    let mut rewritten: String = head
        .lines()
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .map(|l| format!("{l}\r\n"))
        .collect();
    rewritten.push_str("connection: close\r\n\r\n");
    let Ok(mut up) = TcpStream::connect(upstream) else {
        return;
    };
    if up.write_all(rewritten.as_bytes()).is_err() || up.write_all(&buf[head_end + 4..]).is_err() {
        return;
    }
    let mut reply = Vec::new();
    let _ = up.read_to_end(&mut reply);
    if is_commit && fault == Fault::DropReply {
        // The server applied it; the client never hears.
        let _ = client.shutdown(std::net::Shutdown::Both);
        return;
    }
    let _ = client.write_all(&reply);
}

fn socket_of(uri: &str) -> SocketAddr {
    let authority = uri.split("://").nth(1).unwrap().split('/').next().unwrap();
    authority.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rest_reply_lost_on_the_wire_is_resolved_by_reload() {
    let Some(props) = rest_props() else { return };
    let handle = rest_handle(&props).await;
    let ns = unique_ns("wire");
    let name = format!("{ns}.orders");
    let t0 = fresh_table(&handle, &ns).await;

    // Applied, reply dropped: the committer's own success, applied once.
    let (addr, commits) = faulty_proxy(socket_of(&props["uri"]), Fault::DropReply);
    let mut lossy = props.clone();
    lossy.insert("uri".into(), format!("http://{addr}"));
    let t1 = commit_rows(&rest_handle(&lossy).await, &t0, 1, &[])
        .await
        .expect("an applied commit whose reply was lost is a success");
    assert_eq!(commits.load(Ordering::SeqCst), 1, "the commit was re-sent");
    let now = table::load_table(&handle, &name).await.unwrap();
    assert_eq!(
        now.metadata().current_snapshot_id(),
        t1.metadata().current_snapshot_id()
    );
    assert_eq!(now.metadata().snapshots().count(), 1);

    // A 503 without the request reaching the catalog: not applied, safe to redo.
    let (addr, commits) = faulty_proxy(socket_of(&props["uri"]), Fault::Unavailable);
    lossy.insert("uri".into(), format!("http://{addr}"));
    let err = commit_rows(&rest_handle(&lossy).await, &now, 2, &[]).await.unwrap_err();
    assert!(matches!(err, TableError::CommitNotApplied { .. }), "{err}");
    assert!(err.to_string().contains("503"), "{err}");
    assert_eq!(commits.load(Ordering::SeqCst), 1);
    let after = table::load_table(&handle, &name).await.unwrap();
    assert_eq!(after.metadata_location(), now.metadata_location());
    commit_rows(&handle, &after, 2, &[]).await.unwrap();
}

/// Through the sandbox's lossy proxy, moto's UpdateTableMetadataLocation reply is one the SDK
/// cannot parse, sent after moto moved the pointer: a real lost reply, resolved by reload.
#[tokio::test]
async fn an_unreadable_s3tables_reply_is_resolved_by_reload() {
    let Some(props) = s3tables_props() else { return };
    let handle = s3tables_handle(&props).await;
    let ns = unique_ns("raw");
    let t0 = fresh_table(&handle, &ns).await;
    let mut raw = props.clone();
    raw.insert("s3tables.endpoint".into(), env("TIDEMARK_S3TABLES_LOSSY_ENDPOINT"));
    let t1 = commit_rows(&s3tables_handle(&raw).await, &t0, 1, &[])
        .await
        .expect("the commit moto applied is found by the reload");
    let now = table::load_table(&handle, &format!("{ns}.orders")).await.unwrap();
    assert_eq!(now.metadata_location(), t1.metadata_location());
    assert_eq!(now.metadata().snapshots().count(), 1);
}

#[tokio::test]
async fn s3tables_swaps_the_pointer_only_from_the_expected_file() {
    let Some(props) = s3tables_props() else { return };
    let handle = s3tables_handle(&props).await;
    let ns = unique_ns("swap");
    let t0 = fresh_table(&handle, &ns).await;
    let t1 = commit_rows(&handle, &t0, 1, &[]).await.unwrap();
    let (l0, l1) = (t0.metadata_location().unwrap(), t1.metadata_location().unwrap());
    let ident = t1.identifier();
    assert!(
        !handle.swap_metadata_pointer(ident, l0, l0).await.unwrap(),
        "swapped from a stale pointer"
    );
    assert!(handle.swap_metadata_pointer(ident, l1, l0).await.unwrap());
    assert_eq!(handle.metadata_pointer(ident).await.unwrap().as_deref(), Some(l0));
    assert!(!handle.swap_metadata_pointer(ident, l1, l0).await.unwrap());
    let err = handle.register_table(ident, l1).await.unwrap_err();
    assert!(matches!(err, TableError::MissingCapability { .. }), "{err}");
    assert_no_secret(&format!("{err} {:?}", handle.backend()), &props);
}
