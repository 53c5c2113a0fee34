//! The key-range chunks of a copy-on-write merge ([`crate::apply::unit`], [`crate::apply::spill`]),
//! [`CHUNKS_IN_FLIGHT`] at a time on tasks of their own, so that both cores work (the Parquet
//! decode, the merge, the sort and the encode of one chunk run mostly on one thread).
//!
//! Each chunk has two stages: `compute` (read its rows, merge, sort; a spawned task, so it owns
//! what it uses) and `write` (its files). The write stage is *started* in chunk order, on the
//! caller's task, before it is spawned: that is where a chunk draws its file ids, so that the
//! ids come in the same sequence as when the chunks ran one after the other (deterministic ids
//! give the same file names). Results come back in chunk order.
//!
//! Memory: a chunk takes one of [`CHUNKS_IN_FLIGHT`] slots before its compute starts and gives
//! it back when its files are written, so no more than that many chunks' data are held at once.
//!
//! Errors: the first error in chunk order wins, as when the chunks ran one after the other (a
//! conflict in the second chunk is reported even when the first is still running, and a failed
//! write of an earlier chunk before a later chunk's conflict); everything still running is
//! aborted, and nothing is committed (the caller commits only after every chunk succeeded).
//! What the chunks before the failing one wrote comes back with the error ([`ChunksFailed`]):
//! those files are in no snapshot, and the caller deletes them ([`discard`]).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinError, JoinHandle};

use iceberg::spec::DataFile;
use iceberg::table::Table;

use crate::apply::ApplyError;
use crate::apply::rules::ROWS_PER_FILE;
use crate::merge::MergeError;
use crate::table::TableError;

/// Chunks merged at the same time (the machines this is tuned for have two cores).
pub const CHUNKS_IN_FLIGHT: usize = 2;

#[cfg(test)]
tokio::task_local! {
    /// Tests: the chunks in flight instead of [`CHUNKS_IN_FLIGHT`] (1 runs them one after the
    /// other, as before chunks ran concurrently), for merges called within its scope.
    pub(crate) static LIMIT: usize;
}

/// The chunks in flight: [`CHUNKS_IN_FLIGHT`] (tests may set [`LIMIT`]).
pub(crate) fn limit() -> usize {
    #[cfg(test)]
    if let Ok(n) = LIMIT.try_with(|n| *n) {
        return n;
    }
    CHUNKS_IN_FLIGHT
}

/// The partitions each of `merges` merges runs on when they share the [`limit`] slots: one
/// when two or more run side by side (they keep both cores busy, and a plan on one partition
/// skips the hash repartitioning that copies every row), else two ([`crate::merge::merge_in`]).
pub(crate) fn partitions_each(merges: usize) -> usize {
    if merges >= 2 && limit() >= 2 { 1 } else { 2 }
}

/// The table rows a copy-on-write chunk of `files` reads: `chunk_rows`, or fewer, so that a
/// table smaller than [`limit`] chunks of `chunk_rows` still makes [`limit`] chunks and both
/// cores merge (one chunk of a 1M-row table left one core idle through its decode, sort and
/// encode); never fewer than one file's rows ([`ROWS_PER_FILE`]).
pub(crate) fn chunk_rows_for(files: &[&DataFile], chunk_rows: u64) -> u64 {
    let rows: u64 = files.iter().map(|f| f.record_count()).sum();
    chunk_rows.min(rows.div_ceil(limit() as u64).max(ROWS_PER_FILE as u64))
}

/// A spawned task, aborted when dropped (an error in another chunk stops it).
struct Task<T>(JoinHandle<T>);

impl<T> Drop for Task<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn joined<T>(r: Result<Result<T, ApplyError>, JoinError>) -> Result<T, ApplyError> {
    match r {
        Ok(r) => r,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(MergeError::Input(format!("a merge task stopped: {e}")).into()),
    }
}

/// A failed [`in_order`]: the first error in chunk order, and the results of the writes that
/// completed before it (files written for a unit that will not be committed).
pub(crate) struct ChunksFailed<U> {
    pub(crate) error: ApplyError,
    pub(crate) written: Vec<U>,
}

/// Deletes `files`, written for a unit that stopped before its commit, best effort (each
/// delete is tried), and returns `error`, which stays the error: unchanged when every file was
/// deleted, else wrapped with each file left and why ([`ApplyError::Uncleaned`]).
pub(crate) async fn discard(table: &Table, error: ApplyError, files: Vec<DataFile>) -> ApplyError {
    let left = remove_files(table, written_paths(&files)).await;
    with_left(error, left)
}

/// `error`, wrapped with the files left behind when there are any ([`ApplyError::Uncleaned`]).
fn with_left(error: ApplyError, left: Vec<String>) -> ApplyError {
    if left.is_empty() {
        error
    } else {
        ApplyError::Uncleaned {
            error: Box::new(error),
            left,
        }
    }
}

/// Deletes `paths` best effort (each delete is tried) and names each one left and why.
async fn remove_files(table: &Table, paths: Vec<String>) -> Vec<String> {
    let mut left = Vec::new();
    for path in paths {
        if let Err(e) = table.file_io().delete(&path).await {
            left.push(format!("{path}: {e}"));
        }
    }
    left
}

/// A commit that failed with `error`, and the data and delete files its attempt wrote: removed
/// when the commit certainly did not go in (a conflict, not applied, a failure before it was
/// sent), so that a retry or a re-run needs no more room than the first attempt; kept when its
/// outcome is unknown (the commit may be in; the next run resolves it). With `retry` (the caller
/// tries again) a file that could not be removed is named on stderr, since the command goes on;
/// else the error is returned, naming each file left ([`ApplyError::Uncleaned`]).
pub(crate) async fn after_failed_commit(
    table: &Table,
    error: TableError,
    written: Vec<String>,
    retry: bool,
) -> Result<(), ApplyError> {
    let left = match error {
        TableError::CommitUnknown { .. } => Vec::new(),
        _ => remove_files(table, written).await,
    };
    if !retry {
        return Err(with_left(error.into(), left));
    }
    for l in &left {
        eprintln!(
            "tidemark: warning: a file written for a commit that did not go in could not be removed (in no snapshot; delete it): {l}"
        );
    }
    Ok(())
}

/// The paths of the files an attempt wrote (its data and delete files), before the commit takes
/// them.
pub(crate) fn written_paths<'a>(files: impl IntoIterator<Item = &'a DataFile>) -> Vec<String> {
    files.into_iter().map(|f| f.file_path().to_string()).collect()
}

/// [`discard`] of what a failed [`in_order`] wrote, plus `earlier` (files the unit wrote before).
pub(crate) async fn discard_failed(
    table: &Table,
    failed: ChunksFailed<Vec<DataFile>>,
    earlier: Vec<DataFile>,
) -> ApplyError {
    let mut files = earlier;
    files.extend(failed.written.into_iter().flatten());
    discard(table, failed.error, files).await
}

/// Runs `compute` then `write` for every item, `limit` items at a time (see the module
/// documentation), and returns the writes' results in the items' order.
pub(crate) async fn in_order<I, T, U, C, CF, W, WF>(
    items: I,
    limit: usize,
    mut compute: C,
    mut write: W,
) -> Result<Vec<U>, ChunksFailed<U>>
where
    I: IntoIterator,
    C: FnMut(I::Item) -> CF,
    CF: Future<Output = Result<T, ApplyError>> + Send + 'static,
    T: Send + 'static,
    W: FnMut(T) -> Result<WF, ApplyError>,
    WF: Future<Output = Result<U, ApplyError>> + Send + 'static,
    U: Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limit.max(1)));
    let mut items = items.into_iter();
    let mut next = items.next();
    // A computed chunk keeps its slot until its write ends, a failed one until it is seen (so
    // that no chunk is started after a failure).
    let mut computing: VecDeque<Task<(Result<T, ApplyError>, OwnedSemaphorePermit)>> = VecDeque::new();
    let mut writing: VecDeque<Task<Result<U, ApplyError>>> = VecDeque::new();
    let mut out = Vec::new();
    enum Step<T, U> {
        Computed(Result<T, ApplyError>, Option<OwnedSemaphorePermit>),
        Written(Result<U, ApplyError>),
        Slot(OwnedSemaphorePermit),
    }
    while next.is_some() || !computing.is_empty() || !writing.is_empty() {
        let step = {
            let c = computing.front_mut().map(|t| &mut t.0);
            let w = writing.front_mut().map(|t| &mut t.0);
            tokio::select! {
                biased;
                r = async { w.expect("guarded").await }, if w.is_some() => Step::Written(joined(r)),
                r = async { c.expect("guarded").await }, if c.is_some() => match r {
                    Ok((r, permit)) => Step::Computed(r, Some(permit)),
                    Err(e) => Step::Computed(joined(Err(e)), None),
                },
                p = slots.clone().acquire_owned(), if next.is_some() => Step::Slot(p.expect("never closed")),
            }
        };
        match step {
            // Every chunk before the front write is written, every later one has a later error
            // if any: the front write's error is the first in chunk order.
            Step::Written(r) => {
                writing.pop_front();
                match r {
                    Ok(u) => out.push(u),
                    Err(error) => return Err(ChunksFailed { error, written: out }),
                }
            }
            Step::Computed(r, permit) => {
                computing.pop_front();
                match r.and_then(&mut write) {
                    Ok(fut) => writing.push_back(Task(tokio::spawn(async move {
                        let r = fut.await;
                        drop(permit);
                        r
                    }))),
                    Err(error) => {
                        drop(permit);
                        // Earlier chunks' writes come first in chunk order; what they wrote
                        // goes back with the error.
                        while let Some(mut w) = writing.pop_front() {
                            match joined((&mut w.0).await) {
                                Ok(u) => out.push(u),
                                Err(error) => return Err(ChunksFailed { error, written: out }),
                            }
                        }
                        return Err(ChunksFailed { error, written: out });
                    }
                }
            }
            Step::Slot(permit) => {
                let fut = compute(next.take().expect("guarded"));
                next = items.next();
                computing.push_back(Task(tokio::spawn(async move { (fut.await, permit) })));
            }
        }
    }
    Ok(out)
}
