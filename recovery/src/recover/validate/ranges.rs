//! The validation's split by key range ([`super`]), used when the manifests record
//! every data file's key bounds, on both sides (the trusted snapshot's files and the recovered
//! table's): the files are cut into parts of consecutive key ranges, each part holding whole
//! files, so that a part's rows are read once, straight from its files, and compared in memory
//! with the range's events — no spill of the rows (the split by key hash writes every row of both
//! sides to disk and reads it back).
//!
//! The plan ([`plan`]) sorts both sides' files by their lower bound and cuts only where no file
//! reaches past the cut (the highest upper bound so far is below the next file's lower bound), so
//! that runs of overlapping files ("components") stay whole; adjacent components are then joined
//! while a part stays within its target size. A component larger than the largest part allowed
//! (files whose key ranges overlap a lot, as other engines' unsorted appends do), a file without
//! bounds, or bounds of a type other than the key's makes the plan fail, and the validation splits
//! by key hash instead: the memory bound holds either way.
//!
//! The bounds are only a plan, never trusted for the verdict: every key is routed by the parts'
//! lower keys ([`Parts::part_of`]; the events are spilled by it), and every batch read for a part
//! is checked to hold only keys of that part ([`Parts::check_batch`]); a file holding a key
//! outside its manifest's bounds stops the validation with the file and the key named.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int32Type, Int64Type};

use crate::recover::RecoverError;
use crate::reference::Cell;

/// A data file's key bounds and rows, as its manifest records them.
#[derive(Debug, Clone)]
pub(super) struct Bounded {
    pub lo: Cell,
    pub hi: Cell,
    pub rows: u64,
}

/// One part: the files of each side (indexes into the lists given to [`plan`]) and the lowest
/// key bound among them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Part {
    pub lo: Cell,
    pub snapshot: Vec<usize>,
    pub table: Vec<usize>,
    /// Rows of its files, both sides, before deletes.
    pub rows: u64,
}

/// The parts of a plan, in key order. Part `i` holds the keys from its lower key (part 0: every
/// key below too) up to, not including, the next part's lower key.
#[derive(Debug, Clone)]
pub(super) struct Parts(pub Vec<Part>);

/// Cuts the files of both sides into parts of whole files, consecutive in key order, of about
/// `target_rows` rows each; `None` when a file has no bounds (or bounds unlike the others'), or
/// when a run of overlapping files holds more than `max_rows` (see the module documentation).
pub(super) fn plan(
    snapshot: &[Option<Bounded>],
    table: &[Option<Bounded>],
    target_rows: u64,
    max_rows: u64,
) -> Option<Parts> {
    let mut all: Vec<(usize, usize, &Bounded)> = Vec::with_capacity(snapshot.len() + table.len());
    for (side, files) in [snapshot, table].into_iter().enumerate() {
        for (i, f) in files.iter().enumerate() {
            all.push((side, i, f.as_ref()?));
        }
    }
    let kind = |c: &Cell| std::mem::discriminant(c);
    let first = all.first().map(|(_, _, b)| kind(&b.lo));
    if all.iter().any(|(_, _, b)| {
        Some(kind(&b.lo)) != first
            || kind(&b.hi) != kind(&b.lo)
            || !matches!(b.lo, Cell::Str(_) | Cell::Long(_) | Cell::Int(_))
            || b.hi < b.lo
    }) {
        return None;
    }
    all.sort_by(|a, b| a.2.lo.cmp(&b.2.lo));
    // Components: cut wherever no file so far reaches the next file's lower bound.
    let mut components: Vec<Part> = Vec::new();
    let mut hi: Option<&Cell> = None;
    for (side, i, b) in all {
        if hi.is_none_or(|h| *h < b.lo) {
            components.push(Part {
                lo: b.lo.clone(),
                snapshot: Vec::new(),
                table: Vec::new(),
                rows: 0,
            });
        }
        let c = components.last_mut().expect("pushed above");
        (if side == 0 { &mut c.snapshot } else { &mut c.table }).push(i);
        c.rows += b.rows;
        if c.rows > max_rows {
            return None;
        }
        if hi.is_none_or(|h| *h < b.hi) {
            hi = Some(&b.hi);
        }
    }
    // Adjacent components joined while the part stays within the target.
    let mut parts: Vec<Part> = Vec::new();
    for c in components {
        match parts.last_mut() {
            Some(p) if p.rows + c.rows <= target_rows => {
                p.snapshot.extend(c.snapshot);
                p.table.extend(c.table);
                p.rows += c.rows;
            }
            _ => parts.push(c),
        }
    }
    Some(Parts(parts))
}

impl Parts {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Each part's lower key (part 0's is not used: it also holds every key below).
    pub fn lower_keys(&self) -> Vec<Cell> {
        self.0.iter().map(|p| p.lo.clone()).collect()
    }

    /// The part that holds `key`.
    pub fn part_of(lower_keys: &[Cell], key: &Cell) -> usize {
        lower_keys.partition_point(|lo| lo <= key).saturating_sub(1)
    }

    /// Checks that every key of `batch` (its column `key_column`) belongs to part `p`: a row
    /// of another part, or a null key, means the manifest's bounds of `file` are wrong, and the
    /// validation stops naming the file, the key and the part's range.
    pub fn check_batch(&self, p: usize, batch: &RecordBatch, key_column: &str, file: &str) -> Result<(), RecoverError> {
        let invalid = |message: String| RecoverError::Validation { message };
        let key = batch
            .column_by_name(key_column)
            .ok_or_else(|| invalid(format!("data file {file}: no key column {key_column}")))?;
        if key.null_count() > 0 {
            return Err(invalid(format!(
                "data file {file} holds a row whose key ({key_column}) is null"
            )));
        }
        let Some((min, max)) = min_max(key.as_ref()).map_err(|e| invalid(format!("data file {file}: {e}")))? else {
            return Ok(()); // no rows
        };
        let below = p > 0 && min < self.0[p].lo;
        let above = self.0.get(p + 1).is_some_and(|next| max >= next.lo);
        if below || above {
            let key = if below { min } else { max };
            let to = self
                .0
                .get(p + 1)
                .map_or("the highest key".to_string(), |n| format!("below {}", n.lo));
            return Err(invalid(format!(
                "data file {file} holds key {key}, outside the key bounds its manifest records \
                 (the validation's key range from {} to {to} was planned from them)",
                self.0[p].lo
            )));
        }
        Ok(())
    }
}

/// The lowest and highest key of a non-null key column, as cells (`Ok(None)`: no rows); an
/// error for a key type the split cannot compare (the plan only takes string and integer bounds).
fn min_max(key: &dyn Array) -> Result<Option<(Cell, Cell)>, String> {
    if key.is_empty() {
        return Ok(None);
    }
    let str_pair =
        |min: Option<&str>, max: Option<&str>| min.zip(max).map(|(a, b)| (Cell::Str(a.into()), Cell::Str(b.into())));
    Ok(match key.data_type() {
        DataType::Utf8 => str_pair(
            arrow::compute::min_string(key.as_string::<i32>()),
            arrow::compute::max_string(key.as_string::<i32>()),
        ),
        DataType::LargeUtf8 => str_pair(
            arrow::compute::min_string(key.as_string::<i64>()),
            arrow::compute::max_string(key.as_string::<i64>()),
        ),
        DataType::Int64 => {
            let a = key.as_primitive::<Int64Type>();
            arrow::compute::min(a)
                .zip(arrow::compute::max(a))
                .map(|(a, b)| (Cell::Long(a), Cell::Long(b)))
        }
        DataType::Int32 => {
            let a = key.as_primitive::<Int32Type>();
            arrow::compute::min(a)
                .zip(arrow::compute::max(a))
                .map(|(a, b)| (Cell::Int(a), Cell::Int(b)))
        }
        other => return Err(format!("a key column of type {other} cannot be split by key range")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use std::sync::Arc;

    fn s(lo: &str, hi: &str, rows: u64) -> Option<Bounded> {
        Some(Bounded {
            lo: Cell::Str(lo.into()),
            hi: Cell::Str(hi.into()),
            rows,
        })
    }

    fn sides(parts: &Parts) -> Vec<(Vec<usize>, Vec<usize>)> {
        parts.0.iter().map(|p| (p.snapshot.clone(), p.table.clone())).collect()
    }

    /// Sorted, disjoint files on each side whose cuts do not line up: a part ends only where
    /// no file of either side reaches past it, and adjacent runs are joined up to the target.
    #[test]
    fn parts_are_cut_only_where_no_file_of_either_side_reaches_past() {
        let snap = [s("a", "c", 10), s("d", "f", 10), s("m", "p", 10), s("q", "s", 10)];
        // Table: "b".."e" straddles the snapshot's cut between "c" and "d".
        let table = [s("a", "b", 5), s("b", "e", 10), s("e", "f", 5), s("m", "s", 20)];
        let parts = plan(&snap, &table, 0, 1000).unwrap();
        assert_eq!(sides(&parts), vec![(vec![0, 1], vec![0, 1, 2]), (vec![2, 3], vec![3])]);
        assert_eq!(parts.0[1].lo, Cell::Str("m".into()));
        assert_eq!(parts.0.iter().map(|p| p.rows).collect::<Vec<_>>(), vec![40, 40]);
        // A target of 80 joins both runs; of 40 keeps them apart.
        assert_eq!(plan(&snap, &table, 80, 1000).unwrap().len(), 1);
        assert_eq!(plan(&snap, &table, 40, 1000).unwrap().len(), 2);
        // Equal bounds overlap: a key "f" may be in both files.
        let touching = [s("a", "f", 1), s("f", "g", 1)];
        assert_eq!(plan(&touching, &[], 0, 100).unwrap().len(), 1);
    }

    #[test]
    fn no_plan_without_bounds_or_with_a_run_larger_than_allowed() {
        assert!(
            plan(&[s("a", "b", 1), None], &[], 10, 100).is_none(),
            "a file without bounds"
        );
        assert!(plan(&[s("a", "b", 1)], &[None], 10, 100).is_none());
        // One file over everything: one run of 60 rows.
        let snap = [s("a", "z", 30), s("b", "c", 10), s("x", "y", 20)];
        assert!(plan(&snap, &[], 10, 59).is_none());
        assert_eq!(plan(&snap, &[], 10, 60).unwrap().len(), 1);
        let mixed = [
            s("a", "b", 1),
            Some(Bounded {
                lo: Cell::Long(1),
                hi: Cell::Long(2),
                rows: 1,
            }),
        ];
        assert!(plan(&mixed, &[], 10, 100).is_none(), "bounds of two types");
        assert!(plan(&[s("b", "a", 1)], &[], 10, 100).is_none(), "upper below lower");
        assert_eq!(plan(&[], &[], 10, 100).unwrap().len(), 0);
    }

    #[test]
    fn every_key_routes_to_the_part_whose_range_holds_it() {
        let parts = plan(&[s("d", "f", 1), s("m", "p", 1)], &[s("t", "u", 1)], 0, 10).unwrap();
        let lows = parts.lower_keys();
        let route = |k: &str| Parts::part_of(&lows, &Cell::Str(k.into()));
        assert_eq!(
            ["a", "d", "g", "l", "m", "s", "t", "zz"].map(route),
            [0, 0, 0, 0, 1, 1, 2, 2]
        );
    }

    #[test]
    fn a_batch_with_a_key_outside_its_part_names_the_file_and_the_key() {
        let parts = plan(&[s("d", "f", 1), s("m", "p", 1)], &[], 0, 10).unwrap();
        let batch = |keys: Vec<Option<&str>>| {
            let schema = Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
                "order_id",
                DataType::Utf8,
                true,
            )]));
            RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(keys))]).unwrap()
        };
        // Part 0 also holds keys below its lowest bound; part 1 none below "m".
        parts
            .check_batch(0, &batch(vec![Some("a"), Some("l")]), "order_id", "f0")
            .unwrap();
        parts
            .check_batch(1, &batch(vec![Some("m"), Some("zz")]), "order_id", "f1")
            .unwrap();
        let e = parts
            .check_batch(0, &batch(vec![Some("e"), Some("n")]), "order_id", "s3://b/f0.parquet")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("s3://b/f0.parquet") && e.contains("key n") && e.contains("below m"),
            "{e}"
        );
        let e = parts
            .check_batch(1, &batch(vec![Some("c")]), "order_id", "f1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("key c"), "{e}");
        let e = parts
            .check_batch(1, &batch(vec![None]), "order_id", "f1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("null"), "{e}");

        let longs = plan(
            &[
                Some(Bounded {
                    lo: Cell::Long(0),
                    hi: Cell::Long(9),
                    rows: 1,
                }),
                Some(Bounded {
                    lo: Cell::Long(10),
                    hi: Cell::Long(19),
                    rows: 1,
                }),
            ],
            &[],
            0,
            10,
        )
        .unwrap();
        let b = RecordBatch::try_new(
            Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
                "id",
                DataType::Int64,
                false,
            )])),
            vec![Arc::new(Int64Array::from(vec![3, 12]))],
        )
        .unwrap();
        assert!(
            longs
                .check_batch(0, &b, "id", "f")
                .unwrap_err()
                .to_string()
                .contains("key 12")
        );
        // A key type the split cannot compare is an error, never a pass.
        let floats = RecordBatch::try_new(
            Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
                "id",
                DataType::Float64,
                false,
            )])),
            vec![Arc::new(arrow::array::Float64Array::from(vec![1.0]))],
        )
        .unwrap();
        let e = longs.check_batch(0, &floats, "id", "f9").unwrap_err().to_string();
        assert!(e.contains("f9") && e.contains("Float64"), "{e}");
    }
}
