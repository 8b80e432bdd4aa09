"""End to end: `flashgnn trace` on a tiny generated dataset, then `flashgnn simulate`
under the shipped configs (docs/trace.md, docs/simulator.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import cli_cmd, cli_env, generated_dataset, run_cli

REPO = Path(__file__).resolve().parents[2]
TABLE2 = REPO / "configs" / "ssd" / "beacongnn-table2.toml"


def test_trace_then_simulate(tmp_path):
    ds = generated_dataset(tmp_path, scale=11, edge_factor=8, dim=16, dtype="float16")
    out = tmp_path / "t.fgt"
    p = run_cli("trace", ds, out, "--fanout", "5,3", "--batch-size", "64", "--batches", "4", "--json")
    assert p.returncode == 0, p.stderr
    t = json.loads(p.stdout)
    assert t["batches"] == 4 and t["records"] > 64 and out.stat().st_size > 0
    # A second trace to the same path is refused without --force.
    p = run_cli("trace", ds, out, "--batches", "1")
    assert p.returncode == 2 and "--force" in p.stderr

    p = run_cli("simulate", out, "--config", TABLE2, "--design", "all", "--json", "--no-timing")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    res = {d["design"]: d for d in r["runs"][0]["results"]}
    assert set(res) == {"cc", "host", "host-barrier", "smartsage", "bg-1", "bg-dg", "bg-sp", "bg-dgsp", "bg-2"}
    for name, d in res.items():
        assert d["reads"] == t["records"] and d["reads_served"] == t["records"], name
        assert d["batches"] == 4 and d["batches_per_s"] > 0, name
        assert abs(sum(d["breakdown_s"].values()) - d["batch_latency_s"]) <= 1e-6 * d["batch_latency_s"] + 1e-12, name
        assert d["energy_per_batch_total_j"] > 0, name
    # Out of order never loses to the hop barrier on the same reads; die-level
    # sampling moves fewer channel bytes than whole pages.
    assert res["host"]["batches_per_s"] >= res["host-barrier"]["batches_per_s"] * 0.999
    assert res["bg-sp"]["bytes_channel"] < res["bg-1"]["bytes_channel"]
    # The paper's CPU-centric baseline reads the same pages through the block layer, hop by
    # hop, and ships the gathered subgraph over PCIe again to a discrete accelerator.
    assert res["cc"]["bytes_pcie"] > res["host"]["bytes_pcie"]
    assert res["cc"]["batch_latency_s"] > res["host"]["batch_latency_s"]
    assert res["cc"]["flash_commands"] == res["host"]["flash_commands"]
    # Deterministic: the same command gives the same bytes.
    p2 = run_cli("simulate", out, "--config", TABLE2, "--design", "all", "--json", "--no-timing")
    assert p2.stdout == p.stdout

    # Text table with a sweep, and the speed line.
    p = run_cli("simulate", out, "--config", TABLE2, "--design", "host", "--sweep", "channels=2,16")
    assert p.returncode == 0, p.stderr
    assert "flash.channels = 2" in p.stdout and "flash.channels = 16" in p.stdout and "M commands/s" in p.stdout
    # A boolean field sweeps too: multi-plane reads serve the same reads, never slower; the
    # page-cache counters are in the JSON (0 without a cache, as in Table II).
    p = run_cli("simulate", out, "--config", TABLE2, "--design", "bg-1,bg-2", "--sweep",
                "flash.multi_plane=false,true", "--json", "--no-timing")
    assert p.returncode == 0, p.stderr
    off, on = ({d["design"]: d for d in run["results"]} for run in json.loads(p.stdout)["runs"])
    for name in ("bg-1", "bg-2"):
        assert on[name]["reads_served"] == off[name]["reads_served"] == t["records"], name
        assert on[name]["batch_latency_s"] <= off[name]["batch_latency_s"] * 1.001, name
        assert on[name]["dram_cache_hits"] == 0 and off[name]["dram_cache_misses"] == 0, name

    # With a page cache (the TLC config's 256 MiB), its hits and misses are in the text output too.
    tlc = REPO / "configs" / "ssd" / "tlc-conventional.toml"
    pj = run_cli("simulate", out, "--config", tlc, "--design", "smartsage", "--json", "--no-timing")
    d = json.loads(pj.stdout)["runs"][0]["results"][0]
    assert d["dram_cache_hits"] + d["dram_cache_misses"] > 0
    pt = run_cli("simulate", out, "--config", tlc, "--design", "smartsage")
    assert f"smartsage {d['dram_cache_hits']:,} hits / {d['dram_cache_misses']:,} misses" in pt.stdout, pt.stdout

    # A corrupt trace is refused naming the file and the byte offset.
    b = bytearray(out.read_bytes())
    b[len(b) // 2] ^= 0xFF
    bad = tmp_path / "bad.fgt"
    bad.write_bytes(bytes(b))
    p = run_cli("simulate", bad, "--config", TABLE2, "--design", "host")
    assert p.returncode == 2 and str(bad) in p.stderr and "byte offset" in p.stderr, p.stderr

    # A bad config names the field, value and bound.
    cfg = tmp_path / "c.toml"
    cfg.write_text(TABLE2.read_text().replace("channels = 16", "channels = 0"))
    p = run_cli("simulate", out, "--config", cfg, "--design", "host")
    assert p.returncode == 2 and "flash.channels = 0" in p.stderr and "[1, 1024]" in p.stderr, p.stderr
    p = run_cli("simulate", out, "--config", TABLE2, "--design", "nonesuch")
    assert p.returncode == 2 and "nonesuch" in p.stderr


def test_fit_probe_gives_a_valid_config(tmp_path):
    """The this-machine fit uses only the probe's two figures and reproduces both in the model: the QD1 cycle
    (a token held from the submission half of the stack to the data) equals the probe's QD1 latency, and the
    saturated IOPS (units / unit time, the die held for tR + command + page transfer) its deep IOPS."""
    import re

    from flashgnn.ssd.simulate import fit_probe

    text = fit_probe(20000.0, 100000.0, 128, str(TABLE2))
    vals = {k: float(v) for k, v in re.findall(r"^(\w+) = ([0-9.]+)", text, re.M)}
    # Table II's fixed costs, read from the file: NVMe command, firmware, channel command, a 4 KiB page plus its
    # spare area over an 800 MT/s byte-wide channel, and the page over PCIe 4.0 x4 at 86 % payload efficiency.
    import tomllib

    t2 = tomllib.loads(Path(TABLE2).read_text())
    fw, nvme = t2["controller"]["firmware_ns_per_command"], t2["host"]["nvme_command_ns"]
    xfer = (4096 + t2["flash"]["spare_bytes"]) / 0.8
    pcie = 4096 / (16 * 128 / 130 / 8 * 4 * 0.86)
    unit = vals["read_ns"] + 100 + xfer
    units = vals["channels"] * vals["dies"] * vals["packages"]
    assert units >= 1 and abs(units / unit * 1e9 - 100000.0) < 1e-3 * 100000.0
    assert abs(vals["stack_ns"] / 2 + nvme + fw + pcie + unit - 50000.0) < 1.0
    assert vals["stack_ns"] >= 0 and vals["read_ns"] >= 1000
    assert vals["queue_depth"] == 128 and "this-machine" in text
    # Without a dataset the host CPU stays the base's, and the header says so.
    assert vals["cpu_ns_per_node"] == 200.0 and "base config's" in text
    # With a calibration, the producer's decode CPU per read runs in series with its I/O at QD1: it adds to the
    # QD1 cycle, not to the device's saturated IOPS; the per-node cost and one core go into [host].
    cpu = {"ns_per_node": 700.0, "ns_per_read": 1500.0, "engine": "memory", "batches": 5, "setting": "s",
           "producers": 1}
    t2 = fit_probe(20000.0, 100000.0, 128, str(TABLE2), cpu)
    v2 = {k: float(v) for k, v in re.findall(r"^(\w+) = ([0-9.]+)", t2, re.M)}
    unit2 = v2["read_ns"] + 100 + xfer
    units2 = v2["channels"] * v2["dies"] * v2["packages"]
    assert abs(units2 / unit2 * 1e9 - 100000.0) < 1e-3 * 100000.0
    assert abs(v2["stack_ns"] / 2 + nvme + fw + pcie + unit2 - (50000.0 + 1500.0)) < 1.0
    assert v2["cpu_ns_per_node"] == 700.0 and v2["cpu_cores"] == 1
    # The fitted file is a config the simulator accepts.
    from flashgnn import _core

    cfg = tmp_path / "m.toml"
    cfg.write_text(text)
    ds = generated_dataset(tmp_path, scale=9, edge_factor=4, dim=8)
    out = tmp_path / "t.fgt"
    assert run_cli("trace", ds, out, "--fanout", "3,3", "--batch-size", "16", "--batches", "2").returncode == 0
    r = _core.simulate(str(out), str(cfg), ["host"], None, [], False)
    assert r["config"] == "this-machine" and r["runs"][0]["results"][0]["reads_served"] > 0


def test_fit_ssd_calibrates_host_cpu(tmp_path):
    """`fit-ssd FILE` on a dataset's graph.fg also measures host CPU per sampled node on the real decode/sample
    path (memory engine, a calibration seed and setting of its own) and writes it, with one producer core, into
    the host section; the header records the probe figures and the calibration. --depth A,B writes one config
    per depth (OUT.qdA.toml, OUT.qdB.toml), each a config the simulator accepts."""
    import re

    from flashgnn import _core

    ds = generated_dataset(tmp_path, scale=10, edge_factor=8, dim=16)
    out = tmp_path / "m.toml"
    p = run_cli("fit-ssd", ds / "graph.fg", out, "--depth", "8,32", "--seconds", "0.2")
    assert p.returncode == 0, p.stderr
    assert not out.exists() and "host CPU" in p.stdout
    trace = tmp_path / "t.fgt"
    assert run_cli("trace", ds, trace, "--fanout", "3,3", "--batch-size", "16", "--batches", "2").returncode == 0
    for d in (8, 32):
        f = tmp_path / f"m.qd{d}.toml"
        text = f.read_text()
        host = text[text.index("[host]"):text.index("[controller]")]
        ns = float(re.search(r"^cpu_ns_per_node = ([0-9.]+)", host, re.M).group(1))
        assert 10.0 < ns < 1e6, ns  # a sane range: tens of ns to a millisecond per sampled node
        assert re.search(r"^cpu_cores = 1\b", host, re.M)
        assert re.search(rf"^queue_depth = {d}\b", host, re.M)
        assert "memory engine" in text and "seed 7919" in text and f"QD{d} " in text
        r = _core.simulate(str(trace), str(f), ["host"], None, [], False)
        assert r["runs"][0]["results"][0]["reads_served"] > 0
    # Existing outputs are refused without --force (before probing); a directory even with it.
    p = run_cli("fit-ssd", ds / "graph.fg", out, "--depth", "8,32", "--seconds", "0.2")
    assert p.returncode == 2 and "m.qd8.toml" in p.stderr, p.stderr
    (tmp_path / "adir").mkdir()
    p = run_cli("fit-ssd", ds / "graph.fg", tmp_path / "adir", "--force", "--seconds", "0.2")
    assert p.returncode == 2 and "directory" in p.stderr, p.stderr
    assert not [x for x in tmp_path.iterdir() if ".tmp" in x.name]


def test_bench_trace_option(tmp_path):
    ds = generated_dataset(tmp_path, scale=9, edge_factor=4, dim=8)
    out = tmp_path / "b.fgt"
    p = run_cli("bench", ds, "--engine", "uring", "--batches", "2", "--batch-size", "16", "--fanout", "3,2",
                "--probe-seconds", "0.2", "--depth", "8", "--trace", out, "--json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["trace"]["batches"] == 2 and rep["trace"]["records"] > 0 and out.exists()
    r = json.loads(run_cli("simulate", out, "--config", TABLE2, "--design", "host", "--json").stdout)
    assert r["trace_params"]["device_iops_qd1"] == rep["device_iops_qd1"]
    assert r["runs"][0]["results"][0]["reads_served"] == rep["trace"]["records"]
    assert r["speed"]["flash_commands"] > 0 and r["speed"]["commands_per_s"] > 0


def test_bench_plots_from_real_telemetry(tmp_path):
    """`bench --plots DIR` draws each engine's own telemetry (reads in flight per completion round, and at
    submission), and with --trace the capture pass's measured queue depth from its submit/complete times."""
    import pytest

    pytest.importorskip("matplotlib")
    ds = generated_dataset(tmp_path, scale=9, edge_factor=4, dim=8)
    d = tmp_path / "plots"
    p = run_cli("bench", ds, "--engine", "uring", "--batches", "3", "--batch-size", "16", "--fanout", "3,2",
                "--probe-seconds", "0.2", "--depth", "8", "--trace", tmp_path / "b.fgt", "--plots", d, "--json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    _assert_pngs(rep["plots"], ["bench-queue-depth-uring.png", "measured-queue-depth.png"])


def test_traced_latency_reported(tmp_path):
    """A trace recorded on a real engine carries submit/complete times; the report gives
    the measured batch I/O time next to the simulated one."""
    ds = generated_dataset(tmp_path, scale=9, edge_factor=4, dim=8)
    out = tmp_path / "t.fgt"
    assert run_cli("trace", ds, out, "--fanout", "4,2", "--batch-size", "32", "--batches", "2").returncode == 0
    r = json.loads(run_cli("simulate", out, "--config", TABLE2, "--design", "host", "--json").stdout)
    d = r["runs"][0]["results"][0]
    assert d["traced_batch_latency_s"] is not None and 0 < d["traced_batch_latency_s"] < 10
    p = run_cli("simulate", out, "--config", TABLE2, "--design", "host")
    assert "measured on the traced engine" in p.stdout


def test_trace_output_follows_the_force_rule(tmp_path):
    """`flashgnn trace` and `bench --trace` replace only an existing trace file: a user's file (even with --force),
    a directory or a FIFO at OUT is refused by name before any work and left as it was; a trace is replaced with
    --force, and no temporary is left beside it."""
    import os

    ds = generated_dataset(tmp_path, scale=8, edge_factor=4, dim=8, classes=4, seed=3)
    common = ("--fanout", "5,3", "--batch-size", "16", "--batches", "2")
    user = tmp_path / "notes.txt"
    user.write_text("mine")
    for force in ((), ("--force",)):
        r = run_cli("trace", ds, user, *common, *force)
        assert r.returncode != 0 and str(user) in r.stderr, r.stderr
        assert user.read_text() == "mine"
    d = tmp_path / "adir"
    d.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target, kind in ((d, "directory"), (fifo, "FIFO")):
        r = run_cli("trace", ds, target, *common, "--force")
        assert r.returncode != 0 and kind in r.stderr, r.stderr
    r = run_cli("bench", ds, "--engine", "pread", "--batches", "1", "--batch-size", "16", "--fanout", "5,3",
                "--trace", user)
    assert r.returncode != 0 and "not a flashgnn trace" in r.stderr, r.stderr[-800:]
    assert user.read_text() == "mine"
    out = tmp_path / "t.trace"
    assert run_cli("trace", ds, out, *common).returncode == 0
    first = out.read_bytes()
    assert run_cli("trace", ds, out, *common).returncode != 0  # exists, no --force
    r = run_cli("trace", ds, out, *common, "--force", "--seed", "1")
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == first[:8] == b"FGNNTRC\0"
    assert sorted(p.name for p in tmp_path.iterdir() if ".tmp" in p.name) == []


def test_simulate_refuses_fifo_trace_and_config(tmp_path):
    """A FIFO as the trace or as the config is refused by name at once (it used to block the reader)."""
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    ds = generated_dataset(tmp_path, scale=8, edge_factor=4, dim=8, classes=4, seed=3)
    trace = tmp_path / "t.fgt"
    assert run_cli("trace", ds, trace, "--fanout", "5,3", "--batch-size", "16", "--batches", "1").returncode == 0
    for args in (("simulate", fifo, "--config", TABLE2), ("simulate", trace, "--config", fifo)):
        r = run_cli(*args, timeout=30)
        assert r.returncode != 0 and "FIFO" in r.stderr and str(fifo) in r.stderr, r.stderr[-800:]


@pytest.mark.slow
def test_paper_shaped_workload_matches_beacongnn(tmp_path):
    """The "against the paper" target on the `make bench-sim` workload (R-MAT scale 16,
    edge factor 100, 128 x fp16, 3 hops of fanout 3, batch 1024, Table II): BeaconGNN's
    platforms come out in its order, each published throughput ratio is matched within 2x, and
    the CPU-centric design spends more than half its energy moving data out of storage."""
    ds = generated_dataset(tmp_path, scale=16, edge_factor=100, dim=128, dtype="float16", seed=1)
    out = tmp_path / "p.fgt"
    p = run_cli("trace", ds, out, "--fanout", "3,3,3", "--batch-size", "1024", "--batches", "10")
    assert p.returncode == 0, p.stderr
    p = run_cli("simulate", out, "--config", TABLE2, "--design", "all", "--json", "--no-timing")
    assert p.returncode == 0, p.stderr
    res = {d["design"]: d for d in json.loads(p.stdout)["runs"][0]["results"]}
    bps = {k: d["batches_per_s"] for k, d in res.items()}
    order = ["cc", "smartsage", "bg-1", "bg-dg", "bg-sp", "bg-dgsp", "bg-2"]
    assert [bps[a] < bps[b] for a, b in zip(order, order[1:])] == [True] * 6, bps
    # BeaconGNN section VII-B, Figure 14 (averages over its five workloads).
    for a, b, paper in [("smartsage", "cc", 2.11), ("bg-1", "cc", 2.35), ("bg-sp", "bg-1", 5.47),
                        ("bg-dgsp", "bg-sp", 1.20), ("bg-2", "bg-dgsp", 1.41), ("bg-2", "cc", 21.7)]:
        here = bps[a] / bps[b]
        assert paper / 2 <= here <= paper * 2, f"{a}/{b} = {here:.2f}, paper {paper}"
    e = res["cc"]["energy_per_batch_j"]
    moving = e["flash_reads_j"] + e["channel_j"] + e["ssd_dram_j"] + e["pcie_j"] + e["host_dram_j"]
    assert moving > 0.5 * res["cc"]["energy_per_batch_total_j"]


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _assert_pngs(paths, expected_names):
    """Each path is a real PNG (magic bytes, non-trivial size) and the names are exactly the expected ones."""
    assert sorted(Path(p).name for p in paths) == sorted(expected_names)
    for p in paths:
        b = Path(p).read_bytes()
        assert b[:8] == PNG_MAGIC and len(b) > 5000, (p, len(b))


def test_simulate_plots(tmp_path):
    """`simulate --plots DIR` writes one PNG per expected figure: per design (and swept value) active
    channels/dies and queue depth with its histogram; throughput, latency and energy bars; the sweep line
    plot; and the engine's measured queue depth (the trace has timestamps). Names are listed in --json and
    in the text output, and no temporary is left."""
    import pytest

    pytest.importorskip("matplotlib")
    ds = generated_dataset(tmp_path, scale=9, edge_factor=4, dim=8)
    out = tmp_path / "t.fgt"
    assert run_cli("trace", ds, out, "--fanout", "4,2", "--batch-size", "32", "--batches", "2").returncode == 0
    d = tmp_path / "plots"
    p = run_cli("simulate", out, "--config", TABLE2, "--design", "host,bg-2", "--sweep", "channels=2,16",
                "--plots", d, "--json", "--no-timing")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    per = [f"{kind}-{des}-flash.channels-{v}.png" for v in (2, 16) for des in ("host", "bg-2")
           for kind in ("active", "queue-depth")]
    _assert_pngs(r["plots"], per + ["throughput.png", "latency-breakdown.png", "energy-breakdown.png", "sweep.png",
                                    "measured-queue-depth.png"])
    assert all(Path(x).parent == d for x in r["plots"])
    assert not [x for x in d.iterdir() if ".tmp" in x.name]
    # Without a sweep: no sweep plot, plain names; the text output lists the files.
    p = run_cli("simulate", out, "--config", TABLE2, "--design", "host", "--plots", tmp_path / "p1")
    assert p.returncode == 0, p.stderr
    names = ["active-host.png", "queue-depth-host.png", "throughput.png", "latency-breakdown.png",
             "energy-breakdown.png", "measured-queue-depth.png"]
    _assert_pngs(list((tmp_path / "p1").iterdir()), names)
    assert all(n in p.stdout for n in names)
    # A file where the directory should be is refused by name.
    f = tmp_path / "afile"
    f.write_text("x")
    p = run_cli("simulate", out, "--config", TABLE2, "--design", "host", "--plots", f)
    assert p.returncode != 0 and str(f) in p.stderr and "not a directory" in p.stderr, p.stderr
    assert f.read_text() == "x"


def test_plots_without_matplotlib_fail_before_simulating(tmp_path):
    """With matplotlib absent, `--plots` fails at once naming the extra to install, and writes nothing."""
    from conftest import cli_env

    shim = tmp_path / "shim" / "matplotlib"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('matplotlib hidden by the test')\n")
    env = cli_env()
    env["PYTHONPATH"] = f"{shim.parent}:{env.get('PYTHONPATH', '')}"
    d = tmp_path / "plots"
    # The trace does not even exist: the check comes before any simulation.
    p = run_cli("simulate", tmp_path / "missing.fgt", "--config", TABLE2, "--plots", d, env=env)
    assert p.returncode == 2 and "flashgnn[plots]" in p.stderr and "matplotlib" in p.stderr, p.stderr
    assert not d.exists()
    p = run_cli("plot-trace", tmp_path / "missing.fgt", "--plots", d, env=env)
    assert p.returncode == 2 and "flashgnn[plots]" in p.stderr, p.stderr


def test_plot_trace_measured_in_flight(tmp_path):
    """`plot-trace` draws the queue depth the engine measured (submit/complete times in the trace): the
    histogram covers all of the batches' I/O time, in-flight never exceeds the engine's depth, and the
    per-batch I/O time equals what `simulate` reports as traced_batch_latency_s."""
    import pytest

    pytest.importorskip("matplotlib")
    ds = generated_dataset(tmp_path, scale=9, edge_factor=4, dim=8)
    out = tmp_path / "t.fgt"
    assert run_cli("trace", ds, out, "--fanout", "4,2", "--batch-size", "32", "--batches", "3", "--depth",
                   "16").returncode == 0
    p = run_cli("plot-trace", out, "--plots", tmp_path / "pl", "--json")
    assert p.returncode == 0, p.stderr
    m = json.loads(p.stdout)
    _assert_pngs(m["plots"], ["measured-queue-depth.png"])
    assert m["batches"] == 3 and 1 <= m["max_reads_in_flight"] <= 16
    assert abs(sum(m["queue_depth_hist"]) - 1) < 1e-9 and 0 < m["mean_reads_in_flight"] <= 16
    r = json.loads(run_cli("simulate", out, "--config", TABLE2, "--design", "host", "--json").stdout)
    assert m["reads"] == r["runs"][0]["results"][0]["reads"]
    assert abs(m["batch_latency_s"] - r["runs"][0]["results"][0]["traced_batch_latency_s"]) < 1e-9
    # A corrupt trace is an error naming the file and the offset, not a crash.
    b = bytearray(out.read_bytes())
    b[len(b) // 2] ^= 0xFF
    bad = tmp_path / "bad.fgt"
    bad.write_bytes(bytes(b))
    p = run_cli("plot-trace", bad, "--plots", tmp_path / "pl2")
    assert p.returncode == 2 and str(bad) in p.stderr and "byte offset" in p.stderr, p.stderr
    assert not (tmp_path / "pl2" / "measured-queue-depth.png").exists()


def test_batch_size_sweep(tmp_path):
    """`trace --batch-size 16,64` writes one trace per size (t.bs16.fgt, t.bs64.fgt); `simulate t.fgt --sweep
    batch_size=16,64` replays each: bigger batches read more per batch. A missing size, or a trace whose
    recorded size differs from its name, is refused by name."""
    import shutil

    ds = generated_dataset(tmp_path, scale=10, edge_factor=8, dim=8)
    out = tmp_path / "t.fgt"
    p = run_cli("trace", ds, out, "--fanout", "4,2", "--batch-size", "16,64", "--batches", "2", "--json")
    assert p.returncode == 0, p.stderr
    traces = json.loads(p.stdout)["traces"]
    assert [t["out"] for t in traces] == [str(tmp_path / "t.bs16.fgt"), str(tmp_path / "t.bs64.fgt")]
    assert not out.exists()
    p = run_cli("simulate", out, "--config", TABLE2, "--design", "host,bg-2", "--sweep", "batch_size=16,64",
                "--json", "--no-timing")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["sweep"] == "batch_size" and [x["value"] for x in r["runs"]] == ["16", "64"]
    small, big = ({d["design"]: d for d in run["results"]} for run in r["runs"])
    for des in ("host", "bg-2"):
        assert big[des]["reads"] / big[des]["batches"] > small[des]["reads"] / small[des]["batches"], des
        assert big[des]["targets_per_s"] / big[des]["batches_per_s"] > small[des]["targets_per_s"] / small[des]["batches_per_s"]
    assert small["host"]["reads"] == traces[0]["records"] and big["host"]["reads"] == traces[1]["records"]
    p = run_cli("simulate", out, "--config", TABLE2, "--sweep", "batch_size=16,32")
    assert p.returncode != 0 and "t.bs32.fgt" in p.stderr and "--batch-size 16,32" in p.stderr, p.stderr
    shutil.copy(tmp_path / "t.bs16.fgt", tmp_path / "t.bs32.fgt")
    p = run_cli("simulate", out, "--config", TABLE2, "--sweep", "batch_size=32")
    assert p.returncode == 2 and "t.bs32.fgt" in p.stderr and "batch size 16" in p.stderr, p.stderr
    # Every per-size output is checked before any is written: an existing one without --force refuses all.
    p = run_cli("trace", ds, out, "--batch-size", "8,16", "--batches", "1")
    assert p.returncode == 2 and "t.bs16.fgt" in p.stderr and not (tmp_path / "t.bs8.fgt").exists()


def test_several_ssds_sweep(tmp_path):
    """`--sweep devices=1,2,4` (docs/simulator.md, "Several SSDs"): every read is served once at every
    count; per-SSD queue statistics appear only with several SSDs (one SSD's report is the single-SSD
    model's); each SSD gets a share of the reads; a flash-bound config (this machine's 3 units) gets faster
    with more SSDs; the text output has a per-SSD line; a bad count names the field."""
    ds = generated_dataset(tmp_path, scale=11, edge_factor=8, dim=16, dtype="float16")
    out = tmp_path / "t.fgt"
    p = run_cli("trace", ds, out, "--fanout", "5,3", "--batch-size", "64", "--batches", "3", "--json")
    assert p.returncode == 0, p.stderr
    records = json.loads(p.stdout)["records"]
    machine = REPO / "configs" / "ssd" / "this-machine.toml"
    p = run_cli("simulate", out, "--config", machine, "--design", "host,bg-2", "--sweep", "devices=1,2,4",
                "--json", "--no-timing")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["sweep"] == "array.devices"
    runs = {int(run["value"]): {d["design"]: d for d in run["results"]} for run in r["runs"]}
    for n, res in runs.items():
        for name, d in res.items():
            assert d["reads_served"] == d["reads"] == records, (n, name)
            if n == 1:
                assert "devices" not in d, name
                continue
            assert [x["device"] for x in d["devices"]] == list(range(n))
            parts = [x["reads"] for x in d["devices"]]
            assert sum(parts) >= records and min(parts) > 0.5 * sum(parts) / n, (n, name, parts)
            assert sum(x["flash_commands"] for x in d["devices"]) == d["flash_commands"]
            assert all(x["queues"]["nvme_queue"]["arrivals"] == x["reads"] for x in d["devices"])
    # One SSD through the sweep is the plain run's bytes.
    plain = run_cli("simulate", out, "--config", machine, "--design", "host,bg-2", "--json", "--no-timing")
    assert json.loads(plain.stdout)["runs"][0]["results"] == r["runs"][0]["results"]
    # A real trace's read order follows the engine's completions, and on this small trace 2 SSDs already
    # make the one sampling thread the limit: 4 may tie 2 up to list-scheduling noise (the strict rule on a
    # flash-bound config is crates/flashgnn-sim/tests/sim.rs::more_devices_never_slow_a_device_bound_trace).
    lat = [runs[n]["host"]["batch_latency_s"] for n in (1, 2, 4)]
    assert lat[1] < lat[0] and lat[2] <= lat[1] * 1.01, lat
    t = run_cli("simulate", out, "--config", machine, "--design", "host", "--sweep", "devices=2")
    assert t.returncode == 0 and "per SSD" in t.stdout and "#1 " in t.stdout, t.stdout
    bad = run_cli("simulate", out, "--config", machine, "--design", "host", "--sweep", "devices=0")
    assert bad.returncode == 2 and "array.devices" in bad.stderr, bad.stderr


def test_utilization_names_the_saturated_resource(tmp_path):
    """`servers` counts each queue class's servers for an array and `utilization` ranks busy shares; on a
    report whose PCIe link is busy all the time, PCIe comes first."""
    from flashgnn.ssd.simulate import servers, utilization

    s = servers(str(TABLE2), {"devices": "2"}, "host")
    assert s == {"queue_depth_tokens": 256, "host_cpu": 8, "pcie": 2, "controller_cores": 8, "ssd_dram": 2,
                 "channels": 2 * 16, "dies": 2 * 16 * 4 * 2}, s
    assert servers(str(TABLE2), {}, "cc")["queue_depth_tokens"] == 32
    q = lambda busy: {"mean_busy": busy}
    d = {"queues": {"queue_depth_tokens": q(64), "host_cpu": q(1), "pcie": q(1.9), "controller_cores": q(2),
                    "ssd_dram": q(0.5), "channels": q(8), "dies": q(16)}}
    u = utilization(d, s)
    assert next(iter(u)) == "pcie" and abs(u["pcie"] - 0.95) < 1e-12 and list(u.values()) == sorted(u.values(), reverse=True)


def test_simulate_missing_trace_or_config_is_bad_input_exit_2(tmp_path):
    """A trace or config path that does not exist, or names a directory, is the caller's mistake:
    exit 2 with the path named (it exited 1, as an I/O failure)."""
    ds = generated_dataset(tmp_path, scale=8, edge_factor=4, dim=8, classes=4, seed=3)
    trace = tmp_path / "t.fgt"
    assert run_cli("trace", ds, trace, "--fanout", "5,3", "--batch-size", "16", "--batches", "1").returncode == 0
    missing = tmp_path / "nope.fgt"
    for args, named in ((("simulate", missing, "--config", TABLE2), missing),
                        (("simulate", trace, "--config", tmp_path / "nope.toml"), tmp_path / "nope.toml"),
                        (("simulate", tmp_path, "--config", TABLE2), tmp_path),
                        (("plot-trace", missing, "--plots", tmp_path / "plots"), missing)):
        r = run_cli(*args, timeout=60)
        assert r.returncode == 2 and str(named) in r.stderr, (args, r.returncode, r.stderr[-800:])


def test_built_in_configs_need_no_repository(tmp_path):
    """The shipped SSD configs are compiled into the extension: fit-ssd's default base and `simulate --config
    NAME` work from an installed wheel, which has no configs/ssd/ beside it (fit-ssd once looked for the
    repository's file and failed with "No such file" when installed). A bare name that is neither a file nor
    built in is bad input naming the choices."""
    from flashgnn import _core
    from flashgnn.ssd.simulate import config_text

    assert set(_core.SSD_BUILTIN_CONFIGS) == {"beacongnn-table2", "tlc-conventional"}
    assert config_text("beacongnn-table2") == TABLE2.read_text()
    assert config_text("tlc-conventional.toml") == (REPO / "configs" / "ssd" / "tlc-conventional.toml").read_text()
    ds = generated_dataset(tmp_path, scale=8, edge_factor=4, dim=8, classes=4, seed=3)
    trace = tmp_path / "t.fgt"
    assert run_cli("trace", ds, trace, "--fanout", "5,3", "--batch-size", "16", "--batches", "1").returncode == 0
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    env = cli_env()
    for cfg, code in (("tlc-conventional", 0), ("beacongnn-table3", 2)):
        r = subprocess.run(cli_cmd("simulate", trace, "--config", cfg, "--design", "host", "--json", "--no-timing"),
                           cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == code, r.stderr[-800:]
    assert "built-in configs: beacongnn-table2, tlc-conventional" in r.stderr
