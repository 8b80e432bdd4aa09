"""What the server's background threads share (serve/scrubber.py, serve/compactor.py): a daemon thread
running ``_run`` until ``stop()``, and the Rust job it is running now (a scrub pass, a compaction), which
``stop()`` cancels at its next check so the server's shutdown never waits for a whole pass."""

from __future__ import annotations

import threading


class Background:
    #: The thread's name (``ps -T``, tracebacks).
    name = "flashgnn-background"

    def __init__(self, log):
        self._log = log
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._job = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 60.0) -> None:
        self._stop.set()
        with self._lock:
            if self._job is not None:
                self._job.cancel()
        if self._thread is not None:
            self._thread.join(timeout)

    def _set_job(self, job) -> None:
        """Record the job now running (None: none); one started after ``stop()`` is cancelled at once."""
        with self._lock:
            self._job = job
            if job is not None and self._stop.is_set():
                job.cancel()

    def _current_job(self):
        with self._lock:
            return self._job

    def _run(self) -> None:
        raise NotImplementedError
