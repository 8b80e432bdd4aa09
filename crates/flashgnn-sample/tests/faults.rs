//! Fault injection against the sampler, alone in its process so the global
//! live-buffer count is not disturbed by other tests.

use flashgnn_build::{FeatureLayout, Reorder};
use flashgnn_io::engine::{EngineConfig, EngineKind};
use flashgnn_sample::{NeighborSampler, SamplerConfig};
use flashgnn_testing::{rmat_dataset, sampler, tempdir, ENGINES};

#[test]
fn short_reads_eio_and_delays() {
    // Short reads: every system call capped at 512 B forces the continuation
    // paths of uring and pread to run against the kernel — results unchanged.
    // EIO at the n-th read (once, or forever) ends the batch in an error
    // naming the file and offset, drains in-flight reads, leaks no buffer,
    // and the sampler works again afterwards. Delays change nothing.
    use flashgnn_io::aligned::live_buffers;
    use flashgnn_io::engine::FaultPlan;
    let tmp = tempdir();
    let path = rmat_dataset(tmp.path(), "faults", FeatureLayout::Separate, Reorder::None, 200);
    let seeds: Vec<i64> = (0..100).map(|i| i * 11).collect();
    let base = SamplerConfig { engine: EngineKind::Memory, ..Default::default() };
    let want = NeighborSampler::open(&path, &[8, 4], &base).unwrap().sample(&seeds, 5).unwrap();
    for kind in [EngineKind::Uring, EngineKind::Pread, EngineKind::PreadPool] {
        let io = EngineConfig { depth: 32, pool_threads: 4, max_read_bytes: Some(512), fault: None };
        let mut s = sampler(&path, &[8, 4], kind, io, true);
        assert_eq!(s.sample(&seeds, 5).unwrap(), want, "short reads on {kind:?}");
    }
    let before = live_buffers();
    for kind in ENGINES {
        for (fail_at, forever) in [(0, false), (7, false), (50, true)] {
            let plan = FaultPlan { fail_at, forever, errno: 5, delay_us: 0 };
            let io = EngineConfig { depth: 16, pool_threads: 4, max_read_bytes: None, fault: Some(plan) };
            let mut s = sampler(&path, &[8, 4], kind, io, true);
            let e = s.sample(&seeds, 5).unwrap_err().to_string();
            assert!(e.contains("Input/output error") && e.contains(".fg at byte offset"), "{kind:?}: {e}");
            if !forever {
                assert_eq!(s.sample(&seeds, 5).unwrap(), want, "{kind:?} recovers after a transient EIO");
            }
        }
        let plan = FaultPlan { fail_at: u64::MAX, forever: false, errno: 5, delay_us: 200 };
        let io = EngineConfig { depth: 16, pool_threads: 4, max_read_bytes: None, fault: Some(plan) };
        let mut s = sampler(&path, &[8, 4], kind, io, true);
        assert_eq!(
            s.sample(&seeds[..10], 5).unwrap(),
            NeighborSampler::open(&path, &[8, 4], &base).unwrap().sample(&seeds[..10], 5).unwrap()
        );
    }
    assert_eq!(live_buffers(), before, "every I/O buffer was returned or freed");
}
