//! The importer: raw graphs (npy directories, IGB, OGB, SNAP text) become a
//! verified flashgnn dataset (see `docs/format.md`), out of core.
//!
//! Pipeline (HolisticGNN-style overlap; `builder/` drives it):
//!
//! ```text
//!  edge thread:    parse+check ─► external sort runs ─► merge+dedup+degrees ─► (relabel+resort) ─┐
//!  feature thread: parse+check+convert rows ─► stage (or final features.fg) ─► labels, splits ──┤
//!                                                                              layout pass ◄───┘
//!                                                       (slots + overflow pages) ─► manifest ─► publish
//! ```
//!
//! Architecture invariants:
//! - resident memory is bounded by `--memory-budget` plus a documented
//!   constant: edges only ever live in sort chunks sized from the budget;
//!   per-node arrays (4–16 B/node) are charged against the budget up front;
//! - nothing is visible at the output path until every file is written,
//!   fsynced and checksummed (`flashgnn_io::publish_dir`); any error, panic
//!   or cancellation removes the temporary directory;
//! - every input value is checked where it is read, and errors name the file,
//!   the position (line/column or row/byte offset), the value and the bound.

pub mod builder;
pub mod error;
pub mod options;
pub mod progress;
pub mod rows;
pub mod schema;
pub mod sort;
pub mod source;

pub use builder::{build, BuildReport};
pub use error::{BuildError, Result};
pub use options::{BuildOptions, BuildVerify, FeatureLayout, InputFormat, NanPolicy, Reorder, SelfLoops};
pub use progress::Progress;
pub use schema::{parse_dtype, BuildOption, OptionDefault, OptionKind, BUILD_OPTIONS};
