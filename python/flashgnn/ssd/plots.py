"""PNG figures of the SSD design simulator's report and of a trace's measured reads in flight
(docs/simulator.md, "Output"; `flashgnn simulate --plots DIR`, `flashgnn plot-trace TRACE --plots DIR`).

Invariants: matplotlib is optional (the ``plots`` extra) and is checked by :func:`require` before any
simulation, so a missing extra fails at once with the install command; the Agg backend is used (no
display); every figure is written to a temporary name beside its final one, fsynced and renamed, so a
reader never sees half a PNG; file names depend only on the report (design, swept value), never on time,
and are returned in the order written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

EXTRA_HINT = "pip install 'flashgnn[plots]' (or: pip install 'matplotlib>=3.8')"

# Critical-path categories and energy parts, in the report's order (sim.py's _CATS/_ENERGY).
_CATS = ["host", "pcie", "controller", "wait_before_flash", "flash", "wait_after_flash", "barrier"]
_ENERGY = ["flash_reads_j", "channel_j", "ssd_dram_j", "controller_j", "pcie_j", "host_dram_j", "host_cpu_j",
           "die_sampler_j"]


def require() -> None:
    """Raise ImportError naming the extra when matplotlib is not installed."""
    import importlib

    try:
        importlib.import_module("matplotlib")
    except ImportError:
        raise ImportError(f"--plots needs matplotlib, which is not installed: {EXTRA_HINT}") from None


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _out_dir(d: str | os.PathLike) -> Path:
    p = Path(d)
    if os.path.lexists(p) and not p.is_dir():
        raise FileExistsError(f"--plots {p}: exists and is not a directory")
    p.mkdir(parents=True, exist_ok=True)
    return p


def _save(fig, d: Path, name: str, written: list[str]) -> None:
    """Write ``fig`` as d/name durably: temporary name of this process, fsync, rename, fsync the directory."""
    from flashgnn._durable import fsync_path, replace_durably

    final = d / name
    tmp = d / f".{name}.tmp-{os.getpid()}"
    try:
        # A fixed date in the metadata so the same report gives the same bytes.
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": "flashgnn"})
        fsync_path(tmp)
        replace_durably(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
        _plt().close(fig)
    written.append(str(final))


def _slug(v: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", str(v)).strip("_") or "v"


def _hist_axes(ax, hist: list[float], lo: list[int], label: str | None = None, width: float = 0.8,
               shift: float = 0.0, ylabel: str = "% of time") -> None:
    used = [i for i, h in enumerate(hist) if h > 0] or [0]
    lo_i, hi_i = min(used), max(used)
    xs = list(range(lo_i, hi_i + 1))
    ax.bar([x + shift for x in xs], [100 * hist[i] for i in xs], width=width, label=label)
    ax.set_xticks(xs, [str(lo[i]) if lo[i] < 2 else f"{lo[i]}-{2 * lo[i] - 1}" for i in xs], rotation=45,
                  fontsize=7)
    ax.set_xlabel("reads in flight (log2 buckets)")
    ax.set_ylabel(ylabel)


def _queue_depth_fig(title: str, t_s, qd, hist, lo, mean: float | None, *, hist_title: str = "queue-depth histogram",
                     ylabel: str = "% of time", xlabel: str = "time (ms)", style: str = "step"):
    plt = _plt()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [2, 1]})
    if style == "step":
        a.step([t * 1e3 for t in t_s], qd, where="post", lw=0.8)
    else:  # samples of several producers interleaved: dots, not a line between them
        a.plot([t * 1e3 for t in t_s], qd, ".", ms=3)
    a.set_xlabel(xlabel)
    a.set_ylabel("reads in flight")
    a.set_title(f"{title}: queue depth over time" + (f" (mean {mean:.1f})" if mean is not None else ""), fontsize=9)
    _hist_axes(b, hist, lo, ylabel=ylabel)
    b.set_title(hist_title, fontsize=9)
    fig.tight_layout()
    return fig


def run_suffix(r: dict, run: dict) -> str:
    """The file-name suffix of one run of a sweep ("" without a sweep)."""
    return f"-{_slug(r['sweep'])}-{_slug(run['value'])}" if r.get("sweep") else ""


def simulate_plots(r: dict, out: str | os.PathLike, measured: list[tuple[str, dict]] = ()) -> list[str]:
    """Figures of a `simulate` report ``r`` into ``out``; returns the paths written. ``measured`` holds
    (file-name suffix, :func:`flashgnn.ssd.simulate.measured_in_flight` result) per replayed trace; one without
    timestamps (0 batches) draws nothing."""
    plt = _plt()
    d = _out_dir(out)
    written: list[str] = []
    sweep = r.get("sweep")
    runs = r["runs"]
    for run in runs:
        sfx = run_suffix(r, run)
        where = f" ({sweep} = {run['value']})" if sweep else ""
        for res in run["results"]:
            tl = res["timeline"]
            t_ms = [t * 1e3 for t in tl["t_s"]]
            fig, ax = plt.subplots(figsize=(10, 3.6))
            ax.step(t_ms, tl["active_channels"], where="post", lw=0.8, label="active channels")
            ax.step(t_ms, tl["active_dies"], where="post", lw=0.8, label="active dies")
            ax.set_xlabel("simulated time (ms)")
            ax.set_ylabel("busy servers")
            ax.set_title(f"{res['design']}{where}: active channels and dies (means {res['mean_active_channels']:.1f}, "
                         f"{res['mean_active_dies']:.1f})", fontsize=9)
            ax.legend(fontsize=8, loc="upper right")
            fig.tight_layout()
            _save(fig, d, f"active-{res['design']}{sfx}.png", written)
            fig = _queue_depth_fig(f"{res['design']}{where}", tl["t_s"], tl["reads_in_flight"],
                                   res["queue_depth_hist"], res["queue_depth_hist_lo"], res["mean_reads_in_flight"])
            _save(fig, d, f"queue-depth-{res['design']}{sfx}.png", written)

    designs = [x["design"] for x in runs[0]["results"]]
    n = len(runs)
    w = 0.8 / n
    # Throughput per design (one bar per swept value).
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(designs) * max(1, n / 2)), 4))
    for k, run in enumerate(runs):
        ax.bar([i + (k - (n - 1) / 2) * w for i in range(len(designs))],
               [x["batches_per_s"] for x in run["results"]], width=w,
               label=f"{sweep} = {run['value']}" if sweep else None)
    ax.set_xticks(range(len(designs)), designs, rotation=30, fontsize=8)
    ax.set_ylabel("batches/s")
    ax.set_title(f"throughput per design ({r['config']})", fontsize=9)
    if sweep:
        ax.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, d, "throughput.png", written)
    # Stacked breakdowns: one group of bars per design, one bar per swept value.
    for name, key, parts, unit, scale in (("latency-breakdown.png", "breakdown_s", _CATS, "ms per batch", 1e3),
                                          ("energy-breakdown.png", "energy_per_batch_j", _ENERGY, "mJ per batch",
                                           1e3)):
        fig, ax = plt.subplots(figsize=(max(7, 1.2 * len(designs) * max(1, n / 2)), 4.4))
        colors = plt.get_cmap("tab10").colors
        for k, run in enumerate(runs):
            xs = [i + (k - (n - 1) / 2) * w for i in range(len(designs))]
            bottom = [0.0] * len(designs)
            for j, p in enumerate(parts):
                vals = [x[key][p] * scale for x in run["results"]]
                ax.bar(xs, vals, width=w, bottom=bottom, color=colors[j % 10],
                       label=p.removesuffix("_j") if k == 0 else None)
                bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_xticks(range(len(designs)), designs, rotation=30, fontsize=8)
        ax.set_ylabel(unit)
        what = "latency breakdown (critical path)" if key == "breakdown_s" else "energy breakdown"
        ax.set_title(f"{what}" + (f"; bars left to right: {sweep} = {', '.join(x['value'] for x in runs)}"
                                  if sweep else ""), fontsize=9)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        _save(fig, d, name, written)
    if sweep:
        fig, ax = plt.subplots(figsize=(7, 4))
        vals = [run["value"] for run in runs]
        try:
            xs = [float(v) for v in vals]
            numeric = True
        except ValueError:
            xs, numeric = list(range(len(vals))), False
        for i, des in enumerate(designs):
            ax.plot(xs, [run["results"][i]["batches_per_s"] for run in runs], marker="o", label=des)
        if numeric and min(xs) > 0 and max(xs) / min(xs) >= 8:
            ax.set_xscale("log", base=2)
        ax.set_xticks(xs, vals)
        ax.set_xlabel(sweep)
        ax.set_ylabel("batches/s")
        ax.set_title(f"batches/s against {sweep}", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        _save(fig, d, "sweep.png", written)
    for sfx, m in measured:
        if m.get("batches"):
            written += trace_plots(m, d, sfx)
    return written


def trace_plots(m: dict, out: str | os.PathLike, suffix: str = "") -> list[str]:
    """The measured queue depth over batch I/O time and its histogram (``m`` from
    :func:`flashgnn.ssd.simulate.measured_in_flight`). Active channels and dies cannot be observed on a real
    device, so there is no such figure for a measurement."""
    d = _out_dir(out)
    written: list[str] = []
    fig = _queue_depth_fig(f"measured ({Path(m['trace']).name}, {m['batches']} batches)", m["t_s"],
                           m["reads_in_flight"], m["queue_depth_hist"], m["queue_depth_hist_lo"],
                           m["mean_reads_in_flight"])
    _save(fig, d, f"measured-queue-depth{suffix}.png", written)
    return written


def bench_plots(results: list[dict], out: str | os.PathLike) -> list[str]:
    """Per engine of a `flashgnn bench` run, its own telemetry: reads in flight in each producer's ring,
    sampled at every completion round (time since the engine opened), and the histogram of reads in flight at
    each submission. Engines cut off early, or without samples, draw nothing."""
    d = _out_dir(out)
    written: list[str] = []
    for r in results:
        tl = r.get("depth_timeline") or []
        hist = r.get("depth_hist") or []
        if r.get("incomplete") or not tl or not sum(hist):
            continue
        total = sum(hist)
        t0 = min(t for t, _ in tl)
        fig = _queue_depth_fig(f"bench {r['engine']} ({r['workers']} producers, each its own ring)",
                               [t - t0 for t, _ in tl], [q for _, q in tl], [h / total for h in hist],
                               [1 << i for i in range(len(hist))], None, style="dots",
                               hist_title="reads in flight at submission", ylabel="% of reads",
                               xlabel="time since the first sample (ms)")
        _save(fig, d, f"bench-queue-depth-{_slug(r['engine'])}.png", written)
    return written
