//! tidemark's recovery side: Iceberg table work, DataFusion replay, reference validation, DR
//! tools, and the `tidemark` command line (in `cli`).

pub mod catalog;
pub mod exit;
pub mod merge;
pub mod progress;
pub mod reference;
pub mod table;
