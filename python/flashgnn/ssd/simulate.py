"""Trace capture (docs/trace.md) and the SSD design simulator (docs/simulator.md).

``record_trace`` samples batches with capture on and streams every read to a
trace file; ``simulate`` replays a trace under a TOML config and designs
(the model itself is Rust: ``crates/flashgnn-sim``).
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import numpy as np

from flashgnn import _core
from flashgnn.sample.sampler import DEFAULT_DEPTH

# The first bytes of every trace file (docs/trace.md; crates/flashgnn-format/src/trace.rs TRACE_MAGIC).
TRACE_MAGIC = b"FGNNTRC\0"


def check_trace_output(out: str | os.PathLike, force: bool) -> None:
    """The --force rule for a trace file (the same as for datasets, issue 15): an existing ``out`` is replaced
    only with ``force`` and only when it is a trace (a regular file starting with the trace magic); a user's
    file, a directory, a link or a FIFO is refused by name before any work."""
    from flashgnn._durable import NotRegularFileError, kind_of, open_regular

    p = Path(out)
    if not os.path.lexists(p):
        return
    st = os.lstat(p)
    if not stat.S_ISREG(st.st_mode):
        raise FileExistsError(f"{p}: is {kind_of(st.st_mode)}; a trace replaces only a trace file (refused)")
    if not force:
        raise FileExistsError(f"{p}: exists; pass --force to replace it (only a trace file is replaced)")
    try:
        with open_regular(p) as f:
            head = f.read(len(TRACE_MAGIC))
    except NotRegularFileError as e:
        raise FileExistsError(str(e)) from None
    if head != TRACE_MAGIC:
        raise FileExistsError(f"{p}: not a flashgnn trace (first bytes {head!r}, expected {TRACE_MAGIC!r}); "
                              "--force replaces only a trace file (refused)")


def record_trace(dataset: str, out: str, fanouts: list[int], batch_size: int, batches: int, *, engine: str = "uring",
                 depth: int = DEFAULT_DEPTH, seed: int = 0, progress: bool = True, extra: dict | None = None,
                 force: bool = False, type_fanouts: dict | None = None) -> dict:
    """Sample ``batches`` batches of ``batch_size`` seeds (a seeded permutation of the
    train split, else of all nodes) and write their reads to ``out``. Returns a summary.

    A typed dataset's batches are typed: the seeds are its target type's
    (:attr:`Dataset.target_type`), every edge type draws ``fanouts`` unless
    ``type_fanouts`` (``{(src, rel, dst): [per hop]}``, as ``--type-fanouts``
    parses) gives its own; each ``t<i>.features.fg`` is a file of the trace's
    file table (docs/trace.md)."""
    from flashgnn import _progress
    from flashgnn.store.dataset import Dataset

    if batch_size < 1 or batches < 1:
        raise ValueError(f"--batch-size {batch_size} and --batches {batches} must both be >= 1")
    ds = Dataset(dataset)
    rng = np.random.default_rng(seed)
    rel_fanouts, offset, typed_params = None, 0, {}
    if ds.is_typed:
        per_type = dict(type_fanouts or {})
        unknown = sorted(set(per_type) - set(ds.edge_types))
        if unknown:
            raise ValueError(f"--type-fanouts: {'__'.join(unknown[0])} is not an edge type of {ds.path} (edge "
                             f"types: {', '.join('__'.join(e) for e in ds.edge_types)})")
        bad = [et for et, f in per_type.items() if len(f) != len(fanouts)]
        if bad:
            raise ValueError(f"--type-fanouts: {'__'.join(bad[0])} has {len(per_type[bad[0]])} hops, --fanout has "
                             f"{len(fanouts)} (every edge type takes the same number of hops)")
        rel_fanouts = [[int(per_type.get(et, fanouts)[h]) for et in ds.edge_types] for h in range(len(fanouts))]
        # The engine's per-hop fanouts: the largest per hop (-1 when any is); draws follow rel_fanouts.
        fanouts = [-1 if any(f < 0 for f in h) else max(h) for h in rel_fanouts]
        target = ds.target_type
        offset = sum(t["count"] for t in ds.types["node_types"][: ds.node_types.index(target)])
        count = int(ds.node_type(target)["count"])
        typed_params = {"input_type": target, "edge_types": ["__".join(e) for e in ds.edge_types],
                        "rel_fanouts": rel_fanouts}
    elif type_fanouts:
        raise ValueError(f"--type-fanouts takes a typed dataset; {ds.path} is homogeneous")
    else:
        count = int(ds.num_nodes)
    pool = ds.split("train") if "train" in ds.split_names else np.arange(count)
    order = rng.permutation(pool) + offset
    while len(order) < batches * batch_size:
        order = np.concatenate([order, rng.permutation(pool) + offset])
    params = {"dataset": os.path.abspath(dataset), "fanouts": list(fanouts), "batch_size": batch_size,
              "batches": batches, "engine": engine, "depth": depth, "seed": seed,
              "num_nodes": int(ds.num_nodes), **typed_params, **(extra or {})}
    check_trace_output(out, force)
    # Written beside ``out`` under a name of this process, then renamed over it once complete and fsynced:
    # nothing half-written is ever at ``out``, and a user's ``out.tmp`` is never touched.
    final = Path(out)
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    out = str(tmp)
    rec = _core.TraceRecorder(dataset, out, list(fanouts), json.dumps(params, sort_keys=True), engine=engine, depth=depth,
                              rel_fanouts=rel_fanouts)
    reads = nbytes = nodes = 0
    t0 = time.perf_counter()
    bar = _progress.bar(total=batches, desc="trace", unit="batch", disable=not progress)
    try:
        for b in range(batches):
            seeds = np.ascontiguousarray(order[b * batch_size:(b + 1) * batch_size], dtype=np.int64)
            n, by, nn = rec.batch(seeds, seed * 1_000_003 + b)
            reads += n
            nbytes += by
            nodes += nn
            bar.update(1)
        io_bytes, files = rec.io_bytes(), rec.files()
        records, nb = rec.finish()
    except BaseException:
        bar.close()
        tmp.unlink(missing_ok=True)
        raise
    bar.close()
    secs = time.perf_counter() - t0
    from flashgnn._durable import fsync_path, replace_durably

    fsync_path(tmp)
    trace_bytes = tmp.stat().st_size
    replace_durably(tmp, final)
    out = str(final)
    return {"out": out, "records": records, "batches": nb, "bytes_read": nbytes, "sampled_nodes": nodes,
            "seconds": secs, "trace_bytes": trace_bytes, "engine": engine, "files": files,
            "engine_bytes_read": io_bytes}


def parse_sweep(text: str | None) -> tuple[str, list[str]] | None:
    if not text:
        return None
    if "=" not in text:
        raise ValueError(f"--sweep {text!r}: expected PARAM=V1,V2,... (e.g. channels=4,8,16,32)")
    k, v = text.split("=", 1)
    vals = [x.strip() for x in v.split(",") if x.strip()]
    if not vals:
        raise ValueError(f"--sweep {text!r}: no values after '='")
    return k.strip(), vals


def batch_size_path(out: str | os.PathLike, batch_size: int) -> Path:
    """The trace of one batch size when `flashgnn trace` is given several: ``t.fgt`` -> ``t.bs256.fgt``
    (``t`` -> ``t.bs256``). `simulate t.fgt --sweep batch_size=...` finds them by the same rule."""
    p = Path(out)
    return p.with_name(f"{p.stem}.bs{batch_size}{p.suffix}") if p.suffix else p.with_name(f"{p.name}.bs{batch_size}")


def parse_batch_sizes(text: str | int) -> list[int]:
    """``--batch-size 1024`` or ``256,512,1024``: distinct sizes >= 1, in the order given."""
    try:
        sizes = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--batch-size {text!r}: expected an integer or a comma list (e.g. 256,512,1024)") from None
    if not sizes or any(b < 1 for b in sizes) or len(set(sizes)) != len(sizes):
        raise ValueError(f"--batch-size {text!r}: sizes must be >= 1 and distinct")
    return sizes


def simulate(trace: str, config: str, designs: list[str] | str = "all", sweep: str | None = None,
             timing: bool = True) -> dict:
    """Replay ``trace`` under ``config`` (TOML) for ``designs``; returns the report.

    ``sweep="batch_size=256,512"`` replays one trace per size, found by :func:`batch_size_path` (a batch
    size changes the reads themselves, so it cannot be swept over one trace); each run carries its
    ``trace``, and a trace whose recorded batch size differs from its name is refused."""
    if isinstance(designs, str):
        designs = designs.split(",")
    sw = parse_sweep(sweep)
    if sw is None or sw[0] != "batch_size":
        return _core.simulate(trace, config, list(designs), sw, [], timing)
    sizes = parse_batch_sizes(",".join(sw[1]))
    report: dict | None = None
    for bs in sizes:
        p = batch_size_path(trace, bs)
        if not os.path.lexists(p):
            raise FileNotFoundError(f"--sweep batch_size: {p} (the trace of batch size {bs}) does not exist; record "
                                    f"one trace per size with `flashgnn trace DATASET {trace} --batch-size "
                                    f"{','.join(map(str, sizes))}`")
        r = _core.simulate(str(p), config, list(designs), None, [], timing)
        got = r.get("trace_params", {}).get("batch_size")
        if got != bs:
            raise ValueError(f"{p}: recorded with batch size {got}, but its name says {bs} (refused)")
        run = r["runs"][0]
        run["value"], run["trace"] = str(bs), str(p)
        if report is None:
            report = {**r, "trace": str(trace), "sweep": "batch_size", "runs": []}
        elif r["dataset_id"] != report["dataset_id"]:
            raise ValueError(f"{p}: dataset {r['dataset_id']} differs from {batch_size_path(trace, sizes[0])}'s "
                             f"{report['dataset_id']} (a batch-size sweep compares traces of one dataset)")
        report["runs"].append(run)
        if timing and "speed" in r and report is not None and report["runs"][0] is not run:
            s, t = report["speed"], r["speed"]
            s["flash_commands"] += t["flash_commands"]
            s["wall_seconds"] += t["wall_seconds"]
            s["commands_per_s"] = s["flash_commands"] / max(s["wall_seconds"], 1e-12)
    return report


def measured_in_flight(trace: str) -> dict:
    """Reads in flight as the traced engine measured them (its submit/complete timestamps): a timeline
    over batch I/O time and the share of time per log2 bucket. ``batches`` is 0 for a trace without
    timestamps. Channels and dies are not observable on a real device."""
    return _core.trace_in_flight(str(trace))


_CATS = ["host", "pcie", "controller", "wait_before_flash", "flash", "wait_after_flash", "barrier"]
_ENERGY = ["flash_reads_j", "channel_j", "ssd_dram_j", "controller_j", "pcie_j", "host_dram_j", "host_cpu_j",
           "die_sampler_j"]


def format_report(r: dict) -> str:
    lines = [f"trace {r['trace']} (dataset {r['dataset_id']}), config {r['config']}, seed {r['seed']}"]
    for run in r["runs"]:
        if r.get("sweep"):
            lines.append(f"\n{r['sweep']} = {run['value']}")
            if run.get("trace") and run["results"]:
                d0 = run["results"][0]
                lines.append(f"trace {run['trace']}: {d0['reads'] / max(d0['batches'], 1):.0f} reads per batch")
        lines.append(f"{'design':<13}{'batch/s':>9}{'targets/s':>11}{'lat ms':>8}  "
                     + "".join(f"{c[:9]:>10}" for c in _CATS) + f"{'QD':>7}{'ch':>6}{'dies':>7}")
        for d in run["results"]:
            lines.append(f"{d['design']:<13}{d['batches_per_s']:>9.1f}{d['targets_per_s']:>11.0f}"
                         f"{d['batch_latency_s'] * 1e3:>8.3f}  "
                         + "".join(f"{d['breakdown_s'][c] * 1e3:>10.3f}" for c in _CATS)
                         + f"{d['mean_queue_depth']:>7.1f}{d['mean_active_channels']:>6.1f}{d['mean_active_dies']:>7.1f}")
        lines.append("energy per batch (mJ):")
        lines.append(f"{'design':<13}{'total':>9}" + "".join(f"{e[:-2]:>12}" for e in _ENERGY))
        for d in run["results"]:
            en = d["energy_per_batch_j"]
            lines.append(f"{d['design']:<13}{d['energy_per_batch_total_j'] * 1e3:>9.3f}"
                         + "".join(f"{en[e] * 1e3:>12.4f}" for e in _ENERGY))
        lines.append("reads in flight (share of simulated time; buckets by lower bound):")
        los = run["results"][0]["queue_depth_hist_lo"] if run["results"] else []
        used = [i for i in range(len(los)) if any(d["queue_depth_hist"][i] >= 0.005 for d in run["results"])]
        lines.append(f"{'design':<13}" + "".join(f"{'>=' + str(los[i]):>8}" for i in used))
        for d in run["results"]:
            lines.append(f"{d['design']:<13}" + "".join(f"{d['queue_depth_hist'][i]:>8.1%}" for i in used))
        cached = [d for d in run["results"] if d.get("dram_cache_hits", 0) + d.get("dram_cache_misses", 0)]
        if cached:
            lines.append("SSD-DRAM page cache: " + "; ".join(
                f"{d['design']} {d['dram_cache_hits']:,} hits / {d['dram_cache_misses']:,} misses "
                f"({d['dram_cache_hits'] / (d['dram_cache_hits'] + d['dram_cache_misses']):.1%})" for d in cached))
        arrays = [d for d in run["results"] if d.get("devices")]
        if arrays:
            lines.append("per SSD (reads incl. parts split at stripe chunks; mean NVMe commands outstanding; "
                         "busy share of its PCIe link; mean busy channels):")
            for d in arrays:
                lines.append(f"{d['design']:<13}" + "; ".join(
                    f"#{x['device']} {x['reads']:,} reads QD {x['queues']['nvme_queue']['mean_occupancy']:.1f} "
                    f"pcie {x['queues']['pcie']['mean_busy']:.0%} "
                    f"ch {x['queues']['channels']['mean_busy']:.1f}"
                    for x in d["devices"]))
        measured = [d for d in run["results"] if d.get("traced_batch_latency_s")]
        if measured:
            d = measured[0]
            lines.append(f"measured on the traced engine: {d['traced_batch_latency_s'] * 1e3:.3f} ms per batch of I/O "
                         f"(first submission to last completion); compare with the host design's latency")
    if r.get("speed"):
        s = r["speed"]
        lines.append(f"simulated {s['flash_commands']} flash commands in {s['wall_seconds']:.2f} s "
                     f"({s['commands_per_s'] / 1e6:.2f} M commands/s)")
    return "\n".join(lines)


def servers(config: str, overrides: dict | None = None, design: str = "host") -> dict:
    """Servers of each queue class of the array (docs/simulator.md, "Queues everywhere") for ``design``,
    from the TOML ``config`` with ``overrides`` (sweep names or dotted fields) applied: what
    `utilization` divides by."""
    import tomllib

    with open(config, "rb") as f:
        c = tomllib.load(f)
    for key, val in (overrides or {}).items():
        sec, _, field = _ALIASES.get(key, key).partition(".")
        c.setdefault(sec, {})[field] = val
    devices = int(c.get("array", {}).get("devices", 1))
    fl, h = c["flash"], c["host"]
    ch = int(fl["channels"])
    return {
        "queue_depth_tokens": int(h["block_queue_depth"] if design == "cc" else h["queue_depth"]),
        "host_cpu": int(h["cpu_cores"]),
        "pcie": devices,
        "controller_cores": devices * int(c["controller"]["cores"]),
        "ssd_dram": devices,
        "channels": devices * ch,
        "dies": devices * ch * int(fl["packages"]) * int(fl["dies"]),
    }


_ALIASES = _core.SSD_SWEEP_ALIASES  # the simulator's own short names for swept fields


def utilization(design: dict, srv: dict) -> dict:
    """Busy share of each queue class (mean busy servers over servers), highest first: the first is the
    resource that saturates. ``queue_depth_tokens`` near 1 means the engine's depth, not a device, limits."""
    u = {k: design["queues"][k]["mean_busy"] / n for k, n in srv.items() if k in design["queues"] and n > 0}
    return dict(sorted(u.items(), key=lambda kv: -kv[1]))


# The host-CPU calibration's setting: a seed and fanout/batch size no documented trace uses, so the fit never
# sees the batches it is later asked to predict (docs/simulator.md, "Against this machine").
CPU_CAL_SEED = 7919
CPU_CAL_FANOUTS = [12, 6]
CPU_CAL_BATCH_SIZE = 96
CPU_CAL_BATCHES = 6  # the first is a warm-up (caches, allocator) and is not counted


def calibrate_host_cpu(dataset: str, *, engine: str = "memory", batches: int = CPU_CAL_BATCHES) -> dict:
    """Host CPU per sampled node and per read of the real sampling path (decode, draw, issue and completion
    handling), without device time: the engine's own trace of a few batches on the ``memory`` engine (the
    same decode and sampling code as ``uring``, reads served from RAM), at the calibration setting above.
    The windows (first submission to last completion per batch) are then pure CPU of one producer."""
    import tempfile

    if batches < 2:
        raise ValueError(f"host CPU calibration needs >= 2 batches (one warm-up), got {batches}")
    with tempfile.TemporaryDirectory(prefix="flashgnn-cal-") as d:
        t = os.path.join(d, "cal.fgt")
        record_trace(dataset, t, CPU_CAL_FANOUTS, CPU_CAL_BATCH_SIZE, batches, engine=engine, seed=CPU_CAL_SEED,
                     progress=False)
        m = measured_in_flight(t)
    if m["batches"] < 2 or m["page_nodes"] == 0:
        raise ValueError(f"{dataset}: host CPU calibration recorded no timed reads on {engine} (empty graph?)")
    # Leave out the warm-up batch (first touch of the dataset's pages, allocator growth).
    secs = sum(m["batch_io_s"][1:])
    reads = sum(m["batch_reads"][1:])
    nodes = sum(m["batch_page_nodes"][1:])
    if nodes == 0:
        raise ValueError(f"{dataset}: host CPU calibration sampled no nodes after the warm-up batch")
    return {"engine": engine, "batches": m["batches"] - 1, "seconds": secs, "reads": reads, "page_nodes": nodes,
            "ns_per_node": secs * 1e9 / nodes, "ns_per_read": secs * 1e9 / max(reads, 1),
            "setting": f"fanout {','.join(map(str, CPU_CAL_FANOUTS))}, batch {CPU_CAL_BATCH_SIZE}, seed {CPU_CAL_SEED}",
            "producers": 1}


def config_text(base: str) -> str:
    """A config's text: the file at ``base`` (a FIFO or device is refused by name), or where no such file exists
    and ``base`` is a bare name, the built-in config of that name (``_core.SSD_BUILTIN_CONFIGS``, compiled in from
    the repository's configs/ssd/: an installed wheel has no repository beside it). The simulator resolves
    ``--config NAME`` the same way."""
    from flashgnn._durable import read_regular

    name = base.removesuffix(".toml")
    if not os.path.lexists(base) and os.sep not in base and name in _core.SSD_BUILTIN_CONFIGS:
        return _core.SSD_BUILTIN_CONFIGS[name]
    return read_regular(base).decode("utf-8")


def fit_probe(iops_qd1: float, iops_deep: float, depth: int, base: str, host_cpu: dict | None = None) -> str:
    """A `this-machine` config from the device probe alone (docs/simulator.md, "Against this
    machine"): the model reproduces both probe points — its QD1 cycle is the probe's QD1 latency
    and its saturated IOPS (units / unit time) the probe's IOPS at ``depth``; the units are laid
    out as up to the base's channels x dies. ``host_cpu`` (:func:`calibrate_host_cpu`) sets host.cpu_ns_per_node and host.cpu_cores; without
    it they stay the base's."""
    import math
    import re
    import tomllib

    text = config_text(base)
    b = tomllib.loads(text)
    h, c, fl = b["host"], b["controller"], b["flash"]
    lat_ns = 1e9 / iops_qd1
    ch_bytes_per_ns = fl["bus_mts"] * 1e6 * fl["bus_bits"] / 8 / 1e9
    # A whole page crosses the channel with its spare area (ECC parity), as the engine moves it.
    xfer_ns = (fl["page_bytes"] + fl.get("spare_bytes", 0)) / ch_bytes_per_ns
    gen_gts = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0}.get(h["pcie_gen"], 64.0)
    pcie_ns = fl["page_bytes"] / (gen_gts * (0.8 if h["pcie_gen"] <= 2 else 128 / 130) / 8 * h["pcie_lanes"]
                                  * h["pcie_efficiency"])
    # The engine's producer thread does, per read, what the probe's does (submit, reap) plus the decode and
    # sampling the calibration measured (``cpu_read_ns``). At QD1 that is in series with its I/O: the engine's
    # QD1 cycle is the probe's latency plus it. At depth it overlaps the device's work, and the model's host
    # CPU queue (cpu_cores = 1, cpu_ns_per_node) is what limits the rate should the producer's core bind; the
    # device's saturated IOPS stay the probe's.
    cpu_read_ns = host_cpu["ns_per_read"] if host_cpu else 0.0
    probe_lat_ns, probe_deep = lat_ns, iops_deep
    lat_ns += cpu_read_ns
    # Per read, outside the flash unit but inside the QD1 cycle: NVMe command, firmware, PCIe data.
    outside_ns = h["nvme_command_ns"] + c["firmware_ns_per_command"] + pcie_ns
    # Parallel units: as many as the deep IOPS needs if each held for the QD1 cycle less the costs
    # outside it (Little's law at saturation), laid out as up to the base's channels x dies and rounded down to
    # that grid; then each unit's time (tR + command + page transfer: the die is held until its page register
    # is drained) is set so that units / unit time = the deep IOPS exactly.
    units = max(1, math.floor(iops_deep * (lat_ns - outside_ns) / 1e9))
    ch = min(fl["channels"], units)
    per_ch = max(1, units // ch)
    units = ch * per_ch
    unit_ns = units / iops_deep * 1e9
    read_ns = max(unit_ns - fl["command_ns"] - xfer_ns, 1000.0)
    unit_ns = read_ns + fl["command_ns"] + xfer_ns
    # At QD1 the model's cycle is the time a queue-depth token is held: the submission half of the host stack,
    # the costs outside the unit and the unit; the completion half overlaps the next read. The probe's QD1 cycle
    # is its whole latency, so the stack is what is left: 2 x (latency - outside - unit).
    stack = max(2 * (lat_ns - outside_ns - unit_ns), 0.0)

    def put(text, section, key, value):
        lines, cur, n = text.split("\n"), None, 0
        for i, line in enumerate(lines):
            st = line.strip()
            if st.startswith("[") and st.endswith("]"):
                cur = st[1:-1]
            elif cur == section and re.match(rf"{key}\s*=", st):
                lines[i] = f"{key} = {value}   # fitted (see the header)"
                n += 1
        if n != 1:
            raise ValueError(f"{base}: no {section}.{key} to fit")
        return "\n".join(lines)

    text = re.sub(r'^name = .*$', 'name = "this-machine"', text, count=1, flags=re.M)
    text = put(text, "host", "stack_ns", f"{stack:.1f}")
    text = put(text, "host", "queue_depth", str(depth))
    text = put(text, "flash", "read_ns", f"{read_ns:.1f}")
    text = put(text, "flash", "channels", str(ch))
    text = put(text, "flash", "packages", "1")
    text = put(text, "flash", "dies", str(per_ch))
    if host_cpu:
        text = put(text, "host", "cpu_ns_per_node", f"{host_cpu['ns_per_node']:.1f}")
        text = put(text, "host", "cpu_cores", str(host_cpu["producers"]))
        cpu = (f"# host CPU: {host_cpu['ns_per_node']:.0f} ns per sampled node ({host_cpu['ns_per_read']:.0f} ns per read), "
               f"the real decode/sample path on the {host_cpu['engine']} engine (no device time) over "
               f"{host_cpu['batches']} batches at {host_cpu['setting']} (a setting no predicted trace uses);\n"
               f"# host.cpu_cores = {host_cpu['producers']}: `flashgnn trace` samples with one producer thread.\n")
    else:
        cpu = "# host CPU: the base config's (no dataset to calibrate on).\n"
    head = (f"# this-machine: fitted by `flashgnn fit-ssd` from the device probe alone (never from a trace).\n"
            f"# probe: 4 KiB random reads, O_DIRECT: QD1 {iops_qd1:.0f} IOPS (latency {probe_lat_ns / 1e3:.1f} us), "
            f"QD{depth} {probe_deep:.0f} IOPS; with the engine's decode CPU per read ({cpu_read_ns:.0f} ns) "
            f"in series at QD1: QD1 cycle {lat_ns / 1e3:.1f} us.\n"
            f"# fit: {units} parallel units = floor(deep IOPS x (QD1 cycle - NVMe - firmware - PCIe transfer)) "
            f"as {ch} channels x {per_ch} dies; unit time (tR + command + page transfer) = units / deep IOPS = "
            f"{unit_ns / 1e3:.1f} us;\n"
            f"# host.stack_ns = 2 x (QD1 cycle - NVMe - firmware - PCIe - unit time), so the model's QD1 cycle (the token "
            f"held from the submission half of the stack to the data) is the one above; units\n"
            f"# x 1 / unit time is the probe's deep IOPS, "
            f"reached from about QD {units} on. Everything else: {Path(base).name}.\n" + cpu)
    return head + text


def depth_path(out: str | os.PathLike, depth: int) -> Path:
    """The config fitted at one depth when `fit-ssd --depth` is given several: ``m.toml`` -> ``m.qd64.toml``."""
    p = Path(out)
    return p.with_name(f"{p.stem}.qd{depth}{p.suffix}") if p.suffix else p.with_name(f"{p.name}.qd{depth}")


def fit_this_machine(path: str, base: str, depth: int | list[int] = 256, seconds: float = 2.0,
                     engine: str = "uring", dataset: str | None = None) -> tuple[str | list[str], dict]:
    """Probe ``path`` at QD1 and at each of ``depth`` and, with ``dataset``, calibrate host CPU on it;
    returns (config text, or one per depth when ``depth`` is a list; figures)."""
    depths = depth if isinstance(depth, list) else [depth]
    iops1 = _core.probe_random_reads(path, 4096, 1, seconds, engine)
    deep = {d: _core.probe_random_reads(path, 4096, d, seconds, engine) for d in depths}
    cpu = calibrate_host_cpu(dataset) if dataset else None
    texts = [fit_probe(iops1, deep[d], d, base, cpu) for d in depths]
    figures = {"iops_qd1": iops1, "iops_deep": deep[depths[-1]], "depth": depths[-1],
               "iops_by_depth": {str(d): v for d, v in deep.items()}, "host_cpu": cpu}
    return (texts if isinstance(depth, list) else texts[0]), figures
