//! The scenario builder (issue 31): one journal, one catalog (of any kind the scratch's
//! environment reaches), one warehouse and one table, and the steps of tidemark's story on them,
//! each run through the `tidemark` binary as an operator runs it:
//! journal → apply → bad write → audit → recover → flip → readers.
//!
//! ```ignore
//! let s = Scratch::new();
//! let story = Story::new(&s).generated(100, 600, 100); // journal init + 600 events in 6 batches
//! story.apply_until(300);
//! story.bad_delete("status = 'paid'");
//! let r = story.run("recover", &["--into", "shop.orders_r", "--json"]).ok().json();
//! ```
//!
//! A step that must succeed is a method returning its [`Run`] after `.ok()`; [`Story::run`]
//! returns the run unchecked, for the scenarios that expect a refusal.

use super::{Run, Scratch, events};

#[derive(Clone)]
pub struct Story<'s> {
    pub s: &'s Scratch,
    /// The journal's URL: a folder of the scratch or `s3://…`.
    pub journal: String,
    /// The catalog: a SQLite file, `postgres://…`, `rest+http://…`, `s3tables://…` or a name
    /// defined in the scratch's environment.
    pub catalog: String,
    /// `--warehouse` for the catalog kinds that take one.
    pub warehouse: Option<String>,
    /// `NAMESPACE.TABLE`.
    pub table: String,
    /// `gen events --seed` for [`Story::generated`].
    pub seed: Option<u64>,
}

impl<'s> Story<'s> {
    /// The embedded default: the journal in `journal/`, the SQLite catalog `catalog.db` (its
    /// warehouse beside it), the table `shop.orders`; nothing written yet.
    pub fn new(s: &'s Scratch) -> Self {
        Story {
            s,
            journal: s.path_str("journal"),
            catalog: s.path_str("catalog.db"),
            warehouse: None,
            table: "shop.orders".into(),
            seed: None,
        }
    }

    pub fn journal(mut self, url: impl Into<String>) -> Self {
        self.journal = url.into();
        self
    }

    pub fn catalog(mut self, catalog: impl Into<String>) -> Self {
        self.catalog = catalog.into();
        self
    }

    pub fn warehouse(mut self, url: impl Into<String>) -> Self {
        self.warehouse = Some(url.into());
        self
    }

    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// `journal init`.
    pub fn init(self) -> Self {
        self.s.run(&["journal", "init", "--journal", &self.journal]).ok();
        self
    }

    /// `journal init`, then `gen events --orders N --events M` appended in batches of `batch`
    /// (`events.ndjson` in the scratch folder).
    pub fn generated(self, orders: u64, events: u64, batch: u64) -> Self {
        let story = self.init();
        let input = story.s.path_str("events.ndjson");
        let (orders, events) = (orders.to_string(), events.to_string());
        let seed = story.seed.map(|s| s.to_string());
        let mut args = vec![
            "gen", "events", "--orders", &orders, "--events", &events, "--out", &input,
        ];
        if let Some(seed) = &seed {
            args.extend(["--seed", seed]);
        }
        story.s.run(&args).ok();
        story.append_file(&input, batch);
        story
    }

    /// `journal init`, then the synthetic events ([`events`]) 1..=`last` in batches of `batch`.
    pub fn journaled(self, last: u64, batch: u64) -> Self {
        let story = self.init();
        story.append_events(1, last, batch);
        story
    }

    /// `journal append` of the synthetic events `first..=last` in batches of `batch`.
    pub fn append_events(&self, first: u64, last: u64, batch: u64) -> Run {
        let input = self
            .s
            .write(&format!("events-{first}-{last}.ndjson"), &events(first, last));
        self.append_file(input.to_str().unwrap(), batch)
    }

    /// `journal append --input FILE --batch-size N`.
    pub fn append_file(&self, input: &str, batch: u64) -> Run {
        self.s
            .append_with(&self.journal, input, &["--batch-size", &batch.to_string()])
            .ok()
    }

    /// `--catalog C [--warehouse W]`.
    pub fn catalog_args(&self) -> Vec<&str> {
        let mut args = vec!["--catalog", self.catalog.as_str()];
        if let Some(w) = &self.warehouse {
            args.extend(["--warehouse", w.as_str()]);
        }
        args
    }

    /// `tidemark VERB --journal J --catalog C [--warehouse W] --table T EXTRA…`, unchecked: the
    /// commands that take the story's journal, catalog and table (`apply`, `recover`, `audit`,
    /// `drill`, …).
    pub fn run(&self, verb: &str, extra: &[&str]) -> Run {
        self.s.run(&self.args(verb, extra))
    }

    /// The arguments [`Story::run`] passes, for a caller that runs them otherwise
    /// ([`Scratch::run_paused`]).
    pub fn args<'a>(&'a self, verb: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![verb, "--journal", self.journal.as_str()];
        args.extend(self.catalog_args());
        args.extend(["--table", self.table.as_str()]);
        args.extend(extra);
        args
    }

    /// `tidemark recover --journal J --catalog C [--warehouse W] --source-table T --into INTO
    /// EXTRA…`, unchecked.
    pub fn recover(&self, into: &str, extra: &[&str]) -> Run {
        self.s.run(&self.recover_args(into, extra))
    }

    /// The arguments [`Story::recover`] passes.
    pub fn recover_args<'a>(&'a self, into: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec!["recover", "--journal", self.journal.as_str()];
        args.extend(self.catalog_args());
        args.extend(["--source-table", self.table.as_str(), "--into", into]);
        args.extend(extra);
        args
    }

    /// `tidemark VERB --catalog C [--warehouse W] --table T EXTRA…` (no journal: `fault
    /// delete`, `table …`), unchecked.
    pub fn run_on_table(&self, verb: &[&str], extra: &[&str]) -> Run {
        let mut args = verb.to_vec();
        args.extend(self.catalog_args());
        args.extend(["--table", self.table.as_str()]);
        args.extend(extra);
        self.s.run(&args)
    }

    /// The drill of the story's real table: `drill --source-table T --journal J --catalog C
    /// [--warehouse W] --scratch SCRATCH EXTRA…`, unchecked.
    pub fn drill_table(&self, scratch: &str, extra: &[&str]) -> Run {
        let mut args = vec![
            "drill",
            "--source-table",
            self.table.as_str(),
            "--journal",
            self.journal.as_str(),
        ];
        args.extend(self.catalog_args());
        args.extend(["--scratch", scratch]);
        args.extend(extra);
        self.s.run(&args)
    }

    /// `apply` of everything journaled, which must succeed.
    pub fn apply(&self, extra: &[&str]) -> Run {
        self.run("apply", extra).ok()
    }

    /// `apply --until POSITION`, which must succeed.
    pub fn apply_until(&self, until: u64) -> Run {
        self.apply(&["--until", &until.to_string()])
    }

    /// The bad write: `fault delete --where PREDICATE`, which must succeed.
    pub fn bad_delete(&self, predicate: &str) -> Run {
        self.run_on_table(&["fault", "delete"], &["--where", predicate]).ok()
    }

    /// [`Story::bad_delete`] with `--json`: what it printed.
    pub fn bad_delete_json(&self, predicate: &str) -> serde_json::Value {
        self.run_on_table(&["fault", "delete"], &["--where", predicate, "--json"])
            .ok()
            .json()
    }
}
