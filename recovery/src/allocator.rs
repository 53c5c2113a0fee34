//! The settings of mimalloc, the global allocator of the `tidemark` binary and of the suite (the
//! library sets no allocator; [`configure`] changes nothing for a process that does not use
//! mimalloc).
//!
//! mimalloc returns ("purges") freed memory to the operating system after a delay, 1 s by
//! default (mimalloc 3). A recovery frees and allocates large buffers all the time (file reads,
//! merge inputs, spills): a purged page was soon asked for again, and every new page is a page
//! fault the kernel zeroes first (`clear_page_erms` was 15% of a 10M + 1M recovery's profile,
//! 380,000 minor faults, 5–8 s of system time; docs/performance.md, "the allocator's purge
//! delay"). A command that ends when its work is done ([`Process::OneShot`]: a recovery, an
//! apply, a drill) therefore never purges: its memory is bounded by its own design (docs/benchmarks.md,
//! "Memory and spill files") and goes back to the system when it exits. A command that runs until stopped
//! ([`Process::Service`]: `replica follow` without `--once`, the Ballista scheduler and
//! executors) keeps mimalloc's default, so that an idle service gives back what a busy cycle took.
//!
//! A one-shot process also turns transparent huge pages off for itself (mimalloc's `allow_thp`
//! and, for the arena mimalloc reserved before [`configure`] ran, `prctl(PR_SET_THP_DISABLE)`).
//! mimalloc asks for huge pages on its arenas (`MADV_HUGEPAGE`), so each first touch had the
//! kernel zero 2 MiB: on this project's 2-vCPU machines a 10M + 1M recovery spent 2.7–4.0 s of
//! system time and peaked at 1.43–1.49 GB with them, 1.7 s and 1.26–1.40 GB without, its
//! validation 4.3–4.4 s instead of 5.1–5.4 s (docs/runs/issue-33.md, "Fresh memory").
//! `MIMALLOC_ALLOW_THP` set in the environment wins.

/// What kind of process is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    /// Ends when its work is done.
    OneShot,
    /// Runs until stopped.
    Service,
}

/// The environment variable that overrides the choice (mimalloc's own; `-1`: never purge).
pub const PURGE_DELAY_ENV: &str = "MIMALLOC_PURGE_DELAY";

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_t` (the Rust bindings name no constant
/// for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Never purge (mimalloc's value for it).
pub const NEVER: i64 = -1;

/// The environment variable that keeps transparent huge pages as it says (mimalloc's own).
pub const ALLOW_THP_ENV: &str = "MIMALLOC_ALLOW_THP";

/// `mi_option_allow_thp` in mimalloc 3's `mi_option_t`.
const MI_OPTION_ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

/// Sets mimalloc's purge delay for `process` (see the module doc) unless [`PURGE_DELAY_ENV`] is
/// set (mimalloc reads it itself): returns the delay set, in milliseconds, if any.
pub fn configure(process: Process) -> Option<i64> {
    if process == Process::OneShot && std::env::var_os(ALLOW_THP_ENV).is_none() {
        no_huge_pages();
    }
    configure_unless(process, std::env::var_os(PURGE_DELAY_ENV).is_some())
}

/// Transparent huge pages off for this process (see the module doc): mimalloc no longer asks
/// for them, and the kernel gives none, also in the memory mimalloc reserved before.
fn no_huge_pages() {
    // SAFETY: sets one integer option of the C library, read at each reservation of OS memory.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0) };
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and sets a flag of this process.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

fn configure_unless(process: Process, set_by_environment: bool) -> Option<i64> {
    if set_by_environment || process == Process::Service {
        return None;
    }
    // SAFETY: sets one integer option of the C library; mimalloc reads it at each purge.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, NEVER as _) };
    Some(NEVER)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// mimalloc's purge delay now, in milliseconds (`-1`: never).
    // `c_long` is `i64` here, 32 bits on other targets.
    #[allow(clippy::useless_conversion)]
    fn purge_delay_ms() -> i64 {
        // SAFETY: reads one integer option of the C library.
        i64::from(unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) })
    }

    /// The option index is mimalloc 3's purge delay: setting it changes what mimalloc reports
    /// for that option and not for its neighbour in the enumeration (NUMA nodes, which the
    /// bindings name); a service and a delay the environment sets are left alone.
    #[test]
    fn one_shot_processes_never_purge_services_and_the_environment_keep_their_delay() {
        // SAFETY (every call below): reads or sets one integer option of the C library.
        let numa = unsafe { libmimalloc_sys::mi_option_get(libmimalloc_sys::mi_option_use_numa_nodes) };
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 1234) };
        assert_eq!(purge_delay_ms(), 1234);
        assert_eq!(configure_unless(Process::OneShot, true), None);
        assert_eq!(configure_unless(Process::Service, false), None);
        assert_eq!(purge_delay_ms(), 1234, "the environment's and a service's delay stay");
        assert_eq!(configure_unless(Process::OneShot, false), Some(NEVER));
        assert_eq!(purge_delay_ms(), NEVER);
        let numa_after = unsafe { libmimalloc_sys::mi_option_get(libmimalloc_sys::mi_option_use_numa_nodes) };
        assert_eq!(numa, numa_after);
    }

    /// The option index is mimalloc 3's `allow_thp`: mimalloc reports it enabled before (its
    /// default on Linux) and disabled after, while its neighbours `minimal_purge_size` and
    /// `page_cross_thread_max_reclaim` (32 in `options.c`; the header's comment says 16) keep
    /// their values; and the kernel reports THP disabled for the process.
    #[test]
    #[cfg(target_os = "linux")]
    fn huge_pages_go_off_for_the_process() {
        // SAFETY (every call below): reads one integer option of the C library, or this
        // process's THP flag.
        let get = |o| unsafe { libmimalloc_sys::mi_option_get(o) };
        let (before, reclaim, purge_size) = (get(MI_OPTION_ALLOW_THP), get(42), get(44));
        assert_eq!((before, reclaim), (1, 32), "mimalloc 3's defaults at indices 43 and 42");
        no_huge_pages();
        assert_eq!(get(MI_OPTION_ALLOW_THP), 0);
        assert_eq!((get(42), get(44)), (reclaim, purge_size));
        assert_eq!(unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) }, 1);
    }
}
