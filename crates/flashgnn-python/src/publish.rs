//! `flashgnn._core.publish_dir` and friends: the one publishing rule
//! (`flashgnn_io::publish`) for the directories Python writes too (`embed`,
//! `presample`, `inference` outputs), so both languages publish, refuse and
//! clean up with the same code. Types converted, errors mapped; no logic.

use std::path::PathBuf;

use pyo3::prelude::*;

fn io(e: flashgnn_io::IoError) -> PyErr {
    crate::error::py_err(crate::error::CoreError::Io(e))
}

/// Publish the fully written directory `tmp` as `out` atomically (swapping out an existing flashgnn output).
#[pyfunction]
pub fn publish_dir(py: Python<'_>, tmp: PathBuf, out: PathBuf) -> PyResult<()> {
    py.detach(|| flashgnn_io::publish::publish_dir(&tmp, &out)).map_err(io)
}

/// The `--force` rule, and that `out` is none of `inputs` nor holds one; FileExistsError naming `out`.
#[pyfunction]
#[pyo3(signature = (out, force, inputs = Vec::new()))]
pub fn check_output(out: PathBuf, force: bool, inputs: Vec<PathBuf>) -> PyResult<()> {
    flashgnn_io::publish::check_output(&out, force).map_err(io)?;
    let refs: Vec<&std::path::Path> = inputs.iter().map(PathBuf::as_path).collect();
    flashgnn_io::publish::check_not_input(&out, &refs).map_err(io)
}

/// A fresh `.OUT.tmp-PID-NANOS` beside `out`, holding an owner marker.
#[pyfunction]
pub fn create_tmp_dir(out: PathBuf) -> PyResult<PathBuf> {
    flashgnn_io::publish::create_tmp_dir(&out).map_err(io)
}

/// Remove the temporaries beside `out` whose owner process is gone: `[(path, pid)]` removed.
#[pyfunction]
pub fn remove_stale_tmps(out: PathBuf) -> Vec<(PathBuf, u64)> {
    flashgnn_io::publish::remove_stale_tmps(&out)
}

/// `mkdir -p` durably: each directory created is fsynced into its parent before the next is made in it.
#[pyfunction]
pub fn create_dir_all_durable(py: Python<'_>, d: PathBuf) -> PyResult<()> {
    py.detach(|| flashgnn_io::publish::create_dir_all_durable(&d)).map_err(io)
}

/// Whether directory `d` holds one of the output markers.
#[pyfunction]
pub fn is_flashgnn_output(d: PathBuf) -> bool {
    flashgnn_io::publish::is_flashgnn_output(&d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("OUTPUT_MARKERS", flashgnn_io::publish::OUTPUT_MARKERS.to_vec())?;
    m.add("OWNER_FILE", flashgnn_io::publish::OWNER_FILE)?;
    m.add_function(wrap_pyfunction!(publish_dir, m)?)?;
    m.add_function(wrap_pyfunction!(check_output, m)?)?;
    m.add_function(wrap_pyfunction!(create_tmp_dir, m)?)?;
    m.add_function(wrap_pyfunction!(create_dir_all_durable, m)?)?;
    m.add_function(wrap_pyfunction!(remove_stale_tmps, m)?)?;
    m.add_function(wrap_pyfunction!(is_flashgnn_output, m)?)?;
    Ok(())
}
