"""What one admitted call carries between the event loop and its worker in ``flashgnn serve``.

Owns the answer a refused request gets (:class:`Status`: a gRPC code, the
message, and the reason that keys Stats' ``rejected`` counters), a call's
deadline and cancellation (:class:`Call`, which every RPC's work checks before
starting or committing: work whose answer nobody will read is not started;
work already committing finishes) and its in-flight slot (:class:`Slot`,
released exactly once, when the work ends rather than when the handler stops
waiting, so ``--max-inflight`` bounds real work).
"""

from __future__ import annotations

import concurrent.futures
import threading
import time

import grpc


class Status(Exception):
    """A gRPC status to answer with; ``reason`` keys the Stats 'rejected' counters."""

    def __init__(self, code: grpc.StatusCode, message: str, reason: str | None = None):
        super().__init__(message)
        self.code, self.message, self.reason = code, message, reason


def invalid(message: str) -> Status:
    return Status(grpc.StatusCode.INVALID_ARGUMENT, message, "invalid_argument")


class Slot:
    """An admitted request's in-flight slot; released exactly once when its work ends."""

    def __init__(self, release):
        self._release, self._released = release, False
        self._lock = threading.Lock()

    def release(self, *_):
        with self._lock:
            if self._released:
                return
            self._released = True
        self._release()


class Call:
    """One admitted request's deadline and cancellation flag, seen by its worker."""

    def __init__(self, rpc: str, deadline: float, note: str = ""):
        self.rpc, self.deadline, self.note = rpc, deadline, note
        self.budget_s = max(0.0, deadline - time.monotonic())
        self._cancelled = threading.Event()
        self._lock = threading.Lock()
        self._reading: concurrent.futures.Future | None = None

    def cancel(self) -> None:
        with self._lock:
            self._cancelled.set()
            if self._reading is not None:
                self._reading.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def reading(self, fut: concurrent.futures.Future | None) -> None:
        """The message read a worker now waits for (cancelled with the call), or None."""
        with self._lock:
            self._reading = fut
            if fut is not None and self._cancelled.is_set():
                fut.cancel()

    def sleep(self, seconds: float) -> None:
        self._cancelled.wait(min(seconds, max(0.0, self.deadline - time.monotonic())))

    def expired(self) -> Status:
        return Status(grpc.StatusCode.DEADLINE_EXCEEDED, f"{self.rpc}: deadline of {self.budget_s:.3g} s exceeded{self.note}",
                      "deadline_exceeded")

    def check(self) -> None:
        """Raise before starting (or committing) work whose answer nobody will read."""
        if time.monotonic() >= self.deadline:
            raise self.expired()
        if self._cancelled.is_set():
            raise Status(grpc.StatusCode.CANCELLED, f"{self.rpc}: cancelled before the work started", "cancelled")


class Admitted:
    """What a servicer method's ``context`` is here: the admitted call (deadline, cancellation)."""

    def __init__(self, call: Call):
        self.call = call

