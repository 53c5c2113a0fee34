//! The validation's verdict ([`ValidationReport`], its [`Mismatch`]es, the [`DistributedCheck`]
//! of a distributed recovery) and the sample a distributed recovery asks for ([`SampleRequest`]).

use serde::Serialize;
use tidemark_schemas::FORMAT_VERSION;

/// How many mismatches the report lists.
pub const FIRST_MISMATCHES: usize = 20;

#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Mismatch {
    pub key: String,
    /// `missing`, `extra`, `version`, `delete_flag`, `value`, `duplicate`.
    pub kind: String,
    pub column: Option<String>,
    pub expected: Option<String>,
    pub found: Option<String>,
}

#[derive(Debug, Clone, Serialize, Default, schemars::JsonSchema)]
pub struct ValidationReport {
    pub format_version: u32,
    pub ok: bool,
    pub keys_expected: u64,
    pub rows_found: u64,
    pub tombstones_expected: u64,
    pub missing: u64,
    pub extra: u64,
    pub version_mismatches: u64,
    pub delete_flag_mismatches: u64,
    pub value_mismatches: u64,
    pub duplicate_keys: u64,
    pub first_mismatches: Vec<Mismatch>,
    /// Partitions the check was split into (1: compared whole): key ranges of whole files, or
    /// key-hash partitions of about `PARTITION_ROWS` (250,000) of the snapshot's or table's rows and the
    /// range's events each (see `split`).
    pub partitions: u64,
    /// How the keys were split: `whole` (one partition), `key_range` (by the files' key bounds,
    /// rows read straight from the files) or `key_hash` (every row spilled to disk by a hash
    /// of its key). Empty in a partition's own verdict.
    pub split: String,
    /// Set when only a sample of the key partitions was compared with the reference (a
    /// distributed recovery; docs/scale-out.md): the counts above are the sample's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample: Option<Sample>,
    /// The distributed recovery's own check of every key, run on the cluster (docs/scale-out.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distributed: Option<DistributedCheck>,
}

/// The key partitions (by the hash of the key, as the partitioned validation splits them) that
/// a sampled validation compared: `partitions` of `0..of`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Sample {
    pub partitions: Vec<usize>,
    pub of: usize,
}

/// Asks for a sampled validation: about one key partition in `one_in`, chosen from `seed`.
#[derive(Debug, Clone)]
pub struct SampleRequest {
    pub seed: String,
    pub one_in: usize,
}

/// A sampled validation splits the keys into at least this many partitions.
pub const MIN_SAMPLE_PARTITIONS: usize = 16;

impl SampleRequest {
    /// The sample of `parts` partitions: `max(1, parts / one_in)` of them, evenly spaced from
    /// a start drawn from the seed (the same seed gives the same sample).
    pub fn pick(&self, parts: usize) -> Sample {
        use std::hash::{Hash, Hasher};
        let k = (parts / self.one_in.max(1)).clamp(1, parts);
        let mut h = std::hash::DefaultHasher::new();
        self.seed.hash(&mut h);
        let start = (h.finish() % parts as u64) as usize;
        let mut partitions: Vec<usize> = (0..k).map(|i| (start + i * parts / k) % parts).collect();
        partitions.sort_unstable();
        Sample { partitions, of: parts }
    }
}

/// The verdict of the distributed validation (every key, computed on the cluster by a
/// formulation other than the merge's; see `recover::distributed_check`).
#[derive(Debug, Clone, Serialize, Default, PartialEq, Eq, schemars::JsonSchema)]
pub struct DistributedCheck {
    pub ok: bool,
    /// Rows the check expects (one per key) and the distinct keys among them.
    pub keys_expected: u64,
    pub rows_found: u64,
    /// Keys the table holds more than once.
    pub duplicate_keys: u64,
    /// Expected rows the table lacks or holds with other values, and the table's rows no
    /// expected row equals.
    pub missing_or_different: u64,
    pub extra_or_different: u64,
    /// Keys of the first differing rows (at most [`FIRST_MISMATCHES`]).
    pub first_keys: Vec<String>,
}

impl ValidationReport {
    /// The empty verdict of a check split `split` into `parts` partitions, which [`Self::add`]
    /// sums their verdicts into.
    pub(super) fn split_into(parts: usize, split: &str) -> ValidationReport {
        ValidationReport {
            format_version: FORMAT_VERSION,
            ok: true,
            partitions: parts as u64,
            split: split.into(),
            ..Default::default()
        }
    }

    /// Adds another partition's verdict (counts summed, mismatches listed up to the limit).
    pub(super) fn add(&mut self, r: ValidationReport) {
        self.keys_expected += r.keys_expected;
        self.rows_found += r.rows_found;
        self.tombstones_expected += r.tombstones_expected;
        self.missing += r.missing;
        self.extra += r.extra;
        self.version_mismatches += r.version_mismatches;
        self.delete_flag_mismatches += r.delete_flag_mismatches;
        self.value_mismatches += r.value_mismatches;
        self.duplicate_keys += r.duplicate_keys;
        self.ok &= r.ok;
        let room = FIRST_MISMATCHES.saturating_sub(self.first_mismatches.len());
        self.first_mismatches.extend(r.first_mismatches.into_iter().take(room));
    }
}

#[cfg(test)]
mod tests {
    use super::SampleRequest;

    #[test]
    fn a_sample_is_a_few_distinct_partitions_fixed_by_its_seed() {
        let req = |seed: &str| SampleRequest {
            seed: seed.into(),
            one_in: 8,
        };
        let s = req("rec-1").pick(40);
        assert_eq!((s.of, s.partitions.len()), (40, 5));
        assert!(s.partitions.windows(2).all(|w| w[0] < w[1]) && s.partitions.iter().all(|&p| p < 40));
        assert_eq!(req("rec-1").pick(40), s, "the same seed, the same sample");
        assert_eq!(req("rec-1").pick(3).partitions.len(), 1, "at least one partition");
        let starts: std::collections::BTreeSet<_> =
            (0..20).map(|i| req(&format!("r{i}")).pick(16).partitions).collect();
        assert!(starts.len() > 1, "seeds choose different samples");
    }
}
