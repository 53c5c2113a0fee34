//! The applier's in-memory key index for merge-on-read: per data file, every row's key (Arrow
//! row format, comparable as bytes) and version, by row position. Data files never change, so an
//! entry stays right for as long as its file is live; which rows are still live is decided at
//! each lookup by the snapshot's position deletes. A file enters the index when a unit scans its
//! key column, or when the applier writes it (its rows are known). Files that are no longer live
//! are dropped ([`KeyIndex::retain`]). Without it every unit would decode the key column of
//! every candidate file: at 10M rows and random keys, the whole table's keys per commit.
//!
//! The index is not used for a snapshot with equality deletes (they compare other columns).

use std::collections::{HashMap, HashSet};

use arrow::row::{Row, Rows};

/// The keys and versions of one data file, by position.
struct FileKeys {
    keys: Rows,
    versions: Option<Vec<i64>>,
    /// Positions in key order, when the file is not sorted by key.
    order: Option<Vec<u32>>,
}

/// See the module documentation.
#[derive(Default)]
pub struct KeyIndex {
    files: HashMap<String, FileKeys>,
}

impl std::fmt::Debug for KeyIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyIndex").field("files", &self.files.len()).finish()
    }
}

impl KeyIndex {
    pub fn contains(&self, path: &str) -> bool {
        self.files.contains_key(path)
    }

    /// Records the keys (and versions) of every row of the data file at `path`, by position.
    pub fn insert(&mut self, path: &str, keys: Rows, versions: Option<Vec<i64>>) {
        let n = keys.num_rows();
        let sorted = (1..n).all(|i| keys.row(i - 1) <= keys.row(i));
        let order = (!sorted).then(|| {
            let mut o: Vec<u32> = (0..n as u32).collect();
            o.sort_by(|a, b| keys.row(*a as usize).cmp(&keys.row(*b as usize)));
            o
        });
        self.files.insert(path.to_string(), FileKeys { keys, versions, order });
    }

    /// Forgets the files not in `live`.
    pub fn retain(&mut self, live: &HashSet<&str>) {
        self.files.retain(|p, _| live.contains(p.as_str()));
    }

    /// The rows of the file at `path` holding one of `wanted` (sorted, unique), as
    /// (position, version, index in `wanted`); `None` when the file is not indexed.
    pub fn lookup(&self, path: &str, wanted: &[Row<'_>]) -> Option<Vec<(u64, Option<i64>, usize)>> {
        let f = self.files.get(path)?;
        let n = f.keys.num_rows();
        let mut out = Vec::new();
        if n == 0 {
            return Some(out);
        }
        let at = |i: usize| match &f.order {
            Some(o) => o[i] as usize,
            None => i,
        };
        let (lo, hi) = (f.keys.row(at(0)), f.keys.row(at(n - 1)));
        let first = wanted.partition_point(|w| *w < lo);
        let last = wanted.partition_point(|w| *w <= hi);
        for (w, key) in wanted.iter().enumerate().take(last).skip(first) {
            // The first row (in key order) not below the key; keys are unique within a file
            // tidemark wrote, but a foreign file may hold a key twice: every match counts.
            let mut i = {
                let (mut a, mut b) = (0usize, n);
                while a < b {
                    let m = (a + b) / 2;
                    if f.keys.row(at(m)) < *key {
                        a = m + 1;
                    } else {
                        b = m;
                    }
                }
                a
            };
            while i < n && f.keys.row(at(i)) == *key {
                let pos = at(i);
                out.push((pos as u64, f.versions.as_ref().map(|v| v[pos]), w));
                i += 1;
            }
        }
        Some(out)
    }

    /// Bytes the index holds (about).
    pub fn size(&self) -> usize {
        self.files
            .values()
            .map(|f| {
                f.keys.size()
                    + f.versions.as_ref().map_or(0, |v| v.len() * 8)
                    + f.order.as_ref().map_or(0, |o| o.len() * 4)
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, StringArray};
    use arrow::row::{RowConverter, SortField};
    use arrow_schema::DataType;

    use super::*;

    fn rows(keys: &[&str]) -> Rows {
        let c = RowConverter::new(vec![SortField::new(DataType::Utf8)]).unwrap();
        let a: ArrayRef = Arc::new(StringArray::from(keys.to_vec()));
        c.convert_columns(&[a]).unwrap()
    }

    #[test]
    fn lookups_find_every_position_of_a_key_sorted_or_not() {
        let mut index = KeyIndex::default();
        index.insert("sorted", rows(&["a", "c", "e"]), Some(vec![1, 2, 3]));
        index.insert("unsorted", rows(&["e", "a", "c", "a"]), None);
        let wanted = rows(&["a", "b", "e", "z"]);
        let w: Vec<Row<'_>> = wanted.iter().collect();
        assert_eq!(index.lookup("sorted", &w), Some(vec![(0, Some(1), 0), (2, Some(3), 2)]));
        let mut found = index.lookup("unsorted", &w).unwrap();
        found.sort();
        assert_eq!(found, vec![(0, None, 2), (1, None, 0), (3, None, 0)]);
        assert_eq!(index.lookup("other", &w), None);
        index.retain(&HashSet::from(["sorted"]));
        assert!(index.contains("sorted") && !index.contains("unsorted"));
    }
}
