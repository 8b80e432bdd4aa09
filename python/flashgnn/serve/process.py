"""``flashgnn serve`` in a child process: the one launcher the crash test, the
serving benchmark and the tests share.

It listens on port 0 (the kernel picks a free port, so there is no race
between choosing and binding one), reads the address from the server's
"listening on HOST:PORT" line, sends the server's stderr to a file and keeps
the rest of stdout (the shutdown summary) for :meth:`ServeProcess.stop`.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


_TOKEN_FILE = object()  # ServeProcess.client's default: the token the server was started with


class ServeStartError(RuntimeError):
    """The server exited, or did not listen in time; the message has its stderr tail."""


class ServeProcess:
    def __init__(self, dataset, token_file, *args, stderr_path, env: dict | None = None, timeout: float = 60.0,
                 preexec_fn=None, launcher: list[str] | None = None):
        # launcher: what runs `flashgnn serve ARGS` (tests pass a wrapper that slows chosen RPCs down).
        cmd = [*(launcher or [sys.executable, "-m", "flashgnn.cli"]), "serve", str(dataset), "--listen", "127.0.0.1:0",
               "--token-file", str(token_file), *map(str, args)]
        self.token_file = Path(token_file)
        self.stderr_path = Path(stderr_path)
        self._err = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._err, text=True,
                                     env=dict(env if env is not None else os.environ, PYTHONUNBUFFERED="1"),
                                     preexec_fn=preexec_fn)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        t_end = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, t_end - time.monotonic()))
            except queue.Empty:
                self.proc.kill()
                self.proc.wait()
                raise ServeStartError(f"server did not listen within {timeout:.0f} s: {self._tail()}") from None
            if line is None:
                raise ServeStartError(f"server exited {self.proc.wait()} before listening: {self._tail()}")
            if "listening on" in line:
                self.address = line.split("listening on ", 1)[1].split()[0]
                return

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def stderr(self) -> str:
        if not self._err.closed:
            self._err.flush()
        return self.stderr_path.read_text(errors="replace")

    def _tail(self, lines: int = 3) -> str:
        return " | ".join(self.stderr().strip().splitlines()[-lines:])

    def kill(self) -> None:
        """SIGKILL (a crash) and reap."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._err.close()

    def client(self, token=_TOKEN_FILE, **kw):
        """A :class:`flashgnn.Client` of this server, with the token of its ``--token-file`` unless given
        (``token=None``: no token)."""
        from flashgnn.serve.client import Client
        from flashgnn.serve.token import read_token_file

        return Client(self.address, token=read_token_file(self.token_file) if token is _TOKEN_FILE else token, **kw)

    def stop(self, sig=signal.SIGTERM, timeout: float = 60.0) -> tuple[int, str]:
        """Send ``sig``, wait; returns (exit code, the rest of stdout)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        out = []
        while True:
            try:
                line = self.lines.get(timeout=5)
            except queue.Empty:
                break
            if line is None:
                break
            out.append(line)
        self._err.flush()
        return rc, "".join(out)
