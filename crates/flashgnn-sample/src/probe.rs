//! Device probe: random-read IOPS at a request size and depth, O_DIRECT,
//! on a dataset's own file — the "device limit" every benchmark divides by.

use std::path::Path;
use std::time::{Duration, Instant};

use flashgnn_io::aligned::BufPool;
use flashgnn_io::engine::{open_engine, EngineConfig, EngineKind, ReadReq};
use flashgnn_io::IoError;

use crate::rng::NodeRng;

pub fn random_reads(path: &Path, kind: EngineKind, len: u32, depth: usize, seconds: f64) -> Result<f64, IoError> {
    let size = std::fs::metadata(path).map_err(|e| IoError::new("stat", path, None, e))?.len();
    let slots = (size / len as u64).max(1);
    let cfg = EngineConfig { depth: depth.max(1), pool_threads: depth.max(1), ..Default::default() };
    let mut io = open_engine(kind, &[path.to_path_buf()], &cfg)?;
    let mut pool = BufPool::new(depth * len as usize * 2);
    let mut rng = NodeRng::new(0xD15C, size);
    let mut done = Vec::new();
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let t = Instant::now();
    let mut completed = 0u64;
    while Instant::now() < end {
        while io.in_flight() < io.depth() {
            let off = rng.below(slots) * len as u64;
            io.submit(ReadReq { file: 0, offset: off, len, tag: 0 }, pool.get(len as usize))?;
        }
        done.clear();
        io.complete(1, &mut done)?;
        completed += done.len() as u64;
        for d in done.drain(..) {
            pool.put(d.buf);
        }
    }
    let elapsed = t.elapsed().as_secs_f64();
    while io.in_flight() > 0 {
        io.complete(1, &mut done)?;
        done.clear();
    }
    Ok(completed as f64 / elapsed)
}
