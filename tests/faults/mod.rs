//! End-to-end scenarios of the fault issue (issue 12): what a command does when its own write's
//! outcome is unknown, a re-run of a completed recovery, S3 errors and lost replies through the
//! fault proxy, refused credentials, and crashes (kill -9 and failpoints) at any moment followed
//! by a plain re-run; the commands beyond the journal's under 10% of S3 requests failing
//! (commands.rs). Shared helpers are in tests/support/faults.rs.

mod commands;
mod crashes;
mod debris;
mod disk_full;
mod follow;
mod reruns;
mod s3;
