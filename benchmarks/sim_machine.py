"""The simulator against this machine (docs/simulator.md, "Against this machine"): for each of four settings,
fit `this-machine` from the device probe alone (QD1 and the setting's depth, plus QD256; host CPU on the memory
engine at a calibration setting of its own) just before and just after recording a trace on the real engine, fit
from the mean of the two probes, and replay the trace under the fit: simulated ÷ traced batch I/O time. Probes and
trace of a setting run back to back, so they see the same machine; ``--rounds`` repeats everything to show how much
a shared machine moves the figures.

    python -m benchmarks.sim_machine DATASET --work DIR [--rounds 3] [--json]

The trace being predicted is never an input of the fit.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

# (name, engine, fanouts, batch size, batches, depth): the four settings of the docs' table.
SETTINGS = [
    ("uring 25,10 b256 qd256", "uring", [25, 10], 256, 10, 256),
    ("uring 10,5 b1024 qd64", "uring", [10, 5], 1024, 10, 64),
    ("uring 15,10,5 b128 qd128", "uring", [15, 10, 5], 128, 10, 128),
    ("pread 10,5 b64 qd1", "pread", [10, 5], 64, 5, 1),
]
BAND = 0.2  # the target: simulated within ±20 % of traced


def run(dataset: str, work: str, rounds: int = 1, seconds: float = 2.0, progress: bool = True) -> dict:
    from tqdm.auto import tqdm

    from flashgnn.ssd.simulate import depth_path, fit_probe, fit_this_machine, record_trace, simulate

    base = str(Path(__file__).resolve().parents[2] / "configs" / "ssd" / "beacongnn-table2.toml")
    w = Path(work)
    w.mkdir(parents=True, exist_ok=True)
    graph = str(Path(dataset) / "graph.fg")
    rows = []
    bar = tqdm(total=rounds * len(SETTINGS), desc="fit+trace+replay", unit="setting", disable=not progress)
    for rnd in range(rounds):
        for name, engine, fanouts, bs, nb, depth in SETTINGS:
            depths = sorted({max(depth, 2), 256}) if depth > 1 else [256]
            # Probe (and calibrate host CPU) just before and just after the trace, and fit from the mean of
            # the two: the device's speed drifts on a shared machine, and the trace runs between the two.
            _, before = fit_this_machine(graph, base, depths, seconds, dataset=dataset)
            t = w / "t.fgt"
            record_trace(dataset, str(t), fanouts, bs, nb, engine=engine, depth=max(depth, 1), progress=False,
                         force=True)
            _, after = fit_this_machine(graph, base, depths, seconds, dataset=dataset)
            probe = {"iops_qd1": 2 / (1 / before["iops_qd1"] + 1 / after["iops_qd1"]),  # mean latency
                     "iops_by_depth": {k: (before["iops_by_depth"][k] + after["iops_by_depth"][k]) / 2
                                       for k in before["iops_by_depth"]},
                     "host_cpu": dict(before["host_cpu"])}
            for k in ("ns_per_node", "ns_per_read"):
                probe["host_cpu"][k] = (before["host_cpu"][k] + after["host_cpu"][k]) / 2
            cfg, nocpu = {}, {}
            for d in depths:
                p = depth_path(w / "this-machine.toml", d)
                p.write_text(fit_probe(probe["iops_qd1"], probe["iops_by_depth"][str(d)], d, base, probe["host_cpu"]))
                cfg[d] = str(p)
                # The same probes without the host-CPU calibration (the base's CPU per node, 8 cores): what the
                # calibration adds.
                p = depth_path(w / "no-cpu.toml", d)
                p.write_text(fit_probe(probe["iops_qd1"], probe["iops_by_depth"][str(d)], d, base, None))
                nocpu[d] = str(p)
            row = {"round": rnd, "setting": name, "engine": engine, "depth": depth,
                   "probe_iops_qd1": probe["iops_qd1"], "probe_iops_by_depth": probe["iops_by_depth"],
                   "host_cpu_ns_per_node": probe["host_cpu"]["ns_per_node"]}
            at = max(depth, 2) if depth > 1 else 256
            for label, c in (("at_depth", cfg[at]), ("qd256", cfg[256]), ("no_cpu", nocpu[at])):
                r = simulate(str(t), c, "host", f"queue_depth={depth}", timing=False)
                res = r["runs"][0]["results"][0]
                row["traced_ms"] = res["traced_batch_latency_s"] * 1e3
                row[f"sim_ms_{label}"] = res["batch_latency_s"] * 1e3
                row[f"ratio_{label}"] = res["batch_latency_s"] / res["traced_batch_latency_s"]
            rows.append(row)
            bar.update(1)
    bar.close()
    summary = {}
    for name, *_ in SETTINGS:
        rs = [r for r in rows if r["setting"] == name]
        summary[name] = {k: {"median": statistics.median(r[k] for r in rs), "min": min(r[k] for r in rs),
                             "max": max(r[k] for r in rs)} for k in ("ratio_at_depth", "ratio_qd256", "ratio_no_cpu", "traced_ms")}
    within = sum(abs(s["ratio_at_depth"]["median"] - 1) <= BAND for s in summary.values())
    rows_within = sum(abs(r["ratio_at_depth"] - 1) <= BAND for r in rows)
    return {"dataset": dataset, "rounds": rounds, "rows": rows, "summary": summary, "within": within,
            "rows_within": rows_within, "settings": len(SETTINGS)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sim_machine", description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--work", required=True, help="directory for the fitted configs and the trace (overwritten)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=2.0, help="probe seconds per depth")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.rounds < 1:
        ap.error("--rounds must be >= 1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    r = run(a.dataset, a.work, a.rounds, a.seconds, progress=not a.json)
    if a.json:
        print(json.dumps(r, indent=2))
        return 0
    print(f"{'round':>5}  {'setting':<26}{'probe QD1':>10}{'probe QDd':>10}{'CPU ns/node':>12}{'traced ms':>10}"
          f"{'sim ms':>8}{'sim/traced':>11}{'(QD256 fit)':>12}{'(no CPU)':>9}")
    for x in r["rows"]:
        dd = str(max(x["depth"], 2)) if x["depth"] > 1 else "256"
        print(f"{x['round']:>5}  {x['setting']:<26}{x['probe_iops_qd1']:>10.0f}{x['probe_iops_by_depth'][dd]:>10.0f}"
              f"{x['host_cpu_ns_per_node']:>12.0f}{x['traced_ms']:>10.1f}{x['sim_ms_at_depth']:>8.1f}"
              f"{x['ratio_at_depth']:>11.2f}{x['ratio_qd256']:>12.2f}{x['ratio_no_cpu']:>9.2f}")
    print(f"summary: {r['within']} of {r['settings']} settings within ±{BAND:.0%} (median sim/traced over "
          f"{r['rounds']} rounds, fit at each setting's depth; {r['rows_within']} of {len(r['rows'])} single "
          f"fit+trace pairs): "
          + ", ".join(f"{k} {v['ratio_at_depth']['median']:.2f} [{v['ratio_at_depth']['min']:.2f}-"
                      f"{v['ratio_at_depth']['max']:.2f}]" for k, v in r["summary"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
