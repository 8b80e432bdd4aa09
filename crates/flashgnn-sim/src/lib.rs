//! flashgnn SSD design simulator (docs/simulator.md).
//!
//! Replays an I/O trace captured by the sampling engine (docs/trace.md)
//! through a deterministic discrete-event model of an SSD ([`engine`]) under
//! named designs ([`design`]) that differ in where sampling runs and what
//! crosses which link; every parameter comes from a TOML config
//! ([`config`], configs/ssd/).

pub mod config;
pub mod design;
pub mod engine;
pub mod measured;
pub mod trace;

use std::path::Path;

use serde::Serialize;

pub use config::Config;
pub use design::{Design, DESIGNS};
pub use engine::{DesignResult, Engine};

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Format(#[from] flashgnn_format::FormatError),
    #[error("{0}")]
    Io(String),
    /// A named input (trace, config) that cannot be opened as a regular
    /// file: missing, a directory, a FIFO. The caller named the wrong path,
    /// so it is bad input (`InputError`, exit 2), not an I/O failure.
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    BadRequest(String),
}

pub type Result<T, E = SimError> = std::result::Result<T, E>;

impl SimError {
    /// `what` failed on the input `name`: [`SimError::Input`] when the path
    /// does not name a readable regular file (missing, refused by
    /// `open_regular`), [`SimError::Io`] for a failing device or permission.
    pub fn opening(name: &str, what: &str, e: &flashgnn_io::IoError) -> SimError {
        use std::io::ErrorKind::{InvalidInput, NotFound};
        let msg = format!("{name}: {what}: {e}");
        match e.source.kind() {
            NotFound | InvalidInput => SimError::Input(msg),
            _ => SimError::Io(msg),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// The swept value (None without a sweep).
    pub value: Option<String>,
    pub results: Vec<DesignResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Speed {
    pub flash_commands: u64,
    pub wall_seconds: f64,
    pub commands_per_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub trace: String,
    pub dataset_id: String,
    pub trace_params: serde_json::Value,
    pub config: String,
    pub seed: u64,
    pub sweep: Option<String>,
    pub runs: Vec<Run>,
    /// Simulator speed (wall clock; left out when `timing` is off so the
    /// report is byte-identical between runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speed: Option<Speed>,
}

pub struct Request<'a> {
    pub trace: &'a Path,
    pub config: &'a Path,
    /// Design names, or ["all"].
    pub designs: Vec<String>,
    /// (field, values): one run per value.
    pub sweep: Option<(String, Vec<String>)>,
    /// Extra overrides applied to every run.
    pub set: Vec<(String, String)>,
    pub timing: bool,
}

/// Replay `trace` under one config and design. Streams the trace batch by
/// batch (bounded memory).
pub fn simulate_one(trace: &Path, cfg: &Config, d: &Design) -> Result<DesignResult> {
    let mut r = trace::TraceReader::open(trace)?;
    let params: serde_json::Value = serde_json::from_str(&r.header.params).unwrap_or(serde_json::Value::Null);
    let bs = params.get("batch_size").and_then(|v| v.as_u64());
    let mut e = Engine::new(cfg, d);
    let mut n = 0u64;
    let (mut traced_s, mut traced_n) = (0.0f64, 0u64);
    while let Some(b) = r.next_batch()? {
        // Measured batch time from the trace's own timestamps (first
        // submission to last completion), when the engine recorded them.
        let lo = b.iter().filter(|x| x.submit_ns > 0).map(|x| x.submit_ns).min();
        let hi = b.iter().map(|x| x.complete_ns).max();
        if let (Some(lo), Some(hi)) = (lo, hi) {
            if hi > lo {
                traced_s += (hi - lo) as f64 / 1e9;
                traced_n += 1;
            }
        }
        // The last batch of an epoch may be short: never more targets than hop-0 reads' items.
        let est: u64 = b
            .iter()
            .filter(|x| x.hop == 0 && x.kind == flashgnn_format::trace::KIND_SLOT_PAGE)
            .map(|x| x.items as u64)
            .sum();
        e.run_batch(b, bs.map(|v| v.min(est.max(1))));
        n += 1;
        if cfg.sim.max_batches > 0 && n >= cfg.sim.max_batches {
            break;
        }
    }
    let mut res = e.result();
    res.traced_batch_latency_s = (traced_n > 0).then(|| traced_s / traced_n as f64);
    Ok(res)
}

pub fn simulate(req: &Request) -> Result<Report> {
    let t0 = std::time::Instant::now();
    let designs: Vec<&Design> = if req.designs.iter().any(|d| d == "all") {
        DESIGNS.iter().collect()
    } else {
        req.designs
            .iter()
            .map(|n| {
                design::by_name(n).ok_or_else(|| {
                    SimError::BadRequest(format!("--design {n:?} is not a design (one of: {}, all)", design::names()))
                })
            })
            .collect::<Result<_>>()?
    };
    let head = trace::TraceReader::open(req.trace)?;
    let values: Vec<Option<String>> = match &req.sweep {
        Some((_, vs)) => vs.iter().cloned().map(Some).collect(),
        None => vec![None],
    };
    let mut runs = Vec::new();
    let mut cmds = 0;
    let mut cfg_name = String::new();
    let mut seed = 0;
    for v in values {
        let mut ov = req.set.clone();
        if let (Some((p, _)), Some(v)) = (&req.sweep, &v) {
            ov.push((p.clone(), v.clone()));
        }
        let cfg = Config::load(req.config, &ov)?;
        cfg_name = cfg.name.clone();
        seed = cfg.sim.seed;
        let mut results = Vec::new();
        for d in &designs {
            let r = simulate_one(req.trace, &cfg, d)?;
            cmds += r.flash_commands;
            results.push(r);
        }
        runs.push(Run { value: v, results });
    }
    let wall = t0.elapsed().as_secs_f64();
    Ok(Report {
        trace: req.trace.display().to_string(),
        dataset_id: format!("{:016x}", head.header.dataset_id),
        trace_params: serde_json::from_str(&head.header.params).unwrap_or(serde_json::Value::Null),
        config: if cfg_name.is_empty() { req.config.display().to_string() } else { cfg_name },
        seed,
        sweep: req.sweep.as_ref().map(|s| config::resolve_alias(&s.0)),
        runs,
        speed: req.timing.then(|| Speed {
            flash_commands: cmds,
            wall_seconds: wall,
            commands_per_s: cmds as f64 / wall.max(1e-9),
        }),
    })
}
