//! A full disk under the SQLite catalog (a small tmpfs, mounted for the test; skipped with a
//! message where mounting is not permitted): the error names the full disk, never "cannot be
//! reached" nor a later `NamespaceNotFound` that hid it.

use super::super::support::faults::files_ending;
use super::super::support::*;

/// A tmpfs of `kib` KiB at a fresh folder, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(kib: u64) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!(
                "skipped: cannot mount a tmpfs (run as root to test a full disk): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        Some(Tmpfs { dir })
    }

    fn path(&self, rel: &str) -> String {
        self.dir.path().join(rel).display().to_string()
    }

    /// Fills the file system but for `free_kib` KiB.
    fn fill_but(&self, free_kib: u64) {
        let filler = self.dir.path().join("filler");
        let _ = std::fs::remove_file(&filler);
        let _ = std::fs::remove_file(self.dir.path().join("catalog.db"));
        let stat = nix_free_kib(self.dir.path());
        let size = stat.saturating_sub(free_kib) * 1024;
        std::fs::write(&filler, vec![0u8; size as usize]).unwrap();
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Free KiB of the file system at `dir` (`df`).
fn nix_free_kib(dir: &std::path::Path) -> u64 {
    let out = std::process::Command::new("df")
        .args(["-k", "--output=avail"])
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap()
}

#[test]
fn a_full_disk_under_the_sqlite_catalog_is_named() {
    let Some(fs) = Tmpfs::mount(1024) else {
        return;
    };
    let s = Scratch::new();
    let journal = journal_with(&s, "journal", 200, 200);
    let catalog = fs.path("catalog.db");
    let warehouse = s.path_str("warehouse");
    let story = s.story(&journal, &catalog, "shop.orders").warehouse(&warehouse);
    let apply = story.args("apply", &[]);
    let mut failed = 0;
    // From no room at all to room for everything: every failure names the full disk, whichever
    // write it hit (creating the catalog's tables, the namespace, the table's row).
    for free in (0..=64).step_by(4) {
        fs.fill_but(free);
        let _ = std::fs::remove_dir_all(s.path("warehouse"));
        let r = s.run(&apply);
        if r.code == 0 {
            continue;
        }
        failed += 1;
        assert_eq!(r.code, 1, "{free} KiB free: {}", r.stderr);
        assert!(r.stderr.contains("the disk is full"), "{free} KiB free: {}", r.stderr);
        assert_eq!(
            r.stderr.matches("database or disk is full").count(),
            1,
            "{free} KiB free: {}",
            r.stderr
        );
        for hidden in ["cannot be reached", "NamespaceNotFound", "does not exist"] {
            assert!(!r.stderr.contains(hidden), "{free} KiB free: {}", r.stderr);
        }
    }
    assert!(failed > 0, "the catalog never ran out of room");
}

/// A full disk under the warehouse: the table file's write fails, and the printed error says
/// the cause once (iceberg's and opendal's errors each repeat their source in their own text;
/// `{:#}` printed "No space left on device" three times).
#[test]
fn a_full_warehouse_disk_is_named_once() {
    let Some(fs) = Tmpfs::mount(1024) else {
        return;
    };
    let s = Scratch::new();
    let journal = journal_with(&s, "journal", 200, 200);
    let catalog = s.path_str("catalog.db");
    let warehouse = fs.path("warehouse");
    fs.fill_but(0);
    let r = s
        .story(&journal, &catalog, "shop.orders")
        .warehouse(&warehouse)
        .run("apply", &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.stderr.matches("No space left on device").count(), 1, "{}", r.stderr);
    assert_eq!(r.stderr.matches("no storage space").count(), 1, "{}", r.stderr);
}

/// A data file whose write fails on a full disk is removed (issue 34): nothing half-written
/// takes the room the re-run needs, and the re-run after freeing space succeeds.
#[test]
fn a_data_file_cut_short_by_a_full_disk_is_removed() {
    let Some(fs) = Tmpfs::mount(8 * 1024) else {
        return;
    };
    let s = Scratch::new();
    let journal = s.path_str("journal");
    s.run(&["journal", "init", "--journal", &journal]).ok();
    let input = s.path_str("events.ndjson");
    s.run(&[
        "gen", "events", "--orders", "30000", "--events", "60000", "--out", &input,
    ])
    .ok();
    s.append(&journal, &input).ok();
    let catalog = s.path_str("catalog.db");
    let warehouse = fs.path("warehouse");
    // Room for the table's metadata, not for its data files.
    fs.fill_but(256);
    let story = s.story(&journal, &catalog, "shop.orders").warehouse(&warehouse);
    let apply = story.args("apply", &["--json"]);
    let r = s.run(&apply);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("No space left on device"), "{}", r.stderr);
    let left = files_ending(std::path::Path::new(&warehouse), ".parquet");
    assert!(
        left.is_empty(),
        "half-written data files left behind: {left:?}\n{}",
        r.stderr
    );
    std::fs::remove_file(fs.dir.path().join("filler")).unwrap();
    let again = s.run(&apply).ok().json();
    assert_eq!(again["applied_to_position"], 60000, "{again}");
}

/// A table's row that the SQLite catalog never wrote (issue 34): iceberg-catalog-sql's
/// `create_table` ignores a failed commit, so a commit refused by the database (here: locked by
/// a reader for longer than the busy timeout; a full disk fails the same way) was reported as a
/// created table, and the next step failed on a table that was not there ("the outcome of the
/// commit is unknown … TableNotFound", exit 9). Now the creation itself fails, naming the table
/// and the database's cause, its first metadata file is removed, and a re-run creates the table.
#[test]
fn a_table_row_the_sqlite_catalog_did_not_write_is_named() {
    let s = Scratch::new();
    let journal = journal_with(&s, "journal", 50, 50);
    let (catalog, warehouse) = (s.path_str("catalog.db"), s.path_str("warehouse"));
    let apply = |table: &str| {
        s.story(&journal, &catalog, table)
            .warehouse(&warehouse)
            .run("apply", &[])
    };
    // The namespace and the catalog's own tables exist before.
    apply("shop.first").ok();
    // A reader holds the database (Python's sqlite3, not tidemark) for 12 seconds: a write may
    // begin, its commit cannot.
    let mut reader = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('BEGIN'); \
             c.execute('SELECT count(*) FROM iceberg_tables').fetchone(); print('holding', flush=True); \
             time.sleep(12); c.execute('COMMIT')",
            &catalog,
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(reader.stdout.take().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), "holding");
    let r = apply("shop.orders");
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("create table shop.orders failed") && r.stderr.contains("database is locked"),
        "{}",
        r.stderr
    );
    for hidden in ["TableNotFound", "outcome of the commit is unknown"] {
        assert!(!r.stderr.contains(hidden), "{}", r.stderr);
    }
    let metadata: Vec<_> = std::fs::read_dir(s.path("warehouse/shop/orders/metadata"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(metadata.is_empty(), "the failed creation left {metadata:?}");
    reader.wait().unwrap();
    // Once the reader is gone the same command creates and applies.
    apply("shop.orders").ok();
    let rows = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); \
             print(c.execute(\"SELECT count(*) FROM iceberg_tables WHERE table_name = 'orders'\").fetchone()[0])",
            &catalog,
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&rows.stdout).trim(), "1");
}
