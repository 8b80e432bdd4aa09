"""``flashgnn serve --compact-delta SIZE``: compaction in a background thread of a live server.

Every acknowledged write stays in the mutable store's in-memory delta until a
compaction folds the log into a new base generation (docs/format.md,
*Generations and compaction*): a server that never compacts grows by every
write it takes (docs/reliability.md, *Soak*) and replays a longer log at every
restart. This thread polls the store every ``POLL_S`` and compacts whenever
the delta holds ``threshold`` bytes or more; reads and writes go on meanwhile
(the store pauses writes only to carry the last frames into the new log and
switch ``CURRENT``).

After a switch ``on_switch(report)`` runs: the server rebuilds its Run cache,
whose keys belong to the generation it was chosen on (a sampler on the new
base runs without the old one, docs/sampling.md).

A failed compaction (ENOSPC, an unreadable page of the base it must fold) is
logged with its error and tried again after a back-off that doubles from
``RETRY_FIRST_S`` to ``RETRY_MAX_S``; the generation is then unchanged and
nothing acknowledged is lost (the store's guarantee, explored by the
crash-state suites). Stopping cancels a compaction in progress. ``status()``
is what Stats reports under ``graph_stats_json["compaction"]``.

Invariant: a failure of the compactor never stops the server.
"""

from __future__ import annotations

import time

from .background import Background

POLL_S = 1.0
RETRY_FIRST_S = 2.0
RETRY_MAX_S = 60.0


class AutoCompact(Background):
    name = "flashgnn-compact"

    def __init__(self, graph, threshold: int, log, on_switch=None):
        if threshold <= 0:
            raise ValueError(f"--compact-delta {threshold}: expected a size > 0")
        super().__init__(log)
        self.graph, self.threshold, self._on_switch = graph, int(threshold), on_switch
        self.compactions = 0
        self.failures = 0
        self.last: dict | None = None
        self.last_error: str | None = None

    def start(self) -> None:
        super().start()
        self._log(f"compact: folding the log into a new generation whenever the delta holds "
                  f"{self.threshold / 2**20:.1f} MiB")

    def _compact(self) -> dict:
        job = self.graph._core.start_compact()
        self._set_job(job)
        try:
            while not job.wait(0.2):
                pass
            return job.result()
        finally:
            self._set_job(None)

    def _run(self) -> None:
        retry = RETRY_FIRST_S
        while not self._stop.wait(POLL_S):
            try:
                delta = int(self.graph.stats()["delta_bytes"])
                if delta < self.threshold:
                    continue
                t = time.perf_counter()
                rep = self._compact()
            except Exception as e:  # noqa: BLE001 - compaction must never take the server down
                if self._stop.is_set():
                    break
                self.failures += 1
                self.last_error = str(e)
                self._log(f"compact: error: {e}; next try in {retry:g} s")
                self._stop.wait(retry)
                retry = min(2 * retry, RETRY_MAX_S)
                continue
            retry = RETRY_FIRST_S
            self.compactions += 1
            self.last_error = None
            self.last = {"finished_unix": time.time(), "seconds": time.perf_counter() - t, "delta_bytes": delta,
                         "generation": rep.get("generation"), "folded_ops": rep.get("folded_ops")}
            self._log(f"compact: generation {rep.get('generation')} from {delta / 2**20:.1f} MiB of delta "
                      f"({rep.get('folded_ops')} ops) in {self.last['seconds']:.1f} s")
            if self._on_switch is not None:
                try:
                    self._on_switch(rep)
                except Exception as e:  # noqa: BLE001
                    self._log(f"compact: after generation {rep.get('generation')}: {e}")

    def status(self) -> dict:
        return {"threshold_bytes": self.threshold, "compactions": self.compactions, "failures": self.failures,
                "running": self._current_job() is not None, "last": self.last, "error": self.last_error}
