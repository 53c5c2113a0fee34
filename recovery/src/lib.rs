//! tidemark's recovery side: Iceberg table work, DataFusion replay, reference validation, DR
//! tools, and the `tidemark` command line (in `cli`).

pub mod exit;
pub mod progress;
pub mod catalog;
pub mod table;
pub mod reference;
pub mod merge;
