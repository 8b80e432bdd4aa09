//! `flashgnn._core` budget functions: conversion only. The arithmetic of the
//! split and the probes of available memory and cores are
//! `flashgnn_sample::budget`; a split crosses as a dict with fixed keys
//! (`flashgnn.sample.budget` documents them), for Python to print and to
//! size the tiers it builds.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use flashgnn_sample::budget::{self, probe, Auto, AutoInput, Shape, Split};

use crate::error::py_err;

fn split_dict<'py>(py: Python<'py>, s: &Split) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("budget", s.budget)?;
    d.set_item("engine", s.engine)?;
    d.set_item("window", s.window)?;
    d.set_item("per_batch", s.shape.per_batch)?;
    d.set_item("per_lookahead", if s.shape.lookahead > 0 { s.shape.per_lookahead } else { 0 })?;
    d.set_item("workers", s.shape.workers)?;
    d.set_item("prefetch", s.shape.prefetch)?;
    d.set_item("lookahead", s.shape.lookahead)?;
    d.set_item("lookahead_cache", s.lookahead_cache)?;
    d.set_item("cache", s.cache)?;
    d.set_item("cache_static", s.cache_static)?;
    d.set_item("cache_dynamic", s.cache_dynamic)?;
    Ok(d)
}

/// The split of `budget` (`flashgnn_sample::budget::split`), as a dict.
#[pyfunction]
#[pyo3(signature = (budget, per_batch, per_lookahead, workers, prefetch, lookahead, hot_fraction, data_bytes))]
#[allow(clippy::too_many_arguments)]
pub fn budget_split<'py>(
    py: Python<'py>,
    budget: u64,
    per_batch: u64,
    per_lookahead: u64,
    workers: u64,
    prefetch: u64,
    lookahead: u64,
    hot_fraction: f64,
    data_bytes: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let shape = Shape { per_batch, per_lookahead, workers, prefetch, lookahead };
    split_dict(py, &budget::split(budget, shape, hot_fraction, data_bytes).map_err(py_err)?)
}

/// `--memory-budget auto` (`flashgnn_sample::budget::auto`): a split dict
/// with `fits`, or `{"budget": 0, "room", "base", "lookahead"}` when the room
/// cannot hold engine + window.
#[pyfunction]
#[pyo3(signature = (available, reserve, data_bytes, nodes, training, lookahead, per_batch, per_lookahead, workers, prefetch, hot_fraction))]
#[allow(clippy::too_many_arguments)]
pub fn budget_auto<'py>(
    py: Python<'py>,
    available: u64,
    reserve: u64,
    data_bytes: u64,
    nodes: u64,
    training: bool,
    lookahead: Option<u64>,
    per_batch: u64,
    per_lookahead: u64,
    workers: u64,
    prefetch: u64,
    hot_fraction: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let input = AutoInput { available, reserve, data_bytes, nodes, training, lookahead };
    let shape = Shape { per_batch, per_lookahead, workers, prefetch, lookahead: 0 };
    match budget::auto(input, shape, hot_fraction).map_err(py_err)? {
        Auto::Split { split, fits } => {
            let d = split_dict(py, &split)?;
            d.set_item("fits", fits)?;
            Ok(d)
        }
        Auto::NoRoom { room, base, lookahead } => {
            let d = PyDict::new(py);
            d.set_item("budget", 0)?;
            d.set_item("room", room)?;
            d.set_item("base", base)?;
            d.set_item("lookahead", lookahead)?;
            d.set_item("per_batch", per_batch)?;
            Ok(d)
        }
    }
}

/// The prefetch window's bytes (`flashgnn_sample::budget::Shape::window_bytes`).
#[pyfunction]
pub fn budget_window_bytes(prefetch: u64, lookahead: u64, per_batch: u64, per_lookahead: u64) -> u64 {
    Shape { per_batch, per_lookahead, workers: 1, prefetch, lookahead }.window_bytes()
}

/// Bytes a static hot set holds a row of `dim` values of `dtype` (a numpy
/// dtype name) in under `codec` (`flashgnn_sample::rowcodec`): its encoded
/// size, or its size as stored when the codec is `none`, does not apply to
/// the dtype or would not make it smaller. Unknown names are refused, named.
#[pyfunction]
pub fn row_held_bytes(codec: &str, dtype: &str, dim: u64) -> PyResult<u64> {
    use flashgnn_sample::{rowcodec::RowCodec, SampleError};
    let codec = RowCodec::parse(codec).map_err(|e| py_err(SampleError::Config(e)))?;
    let dt = flashgnn_format::Dtype::parse(dtype)
        .ok_or_else(|| py_err(SampleError::Config(format!("feature dtype {dtype:?}: not a dtype flashgnn stores"))))?;
    let stored = dim as usize * dt.size();
    Ok(codec.map_or(stored, |c| c.held(dt, dim as usize).min(stored)) as u64)
}

/// Bytes `auto` leaves outside the budget (`flashgnn_sample::budget::reserve`).
#[pyfunction]
#[pyo3(signature = (per_batch, torch_loaded, node_bytes=0))]
pub fn budget_reserve(per_batch: u64, torch_loaded: bool, node_bytes: u64) -> u64 {
    budget::reserve(per_batch, torch_loaded, node_bytes)
}

#[pyfunction]
#[pyo3(signature = (want, budget, per_batch, prefetch=4, lookahead=0))]
pub fn producers_that_fit(want: u64, budget: Option<u64>, per_batch: u64, prefetch: u64, lookahead: u64) -> u64 {
    budget::producers_that_fit(want, budget, per_batch, prefetch, lookahead)
}

/// The raw memory readings: `cgroup_headroom`, `mem_available` (None when
/// unreadable) and `file_rss`.
#[pyfunction]
pub fn memory_probe(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let m = probe::Memory::read();
    let d = PyDict::new(py);
    d.set_item("cgroup_headroom", m.cgroup_headroom)?;
    d.set_item("mem_available", m.mem_available)?;
    d.set_item("file_rss", m.file_rss)?;
    Ok(d)
}

/// What [`memory_probe`]'s readings leave this process (`Memory::available`).
#[pyfunction]
#[pyo3(signature = (cgroup_headroom, mem_available, file_rss))]
pub fn available_from(cgroup_headroom: Option<u64>, mem_available: Option<u64>, file_rss: u64) -> u64 {
    probe::Memory { cgroup_headroom, mem_available, file_rss }.available()
}

#[pyfunction]
pub fn available_memory() -> u64 {
    probe::available_memory()
}

#[pyfunction]
pub fn cpu_cores() -> u64 {
    probe::cpu_cores()
}

#[pyfunction]
#[pyo3(signature = (affinity, quota))]
pub fn cores_from(affinity: u64, quota: Option<f64>) -> u64 {
    probe::cores_from(affinity, quota)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("BUDGET_HEADROOM", budget::HEADROOM)?;
    m.add("LOOKAHEAD_SHARE", budget::LOOKAHEAD_SHARE)?;
    m.add("BELADY_NODE_BYTES", budget::BELADY_NODE_BYTES)?;
    m.add("STRUCTURE_QUEUE", budget::STRUCTURE_QUEUE)?;
    m.add("AUTO_LOOKAHEAD", budget::AUTO_LOOKAHEAD)?;
    m.add("AUTO_RESERVE_TORCH", budget::AUTO_RESERVE_TORCH)?;
    m.add("AUTO_RESERVE_MODEL", budget::AUTO_RESERVE_MODEL)?;
    m.add("ACTIVATION_BATCHES", budget::ACTIVATION_BATCHES)?;
    m.add("CODE_PAGES_KEPT", budget::CODE_PAGES_KEPT)?;
    m.add_function(wrap_pyfunction!(budget_split, m)?)?;
    m.add_function(wrap_pyfunction!(row_held_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(budget_auto, m)?)?;
    m.add_function(wrap_pyfunction!(budget_reserve, m)?)?;
    m.add_function(wrap_pyfunction!(budget_window_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(producers_that_fit, m)?)?;
    m.add_function(wrap_pyfunction!(memory_probe, m)?)?;
    m.add_function(wrap_pyfunction!(available_from, m)?)?;
    m.add_function(wrap_pyfunction!(available_memory, m)?)?;
    m.add_function(wrap_pyfunction!(cpu_cores, m)?)?;
    m.add_function(wrap_pyfunction!(cores_from, m)?)?;
    Ok(())
}
