//! Invariants of the SSD model over synthetic traces shaped like the
//! sampler's (seed slot pages, then pages caused by them, then feature
//! rows), written and read through the real trace format.

use std::path::{Path, PathBuf};

use flashgnn_format::trace::*;
use flashgnn_sim::config::Config;
use flashgnn_sim::trace::TraceWriter;
use flashgnn_sim::{design, simulate, simulate_one, Request, DESIGNS};

const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs/ssd/beacongnn-table2.toml");
const TLC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs/ssd/tlc-conventional.toml");

/// A deterministic pseudo-random trace: `batches` batches of `seeds` seed
/// reads, each causing `fan` hop-1 reads, each causing `fan` hop-2 feature
/// reads; offsets spread over a 4 GiB graph file.
fn write_trace(path: &Path, batches: u32, seeds: u32, fan: u32) -> u64 {
    let h = TraceHeader {
        version: TRACE_VERSION,
        dataset_id: 1,
        page_size: 4096,
        params: format!("{{\"batch_size\":{seeds}}}"),
    };
    let mut w = TraceWriter::create(path, &h).unwrap();
    let mut x = 0x1234_5678_9abc_def0u64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut total = 0;
    for _ in 0..batches {
        let mut reads = Vec::new();
        let push = |reads: &mut Vec<TraceRead>,
                    file: u8,
                    kind: u8,
                    hop: u8,
                    offset: u64,
                    length: u32,
                    dep: u32,
                    items: u32| {
            reads.push(TraceRead {
                file,
                kind,
                hop,
                offset,
                length,
                dep,
                bytes_used: (length / 8).max(1),
                items,
                ..Default::default()
            });
            reads.len() as u32 - 1
        };
        let mut l1 = Vec::new();
        for _ in 0..seeds {
            let r = push(&mut reads, FILE_GRAPH, KIND_SLOT_PAGE, 0, (rnd() % (1 << 20)) * 4096, 4096, NO_DEP, 1);
            l1.push(r);
        }
        let mut l2 = Vec::new();
        for &p in &l1 {
            for k in 0..fan {
                let (file, kind) =
                    if k % 4 == 3 { (FILE_OVERFLOW, KIND_OVERFLOW_PAGE) } else { (FILE_GRAPH, KIND_SLOT_PAGE) };
                l2.push(push(&mut reads, file, kind, 1, (rnd() % (1 << 20)) * 4096, 4096, p, 2));
            }
        }
        for &p in &l2 {
            for _ in 0..fan {
                // Feature rows of 256 B, sometimes straddling two pages.
                push(
                    &mut reads,
                    FILE_FEATURES,
                    KIND_FEATURE_ROW,
                    2,
                    (rnd() % (1 << 30)) & !511,
                    512 + 512 * (rnd() % 2) as u32,
                    p,
                    1,
                );
            }
        }
        total += reads.len() as u64;
        w.write_batch(&reads).unwrap();
    }
    w.finish().unwrap();
    total
}

fn trace(dir: &Path, batches: u32, seeds: u32, fan: u32) -> (PathBuf, u64) {
    let p = dir.join("t.fgt");
    let n = write_trace(&p, batches, seeds, fan);
    (p, n)
}

fn cfg(over: &[(&str, &str)]) -> Config {
    let ov: Vec<(String, String)> = over.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    Config::load(Path::new(CONFIG), &ov).unwrap()
}

/// Flash pages a trace's reads span (the model's mapping of extents).
fn pages_of(p: &Path, page: u64) -> u64 {
    let mut r = flashgnn_sim::trace::TraceReader::open(p).unwrap();
    let mut n = 0;
    while let Some(b) = r.next_batch().unwrap() {
        for x in b {
            let base = (x.file as u64) << 40;
            n += (base + x.offset + x.length as u64 - 1) / page - (base + x.offset) / page + 1;
        }
    }
    n
}

#[test]
fn every_read_served_once_by_every_design() {
    let d = tempfile::tempdir().unwrap();
    let (p, n) = trace(d.path(), 3, 64, 5);
    let c = cfg(&[]);
    let pages = pages_of(&p, 4096);
    for des in DESIGNS {
        let r = simulate_one(&p, &c, des).unwrap();
        assert_eq!(r.reads, n, "{}", des.name);
        assert_eq!(r.reads_served, n, "{}: every read completes exactly once", des.name);
        assert_eq!(r.flash_commands, pages, "{}: one flash read per page an extent spans", des.name);
        assert_eq!(r.batches, 3);
        assert_eq!(r.traced_batch_latency_s, None, "a trace without times has no measured latency");
        assert!(r.batches_per_s > 0.0);
        // Queue-depth histogram: shares of time summing to 1; the timeline
        // is bounded, ordered, and never shows more busy units than exist.
        let h: f64 = r.queue_depth_hist.iter().sum();
        assert!((h - 1.0).abs() < 1e-9, "{}: histogram sums to {h}", des.name);
        let tl = &r.timeline;
        assert!(
            tl.t_s.len() > 10 && tl.t_s.len() <= flashgnn_sim::engine::TIMELINE_MAX,
            "{}: {} points",
            des.name,
            tl.t_s.len()
        );
        assert!(tl.t_s.windows(2).all(|w| w[0] < w[1]));
        assert!(tl.active_channels.iter().all(|&c| c <= 16) && tl.active_dies.iter().all(|&x| x <= 128));
        assert!(tl.active_dies.iter().any(|&x| x > 0));
        // The critical-path breakdown accounts for the whole batch latency.
        let sum: f64 = r.breakdown_s.values().sum();
        assert!(
            (sum - r.batch_latency_s).abs() <= 1e-9 + 1e-6 * r.batch_latency_s,
            "{}: {sum} vs {}",
            des.name,
            r.batch_latency_s
        );
    }
}

#[test]
fn littles_law_on_every_queue() {
    let d = tempfile::tempdir().unwrap();
    let (p, _) = trace(d.path(), 2, 128, 6);
    // Both configs, with and without multi-plane reads (pages riding a
    // die's tR leave the die's queue at their own time); TLC also has a
    // page cache (hits never reach a die).
    for (conf, mp) in [(CONFIG, "false"), (TLC, "false"), (CONFIG, "true"), (TLC, "true")] {
        let ov = [("host.queue_depth".to_string(), "32".to_string()), ("flash.multi_plane".into(), mp.into())];
        let c = Config::load(Path::new(conf), &ov).unwrap();
        for des in DESIGNS {
            let r = simulate_one(&p, &c, des).unwrap();
            let mut checked = 0;
            for (name, q) in &r.queues {
                if q.arrivals == 0 {
                    continue;
                }
                checked += 1;
                let lw = q.arrival_rate * q.mean_sojourn_s;
                assert!(
                    (q.mean_occupancy - lw).abs() <= 1e-6 * q.mean_occupancy.max(1e-3),
                    "{} {}: L = {} but lambda*W = {}",
                    des.name,
                    name,
                    q.mean_occupancy,
                    lw
                );
                assert!(q.mean_busy <= q.mean_occupancy + 1e-9, "{} {}: busy servers above occupancy", des.name, name);
            }
            assert!(checked >= 2, "{}: only {checked} queues saw traffic", des.name);
        }
    }
}

#[test]
fn more_channels_or_dies_never_slow_the_host_design() {
    let d = tempfile::tempdir().unwrap();
    let (p, _) = trace(d.path(), 2, 128, 5);
    let host = design::by_name("host").unwrap();
    for (field, values) in [
        ("channels", &["1", "2", "4", "8", "16", "32"][..]),
        ("dies", &["1", "2", "4", "8"][..]),
        ("packages", &["1", "2", "4"][..]),
    ] {
        let mut prev = f64::INFINITY;
        for v in values {
            let r = simulate_one(&p, &cfg(&[(field, v), ("host.queue_depth", "64")]), host).unwrap();
            // FIFO list scheduling admits tiny (Graham-type) anomalies: a
            // different mapping can reorder a few equal-time grants. Allow
            // 0.1 %, far below any real effect of a resource (docs/simulator.md).
            assert!(
                r.batch_latency_s <= prev * 1.001,
                "{field}={v}: {} s per batch, slower than {prev} s with fewer",
                r.batch_latency_s
            );
            prev = r.batch_latency_s;
        }
    }
    // And the sweep does change something: one channel is much slower.
    let one = simulate_one(&p, &cfg(&[("channels", "1")]), host).unwrap();
    let many = simulate_one(&p, &cfg(&[("channels", "16")]), host).unwrap();
    assert!(one.batch_latency_s > 2.0 * many.batch_latency_s);
}

#[test]
fn same_seed_same_bytes() {
    let d = tempfile::tempdir().unwrap();
    let (p, _) = trace(d.path(), 2, 32, 4);
    let conf = PathBuf::from(CONFIG);
    let run = |seed: &str| {
        let req = Request {
            trace: &p,
            config: &conf,
            designs: vec!["all".into()],
            sweep: Some(("channels".into(), vec!["8".into(), "16".into()])),
            set: vec![("flash.mapping".into(), "hash".into()), ("seed".into(), seed.into())],
            timing: false,
        };
        serde_json::to_string(&simulate(&req).unwrap()).unwrap()
    };
    let a = run("7");
    assert_eq!(a, run("7"));
    assert_ne!(a, run("8"), "the seed drives the hashed mapping");
}

#[test]
fn bad_config_names_the_field() {
    let text = std::fs::read_to_string(CONFIG).unwrap();
    let bad = |from: &str, to: &str, want: &[&str]| {
        assert!(text.contains(from), "{from}");
        let e = Config::parse(&text.replacen(from, to, 1), "x.toml", &[]).unwrap_err().to_string();
        for w in want {
            assert!(e.contains(w), "{e:?} lacks {w:?}");
        }
    };
    bad("channels = 16", "channels = 0", &["x.toml", "flash.channels", "0", "[1, 1024]"]);
    bad("read_ns = 3000.0", "read_ns = -1.0", &["flash.read_ns", "-1"]);
    bad("page_bytes = 4096", "page_bytes = 3000", &["flash.page_bytes", "3000", "power of two"]);
    bad("pcie_lanes = 4", "pcie_lanes = 4\nlanes_typo = 3", &["lanes_typo"]);
    bad("cores = 4 ", "", &["cores"]);
    bad("voltage = 3.3", "voltage = \"high\"", &["voltage"]);
    bad("block_queue_depth = 32", "block_queue_depth = 0", &["host.block_queue_depth", "0", "[1, 65536]"]);
    bad("multi_plane = false", "multi_plane = 2", &["multi_plane"]);
    // The reserved part of SSD DRAM cannot exceed the DRAM.
    let e = Config::parse(&text, "x.toml", &[("controller.dram_reserved_bytes".into(), "2147483648".into())])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("controller.dram_reserved_bytes") && e.contains("2147483648") && e.contains("1073741824"),
        "{e}"
    );
    let e = Config::parse(&text, "x.toml", &[("flash.nonesuch".into(), "1".into())]).unwrap_err().to_string();
    assert!(e.contains("flash.nonesuch"), "{e}");
    let e = Config::parse(&text, "x.toml", &[("channels".into(), "many".into())]).unwrap_err().to_string();
    assert!(e.contains("flash.channels") && e.contains("many"), "{e}");
}

#[test]
fn corrupt_trace_names_the_offset() {
    let d = tempfile::tempdir().unwrap();
    let (p, _) = trace(d.path(), 1, 8, 2);
    let mut b = std::fs::read(&p).unwrap();
    let hdr = HEADER_FIXED + "{\"batch_size\":8}".len();
    // Damage the block magic: refused at that offset before any replay.
    b[hdr] = b'X';
    std::fs::write(&p, &b).unwrap();
    let e = simulate_one(&p, &cfg(&[]), &DESIGNS[0]).unwrap_err().to_string();
    assert!(
        e.contains(&p.display().to_string()) && e.contains(&format!("byte offset {hdr}")) && e.contains("block magic"),
        "{e}"
    );
    // Damage the header's params: the header CRC names offset 0.
    let (p2, _) = trace(d.path(), 1, 8, 2);
    let mut b = std::fs::read(&p2).unwrap();
    b[HEADER_FIXED + 1] ^= 1;
    std::fs::write(&p2, &b).unwrap();
    let e = simulate_one(&p2, &cfg(&[]), &DESIGNS[0]).unwrap_err().to_string();
    assert!(e.contains("byte offset 0") && e.contains("checksum"), "{e}");
}

#[test]
fn speed_is_reported() {
    let d = tempfile::tempdir().unwrap();
    let (p, _) = trace(d.path(), 4, 256, 10);
    let conf = PathBuf::from(CONFIG);
    let req = Request {
        trace: &p,
        config: &conf,
        designs: vec!["host".into(), "bg-2".into()],
        sweep: None,
        set: vec![],
        timing: true,
    };
    let r = simulate(&req).unwrap();
    let s = r.speed.expect("timing on reports speed");
    assert!(s.flash_commands > 100_000 && s.commands_per_s > 0.0);
    eprintln!("simulated {} flash commands at {:.2} M commands/s", s.flash_commands, s.commands_per_s / 1e6);
    // In-storage die-level sampling moves fewer bytes over the channels.
    let (h, b2) = (&r.runs[0].results[0], &r.runs[0].results[1]);
    assert!(b2.bytes_channel < h.bytes_channel / 4);
    assert!(b2.bytes_pcie < h.bytes_pcie / 10);
}

/// A trace that reads the same `pages` graph pages (one per seed, no
/// dependencies) in each of `batches` batches: the reuse a page cache sees.
fn write_repeat_trace(path: &Path, batches: u32, pages: u64) {
    let h = TraceHeader {
        version: TRACE_VERSION,
        dataset_id: 2,
        page_size: 4096,
        params: format!("{{\"batch_size\":{pages}}}"),
    };
    let mut w = TraceWriter::create(path, &h).unwrap();
    for _ in 0..batches {
        let reads: Vec<TraceRead> = (0..pages)
            .map(|k| TraceRead {
                file: FILE_GRAPH,
                kind: KIND_SLOT_PAGE,
                hop: 0,
                offset: k * 4096,
                length: 4096,
                dep: NO_DEP,
                bytes_used: 512,
                items: 1,
                ..Default::default()
            })
            .collect();
        w.write_batch(&reads).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn cc_pays_the_block_interface_and_a_second_pcie_crossing() {
    // cc is host-barrier at the block layer's depth plus the gathered
    // subgraph (every read's used bytes) crossing PCIe again to a discrete
    // accelerator: same flash reads, more PCIe bytes, slower than host.
    let d = tempfile::tempdir().unwrap();
    let (p, n) = trace(d.path(), 2, 128, 5);
    let used: u64 = {
        let mut r = flashgnn_sim::trace::TraceReader::open(&p).unwrap();
        let mut u = 0;
        while let Some(b) = r.next_batch().unwrap() {
            u += b.iter().map(|x| x.bytes_used as u64).sum::<u64>();
        }
        u
    };
    let by = |n: &str| design::by_name(n).unwrap();
    let c = cfg(&[]);
    let host = simulate_one(&p, &c, by("host")).unwrap();
    let cc = simulate_one(&p, &c, by("cc")).unwrap();
    assert_eq!(cc.reads_served, n);
    assert_eq!(cc.flash_commands, host.flash_commands, "the same pages are read");
    assert!(cc.bytes_pcie >= host.bytes_pcie + used, "{} vs host {} + used {used}", cc.bytes_pcie, host.bytes_pcie);
    assert!(cc.batch_latency_s > host.batch_latency_s, "cc {} s, host {} s", cc.batch_latency_s, host.batch_latency_s);
    // At the engine's depth, cc is exactly host-barrier plus the transfer.
    let c2 = cfg(&[("host.block_queue_depth", "256")]);
    let hb = simulate_one(&p, &c2, by("host-barrier")).unwrap();
    let cc2 = simulate_one(&p, &c2, by("cc")).unwrap();
    assert_eq!(cc2.bytes_pcie, hb.bytes_pcie + used);
    assert!(cc2.batch_latency_s > hb.batch_latency_s);
    // A shallower block queue never makes cc faster.
    let shallow = simulate_one(&p, &cfg(&[("host.block_queue_depth", "4")]), by("cc")).unwrap();
    assert!(shallow.batch_latency_s > cc.batch_latency_s);
}

#[test]
fn multi_plane_reads_are_never_slower_and_one_plane_is_the_old_model() {
    // Few dies so that pages queue per die: multi-plane reads then share a
    // tR. Every read is still served once, each page still one command.
    let d = tempfile::tempdir().unwrap();
    let (p, n) = trace(d.path(), 2, 128, 5);
    let small = [("channels", "4"), ("packages", "1"), ("dies", "1")];
    let mut faster = 0;
    for name in ["host", "cc", "bg-1", "bg-sp", "bg-2"] {
        let des = design::by_name(name).unwrap();
        let run = |mp: &str, planes: &str| {
            let mut ov = small.to_vec();
            ov.push(("flash.multi_plane", mp));
            ov.push(("planes", planes));
            simulate_one(&p, &cfg(&ov), des).unwrap()
        };
        let off = run("false", "2");
        let on = run("true", "2");
        assert_eq!(on.reads_served, n, "{name}");
        assert_eq!(on.flash_commands, off.flash_commands, "{name}: one command per page either way");
        assert!(
            on.batch_latency_s <= off.batch_latency_s * 1.001,
            "{name}: multi-plane {} s, single-plane {} s",
            on.batch_latency_s,
            off.batch_latency_s
        );
        if on.batch_latency_s < off.batch_latency_s * 0.95 {
            faster += 1;
        }
        // With one plane, the switch changes nothing, byte for byte.
        let a = serde_json::to_string(&run("true", "1")).unwrap();
        let b = serde_json::to_string(&run("false", "1")).unwrap();
        assert_eq!(a, b, "{name}: planes = 1 with multi_plane on differs");
    }
    assert!(faster >= 3, "multi-plane helped only {faster} of 5 designs on a die-bound config");
}

#[test]
fn ssd_dram_page_cache_saves_flash_reads_only_when_it_fits() {
    // 3 batches re-reading the same 256 pages. A page cache holding them
    // all serves batches 2 and 3 from SSD DRAM; a 4-page LRU is flushed by
    // the cyclic scan (every read misses); no cache sends all to flash.
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("r.fgt");
    let (batches, pages) = (3u64, 256u64);
    write_repeat_trace(&p, batches as u32, pages);
    let gib = 1u64 << 30;
    let reserved = |cache_pages: u64| (gib - cache_pages * 4096).to_string();
    for name in ["smartsage", "bg-1", "bg-dg"] {
        let des = design::by_name(name).unwrap();
        let run = |cache_pages: u64| {
            let r = reserved(cache_pages);
            simulate_one(&p, &cfg(&[("controller.dram_reserved_bytes", r.as_str())]), des).unwrap()
        };
        let big = run(pages * 2);
        let tiny = run(4);
        let none = run(0);
        assert_eq!(big.flash_commands, pages, "{name}: only the first batch reads flash");
        assert_eq!((big.dram_cache_hits, big.dram_cache_misses), (pages * (batches - 1), pages), "{name}");
        assert_eq!(tiny.flash_commands, pages * batches, "{name}: a 4-page LRU never hits a 256-page cycle");
        assert_eq!(tiny.dram_cache_hits, 0);
        assert_eq!(none.flash_commands, pages * batches, "{name}");
        assert_eq!((none.dram_cache_hits, none.dram_cache_misses), (0, 0), "{name}: no cache, nothing counted");
        assert!(big.batch_latency_s < tiny.batch_latency_s, "{name}: hits are faster");
        assert_eq!(big.reads_served, pages * batches);
    }
    // Designs that do not stage whole pages in SSD DRAM never use it.
    for name in ["host", "cc", "bg-sp", "bg-2"] {
        let r =
            simulate_one(&p, &cfg(&[("controller.dram_reserved_bytes", "0")]), design::by_name(name).unwrap()).unwrap();
        assert_eq!(r.flash_commands, pages * batches, "{name}");
        assert_eq!((r.dram_cache_hits, r.dram_cache_misses), (0, 0), "{name}");
    }
}

#[test]
fn host_in_the_loop_designs_pay_a_round_trip_per_hop() {
    // The synthetic trace has hops 0, 1, 2: two hop boundaries. Raising the
    // host stack by 100 us costs every in-storage design 100 us per batch
    // (half on the batch's command, half on its completion); BG-1, BG-SP and
    // SmartSAGE pay it again at each of the two boundaries (BeaconGNN
    // section III, "Challenge 1"), out-of-order designs do not.
    let d = tempfile::tempdir().unwrap();
    let (p, _) = trace(d.path(), 2, 64, 4);
    let extra = |name: &str| {
        let des = design::by_name(name).unwrap();
        let a = simulate_one(&p, &cfg(&[("host.stack_ns", "10000.0")]), des).unwrap();
        let b = simulate_one(&p, &cfg(&[("host.stack_ns", "110000.0")]), des).unwrap();
        b.batch_latency_s - a.batch_latency_s
    };
    for name in ["bg-1", "bg-sp", "smartsage"] {
        let x = extra(name);
        assert!((x - 300e-6).abs() < 5e-6, "{name}: +{x} s per batch, want 3 x 100 us");
    }
    for name in ["bg-dg", "bg-dgsp", "bg-2"] {
        let x = extra(name);
        assert!((x - 100e-6).abs() < 5e-6, "{name}: +{x} s per batch, want 100 us");
    }
}

// ---- Several SSDs (docs/simulator.md, "Several SSDs") ----

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, &x| (h ^ x as u64).wrapping_mul(0x100000001b3))
}

/// FNV-1a of the whole `--json --no-timing` report (trace path blanked) of
/// every design, on both shipped configs, multi-plane off and on.
fn report_hashes(set: &[(&str, &str)]) -> Vec<u64> {
    let d = tempfile::tempdir().unwrap();
    let (p, _) = trace(d.path(), 2, 48, 4);
    let mut out = Vec::new();
    for conf in [CONFIG, TLC] {
        for mp in ["false", "true"] {
            let conf = PathBuf::from(conf);
            let mut s: Vec<(String, String)> = set.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
            s.push(("flash.multi_plane".into(), mp.into()));
            let req =
                Request { trace: &p, config: &conf, designs: vec!["all".into()], sweep: None, set: s, timing: false };
            let mut r = simulate(&req).unwrap();
            r.trace = String::new();
            out.push(fnv(serde_json::to_string(&r).unwrap().as_bytes()));
        }
    }
    out
}

/// The hashes of the same reports from the simulator before it modelled
/// several devices (commit dbc45ad, computed there with this function).
const ONE_DEVICE_GOLDEN: [u64; 4] = [0x3c086fabb609d35d, 0x29ede75022175d5b, 0xec502007410768a1, 0xe2a07c5d10c26ea2];

#[test]
fn one_device_is_byte_identical_to_the_single_ssd_model() {
    let now = report_hashes(&[]);
    eprintln!("report hashes: {now:#x?}");
    assert_eq!(now, ONE_DEVICE_GOLDEN, "one device must reproduce the single-SSD model's bytes");
    // Naming the default explicitly, or any chunk size, changes nothing with one device.
    assert_eq!(report_hashes(&[("devices", "1"), ("stripe_bytes", "4096")]), now);
}

#[test]
fn more_devices_never_slow_a_device_bound_trace() {
    // Two channels of one die each: the flash, not the host, is the
    // bottleneck, so striping over more SSDs must help and never hurt.
    let d = tempfile::tempdir().unwrap();
    let (p, _) = trace(d.path(), 2, 128, 5);
    let host = design::by_name("host").unwrap();
    let base = [("channels", "2"), ("packages", "1"), ("dies", "1")];
    let lat = |n: &str| {
        let mut ov = base.to_vec();
        ov.push(("devices", n));
        simulate_one(&p, &cfg(&ov), host).unwrap().batch_latency_s
    };
    let (l1, l2, l4) = (lat("1"), lat("2"), lat("4"));
    // 0.1 %: FIFO list scheduling's tiny reorderings (see the channel test).
    assert!(l2 <= l1 * 1.001 && l4 <= l2 * 1.001, "1: {l1} s, 2: {l2} s, 4: {l4} s per batch");
    assert!(l1 > 1.6 * l2, "two devices of a flash-bound trace should near halve it: {l1} vs {l2}");
}

#[test]
fn each_device_serves_its_share_with_its_own_queues() {
    let d = tempfile::tempdir().unwrap();
    let (p, n) = trace(d.path(), 2, 128, 5);
    for des in DESIGNS {
        for devs in [2u32, 4] {
            let c = cfg(&[("devices", &devs.to_string()), ("host.queue_depth", "64")]);
            let r = simulate_one(&p, &c, des).unwrap();
            assert_eq!(r.reads_served, n, "{} x{devs}: every read served once", des.name);
            assert_eq!(r.devices.len(), devs as usize);
            let parts: u64 = r.devices.iter().map(|x| x.reads).sum();
            let cmds: u64 = r.devices.iter().map(|x| x.flash_commands).sum();
            assert!(parts >= n, "{}: parts {parts} < reads {n}", des.name);
            assert_eq!(cmds, r.flash_commands, "{}: every flash command on one device", des.name);
            // Offsets are uniform over the files: ~1/N of the reads each (4 %).
            for x in &r.devices {
                let share = x.reads as f64 / parts as f64;
                assert!(
                    (share - 1.0 / devs as f64).abs() < 0.04,
                    "{} x{devs}: device {} served {share:.3} of the reads",
                    des.name,
                    x.device
                );
                assert_eq!(x.queues["nvme_queue"].arrivals, x.reads, "{}: one NVMe command per part", des.name);
                for (name, q) in &x.queues {
                    if q.arrivals == 0 {
                        continue;
                    }
                    let lw = q.arrival_rate * q.mean_sojourn_s;
                    assert!(
                        (q.mean_occupancy - lw).abs() <= 1e-6 * q.mean_occupancy.max(1e-3),
                        "{} device {} {name}: L = {} but lambda*W = {lw}",
                        des.name,
                        x.device,
                        q.mean_occupancy
                    );
                }
            }
            // The array totals are the devices' sums.
            let ch: u64 = r.devices.iter().map(|x| x.queues["channels"].arrivals).sum();
            assert_eq!(ch, r.queues["channels"].arrivals);
            let json = serde_json::to_string(&r).unwrap();
            assert!(json.contains("\"devices\":[") && json.contains("nvme_queue"));
        }
        let one = simulate_one(&p, &cfg(&[]), des).unwrap();
        assert!(one.devices.is_empty() && !serde_json::to_string(&one).unwrap().contains("nvme_queue"));
    }
}

#[test]
fn a_read_across_a_chunk_boundary_is_split_over_two_devices() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("s.fgt");
    let h = TraceHeader { version: TRACE_VERSION, dataset_id: 3, page_size: 4096, params: "{\"batch_size\":1}".into() };
    let mut w = TraceWriter::create(&p, &h).unwrap();
    let read = |offset: u64, length: u32, dep: u32, hop: u8| TraceRead {
        file: FILE_GRAPH,
        kind: KIND_SLOT_PAGE,
        hop,
        offset,
        length,
        dep,
        bytes_used: 1000,
        items: 1,
        ..Default::default()
    };
    // 8 KiB straddling the first 64 KiB chunk boundary (chunk 0 → device 0,
    // chunk 1 → device 1), then a read depending on it in chunk 2 (device 0
    // again, in its second chunk: 68 KiB into device 0's part file).
    w.write_batch(&[read(60 << 10, 8 << 10, NO_DEP, 0), read(132 << 10, 4096, 0, 1)]).unwrap();
    w.finish().unwrap();
    for des in DESIGNS {
        let r = simulate_one(&p, &cfg(&[("devices", "2")]), des).unwrap();
        assert_eq!((r.reads, r.reads_served, r.flash_commands), (2, 2, 3), "{}", des.name);
        let per: Vec<(u64, u64)> = r.devices.iter().map(|x| (x.reads, x.flash_commands)).collect();
        assert_eq!(per, vec![(2, 2), (1, 1)], "{}", des.name);
        // With one device the same reads are 2 reads, 3 pages.
        let one = simulate_one(&p, &cfg(&[]), des).unwrap();
        assert_eq!((one.reads_served, one.flash_commands), (2, 3));
    }
}

#[test]
fn bad_array_config_names_the_field() {
    let text = std::fs::read_to_string(CONFIG).unwrap();
    let e = Config::parse(&text, "x.toml", &[("devices".into(), "0".into())]).unwrap_err().to_string();
    assert!(e.contains("x.toml") && e.contains("array.devices") && e.contains("[1, 64]"), "{e}");
    let e = Config::parse(&text, "x.toml", &[("stripe_bytes".into(), "5000".into())]).unwrap_err().to_string();
    assert!(e.contains("array.stripe_bytes") && e.contains("5000") && e.contains("4096"), "{e}");
    let e =
        Config::parse(&format!("{text}\n[array]\ndevices = 2\ndisks = 3\n"), "x.toml", &[]).unwrap_err().to_string();
    assert!(e.contains("disks"), "{e}");
    let c = Config::parse(&format!("{text}\n[array]\ndevices = 4\n"), "x.toml", &[]).unwrap();
    assert_eq!((c.array.devices, c.array.stripe_bytes), (4, 65536));
}

#[test]
fn built_in_configs_by_name_equal_the_repository_files() {
    // An installed wheel has no configs/ssd/ beside it: the shipped configs are compiled in and
    // found by name where no file of that name exists (with or without `.toml`).
    for (name, file) in [("beacongnn-table2", CONFIG), ("tlc-conventional.toml", TLC)] {
        let by_name = Config::load(Path::new(name), &[]).unwrap();
        let by_file = Config::load(Path::new(file), &[]).unwrap();
        assert_eq!(format!("{by_name:?}"), format!("{by_file:?}"), "{name}");
    }
    // A name that is neither a file nor built in: bad input naming the path and the choices.
    let err = Config::load(Path::new("beacongnn-table3"), &[]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, flashgnn_sim::SimError::Input(_)), "{msg}");
    assert!(
        msg.contains("beacongnn-table3") && msg.contains("built-in configs: beacongnn-table2, tlc-conventional"),
        "{msg}"
    );
    // A path with a directory is a file, never a built-in name.
    assert!(Config::load(Path::new("./beacongnn-table2"), &[]).is_err());
}
