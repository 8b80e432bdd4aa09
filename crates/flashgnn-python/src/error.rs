//! The one place Rust errors become Python exceptions: every binding turns
//! an error into a `PyErr` through [`py_err`] (or `?` on a [`CoreError`]),
//! and no other file constructs a Python exception.
//!
//! | Rust | Python |
//! |---|---|
//! | `BuildError::Input` | `flashgnn.InputError` |
//! | `BuildError::Config` | `flashgnn.InputError` |
//! | `StoreError::NotADataset` | `flashgnn.DatasetNotFoundError` |
//! | `StoreError::BadRequest` (id out of range, unknown split) | `IndexError` |
//! | `StoreError::Format` (a dataset file failed a check), short reads | `flashgnn.CorruptDatasetError` |
//! | `BuildError::Format` (an *input* file failed a check) | `flashgnn.InputError` |
//! | `IoError` | `OSError` with the errno |
//! | `IoError` refusing a non-regular file (FIFO, device, broken link) | `InputError` (build), `CorruptDatasetError` (dataset) |
//! | `IoError` refusing to replace an output (`--force` rule) | `InputError` (build, generate), else `FileExistsError` |
//! | `BuildError::Cancelled` | `KeyboardInterrupt` |
//! | `SampleError::Store/Format/Io` | as `StoreError` |
//! | `SampleError::BadRequest` (seed out of range, bad fanout) | `IndexError` |
//! | `SampleError::Config` (unknown engine or hot set, zero batch size, hot fraction) | `flashgnn.InputError` |
//! | `SampleError::Internal` (a producer thread died) | `RuntimeError` |
//! | `MutError::Invalid` (bad argument) | `ValueError` |
//! | `MutError::Corrupt` (`mut/`: log, `CURRENT`, free list, `mut` not a directory) | `flashgnn.CorruptDatasetError` |
//! | `MutError::Unavailable` (closed, read-only, log failed) | `RuntimeError` |
//! | `MutError::Io` / `Store` / `Build` | as `IoError` / `StoreError` / `BuildError` |
//! | `SimError::Format` (a trace failed a check) | `flashgnn.CorruptDatasetError` |
//! | `FormatError` of a pre-sample record (`presample_*`) | `flashgnn.CorruptDatasetError` |
//! | `SimError::Config` / `BadRequest` / `Input` (a named trace or config that is missing or not a regular file) | `flashgnn.InputError` |
//! | `SimError::Io` | `OSError` |
//! | `CoreError::Io` (the publishing helpers) | `OSError` with the errno; `FileExistsError` for a refused output |
//! | `CoreError::Input` (a binding argument or option that does not convert) | `flashgnn.InputError` |
//! | `CoreError::Unavailable` (object closed, or created in another process) | `RuntimeError` |
//! | `CoreError::Internal` (a report that does not encode) | `RuntimeError` |
//!
//! Code that can fail in more than one crate (a sampler opening a mutated
//! dataset: the store, the mutable log, the engine) returns [`CoreError`],
//! which keeps each error's own type until it is mapped here — never
//! re-wrapped as another kind (a damaged `mut/` is corruption, not a bad
//! request).

use flashgnn_build::BuildError;
use flashgnn_mutate::MutError;
use flashgnn_sample::SampleError;
use flashgnn_sim::SimError;
use flashgnn_store::StoreError;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyIndexError, PyKeyboardInterrupt, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

create_exception!(flashgnn, FlashgnnError, PyException, "Base class of flashgnn errors.");
create_exception!(
    flashgnn,
    InputError,
    FlashgnnError,
    "Bad input data or options (names file, position, value and bound)."
);
create_exception!(flashgnn, CorruptDatasetError, FlashgnnError, "A dataset file failed a checksum or bounds check.");
create_exception!(flashgnn, DatasetNotFoundError, FlashgnnError, "The path is not a flashgnn dataset.");

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("FlashgnnError", py.get_type::<FlashgnnError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("CorruptDatasetError", py.get_type::<CorruptDatasetError>())?;
    m.add("DatasetNotFoundError", py.get_type::<DatasetNotFoundError>())?;
    Ok(())
}

/// A refusal made by flashgnn itself (no errno): a non-regular file opened
/// (`InvalidInput`) or an output it will not replace (`AlreadyExists`).
fn refusal(e: &flashgnn_io::IoError) -> Option<std::io::ErrorKind> {
    let k = e.source.kind();
    (e.source.raw_os_error().is_none()
        && matches!(k, std::io::ErrorKind::InvalidInput | std::io::ErrorKind::AlreadyExists))
    .then_some(k)
}

fn io_err(e: &flashgnn_io::IoError) -> PyErr {
    let msg = e.to_string();
    if refusal(e) == Some(std::io::ErrorKind::AlreadyExists) {
        return pyo3::exceptions::PyFileExistsError::new_err(msg);
    }
    match e.source.raw_os_error() {
        Some(code) => PyOSError::new_err((code, msg)),
        None => PyOSError::new_err(msg),
    }
}

fn store_err(e: StoreError) -> PyErr {
    match &e {
        StoreError::NotADataset(m) => DatasetNotFoundError::new_err(m.clone()),
        StoreError::Format(_) => CorruptDatasetError::new_err(e.to_string()),
        StoreError::Io(io) => {
            // A short read means the file is shorter than the manifest says.
            if io.source.kind() == std::io::ErrorKind::UnexpectedEof
                || refusal(io) == Some(std::io::ErrorKind::InvalidInput)
            {
                CorruptDatasetError::new_err(e.to_string())
            } else {
                io_err(io)
            }
        }
        StoreError::BadRequest(m) => PyIndexError::new_err(m.clone()),
    }
}

fn build_err(e: BuildError) -> PyErr {
    match e {
        BuildError::Input { .. } | BuildError::Config(_) => InputError::new_err(e.to_string()),
        BuildError::Format(_) => InputError::new_err(e.to_string()),
        BuildError::Io(io) if refusal(&io).is_some() => InputError::new_err(io.to_string()),
        BuildError::Io(io) => io_err(&io),
        BuildError::Store(s) => store_err(s),
        BuildError::Cancelled => PyKeyboardInterrupt::new_err(e.to_string()),
    }
}

fn sample_err(e: SampleError) -> PyErr {
    match e {
        SampleError::Store(s) => store_err(s),
        SampleError::Format(f) => store_err(StoreError::Format(f)),
        SampleError::Io(io) => store_err(StoreError::Io(io)),
        SampleError::BadRequest(m) => PyIndexError::new_err(m),
        SampleError::Config(m) => InputError::new_err(m),
        SampleError::Internal(m) => PyRuntimeError::new_err(m),
    }
}

/// A corrupt trace names its file and offset; bad config or request is bad
/// input; I/O is an `OSError`.
fn sim_err(e: SimError) -> PyErr {
    match e {
        SimError::Format(f) => CorruptDatasetError::new_err(f.to_string()),
        SimError::Config(m) | SimError::BadRequest(m) | SimError::Input(m) => InputError::new_err(m),
        SimError::Io(m) => PyOSError::new_err(m),
    }
}

fn mut_err(e: MutError) -> PyErr {
    match e {
        MutError::Invalid(m) => PyValueError::new_err(m),
        MutError::Corrupt(m) => CorruptDatasetError::new_err(m),
        MutError::Unavailable(m) => PyRuntimeError::new_err(m),
        MutError::Io(io) => store_err(StoreError::Io(io)),
        MutError::Store(s) => store_err(s),
        MutError::Build(b) => build_err(b),
    }
}

/// An error of any of the crates below, kept with its own type until it
/// becomes a Python exception (`PyErr::from`, [`py_err`]), or one the
/// binding layer itself raises.
#[derive(Debug)]
pub enum CoreError {
    Store(StoreError),
    Sample(SampleError),
    Mut(MutError),
    Build(BuildError),
    Sim(SimError),
    /// A file-system error of a publishing helper (`publish.rs`): `OSError`
    /// with the errno, `FileExistsError` for an output it will not replace —
    /// not a dataset's corruption, whatever the file.
    Io(flashgnn_io::IoError),
    /// A binding argument or keyword option that does not convert (names it).
    Input(String),
    /// The object cannot serve the call: closed, or created in another
    /// process (fork).
    Unavailable(String),
    /// A report that could not be encoded (a bug, not bad input).
    Internal(String),
}

/// The one conversion every binding uses: any error of the crates below (or
/// a [`CoreError`]) to its Python exception.
pub fn py_err(e: impl Into<CoreError>) -> PyErr {
    PyErr::from(e.into())
}

impl From<StoreError> for CoreError {
    fn from(e: StoreError) -> Self {
        CoreError::Store(e)
    }
}
impl From<SampleError> for CoreError {
    fn from(e: SampleError) -> Self {
        CoreError::Sample(e)
    }
}
impl From<MutError> for CoreError {
    fn from(e: MutError) -> Self {
        CoreError::Mut(e)
    }
}
impl From<BuildError> for CoreError {
    fn from(e: BuildError) -> Self {
        CoreError::Build(e)
    }
}
impl From<SimError> for CoreError {
    fn from(e: SimError) -> Self {
        CoreError::Sim(e)
    }
}
impl From<flashgnn_io::IoError> for CoreError {
    fn from(e: flashgnn_io::IoError) -> Self {
        CoreError::Store(StoreError::Io(e))
    }
}
impl From<flashgnn_format::FormatError> for CoreError {
    fn from(e: flashgnn_format::FormatError) -> Self {
        CoreError::Store(StoreError::Format(e))
    }
}

impl From<CoreError> for PyErr {
    fn from(e: CoreError) -> PyErr {
        match e {
            CoreError::Store(e) => store_err(e),
            CoreError::Sample(e) => sample_err(e),
            CoreError::Mut(e) => mut_err(e),
            CoreError::Build(e) => build_err(e),
            CoreError::Sim(e) => sim_err(e),
            CoreError::Io(e) => io_err(&e),
            CoreError::Input(m) => InputError::new_err(m),
            CoreError::Unavailable(m) | CoreError::Internal(m) => PyRuntimeError::new_err(m),
        }
    }
}
