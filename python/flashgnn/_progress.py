"""Progress for every long command: a tqdm bar on a terminal, plain periodic
lines elsewhere (a log file, CI, a pipe), so logs carry no carriage returns
or escape codes and still show that the job moves."""

from __future__ import annotations

import sys
import time

# Seconds between plain lines; each bar also prints when it closes.
LINE_INTERVAL_S = 10.0


def interactive(stream=None) -> bool:
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


class Lines:
    """The part of tqdm's interface flashgnn uses, printing one plain line
    per ``LINE_INTERVAL_S`` (and one at the end): ``desc: n/total unit
    (pct), elapsed, rate | postfix``."""

    def __init__(self, total=None, desc: str = "", unit: str = "it", stream=None, interval: float = LINE_INTERVAL_S,
                 **_ignored):
        self.total, self.desc, self.unit, self.n = total, desc, unit, 0
        self.stream = stream or sys.stderr
        self.interval = interval
        self.postfix = ""
        self.t0 = self.last = time.perf_counter()
        self.closed = False

    def _amount(self, v: float, unit: bool = True) -> str:
        """``v`` in this bar's unit: bytes as KiB/MiB/GiB, counts with k/M/G."""
        u = self.unit.strip()
        if u == "B":
            from flashgnn._util import human_bytes

            return human_bytes(v)
        tail = f" {u}" if unit else ""
        for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(v) >= div:
                return f"{v / div:.1f}{suffix}{tail}"
        return f"{v:,.0f}{tail}" if v == int(v) else f"{v:,.1f}{tail}"

    def line(self) -> str:
        el = time.perf_counter() - self.t0
        bytes_ = self.unit.strip() == "B"
        if self.total:
            done = f"{self._amount(self.n, unit=bytes_)}/{self._amount(self.total)} ({100 * self.n / self.total:.0f}%)"
        else:
            done = self._amount(self.n)
        rate = f", {self._amount(self.n / el)}/s" if el > 0 else ""
        post = f" | {self.postfix}" if self.postfix else ""
        return f"{self.desc}: {done}, {el:.0f} s{rate}{post}"

    def _maybe_print(self) -> None:
        now = time.perf_counter()
        if now - self.last >= self.interval:
            self.last = now
            print(self.line(), file=self.stream, flush=True)

    def update(self, n: int = 1) -> None:
        self.n += n
        self._maybe_print()

    def refresh(self) -> None:
        self._maybe_print()

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = s

    def set_description(self, desc: str) -> None:
        self.desc = desc

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            print(self.line(), file=self.stream, flush=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def bar(total=None, desc: str = "", unit: str = "it", disable: bool = False, **kw):
    """A tqdm bar on a terminal, :class:`Lines` otherwise; a disabled tqdm when ``disable``."""
    from tqdm.auto import tqdm

    if disable:
        return tqdm(total=total, disable=True)
    if interactive():
        return tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True, **kw)
    return Lines(total=total, desc=desc, unit=unit)
