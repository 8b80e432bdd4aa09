"""GPU-tier benchmark: batches delivered *on the device* per second, with
and without :class:`flashgnn.DeviceCache`, in the same run.

    python -m benchmarks.device_tier DATASET --device-budget 2GiB [--device cuda] [--json]

Both rows run the same seeds through ``uring`` (and the same DRAM cache
when ``--cache-budget`` is given); "plain" copies every row of ``x`` to the
device, "device tier" reads and copies only the rows not resident there and
gathers the rest from the device table. Reported per row: batches/s, reads
per batch, device-tier hit rate, host-to-device bytes per batch, and the
ratio to "plain". Without CUDA it exits 0 with a notice unless
``--device cpu`` is given (the same code on the CPU: reads saved, no
transfer saved).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from flashgnn._util import ArgumentParser  # negative-leading list values (--fanout -1,-1)


def _run(path, fanouts, batch_size, batches, device, cache_budget, device_cache=None) -> dict:
    import torch

    from flashgnn.store.dataset import Dataset
    from flashgnn.sample.sampler import Cache, Sampler

    ds = Dataset(path)
    rng = np.random.default_rng(0)
    pool = ds.split("train") if "train" in ds.split_names else np.arange(ds.num_nodes)
    order = rng.permutation(pool)[: (batches + 1) * batch_size]
    if len(order) < 2 * batch_size:  # one warm-up batch, then at least one timed
        raise SystemExit(f"device_tier: {path}: {len(pool):,} seed nodes make fewer than 2 batches of {batch_size:,}; "
                         f"pass a smaller --batch-size")
    cache = Cache(path, fanouts, cache_budget) if cache_budget else None
    s = Sampler(path, fanouts, dtype=np.float32, cache=cache, device_cache=device_cache)
    h2d = 0
    stamps = []
    from tqdm import tqdm

    for b in tqdm(s.iter_batches(order, batch_size, seed=1, drop_last=True), total=batches + 1, leave=False,
                  desc="device tier" if device_cache else "plain", unit="batch"):
        if device_cache is not None:
            x = device_cache.gather(b)
            h2d += int((b.resident < 0).sum() if b.resident is not None else len(b.x)) * b.x.shape[1] * b.x.itemsize
        else:
            x = torch.from_numpy(b.x).to(device)
            h2d += b.x.nbytes
        if x.is_cuda:
            torch.cuda.synchronize()
        stamps.append(time.perf_counter())
    tel = s.last_iter_telemetry
    n = len(stamps) - 1
    out = {"batches": n, "batches_per_s": n / (stamps[-1] - stamps[0]), "reads_per_batch": tel["reads"] / len(stamps),
           "h2d_bytes_per_batch": h2d / len(stamps)}
    if device_cache is not None:
        out["device_cache"] = device_cache.stats()
    return out


def main(argv=None) -> int:
    from flashgnn._util import parse_size

    p = ArgumentParser(prog="python -m benchmarks.device_tier", description=__doc__.split("\n\n")[0])
    p.add_argument("dataset")
    p.add_argument("--device-budget", type=parse_size, required=True, help="device memory for the resident rows")
    p.add_argument("--device", default=None, help="cuda (default when present) | cuda:N | cpu")
    p.add_argument("--cache-budget", type=parse_size, default=0, help="DRAM cache under both rows (0 = none)")
    p.add_argument("--fanout", default="25,10")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    import torch

    from flashgnn.sample.device import DeviceCache

    if a.device is None and not torch.cuda.is_available():
        print("device_tier: no CUDA device; nothing measured (pass --device cpu to run the tier on the CPU)",
              file=sys.stderr)
        return 0
    device = torch.device(a.device or "cuda")
    fanouts = [int(f) for f in a.fanout.split(",")]
    plain = _run(a.dataset, fanouts, a.batch_size, a.batches, device, a.cache_budget)
    dc = DeviceCache(a.dataset, a.device_budget, device=device, progress=True)
    tier = _run(a.dataset, fanouts, a.batch_size, a.batches, device, a.cache_budget, dc)
    tier["vs_plain"] = tier["batches_per_s"] / plain["batches_per_s"]
    res = {"dataset": a.dataset, "device": str(device), "device_budget": a.device_budget,
           "cache_budget": a.cache_budget, "plain": plain, "device_tier": tier}
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        for name, r in (("plain", plain), ("device tier", tier)):
            print(f"{name:12s} {r['batches_per_s']:7.2f} batches/s  {r['reads_per_batch']:9,.0f} reads/batch  "
                  f"{r['h2d_bytes_per_batch'] / 2**20:7.1f} MiB host->device/batch")
    st = tier["device_cache"]
    print(f"device_tier: {st['rows']:,} rows ({st['bytes'] / 2**20:.0f} MiB) on {st['device']} (loaded in "
          f"{st['load_seconds']:.1f} s), hit rate {st['hit_rate']:.1%}, {tier['vs_plain']:.2f}x plain, reads "
          f"{plain['reads_per_batch']:,.0f} -> {tier['reads_per_batch']:,.0f} per batch", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
