//! What checking a store's log costs in memory (one test: the counting
//! allocator below sees every thread of this binary).
//!
//! `verify_log` replays the log into a delta of its own: a second copy of
//! every record the log touched, materialised from the base. A live server's
//! background scrubber checked its store that way after every pass, back to
//! back, so the server's heap had to hold the store's delta twice over, and
//! both copies grow with every write until a compaction (the soak's climbing
//! anonymous memory, docs/reliability.md, *Soak*). `verify_log_frames`, what
//! the scrubber runs now, checks every frame without applying it: its peak
//! grows with the log's bytes, not with the delta; and it still finds a
//! damaged frame.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use flashgnn_mutate::{verify_log, verify_log_frames, MutError};
use flashgnn_store::Op;
use flashgnn_testing::{build_symmetric, open_mutable, rmat_input, tempdir};

struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let now = NOW.fetch_add(n, Relaxed) + n;
    PEAK.fetch_max(now, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        NOW.fetch_sub(l.size(), Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, size: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, size) };
        if !q.is_null() {
            NOW.fetch_sub(l.size(), Relaxed);
            grew(size);
        }
        q
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Bytes allocated at the peak of `f`, above what was live when it started.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = NOW.load(Relaxed);
    PEAK.store(base, Relaxed);
    let r = f();
    (r, PEAK.load(Relaxed) - base)
}

#[test]
fn checking_the_log_frame_by_frame_holds_the_log_not_a_second_delta() {
    let d = tempdir();
    let o =
        flashgnn_datagen::RmatOptions { scale: 11, edge_factor: 8, dim: 32, classes: 4, seed: 9, ..Default::default() };
    let p = build_symmetric(&rmat_input(d.path(), "raw", &o), &d.path().join("ds"));
    let g = open_mutable(&p);
    g.add_edge(0, 1).unwrap();
    g.close().unwrap();
    drop(g);
    let ((), empty) = peak_of(|| {
        verify_log_frames(&p).unwrap().unwrap();
    });

    // 4,000 edges on random pairs of the 2,048 nodes (most of them touched),
    // 40 ops a frame.
    let g = open_mutable(&p);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % 2048
    };
    for _ in 0..100 {
        let ops: Vec<Op> = (0..40).map(|_| Op::AddEdge { dst: next(), src: next() }).collect();
        g.apply(ops).unwrap();
    }
    g.close().unwrap();
    drop(g);

    let (replayed, replay_peak) = peak_of(|| verify_log(&p).unwrap().unwrap());
    let (frames, frames_peak) = peak_of(|| verify_log_frames(&p).unwrap().unwrap());
    eprintln!(
        "log {} B, {} frames: replay peak {replay_peak} B (replayed delta {} B), frame check peak {frames_peak} B \
         ({empty} B for a one-frame log)",
        frames.wal_bytes, frames.frames, replayed.delta_bytes
    );
    assert!(replayed.replayed && !frames.replayed);
    assert_eq!((frames.frames, frames.ops, frames.last_seq), (replayed.frames, replayed.ops, replayed.last_seq));
    assert_eq!((frames.frames, frames.ops), (101, 4001));
    assert!(replayed.delta_nodes > 1500, "{}", replayed.delta_nodes);
    assert_eq!(frames.delta_nodes, 0);
    // The replay holds a delta of every touched record: its peak is at least
    // that delta's bytes over the frame check's.
    assert!(
        replay_peak >= frames_peak + replayed.delta_bytes as usize,
        "replay peak {replay_peak} B, frame check {frames_peak} B, replayed delta {} B",
        replayed.delta_bytes
    );
    // The frame check: what it held for a one-frame log, plus the log's
    // bytes and one frame's ops (small next to the log).
    let grown = frames_peak.saturating_sub(empty);
    assert!(
        grown <= 2 * frames.wal_bytes as usize,
        "frame check peak {frames_peak} B against {empty} B for a one-frame log: grew {grown} B for a log of {} B",
        frames.wal_bytes
    );

    // Still a check: a damaged byte in the first frame (intact frames after
    // it) is corruption naming the log and the frame's offset.
    let wal = p.join("mut/wal-0.log");
    let mut b = std::fs::read(&wal).unwrap();
    let at = b.len() / 100; // inside the first frames, far from the tail
    b[at] ^= 0x40;
    std::fs::write(&wal, &b).unwrap();
    let e = verify_log_frames(&p).expect_err("a damaged frame is found");
    assert!(matches!(e, MutError::Corrupt(_)), "{e}");
    assert!(e.to_string().contains("wal-0"), "{e}");
}
