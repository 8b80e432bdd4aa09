//! The external sort's tests: both modes against an in-memory sort, the
//! observers, packing, skew, cleanup, and the radix sort's digit positions.

use super::*;
use rand::{RngExt, SeedableRng};

#[test]
fn matches_in_memory_sort_across_many_runs() {
    // Proves the external sort equals sort() for inputs spanning many
    // runs and a multi-level merge (tiny chunks force > MERGE_FANIN_MAX runs).
    let d = tempfile::tempdir().unwrap();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
    let keys: Vec<u64> = (0..200_000).map(|_| rng.random_range(0..5000u64)).collect();
    let mut s = ExternalSorter::new(d.path(), "t", 1024 * 8);
    for &k in &keys {
        s.push(k).unwrap();
    }
    assert!(s.runs() > MERGE_FANIN_MAX);
    let mut m = s.finish().unwrap();
    let mut got = Vec::new();
    while let Some(k) = m.next_key().unwrap() {
        got.push(k);
    }
    let mut want = keys;
    want.sort();
    assert_eq!(got, want);
    drop(m);
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "run files removed");
}

#[test]
fn dedup_keeps_one_copy_per_run_and_counts_every_push() {
    // Runs of 4 keys: duplicates inside a run are dropped, across runs
    // they stay (the merge sees each key at most once per run).
    let d = tempfile::tempdir().unwrap();
    let mut s = ExternalSorter::new(d.path(), "t", 8).with_dedup(true);
    s.chunk_cap = 4;
    for k in [5u64, 5, 5, 1, /* run 2 */ 5, 2, 2, 2, /* last run */ 7, 7] {
        s.push(k).unwrap();
    }
    assert_eq!(s.len(), 10);
    let mut m = s.finish().unwrap();
    assert_eq!(m.total_keys(), 5);
    let mut got = Vec::new();
    while let Some(k) = m.next_key().unwrap() {
        got.push(k);
    }
    assert_eq!(got, vec![1, 2, 5, 5, 7]);
}

fn drain(mut m: Merged) -> Vec<u64> {
    let mut got = Vec::new();
    while let Some(k) = m.next_key().unwrap() {
        got.push(k);
    }
    got
}

#[test]
fn bucketed_sort_matches_sort_and_shows_every_key_once() {
    // Proves the bucketed mode (key-range buckets, a worker sorting
    // ahead) yields exactly sort(keys), that `observe` sees each key
    // once and only keys of one bucket per batch, and that no file is
    // left: 300 K keys under a bound of 2^40 in 8 K-key chunks.
    let d = tempfile::tempdir().unwrap();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
    let bound = 1u64 << 40;
    let keys: Vec<u64> = (0..300_000).map(|_| rng.random_range(0..bound)).collect();
    let mut s = ExternalSorter::bucketed(d.path(), "t", 8192 * 8, bound, keys.len() as u64);
    let shift = s.buckets.as_ref().unwrap().pack.shift;
    assert!(s.buckets() > 8, "{} buckets", s.buckets());
    let mut seen = Vec::new();
    let mut observe = |b: &[u64]| -> Result<()> {
        assert!(b.iter().all(|&k| k >> shift == b[0] >> shift), "a batch spans two buckets");
        seen.extend_from_slice(b);
        Ok(())
    };
    for &k in &keys {
        s.push_with(k, &mut observe).unwrap();
    }
    let m = s.finish_with(&mut observe).unwrap();
    assert_eq!(m.total_keys(), keys.len() as u64);
    let mut want = keys;
    want.sort();
    seen.sort();
    assert_eq!(seen, want);
    assert_eq!(drain(m), want);
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "bucket files removed");
}

#[test]
fn spill_thread_matches_sort_and_its_observer_sees_every_key_once() {
    // The spill thread (observer + O_DIRECT appends of recycled buffers,
    // a buffered last append of odd length) yields exactly sort(keys),
    // its observer sees each key once in one-bucket batches, and the
    // run mode calls the observer on the pushing thread instead.
    let d = tempfile::tempdir().unwrap();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
    let bound = 1u64 << 40;
    let keys: Vec<u64> = (0..300_001).map(|_| rng.random_range(0..bound)).collect();
    let mut want = keys.clone();
    want.sort();
    for (chunk, bucketed) in [(8192 * 8, true), (1 << 24, false)] {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let mut s = ExternalSorter::bucketed(d.path(), "t", chunk, bound, keys.len() as u64);
        assert_eq!(s.buckets() > 0, bucketed);
        let shift = s.buckets.as_ref().map_or(64, |b| b.pack.shift);
        s = s
            .with_spill_thread(Box::new(move |b: &[u64]| {
                assert!(shift == 64 || b.iter().all(|&k| k >> shift == b[0] >> shift), "a batch spans two buckets");
                s2.lock().unwrap().extend_from_slice(b);
                Ok(())
            }))
            .unwrap();
        for &k in &keys {
            s.push_with(k, &mut |_| panic!("the spill thread's observer sees the keys")).unwrap();
        }
        let m = s.finish().unwrap();
        let mut got_seen = std::mem::take(&mut *seen.lock().unwrap());
        got_seen.sort();
        assert_eq!(got_seen, want, "observer, bucketed {bucketed}");
        assert_eq!(drain(m), want, "stream, bucketed {bucketed}");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "bucket files removed");
    }
}

#[test]
fn spill_thread_error_reaches_the_pusher_and_leaves_no_thread() {
    // An observer error (a degree overflow) stops the spill thread; the
    // next push or the finish returns that error, not a hang or a panic.
    let d = tempfile::tempdir().unwrap();
    let bound = 1u64 << 32;
    let mut s = ExternalSorter::bucketed(d.path(), "t", 2048 * 8, bound, 100_000)
        .with_spill_thread(Box::new(|_: &[u64]| {
            Err(crate::BuildError::config("node 9 has more than 4294967295 neighbors"))
        }))
        .unwrap();
    let mut err = None;
    for k in 0..100_000u64 {
        if let Err(e) = s.push(k * 40_000) {
            err = Some(e.to_string());
            break;
        }
    }
    let e = match err {
        Some(e) => e,
        None => s.finish().err().expect("finish reports the observer's error").to_string(),
    };
    assert!(e.contains("node 9 has more than"), "{e}");
}

#[test]
fn bucketed_sort_survives_skew_and_a_wrong_hint() {
    // One bucket gets far more keys than half a chunk (all keys in a
    // narrow range, hint 10x too low): it takes the nested run-and-merge
    // path and the output is still sort(keys); duplicates are kept.
    let d = tempfile::tempdir().unwrap();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
    let bound = 1u64 << 36;
    let mut keys: Vec<u64> = (0..200_000).map(|_| rng.random_range(0..1000u64)).collect();
    keys.extend((0..20_000).map(|_| rng.random_range(0..bound)));
    let s = ExternalSorter::bucketed(d.path(), "t", 4096 * 8, bound, 20_000);
    assert!(s.buckets() > 1);
    sorts_and_cleans_up(s, keys, d.path(), |_| ());
}

/// Push `keys`, finish, and check that the stream is sort(keys) and that
/// no file is left in `dir`; `between` looks at `dir` before the drain.
fn sorts_and_cleans_up(mut s: ExternalSorter, mut keys: Vec<u64>, dir: &Path, between: impl FnOnce(&Path)) {
    for &k in &keys {
        s.push(k).unwrap();
    }
    let m = s.finish().unwrap();
    between(dir);
    keys.sort();
    assert_eq!(drain(m), keys);
    assert_eq!(std::fs::read_dir(dir).unwrap().count(), 0, "bucket and nested run files removed");
}

#[test]
fn packed_bucket_files_give_sort_of_graph_keys() {
    // Graph keys dst << 32 | src with a low bound (the node count): the
    // bucket files store 5 of 8 bytes per key, and decoding gives
    // sort(keys) back — for in-memory buckets, for one that skew sends
    // down the nested out-of-core path (a hub with most of the keys),
    // through a spill thread, with the bucket files' sizes the packed
    // ones while they exist.
    let d = tempfile::tempdir().unwrap();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(21);
    let n = 3_000_000u64; // 22 bits
    let mut keys: Vec<u64> = (0..200_000).map(|_| rng.random_range(0..n) << 32 | rng.random_range(0..n)).collect();
    keys.extend((0..150_000).map(|_| 7 << 32 | rng.random_range(0..n))); // the hub
    keys.push((n - 1) << 32 | (n - 1));
    let s = ExternalSorter::bucketed(d.path(), "g", 8192 * 8, n << 32, 200_000)
        .with_low_bound(n)
        .with_spill_thread(Box::new(|_| Ok(())))
        .unwrap();
    let pack = s.buckets.as_ref().unwrap().pack;
    assert!(s.buckets() > 8 && pack.width == 5, "{} buckets, {pack:?}", s.buckets());
    let bound = keys.len() as u64 * 5;
    sorts_and_cleans_up(s, keys, d.path(), |dir| {
        let stored: u64 = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
        assert!(stored <= bound, "{stored} bytes for {} keys", bound / 5);
    });
}

#[test]
fn packed_bucket_refuses_a_low_half_beyond_its_bound() {
    // A source id at or above the declared low bound would not fit the
    // packed bits: the bucket write refuses it instead of storing a
    // wrong key.
    let d = tempfile::tempdir().unwrap();
    let n = 1000u64;
    let mut s = ExternalSorter::bucketed(d.path(), "g", 1024 * 8, n << 32, 20_000).with_low_bound(n);
    assert!(s.buckets.as_ref().unwrap().pack.low_bits == 10);
    let mut r = Ok(());
    for k in 0..5000u64 {
        r = s.push((k % n) << 32 | if k == 4000 { 1024 } else { k % n });
        if r.is_err() {
            break;
        }
    }
    let e = r.and_then(|_| s.finish().map(|_| ())).unwrap_err().to_string();
    assert!(e.contains("beyond the declared low bound"), "{e}");
}

#[test]
fn bucketed_stream_dropped_early_removes_its_files() {
    // A consumer that stops after a few keys (a build error) leaves no
    // bucket file behind and does not hang on the worker thread.
    let d = tempfile::tempdir().unwrap();
    let bound = 1u64 << 32;
    let mut s = ExternalSorter::bucketed(d.path(), "t", 2048 * 8, bound, 100_000);
    for k in (0..100_000u64).rev() {
        s.push(k * 40_000).unwrap();
    }
    let mut m = s.finish().unwrap();
    assert_eq!(m.next_key().unwrap(), Some(0));
    drop(m);
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

#[test]
fn sort_bucket_equals_sort_for_every_digit_position() {
    // The MSD radix passes and pdqsort of short parts give sort()
    // whatever bits vary: a shared prefix above `shift` (a bucket),
    // graph keys whose source and destination halves each leave
    // constant bits between them, keys varying in bit 63 (the top
    // digit), one repeated key (a hub / duplicates), and all keys equal.
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(9);
    let mut cases: Vec<Vec<u64>> = Vec::new();
    for shift in [52u32, 40, 33, 20, 12] {
        let hi = 5u64 << shift; // every key shares the bits above `shift`
        let mut keys: Vec<u64> = (0..150_000).map(|_| hi | rng.random_range(0..(1u64 << shift.min(63)))).collect();
        keys.extend(std::iter::repeat_n(hi | 77, 20_000));
        cases.push(keys);
    }
    cases.push(
        (0..150_000)
            .map(|_| (3 << 45 | rng.random_range(0..1u64 << 17)) << 32 | rng.random_range(0..1u64 << 22))
            .collect(),
    );
    cases.push((0..150_000).map(|_| rng.random::<u64>()).collect());
    // Hubs: neighbor lists long enough for scatter passes of their own.
    cases.push((0..200_000).map(|i| ((i % 7) << 32) | rng.random_range(0..1u64 << 22)).collect());
    // Two hubs of over SEGMENT_SCATTER_MAX_KEYS each: sorted in place.
    cases.push((0..2_200_000u64).map(|i| ((i % 2) << 40) | rng.random_range(0..1u64 << 22)).collect());
    cases.push(vec![42; 100_000]);
    for keys in cases {
        let mut want = keys.clone();
        want.sort();
        assert_eq!(sort_bucket(&keys), want);
    }
}

#[test]
fn bucketed_sort_refuses_a_key_beyond_its_bound() {
    let d = tempfile::tempdir().unwrap();
    let mut s = ExternalSorter::bucketed(d.path(), "t", 1024 * 8, 1 << 20, 1 << 20);
    let e = s.push(1 << 21).unwrap_err().to_string();
    assert!(e.contains("beyond the declared key bound"), "{e}");
}

#[test]
fn loser_tree_merges_uneven_and_empty_runs() {
    // Runs of different lengths (one empty, one holding u64::MAX, a
    // non-power-of-two count) merge to the sorted union.
    let d = tempfile::tempdir().unwrap();
    let runs: Vec<Vec<u64>> = vec![vec![1, 5, 9, u64::MAX], vec![], vec![0, 5, 5, 6], vec![2], vec![3, 4, 10, 11, 12]];
    let mut paths = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let p = d.path().join(format!("r{i}"));
        write_keys(&p, r).unwrap();
        paths.push(p);
    }
    let mut m = LoserTree::open(paths).unwrap();
    let mut got = Vec::new();
    while let Some(k) = m.next_key().unwrap() {
        got.push(k);
    }
    let mut want: Vec<u64> = runs.concat();
    want.sort();
    assert_eq!(got, want);
}
