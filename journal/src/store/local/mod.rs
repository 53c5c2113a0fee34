//! The local-folder backend: the embedded default. Current objects are plain files at
//! `<root>/<key>`, so other tools (DataFusion, Iceberg's local FileIO, `sha256sum`) read them
//! directly. Versions live beside them in `<root>/.tidemark/versions/<encoded key>/<version id>`
//! and are hard-linked into place.
//!
//! Conditional writes take an exclusive `flock` on the key's version folder, so create-only and
//! compare-and-swap are atomic between threads *and* processes. The version folder is the truth:
//! a crash between writing a version and linking it into place leaves the version readable and is
//! repaired by the next write of that key. A plain file with no version folder (written by another
//! tool) is one unversioned object with version id `null`, as S3 reports pre-versioning objects;
//! its ETag is a digest of its bytes (see [`files::content_etag`]), as an S3 ETag is of a single-part
//! object, so copying a folder byte for byte keeps every ETag.
//!
//! * [`folder`] — [`LocalStore`]: the version folders, the per-key lock, and the contract's
//!   operations on them.
//! * [`files`] — the layout on disk: key checks and encoding, version ids and ETags (a plain
//!   file's is a digest of its bytes), atomic writes.

mod files;
mod folder;

pub use folder::LocalStore;
