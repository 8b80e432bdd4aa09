//! Commit groups in the WAL (version 2) and power loss during a group commit.
//!
//! A group commit writes up to 32 frames with one write and one fdatasync;
//! after a power failure the pages of that (unacknowledged) group can reach
//! the disk in any order: frame k torn, frame k+1 intact. Each frame stores
//! its index in its group, so replay can tell this torn last group (dropped
//! whole, from its first frame) from damage followed by a frame of a *later*
//! group (written only after the damaged group's fdatasync: corruption in
//! the middle, refused).
//!
//! - byte level: three groups of three frames; damage anywhere in the last
//!   group with later frames of that group intact → the whole last group is
//!   dropped; damage in an earlier group → refused with offset and seq;
//! - graph level: the same logs under `MutableGraph::open` (read-only open and
//!   `verify_log` report without changing the file, a writable open truncates
//!   at the group's start and appends after it);
//! - the real group-commit path: 100 concurrent writers form groups of at
//!   most 32 frames with consecutive indices; power loss simulated in the
//!   last group of that log loses nothing acknowledged before it;
//! - version 1: a fixture in the old format replays with the old rule, and a
//!   writable open rewrites it as version 2;
//! - random damage to grouped logs gives a clean open or a clean error.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flashgnn_build::Progress;
use flashgnn_mutate::wal::{self, FRAME_HEADER_BYTES, WAL_HEADER_BYTES};
use flashgnn_mutate::{verify_log, GraphOptions, MutError, MutableGraph};
use flashgnn_store::Op;
use flashgnn_testing::{assert_mentions, open_mutable, read_only, tempdir, tiny_dataset, writable};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const LEN_MASK: u32 = (1 << wal::FRAME_LEN_BITS) - 1;

/// The embedding row frame `seq` writes (to vertex `seq`): four times `seq`.
fn row(seq: u64) -> Vec<u8> {
    (0..4).flat_map(|_| (seq as f32).to_le_bytes()).collect()
}

/// A log of `groups` (sizes) of frames, seq `base_seq + 1 ...`, each frame
/// updating the embedding of vertex `seq`. Returns the bytes and the start
/// offset of every frame (plus the end offset).
fn grouped_log(version: u32, base_seq: u64, groups: &[usize]) -> (Vec<u8>, Vec<usize>) {
    let mut b = wal::encode_header_version(version, 0, base_seq);
    let mut offs = Vec::new();
    let mut seq = base_seq;
    for &n in groups {
        for i in 0..n {
            seq += 1;
            let at = b.len();
            offs.push(at);
            wal::encode_frame(seq, &[Op::UpdateEmbed { vid: seq, row: row(seq) }], &mut b).unwrap();
            wal::set_group_index(&mut b[at..], i as u32);
        }
    }
    offs.push(b.len());
    (b, offs)
}

fn replay(b: &[u8]) -> Result<(wal::ReplayReport, Vec<u64>), MutError> {
    let mut seqs = Vec::new();
    let r = wal::replay("t.log", b, |seq, _, _| {
        seqs.push(seq);
        Ok(())
    })?;
    Ok((r, seqs))
}

/// Damage the frame starting at `off` the way a lost page does: its bytes
/// after the 16-byte header become zeros (crc no longer matches).
fn tear(b: &mut [u8], off: usize) {
    let len = (u32::from_le_bytes(b[off..off + 4].try_into().unwrap()) & LEN_MASK) as usize;
    b[off + FRAME_HEADER_BYTES..off + FRAME_HEADER_BYTES + len].fill(0);
}

// ---------------------------------------------------------------- bytes

#[test]
fn frames_carry_their_group_index() {
    let (b, offs) = grouped_log(wal::WAL_VERSION_2, 0, &[3, 3, 3]);
    let idx: Vec<u32> = offs[..9].iter().map(|&o| wal::group_index(&b[o..])).collect();
    assert_eq!(idx, [0, 1, 2, 0, 1, 2, 0, 1, 2]);
    let (r, seqs) = replay(&b).unwrap();
    assert_eq!(seqs, (1..=9).collect::<Vec<_>>());
    assert_eq!((r.version, r.frames, r.torn_bytes, r.torn_group_frames), (2, 9, 0, 0));
    // A group of 32 frames is the most: index 31 fits, 32 does not.
    assert_eq!(wal::GROUP_MAX_FRAMES, 32);
    let (b, offs) = grouped_log(wal::WAL_VERSION_2, 0, &[32, 32, 5]);
    assert_eq!(wal::group_index(&b[offs[31]..]), 31);
    assert_eq!(replay(&b).unwrap().0.frames, 69);
}

#[test]
fn torn_last_group_is_dropped_whole_when_later_frames_of_it_survived() {
    let (b, offs) = grouped_log(wal::WAL_VERSION_2, 0, &[3, 3, 3]);
    // Damage frame 7 (first of the last group), 8 (middle), 7 and 8, or 7
    // and 9, with a later frame of the same group intact.
    for damaged in [vec![6], vec![7], vec![6, 7], vec![6, 8]] {
        let mut x = b.clone();
        damaged.iter().for_each(|&k| tear(&mut x, offs[k]));
        let (r, seqs) = replay(&x).unwrap();
        assert_eq!(seqs, (1..=6).collect::<Vec<_>>(), "damaged frames {damaged:?}");
        assert_eq!((r.valid_len, r.last_seq), (offs[6] as u64, 6));
        assert_eq!(r.torn_bytes, (b.len() - offs[6]) as u64);
        assert_eq!(r.torn_group_frames, (damaged[0] - 6) as u64);
    }
    // Damage to the header of frame 8 (bad length field) too.
    let mut x = b.clone();
    x[offs[7] + 3] ^= 0x02;
    assert_eq!(replay(&x).unwrap().0.valid_len, offs[6] as u64);
    // The last frame of the last group damaged, nothing valid after it: the
    // log ends at the damaged frame (frames 7 and 8 are a valid prefix).
    let mut x = b.clone();
    tear(&mut x, offs[8]);
    let (r, seqs) = replay(&x).unwrap();
    assert_eq!((seqs.len(), r.valid_len, r.torn_group_frames), (8, offs[8] as u64, 0));
    // A cut in the middle of the last group: ends at the cut frame.
    for cut in offs[7]..offs[9] {
        let (r, _) = replay(&b[..cut]).unwrap();
        assert_eq!(r.valid_len, if cut < offs[8] { offs[7] } else { offs[8] } as u64, "cut at {cut}");
    }
}

#[test]
fn damage_before_a_later_group_is_corruption_in_the_middle() {
    let (b, offs) = grouped_log(wal::WAL_VERSION_2, 0, &[3, 3, 3]);
    // Any frame of groups 1 and 2, including the last frame of group 2 and
    // its first: a frame of a later group follows, so its fdatasync returned.
    for k in 0..6 {
        let mut x = b.clone();
        tear(&mut x, offs[k]);
        let e = replay(&x).unwrap_err().to_string();
        assert!(e.contains(&format!("byte offset {}", offs[k])), "{e}");
        assert_mentions(&e, &[&format!("frame seq {}", k + 1), "corruption in the middle"]);
        assert!(e.contains("of a later commit group"), "{e}");
    }
    // Damage in group 2 with group 3 torn too (only its last frame intact).
    let mut x = b.clone();
    for k in [4, 6, 7] {
        tear(&mut x, offs[k]);
    }
    let e = replay(&x).unwrap_err().to_string();
    assert_mentions(&e, &[&format!("byte offset {}", offs[4]), "corruption in the middle"]);
}

#[test]
fn impossible_group_indices_are_refused() {
    // A valid crc but an index that does not continue the group.
    let mut b = wal::encode_header(0, 0, None);
    for (seq, idx) in [(1u64, 0u32), (2, 1), (3, 3)] {
        let at = b.len();
        wal::encode_frame(seq, &[Op::DeleteVertex { vid: seq }], &mut b).unwrap();
        wal::set_group_index(&mut b[at..], idx);
    }
    let e = replay(&b).unwrap_err().to_string();
    assert!(e.contains("frame seq 3 says it is frame 3 of its commit group"), "{e}");
    // The first frame of a log must start a group.
    let mut b = wal::encode_header(0, 0, None);
    wal::encode_frame(1, &[Op::DeleteVertex { vid: 1 }], &mut b).unwrap();
    wal::set_group_index(&mut b[WAL_HEADER_BYTES as usize..], 2);
    assert!(replay(&b).unwrap_err().to_string().contains("frame seq 1 says it is frame 2"));
}

/// A version-1 log (the format before commit groups), computed from the
/// version-1 spec independently of the encoder: header version 1, two frames (seq 1: delete_vertex 5; seq 2:
/// add_edge 3 <- 4).
const V1_FIXTURE_HEX: &str = "46474e4e57414c00010000000000000000000000000000000000000000000000\
                              3c1df9a0000000000d000000d310744701000000000000000100000002050000\
                              00000000001500000077aa392802000000000000000100000003030000000000\
                              00000400000000000000";

fn v1_fixture() -> Vec<u8> {
    (0..V1_FIXTURE_HEX.len()).step_by(2).map(|i| u8::from_str_radix(&V1_FIXTURE_HEX[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn version_1_logs_replay_with_the_old_rule() {
    let b = v1_fixture();
    // The fixture is what the encoder writes for a version-1 header and
    // index-0 frames (unchanged by version 2).
    let mut again = wal::encode_header_version(1, 0, 0);
    wal::encode_frame(1, &[Op::DeleteVertex { vid: 5 }], &mut again).unwrap();
    wal::encode_frame(2, &[Op::AddEdge { dst: 3, src: 4 }], &mut again).unwrap();
    assert_eq!(b, again);
    let mut ops = Vec::new();
    let r = wal::replay("v1.log", &b, |seq, _, o| {
        ops.push((seq, o));
        Ok(())
    })
    .unwrap();
    assert_eq!((r.version, r.frames, r.torn_bytes), (1, 2, 0));
    assert_eq!(ops, vec![(1, vec![Op::DeleteVertex { vid: 5 }]), (2, vec![Op::AddEdge { dst: 3, src: 4 }])]);
    // Old rule: a damaged frame followed by any valid frame is refused...
    let (b3, offs) = grouped_log(1, 0, &[1, 1, 1]);
    let mut x = b3.clone();
    tear(&mut x, offs[1]);
    let e = replay(&x).unwrap_err().to_string();
    assert_mentions(&e, &[&format!("byte offset {}", offs[1]), "corruption in the middle"]);
    // ...and a damaged last frame is a torn tail.
    let mut x = b3.clone();
    tear(&mut x, offs[2]);
    assert_eq!(replay(&x).unwrap().0.valid_len, offs[2] as u64);
    // A version-1 frame cannot carry a group index: a set index bit is a bad
    // length (here a torn tail: nothing valid follows).
    let mut x = b3.clone();
    wal::set_group_index(&mut x[offs[2]..], 1);
    assert_eq!(replay(&x).unwrap().0.valid_len, offs[2] as u64);
}

// ---------------------------------------------------------------- graph

/// A dataset whose `mut/wal-0.log` is `log` (CURRENT: generation 0, base_seq 0).
fn store_with_log(dir: &Path, log: &[u8]) -> (PathBuf, PathBuf) {
    let p = tiny_dataset(dir);
    drop(open_mutable(&p));
    let w = p.join("mut").join("wal-0.log");
    std::fs::write(&w, log).unwrap();
    (p, w)
}

fn embed0(g: &MutableGraph, v: u64) -> f32 {
    f32::from_le_bytes(g.get_embed(v as i64).unwrap()[..4].try_into().unwrap())
}

#[test]
fn power_loss_in_the_last_group_drops_that_group_and_keeps_the_rest() {
    let d = tempdir();
    let (b, offs) = grouped_log(wal::WAL_VERSION_2, 0, &[3, 3, 3]);
    let mut x = b.clone();
    tear(&mut x, offs[6]); // first frame of group 3; frames 8 and 9 intact
    let (p, w) = store_with_log(d.path(), &x);
    let base7 = {
        let g = MutableGraph::open(&p, &read_only()).unwrap();
        assert_eq!(g.seq(), 6);
        assert_eq!(g.open_report.replay.torn_bytes, (b.len() - offs[6]) as u64);
        (1..=6).for_each(|v| assert_eq!(embed0(&g, v), v as f32));
        assert_ne!(embed0(&g, 8), 8.0, "frame 8 of the torn group is not applied");
        embed0(&g, 7)
    };
    // Read-only open and verify change nothing.
    let r = verify_log(&p).unwrap().unwrap();
    assert_eq!((r.frames, r.last_seq, r.torn_bytes), (6, 6, (b.len() - offs[6]) as u64));
    assert_eq!(std::fs::read(&w).unwrap(), x);
    // A writable open truncates at the group's start and appends after it.
    let g = open_mutable(&p);
    assert_eq!((g.seq(), g.wal_bytes()), (6, offs[6] as u64));
    assert_eq!(std::fs::metadata(&w).unwrap().len(), offs[6] as u64);
    g.update_embed(7, &[70.0; 4]).unwrap();
    drop(g);
    let g = open_mutable(&p);
    assert_eq!((g.seq(), embed0(&g, 7), embed0(&g, 6)), (7, 70.0, 6.0));
    assert_ne!(base7, 70.0);

    // Damage in group 2 with group 3 intact: refused, file untouched.
    let d = tempdir();
    let mut x = b.clone();
    tear(&mut x, offs[5]);
    let (p, w) = store_with_log(d.path(), &x);
    for opts in [read_only(), writable()] {
        let e = MutableGraph::open(&p, &opts).err().unwrap().to_string();
        assert!(e.contains(&format!("wal-0.log: byte offset {}", offs[5])), "{e}");
        assert_mentions(&e, &["frame seq 6", "corruption in the middle"]);
    }
    assert!(verify_log(&p).unwrap_err().to_string().contains("corruption in the middle"));
    assert_eq!(std::fs::read(&w).unwrap(), x);
}

#[test]
fn a_version_1_log_is_rewritten_as_the_current_version_by_a_writable_open() {
    let d = tempdir();
    let (b, offs) = grouped_log(1, 0, &[1, 1, 1]);
    let mut x = b.clone();
    x.extend_from_slice(&[9u8; 7]); // a torn tail
    let (p, w) = store_with_log(d.path(), &x);
    let g = MutableGraph::open(&p, &read_only()).unwrap();
    assert_eq!((g.seq(), g.open_report.replay.version, g.open_report.replay.torn_bytes), (3, 1, 7));
    drop(g);
    assert_eq!(std::fs::read(&w).unwrap(), x, "read-only open changes nothing");
    let g = Arc::new(open_mutable(&p));
    let now = std::fs::read(&w).unwrap();
    assert_eq!(u32::from_le_bytes(now[8..12].try_into().unwrap()), wal::WAL_VERSION);
    assert_eq!(now[WAL_HEADER_BYTES as usize..], b[WAL_HEADER_BYTES as usize..offs[3]]);
    // New groups go after the old frames.
    std::thread::scope(|s| {
        for t in 0..6u64 {
            let g = g.clone();
            s.spawn(move || g.update_embed(10 + t, &[1.0; 4]).unwrap());
        }
    });
    drop(g);
    let g = open_mutable(&p);
    assert_eq!((g.seq(), g.open_report.replay.version), (9, wal::WAL_VERSION));
    assert_eq!((1..=3).map(|v| embed0(&g, v)).collect::<Vec<_>>(), [1.0, 2.0, 3.0]);
}

/// (start offset, seq, index) of every frame of an intact log.
fn frames_of(b: &[u8]) -> Vec<(usize, u64, u32)> {
    let mut out = Vec::new();
    let mut off = WAL_HEADER_BYTES as usize;
    while off < b.len() {
        let len = (u32::from_le_bytes(b[off..off + 4].try_into().unwrap()) & LEN_MASK) as usize;
        out.push((off, u64::from_le_bytes(b[off + 8..off + 16].try_into().unwrap()), wal::group_index(&b[off..])));
        off += FRAME_HEADER_BYTES + len;
    }
    out
}

#[test]
fn real_group_commits_hold_at_most_32_frames_and_survive_power_loss_in_the_last() {
    let d = tempdir();
    let p = tiny_dataset(d.path());
    // The leader waits 100 ms: 100 writers queue meanwhile, more than a group holds.
    let g = Arc::new(
        MutableGraph::open(&p, &GraphOptions { writable: true, group_commit_wait_us: 100_000, ..Default::default() })
            .unwrap(),
    );
    std::thread::scope(|s| {
        for t in 0..100u64 {
            let g = g.clone();
            s.spawn(move || g.update_embed(t, &[t as f64 + 0.5; 4]).unwrap());
        }
    });
    let fsyncs = g.stats.fsyncs.load(std::sync::atomic::Ordering::Relaxed);
    drop(g);
    let w = p.join("mut").join("wal-0.log");
    let b = std::fs::read(&w).unwrap();
    let frames = frames_of(&b);
    assert_eq!(frames.len(), 100);
    // Groups: indices 0, 1, 2, ... with consecutive seqs; one fsync each.
    let mut groups: Vec<Vec<(usize, u64, u32)>> = Vec::new();
    for f in frames {
        if f.2 == 0 {
            groups.push(vec![f]);
        } else {
            let last = groups.last_mut().expect("first frame starts a group");
            assert_eq!(f.2 as usize, last.len());
            last.push(f);
        }
    }
    let sizes: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    assert_eq!(sizes.len() as u64, fsyncs, "{sizes:?}");
    assert!(sizes.iter().all(|&n| n <= 32), "{sizes:?}");
    assert!(sizes.contains(&32), "100 writers queued behind a 100 ms leader fill a group: {sizes:?}");

    // Power loss while the group with >= 3 frames (the last such) was being
    // written: later groups were never written; its first frame torn, the
    // rest intact.
    let k = sizes.iter().rposition(|&n| n >= 3).unwrap();
    let (start, first_seq, _) = groups[k][0];
    let end = groups.get(k + 1).map_or(b.len(), |g| g[0].0);
    let mut x = b[..end].to_vec();
    tear(&mut x, start);
    std::fs::write(&w, &x).unwrap();
    let g = open_mutable(&p);
    assert_eq!((g.seq(), g.wal_bytes()), (first_seq - 1, start as u64));
    assert_eq!(g.open_report.replay.torn_group_frames, 0);
    assert_eq!(g.open_report.replay.torn_bytes, (end - start) as u64);
    drop(g);
    // A middle frame torn instead: the group's intact first frame goes too.
    let mut x = b[..end].to_vec();
    tear(&mut x, groups[k][1].0);
    std::fs::write(&w, &x).unwrap();
    let g = MutableGraph::open(&p, &read_only()).unwrap();
    assert_eq!((g.seq(), g.open_report.replay.torn_group_frames), (first_seq - 1, 1));
    // The same damage with the next group present is refused.
    if k + 1 < groups.len() {
        let mut x = b.clone();
        tear(&mut x, groups[k][1].0);
        std::fs::write(&w, &x).unwrap();
        let e = MutableGraph::open(&p, &read_only()).err().unwrap().to_string();
        assert!(e.contains("corruption in the middle"), "{e}");
    }
}

#[test]
fn compaction_writes_a_version_2_log_with_groups_of_one() {
    let d = tempdir();
    let p = tiny_dataset(d.path());
    let g = Arc::new(open_mutable(&p));
    g.update_embed(1, &[1.0; 4]).unwrap();
    g.compact(&Progress::new()).unwrap();
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let g = g.clone();
            s.spawn(move || g.update_embed(t, &[2.0; 4]).unwrap());
        }
    });
    drop(g);
    let b = std::fs::read(p.join("mut").join("wal-1.log")).unwrap();
    assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), wal::WAL_VERSION);
    assert!(replay(&b).is_ok());
    // reset_group_indices makes every frame its own group.
    let mut body = b[WAL_HEADER_BYTES as usize..].to_vec();
    wal::reset_group_indices("t", &mut body).unwrap();
    let mut again = b[..WAL_HEADER_BYTES as usize].to_vec();
    again.extend_from_slice(&body);
    assert!(frames_of(&again).iter().all(|f| f.2 == 0));
    assert_eq!(replay(&again).unwrap().0.frames, 8);
}

#[test]
fn random_damage_to_grouped_logs_never_panics() {
    let (b, offs) = grouped_log(wal::WAL_VERSION_2, 0, &[4, 1, 7, 3, 5]);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(78);
    let (mut clean, mut errors) = (0, 0);
    for _ in 0..4000 {
        let mut x = b.clone();
        match rng.random_range(0..4) {
            0 => {
                for _ in 0..rng.random_range(1..4) {
                    let i = rng.random_range(0..x.len());
                    x[i] ^= 1 << rng.random_range(0..8);
                }
            }
            1 => x.truncate(rng.random_range(0..x.len())),
            2 => tear(&mut x, offs[rng.random_range(0..offs.len() - 1)]),
            _ => {
                let i = rng.random_range(WAL_HEADER_BYTES as usize..x.len() - 4);
                x[i..i + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            }
        }
        match replay(&x) {
            Ok((r, seqs)) => {
                // Whatever survives is a prefix of whole groups or ends at the damage.
                assert_eq!(seqs, (1..=r.last_seq).collect::<Vec<_>>());
                clean += 1
            }
            Err(MutError::Corrupt(m)) => {
                assert!(m.contains("byte offset"), "{m}");
                errors += 1
            }
            Err(e) => panic!("unexpected error kind: {e}"),
        }
    }
    assert!(clean > 0 && errors > 0, "clean {clean}, errors {errors}");
}

#[test]
fn a_log_of_another_dataset_is_refused() {
    // Two builds of the same input (same layout, different dataset ids): B's
    // log copied over A's is refused where it is replayed (open, read-only
    // open, verify), naming the file and the header's byte offset; A's own
    // log still opens after it is put back.
    let d = tempdir();
    let a = tiny_dataset(&d.path().join("a"));
    let b = tiny_dataset(&d.path().join("b"));
    for (p, v) in [(&a, 1.0f64), (&b, 2.0)] {
        let g = open_mutable(p);
        g.update_embed(3, &[v; 4]).unwrap();
    }
    let wa = a.join("mut").join("wal-0.log");
    let own = std::fs::read(&wa).unwrap();
    let foreign = std::fs::read(b.join("mut").join("wal-0.log")).unwrap();
    assert_eq!(u32::from_le_bytes(own[8..12].try_into().unwrap()), wal::WAL_VERSION);
    std::fs::write(&wa, &foreign).unwrap();
    for opts in [read_only(), writable()] {
        let e = MutableGraph::open(&a, &opts).err().expect("a foreign log was replayed");
        let m = e.to_string();
        assert!(matches!(e, flashgnn_mutate::MutError::Corrupt(_)), "{m}");
        assert_mentions(&m, &["wal-0.log", "byte offset 36", "another dataset"]);
    }
    assert!(flashgnn_mutate::verify_log(&a).is_err());
    std::fs::write(&wa, &own).unwrap();
    let g = MutableGraph::open(&a, &read_only()).unwrap();
    assert_eq!(embed0(&g, 3), 1.0);
}
