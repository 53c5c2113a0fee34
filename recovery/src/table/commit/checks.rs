//! What a commit checks before it writes anything: a table tidemark can commit to
//! ([`check_supported`]: format v2, codecs this build writes, [`check_codecs`]), and the Avro
//! codec its manifests are then written with ([`use_avro_codec`]).

use iceberg::spec::{FormatVersion, TableMetadata};

use super::write::writer_properties;
use crate::table::avro_codec::AvroCodec;
use crate::table::error::{TableError, iceberg_err};

/// The hand-made snapshot supports format v2 tables (partitioned or not: files are written per
/// partition of the default spec) whose codecs this build writes ([`check_codecs`]). Writers
/// call it before they write anything, so that a refused table gets no unreferenced file.
pub fn check_supported(name: &str, meta: &TableMetadata) -> Result<(), TableError> {
    let unsupported = |reason: String| {
        Err(TableError::Unsupported {
            table: name.to_string(),
            reason,
        })
    };
    if meta.format_version() != FormatVersion::V2 {
        return unsupported(format!("format {} (only v2 is supported)", meta.format_version()));
    }
    check_codecs(name, meta)
}

/// Refuses a table whose properties ask for a Parquet or an Avro (manifest) codec this build
/// does not write (see [`writer_properties`], [`AvroCodec::from_properties`]).
pub fn check_codecs(name: &str, meta: &TableMetadata) -> Result<(), TableError> {
    let props = meta
        .table_properties()
        .map_err(iceberg_err(format!("read the properties of {name}")))?;
    writer_properties(name, meta.properties(), &props, meta.current_schema())?;
    AvroCodec::from_properties(meta.properties()).map_err(|reason| TableError::Unsupported {
        table: name.to_string(),
        reason,
    })?;
    Ok(())
}

/// Makes the manifests and manifest list that a commit to `meta`'s table writes next use the
/// codec of its `write.avro.compression-codec` (see [`crate::catalog::table_io`]).
pub(super) fn use_avro_codec(name: &str, meta: &TableMetadata) -> Result<(), TableError> {
    let codec = AvroCodec::from_properties(meta.properties()).map_err(|reason| TableError::Unsupported {
        table: name.to_string(),
        reason,
    })?;
    crate::catalog::table_io::set_table_codec(meta.location(), codec);
    Ok(())
}
