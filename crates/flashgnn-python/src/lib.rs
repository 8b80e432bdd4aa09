//! `flashgnn._core`: the binding layer. It converts types and maps errors —
//! nothing else. Every call that does I/O releases the GIL.
//!
//! Long jobs (build, generate, verify) run on a Rust thread behind a [`Job`]
//! handle that Python polls to drive tqdm bars and cancels on Ctrl-C.

mod belady;
mod budget;
mod dataset;
mod error;
mod graph;
mod job;
mod presample;
mod publish;
mod report;
mod sampler;
mod sim;
mod typed_testdata;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("FORMAT_VERSION", flashgnn_format::FORMAT_VERSION)?;
    m.add("MAX_BATCH_OPS", flashgnn_mutate::MAX_BATCH_OPS)?;
    m.add("MUTATION_OPS", mutation_ops(m.py())?)?;
    m.add("ENGINES", flashgnn_io::engine::EngineKind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>())?;
    m.add("DEFAULT_DEPTH", flashgnn_io::engine::DEFAULT_DEPTH)?;
    m.add("DEFAULT_POOL_THREADS", flashgnn_io::engine::DEFAULT_POOL_THREADS)?;
    // Constants the Rust side owns; Python derives from these, never re-types them.
    m.add("DEFAULT_PAGE_SIZE", flashgnn_format::DEFAULT_PAGE_SIZE)?;
    m.add("BUF_POOL_BYTES", flashgnn_sample::BUF_POOL_BYTES)?;
    m.add("BATCH_PAGE_CACHE_BYTES", flashgnn_sample::BATCH_PAGE_CACHE_BYTES)?;
    m.add("ENGINE_BYTES_PER_PRODUCER", flashgnn_sample::ENGINE_BYTES_PER_PRODUCER)?;
    m.add("MAX_HOPS", flashgnn_sample::MAX_HOPS)?;
    m.add("MAX_PRODUCERS", flashgnn_sample::MAX_PRODUCERS)?;
    m.add("DEFAULT_HOT_FRACTION", flashgnn_sample::DEFAULT_HOT_FRACTION)?;
    m.add("ROW_CODECS", flashgnn_sample::rowcodec::RowCodec::NAMES.to_vec())?;
    // On-disk names: the dataset's page files, and the mutable store's directory, pointer and generations.
    m.add("MANIFEST_FILE", flashgnn_format::manifest::MANIFEST_FILE)?;
    m.add("STRIPES_FILE", flashgnn_io::stripe::STRIPES_FILE)?;
    m.add("GRAPH_FILE", flashgnn_format::manifest::GRAPH_FILE)?;
    m.add("OVERFLOW_FILE", flashgnn_format::manifest::OVERFLOW_FILE)?;
    m.add("FEATURES_FILE", flashgnn_format::manifest::FEATURES_FILE)?;
    m.add("MUT_DIR", flashgnn_mutate::current::MUT_DIR)?;
    m.add("CURRENT_FILE", flashgnn_mutate::current::CURRENT_FILE)?;
    m.add("GEN_PREFIX", flashgnn_mutate::current::GEN_PREFIX)?;
    m.add("PRESAMPLE_FORMAT", flashgnn_format::presample::PRESAMPLE_FORMAT)?;
    m.add("PRESAMPLE_VERSION", flashgnn_format::presample::PRESAMPLE_VERSION)?;
    m.add("PRESAMPLE_VERSION_MIN", flashgnn_format::presample::PRESAMPLE_VERSION_MIN)?;
    m.add("PRESAMPLE_HEADER_BYTES", flashgnn_format::presample::RECORD_HEADER_BYTES)?;
    m.add("BUILD_OPTIONS", job::build_options_py(m.py())?)?;
    m.add("GENERATE_DEFAULTS", job::generate_defaults_py(m.py())?)?;
    let names = |ds: &[flashgnn_format::Dtype]| ds.iter().map(|d| d.name()).collect::<Vec<_>>();
    let choices = pyo3::types::PyDict::new(m.py());
    choices.set_item("dtype", names(&flashgnn_datagen::FEATURE_DTYPES))?;
    choices.set_item("edge_dtype", names(&flashgnn_datagen::EDGE_DTYPES))?;
    choices.set_item("venues", flashgnn_datagen::Venues::ALL.iter().map(|v| v.name()).collect::<Vec<_>>())?;
    m.add("GENERATE_CHOICES", choices)?;
    m.add("GENERATE_IGBH_DEFAULTS", job::generate_igbh_defaults_py(m.py())?)?;
    m.add("IGBH_SIZES", job::igbh_sizes_py(m.py())?)?;
    m.add(
        "SSD_BUILTIN_CONFIGS",
        flashgnn_sim::config::BUILTIN.iter().copied().collect::<std::collections::HashMap<_, _>>(),
    )?;
    m.add("SSD_DESIGNS", flashgnn_sim::DESIGNS.iter().map(|d| d.name).collect::<Vec<_>>())?;
    m.add(
        "SSD_SWEEP_ALIASES",
        flashgnn_sim::config::SWEEP_ALIASES.iter().copied().collect::<std::collections::HashMap<_, _>>(),
    )?;
    error::register(m)?;
    budget::register(m)?;
    publish::register(m)?;
    m.add_class::<dataset::Dataset>()?;
    m.add_class::<job::Job>()?;
    m.add_class::<sampler::Sampler>()?;
    m.add_class::<belady::BeladyRows>()?;
    m.add_class::<sampler::Cache>()?;
    m.add_class::<sampler::Resident>()?;
    m.add_class::<sampler::BatchIter>()?;
    m.add_class::<graph::MutableGraph>()?;
    m.add_function(wrap_pyfunction!(sampler::probe_random_reads, m)?)?;
    m.add_function(wrap_pyfunction!(sampler::samplers_opened, m)?)?;
    m.add_function(wrap_pyfunction!(job::start_build, m)?)?;
    m.add_function(wrap_pyfunction!(job::start_generate, m)?)?;
    m.add_function(wrap_pyfunction!(job::start_verify, m)?)?;
    m.add_function(wrap_pyfunction!(job::start_scrub, m)?)?;
    m.add_function(wrap_pyfunction!(graph::verify_mutable, m)?)?;
    m.add_function(wrap_pyfunction!(graph::_fault_bytes_written, m)?)?;
    m.add_function(wrap_pyfunction!(typed_testdata::_write_typed_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(seal_manifest, m)?)?;
    m.add_function(wrap_pyfunction!(presample::presample_encode, m)?)?;
    m.add_function(wrap_pyfunction!(presample::presample_record_size, m)?)?;
    m.add_function(wrap_pyfunction!(presample::presample_decode, m)?)?;
    m.add_class::<sim::TraceRecorder>()?;
    m.add_function(wrap_pyfunction!(sim::simulate, m)?)?;
    m.add_function(wrap_pyfunction!(sim::trace_in_flight, m)?)?;
    Ok(())
}

/// `_core.MUTATION_OPS`: operation name -> its field names, in
/// `flashgnn_mutate::OPS` order.
fn mutation_ops(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let d = pyo3::types::PyDict::new(py);
    for &(name, fields) in flashgnn_mutate::OPS {
        d.set_item(name, pyo3::types::PyTuple::new(py, fields)?)?;
    }
    Ok(d)
}

/// Recompute the `checksum` of edited manifest text (for tools and tests that
/// edit manifests on purpose); the content is not validated.
#[pyfunction]
fn seal_manifest(text: &str) -> PyResult<String> {
    flashgnn_format::manifest::seal_json("manifest.json", text).map_err(error::py_err)
}
