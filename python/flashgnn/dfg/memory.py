"""A process-wide ledger of bytes: the memory bound summed over runs in flight.

    ledger = ByteLedger(4 << 30, "--max-inflight-bytes")
    with ledger.reserve(plan.peak_bytes, timeout=1.0, what="Run"):
        runner.run(graph, inputs, plan=plan)

A run reserves the bytes its plan says it may hold at its peak *before* any
kernel runs, and gives them back when it is done (also on error). When the
ledger has no room the caller waits, at most ``timeout`` seconds, for runs in
flight to finish; then :class:`LedgerFull` names the bound. A reservation
larger than the whole ledger is refused at once (waiting cannot help).
"""

from __future__ import annotations

import contextlib
import threading
import time


class LedgerFull(Exception):
    """No room in the ledger within the wait (not a ValueError: the request is valid, the server is busy)."""


class ByteLedger:
    def __init__(self, capacity: int, name: str = "max_inflight_bytes"):
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"{name}: {capacity!r} must be an integer >= 1")
        self.capacity, self.name = capacity, name
        self._cond = threading.Condition()
        self._used = 0
        self._holders = 0
        self.waited = 0  # reservations that had to wait (for tests and Stats)
        self.refused = 0

    @property
    def used(self) -> int:
        with self._cond:
            return self._used

    @property
    def holders(self) -> int:
        with self._cond:
            return self._holders

    def acquire(self, nbytes: int, timeout: float, what: str = "request") -> None:
        nbytes = int(nbytes)
        with self._cond:
            if nbytes > self.capacity:
                self.refused += 1
                raise LedgerFull(f"{what}: needs {nbytes} bytes at its peak > {self.name} {self.capacity} "
                                 "(the bound on all runs in flight together)")
            end = time.monotonic() + max(0.0, timeout)
            if self._used + nbytes > self.capacity:
                self.waited += 1
            while self._used + nbytes > self.capacity:
                left = end - time.monotonic()
                if left <= 0:
                    self.refused += 1
                    raise LedgerFull(f"{what}: needs {nbytes} bytes, but {self._used} of {self.name} "
                                     f"{self.capacity} are reserved by {self._holders} run(s) in flight "
                                     f"(waited {timeout:g} s); retry later")
                self._cond.wait(left)
            self._used += nbytes
            self._holders += 1

    def release(self, nbytes: int) -> None:
        with self._cond:
            self._used -= int(nbytes)
            self._holders -= 1
            self._cond.notify_all()

    @contextlib.contextmanager
    def reserve(self, nbytes: int, timeout: float = 0.0, what: str = "request"):
        self.acquire(nbytes, timeout, what)
        try:
            yield
        finally:
            self.release(nbytes)
