"""libFuzzer target (atheris) for the DFG from the wire: what `Run` and `query run` decode.

The DFG decoder is Python (`flashgnn.dfg.Graph.from_bytes`), so its target runs under atheris, which
instruments the decoder's bytecode for coverage and drives it with libFuzzer, the engine of the Rust
targets beside it. The invariant, for every input:

- `Graph.from_bytes` returns a graph or raises `DFGError` (a `ValueError`, which the server answers
  as INVALID_ARGUMENT); anything else (KeyError, TypeError, RecursionError, MemoryError...) is a
  finding;
- an accepted graph serialises and loads back to the same bytes;
- the server's checks before running anything accept or refuse it with a `ValueError`: `Runner.plan`
  with a 64 MiB request bound on small inputs named as the graph declares them (every node's shape
  inferred, no kernel run).

As in the Rust targets, the first input byte asks for the header's lengths and the CRC to be
recomputed (odd: yes), so the checks behind the checksum are fuzzed, not only the checksum.

Run: `fuzz/run.sh dfg_wire` (or `make fuzz T=dfg_wire`), which passes libFuzzer's flags; by hand:
`.venv/bin/python fuzz/python/dfg_wire.py fuzz/corpus/dfg_wire -max_total_time=60`.
"""

import struct
import sys
import zlib

import atheris

with atheris.instrument_imports(include=["flashgnn.dfg"]):
    import flashgnn.dfg as dfg
    from flashgnn.dfg.graph import _HEADER, _TRAILER

import torch  # noqa: E402  (not instrumented: only the decoder and the planner are under test)

torch.set_num_threads(1)
INPUT_ROWS = 4


class PlanningContext:
    """What a server's sampling context tells the planner (feature width and size, the largest degree);
    it never samples: planning runs no kernel."""

    def sample(self, seeds, fanouts, seed):
        raise AssertionError("planning ran a kernel")

    def sampling_info(self, fanouts):
        return {"feature_dim": 8, "feature_itemsize": 4, "max_degree": 64}


RUNNER = dfg.Runner(context=PlanningContext(), max_request_bytes=64 << 20, bound_name="--max-request-bytes")


def reseal(body: bytes) -> bytes:
    """`body` with its header's JSON/blob lengths made consistent with its size and a fresh CRC."""
    b = bytearray(body)
    if len(b) >= _HEADER.size:
        magic, ver, flags, jl, _ = _HEADER.unpack_from(b, 0)
        jl = min(jl, len(b) - _HEADER.size)
        _HEADER.pack_into(b, 0, magic, ver, flags, jl, len(b) - _HEADER.size - jl)
    return bytes(b) + _TRAILER.pack(zlib.crc32(b))


def inputs_for(g) -> dict:
    """Small values for the graph's declared inputs: node ids for `Batch`, float rows otherwise."""
    out = {}
    for name in g.inputs:
        out[name] = torch.arange(INPUT_ROWS) if name == "Batch" else torch.ones(INPUT_ROWS, 8)
    return out


def test_one_input(data: bytes) -> None:
    if not data:
        return
    blob = reseal(data[1:]) if data[0] & 1 else data[1:]
    try:
        g = dfg.Graph.from_bytes(blob)
    except dfg.DFGError:
        return
    again = g.to_bytes()
    if dfg.Graph.from_bytes(again).to_bytes() != again:
        raise AssertionError("an accepted DFG does not serialise and load back to the same bytes")
    try:
        RUNNER.plan(g, inputs_for(g))
    except ValueError:  # DFGError, ShapeError: the server's INVALID_ARGUMENT
        pass


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
