"""`flashgnn serve` with chosen RPCs slowed down, for tests of the in-flight cap, deadlines and the drain.

    python tests/serve/_slow_serve.py GetNeighbors:5[,Rpc:seconds] serve DATASET ...

Each named RPC sleeps inside its admitted work, on its worker, before the deadline check — the same
cancellable sleep a real slow read would be (the call's cancellation or deadline ends it early). Health
runs on the event loop and cannot be slowed. The server itself carries no test hook: this wraps
``Service._guarded`` from outside and then runs the ordinary CLI.
"""

from __future__ import annotations

import sys

from flashgnn.serve import server


def parse(spec: str) -> dict[str, float]:
    out = {}
    for part in filter(None, (s.strip() for s in spec.split(","))):
        name, _, secs = part.partition(":")
        if name not in server.RPCS or name == "Health":
            raise SystemExit(f"_slow_serve: {name!r}: expected one of {', '.join(r for r in server.RPCS if r != 'Health')}")
        out[name] = float(secs)
    return out


def main() -> int:
    delays = parse(sys.argv[1])
    guarded = server.Service._guarded

    def slow(self, work, call):
        if call.rpc in delays:
            call.sleep(delays[call.rpc])
        return guarded(self, work, call)

    server.Service._guarded = slow
    print(f"_slow_serve: slowed {delays}", file=sys.stderr, flush=True)
    from flashgnn.cli import main as cli

    return cli(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
