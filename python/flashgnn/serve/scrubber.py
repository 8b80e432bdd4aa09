"""``flashgnn serve --scrub-rate RATE``: the scrubber (``flashgnn.scrub``,
docs/scrub.md) in a background thread of a live server.

Passes run back to back at the given byte rate, each resuming the
checkpoint of the last (so a restarted server continues where it stopped).
Every finished pass logs one summary line and one line per damaged page on
the server's log (stderr); ``status()`` is what Stats reports under
``graph_stats_json["scrub"]``. Stopping cancels the running pass at a chunk
boundary with its progress saved.

The store's log is checked frame by frame (CRC, sequence numbers, ops
decodable), not replayed: this server validated every op before logging it,
and a replay would rebuild a second copy of the store's whole in-memory delta
on every pass, which grows with every write until a compaction (the soak's
climbing memory, docs/reliability.md, *Soak*). ``flashgnn verify`` replays it.

Invariant: the scrubber only reads; a failure of the scrubber itself (a
foreign or corrupt progress file, a vanished generation after a
compaction) is logged and the next pass starts afresh, it never stops the
server.
"""

from __future__ import annotations

import time

import flashgnn

from .background import Background

#: Damage records kept in ``status()`` (the log has every one of the pass).
STATUS_DAMAGE_MAX = 20
#: Seconds to wait after a failed pass before the next (a damaged store
#: would otherwise be re-read in a tight loop).
RETRY_AFTER_S = 30.0


class BackgroundScrub(Background):
    name = "flashgnn-scrub"

    def __init__(self, dataset: str, rate: int, log, state: str | None = None):
        super().__init__(log)
        self.dataset, self.rate, self.state = str(dataset), int(rate), state
        self.passes = 0
        self.last_pass: dict | None = None
        self.last_error: str | None = None

    def start(self) -> None:
        super().start()
        self._log(f"scrub: background scrubber started at {self.rate / 2**20:.1f} MiB/s" if self.rate else
                  "scrub: background scrubber started at an unlimited rate")

    def _run(self) -> None:
        resume = True
        while not self._stop.is_set():
            try:
                rep = flashgnn.scrub(self.dataset, rate=self.rate, resume=resume, state=self.state, progress=False,
                                     job_hook=self._set_job, replay_log=False)
            except Exception as e:  # noqa: BLE001 - the scrubber must never take the server down
                self.last_error = str(e)
                if resume and "progress file" in str(e):
                    self._log(f"scrub: {e}; starting a new pass")
                    resume = False
                    continue
                self._log(f"scrub: error: {e}; next pass in {RETRY_AFTER_S:g} s")
                self._stop.wait(RETRY_AFTER_S)
                continue
            finally:
                self._set_job(None)
            resume = True
            if not rep["complete"]:
                break  # stopped
            self.passes += 1
            self.last_error = None
            self.last_pass = {
                "finished_unix": time.time(),
                "seconds": rep["seconds"],
                "bytes_read": rep["bytes_read"],
                "bytes_total": rep["bytes_total"],
                "rate_achieved_bytes_per_s": rep["rate_achieved_bytes_per_s"],
                "damaged_count": rep["damaged_count"],
                "damaged": rep["damaged"][:STATUS_DAMAGE_MAX],
            }
            for d in rep["damaged"]:
                self._log(f"scrub: DAMAGED {d['file']} at byte offset {d['offset']}: {d['kind']}: {d['check']}")
            self._log(
                f"scrub: pass {self.passes} done: {rep['bytes_read'] / 2**20:.1f} MiB read in {rep['seconds']:.1f} s "
                f"({rep['rate_achieved_bytes_per_s'] / 2**20:.1f} MiB/s), {rep['damaged_count']} damaged"
            )

    def status(self) -> dict:
        done = total = 0
        job = self._current_job()
        if job is not None:
            for _name, _unit, d, t, _fin in job.poll():
                done, total = d, t
        return {
            "rate_bytes_per_s": self.rate,
            "passes": self.passes,
            "running": job is not None,
            "pass_bytes_done": done,
            "pass_bytes_total": total,
            "last_pass": self.last_pass,
            "error": self.last_error,
        }
