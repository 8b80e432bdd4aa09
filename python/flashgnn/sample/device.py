"""The GPU tier: the hottest feature rows resident in device memory and
gathered there.

``DeviceCache(path, budget, device)`` picks the highest-degree nodes that fit
``budget`` bytes of device memory (one sequential scan of ``graph.fg``, the
same ranking as the DRAM cache's static set), loads their rows once into a
table on ``device``, and tells the engine (``flashgnn._core.Resident``) not
to read or copy them. Each batch then carries ``resident`` (per node: its
table row, or -1); :meth:`DeviceCache.gather` builds ``x`` on the device from
the table for resident rows and copies only the other rows from the host.

Optional by design: without CUDA, ``DeviceCache()`` (device left to choose)
raises :class:`DeviceUnavailable` and callers run without the tier;
``device="cpu"`` runs the same code on the CPU (tests, and to check a set-up
before a GPU is at hand). Batches are equal with and without the tier.
"""

from __future__ import annotations

import os
import time

import numpy as np

from flashgnn import _core


class DeviceUnavailable(RuntimeError):
    """No CUDA device for the GPU tier."""


# Rows loaded per engine call while filling the table.
_LOAD_CHUNK = 65536


class DeviceCache:
    """Hottest feature rows resident on ``device`` (default: the current CUDA
    device) under ``budget`` bytes of device memory; ``dtype`` is the table's
    and the gathered ``x``'s numpy dtype (default float32; None keeps the
    stored one)."""

    def __init__(self, path, budget: int, device=None, dtype=np.float32, engine: str = "uring",
                 progress: bool = False):
        import torch

        from flashgnn.sample.sampler import Sampler

        if device is None:
            if not torch.cuda.is_available():
                raise DeviceUnavailable("no CUDA device: the GPU tier is off (device='cpu' runs it on the CPU)")
            device = "cuda"
        self.device = torch.device(device)
        self.path = os.fspath(path)
        self.budget = int(budget)
        if self.budget < 0:
            raise ValueError(f"device cache budget {budget}: expected >= 0 bytes")
        t0 = time.perf_counter()
        loader = Sampler(self.path, [], engine=engine, labels=False, dtype=dtype)
        self.dim = loader.feature_dim
        self.np_dtype = np.dtype(dtype) if dtype is not None else np.dtype(loader.dtype)
        row = max(1, self.dim * self.np_dtype.itemsize)
        count = self.budget // row if self.dim else 0
        self._core = _core.Resident(self.path, int(count), engine)
        nodes = self._core.nodes()
        self.rows = len(nodes)
        torch_dtype = torch.from_numpy(np.zeros(0, self.np_dtype)).dtype
        self.table = torch.empty((self.rows, self.dim), dtype=torch_dtype, device=self.device)
        chunks = range(0, self.rows, _LOAD_CHUNK)
        if progress:
            from tqdm import tqdm

            chunks = tqdm(chunks, desc="device cache", unit="chunk", leave=False)
        for lo in chunks:
            b = loader.sample(nodes[lo:lo + _LOAD_CHUNK])
            self.table[lo:lo + len(b.n_id)] = torch.from_numpy(np.ascontiguousarray(b.x)).to(self.device)
        self.seconds = time.perf_counter() - t0
        self.hits = 0
        self.misses = 0

    def gather(self, batch):
        """``x`` of ``batch`` (a :class:`flashgnn.sample.sampler.SampledBatch`) as a
        tensor on the device: resident rows from the table, the rest copied
        from the host."""
        import torch

        x = np.ascontiguousarray(batch.x)
        res = batch.resident
        if res is None or len(res) == 0:
            self.misses += len(x)
            return torch.from_numpy(x).to(self.device)
        hit = res >= 0
        out = torch.empty((len(x), self.dim), dtype=self.table.dtype, device=self.device)
        where = torch.from_numpy(np.flatnonzero(hit)).to(self.device)
        out[where] = self.table[torch.from_numpy(res[hit]).to(self.device)]
        miss = np.flatnonzero(~hit)
        if len(miss):
            out[torch.from_numpy(miss).to(self.device)] = torch.from_numpy(x[miss]).to(self.device)
        n_hit = int(hit.sum())
        self.hits += n_hit
        self.misses += len(x) - n_hit
        return out

    def stats(self) -> dict:
        """Rows and bytes resident, device, load time, rows gathered from the
        table (hits) and from the host (misses), hit rate."""
        total = self.hits + self.misses
        return {"device": str(self.device), "budget": self.budget, "rows": self.rows,
                "bytes": int(self.table.numel() * self.table.element_size()), "load_seconds": self.seconds,
                "hits": self.hits, "misses": self.misses, "hit_rate": self.hits / total if total else 0.0}

    def __getstate__(self):
        raise TypeError("flashgnn.DeviceCache holds device memory and cannot be pickled; build one per process")
