"""GraphRunner memory bounds: a DFG's shapes are inferred and its memory bounded before any kernel runs.

What is proved, and how:

- a memory attack (a ~50 KB DFG: one GEMM of two small params to
  [4096, 8192], then Concats doubling it) is refused before any kernel runs:
  in a fresh subprocess, ``ru_maxrss`` grows by less than the configured
  bound plus a small slack, and a kernel-call counter wrapped around every
  kernel reads 0; the same DFG through the real gRPC ``Run`` is answered
  INVALID_ARGUMENT naming the node, op, inferred shape and bound, and the
  server's peak RSS (VmHWM) stays within the bound plus slack;
- eight more small DFGs of the same class (broadcast outer products,
  batched GEMM, 64-way fan-in, doubling the request's own input, many small
  outputs held together, sampling and SpMM's message matrix) are refused
  before any kernel, and the plan's peak bounds a fresh process's real RSS
  growth on inputs of hundreds of MiB (the bound is real, not nominal);
- the in-flight sum: two runs each under the per-request bound but together
  over the ledger: the second waits (and runs once the first releases) or,
  past its wait, is refused naming the bound, with no kernel run; through
  the server, the second concurrent ``Run`` gets RESOURCE_EXHAUSTED;
- every registered built-in op's shape function agrees with its kernel on
  small inputs (inferred == actual where the spec is exact, within the bound
  where it depends on data, e.g. sampling), and every built-in op has a case;
- an op without a shape function (a plugin op) is refused under a memory
  bound, locally and through the server; a shape function that lies is
  caught when the kernel's real output does not fit.

The suite's counts (cases tried, refused cleanly before any kernel) are
printed in the terminal summary.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import flashgnn.dfg as dfg  # noqa: E402
from flashgnn.dfg import shapes  # noqa: E402

from conftest import SERVE_TOKEN, assert_error, cli_env, generated_dataset  # noqa: E402
from test_dfg import random_subgraph  # noqa: E402

MiB = 1 << 20
BOUND = 64 * MiB  # --max-request-bytes used by the attack tests
SLACK = 24 * MiB  # allocator noise, lazily loaded code paths, the error's traceback
COUNTS = {"tried": 0, "refused": 0, "ran": 0, "inferred_exact": 0, "inferred_bound": 0}


@pytest.fixture(scope="module", autouse=True)
def _report(suite_report):
    yield
    suite_report.append(
        f"dfg memory suite: {COUNTS['tried']} hostile cases tried, {COUNTS['refused']} refused cleanly before any "
        f"kernel, {COUNTS['ran']} ran within their bound; shape inference checked against the kernels: "
        f"{COUNTS['inferred_exact']} outputs equal, {COUNTS['inferred_bound']} within a data-dependent bound")


def refused(cond: bool) -> None:
    COUNTS["tried"] += 1
    COUNTS["refused" if cond else "ran"] += 1


def counting_registry(base=None):
    """The built-in registry (or ``base``) with every kernel wrapped to record its calls."""
    reg = (base or dfg.builtin_registry()).copy()
    calls: list[str] = []
    for name in reg.ops():
        d = reg.op(name)
        for dev, k in list(d.kernels.items()):
            def wrapped(ctx, *a, _k=k, **kw):
                calls.append(ctx.op)
                return _k(ctx, *a, **kw)

            d.kernels[dev] = wrapped
    return reg, calls


def attack_graph(concats: int) -> "dfg.Graph":
    """The attack: GEMM of [4096, 1] @ [1, 8192] params (48 KiB), then Concats doubling the width."""
    g = dfg.Graph()
    g.create_in("Batch")
    x = g.create_op("GEMM", [g.create_param("A", torch.ones(4096, 1)), g.create_param("B", torch.ones(1, 8192))])
    for _ in range(concats):
        x = g.create_op("Concat", [x, x])
    g.create_out("Result", x)
    return g


# ---------------------------------------------------------------------------------------------
# the attack, in a fresh process (peak RSS) and in this one (kernel counter)

ATTACK_CHILD = r"""
import json, resource, sys, torch
import flashgnn.dfg as dfg
bound, path = int(sys.argv[1]), sys.argv[2]
reg, calls = dfg.builtin_registry(), []
for name in reg.ops():  # count every kernel call
    d = reg.op(name)
    for dev, k in list(d.kernels.items()):
        def wrapped(ctx, *a, _k=k, **kw):
            calls.append(ctx.op)
            return _k(ctx, *a, **kw)
        d.kernels[dev] = wrapped
g = dfg.Graph.load(path)  # the request as it would arrive: bytes
# warm-up: the same ops on small inputs, so torch's kernels and allocator are loaded before measuring
w = dfg.Graph()
x = w.create_op("GEMM", [w.create_in("A"), w.create_in("B")])
w.create_out("Y", w.create_op("Concat", [x, x]))
dfg.Runner(reg, max_request_bytes=bound).run(w, {"A": torch.ones(64, 1), "B": torch.ones(1, 64)})
calls.clear()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
err = None
try:
    dfg.Runner(reg, max_request_bytes=bound).run(g, {"Batch": torch.tensor([1])})
except dfg.ShapeError as e:
    err = str(e)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kib": before, "after_kib": after, "kernel_calls": len(calls), "error": err,
                  "dfg_bytes": len(g.to_bytes())}))
"""


@pytest.mark.parametrize("concats", [3, 5])
def test_attack_refused_before_any_kernel_peak_rss_within_bound(concats, suite_report, tmp_path):
    """3 Concats: every value is under MAX_VALUE_ELEMENTS, only the request bound refuses it (peak 1.5 GiB);
    5 Concats: the fourth would be 2^29 elements, refused by the per-value limit — before running too."""
    attack_graph(concats).save(tmp_path / "attack.dfg")
    p = subprocess.run([sys.executable, "-c", ATTACK_CHILD, str(BOUND), str(tmp_path / "attack.dfg")],
                       capture_output=True, text=True, timeout=300, env=cli_env())
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    grew = (r["after_kib"] - r["before_kib"]) * 1024
    suite_report.append(f"dfg memory suite: attack GEMM->[4096, 8192] + {concats} Concats ({r['dfg_bytes']} B DFG): "
                        f"peak RSS {r['before_kib'] // 1024} MiB -> {r['after_kib'] // 1024} MiB, "
                        f"{r['kernel_calls']} kernels ran, bound {BOUND // MiB} MiB")
    refused(r["error"] is not None and r["kernel_calls"] == 0)
    assert r["dfg_bytes"] < 64 * 1024
    assert r["error"] is not None, "the attack ran"
    assert r["kernel_calls"] == 0, f"{r['kernel_calls']} kernels ran before the refusal"
    assert grew <= BOUND + SLACK, f"peak RSS grew {grew / MiB:.0f} MiB > bound {BOUND // MiB} + slack {SLACK // MiB}"
    if concats == 3:
        assert_error(r["error"], "refused before running", "node 4 (Concat on", "float32[4096, 65536]",
                     f"> max_request_bytes {BOUND}")
    else:
        assert_error(r["error"], "node 5 (Concat on", "float32[4096, 131072]", "limit MAX_VALUE_ELEMENTS 268435456",
                     "refused before running")


class _NoSampling:
    """Reports sizes but must never be asked to sample (the plan refuses first)."""

    def sample(self, seeds, fanouts, seed):
        raise AssertionError("sampled before the plan refused")

    def sampling_info(self, fanouts):
        return {"feature_dim": 128, "feature_itemsize": 4}


def _hostile(kind: str):
    """(graph, inputs, fragment of the error naming the node/op/shape) — each a small DFG asking for > 64 MiB."""
    g = dfg.Graph()
    batch = g.create_in("Batch")
    feed = {"Batch": torch.arange(4)}
    if kind == "outer-product":
        y = g.create_op("ElementWise", [g.create_param("A", torch.ones(4096, 1)),
                                        g.create_param("B", torch.ones(1, 8192))], attrs={"op": "mul"})
        frag = "node 1 (ElementWise on"
    elif kind == "broadcast-3d":
        y = g.create_op("Add", [g.create_param("A", torch.ones(4096, 1, 1)), g.create_param("B", torch.ones(1, 4096))])
        frag = "float32[4096, 1, 4096]"
    elif kind == "gemm-batch-broadcast":
        y = g.create_op("GEMM", [g.create_param("A", torch.ones(32, 1, 128, 1)),
                                 g.create_param("B", torch.ones(1, 64, 1, 128))])
        frag = "float32[32, 64, 128, 128]"
    elif kind == "gemm-expand-copy":  # a 2 MiB output, but matmul copies A expanded to [8 * 1024, 64, 128]
        a = g.create_op("Add", [g.create_param("A0", torch.ones(8, 1, 64, 1)), g.create_param("A1", torch.ones(128))])
        b = g.create_op("Add", [g.create_param("B0", torch.ones(1, 1024, 1, 1)), g.create_param("B1", torch.ones(128, 1))])
        y = g.create_op("GEMM", [a, b])
        frag = "node 3 (GEMM on"
    elif kind == "concat-fan-in":
        x = g.create_op("GEMM", [g.create_param("A", torch.ones(256, 1)), g.create_param("B", torch.ones(1, 1024))])
        y = g.create_op("Concat", [x] * 64, attrs={"dim": 0})
        frag = "node 2 (Concat on"
    elif kind == "doubling-the-input":  # no params at all: the request's own 4 ids, doubled 22 times
        y = batch
        for _ in range(22):
            y = g.create_op("Concat", [y, y], attrs={"dim": 0})
        frag = "int64[16777216]"
    elif kind == "many-live-outputs":  # each value is small; together, all held to the end, they are not
        a = g.create_op("GEMM", [g.create_param("A", torch.ones(256, 1)), g.create_param("B", torch.ones(1, 1024))])
        for i in range(80):
            g.create_out(f"O{i}", g.create_op("Sigmoid", [a]))  # 1 MiB each
        y = g.create_op("Tanh", [a])
        frag = "node 82 (Tanh on"
    elif kind == "sampling":  # 4096 targets x (1 + 100 + 100^2) nodes x 128 features
        sub, x = g.create_op("BatchPre", [batch], attrs={"fanouts": [100, 100]})
        y = g.create_op("Take", [x, sub])
        feed = {"Batch": torch.arange(4096)}
        frag = "node 1 (BatchPre on"
    elif kind == "spmm-messages":  # small output, but SpMM's [E, D] message matrix is the peak
        sub, x = g.create_op("BatchPre", [batch], attrs={"fanouts": [60]})
        y = g.create_op("Reduce", [g.create_op("SpMM_Sum", [sub, x])], attrs={"dim": 0})
        feed = {"Batch": torch.arange(2048)}
        frag = "node 2 (SpMM_Sum on"
    g.create_out("Result", y)
    return dfg.Graph.from_bytes(g.to_bytes()), feed, frag


HOSTILE = ["outer-product", "broadcast-3d", "gemm-batch-broadcast", "gemm-expand-copy", "concat-fan-in", "doubling-the-input",
           "many-live-outputs", "sampling", "spmm-messages"]


@pytest.mark.parametrize("kind", HOSTILE)
def test_hostile_dfgs_refused_before_any_kernel(kind):
    """Other small DFGs that ask for more memory than they carry: broadcasting, batched GEMM, fan-in, doubling
    the request's own input, many small outputs held together, sampling and its message matrix."""
    reg, calls = counting_registry()
    g, feed, frag = _hostile(kind)
    assert len(g.to_bytes()) < 64 * 1024
    with pytest.raises(dfg.ShapeError) as e:
        dfg.Runner(reg, context=_NoSampling(), max_request_bytes=BOUND).run(g, feed)
    refused(calls == [])
    assert calls == [], f"kernels ran before the refusal: {calls}"
    assert_error(e, frag, "refused before running")
    assert f"> max_request_bytes {BOUND}" in str(e.value) or "limit MAX_VALUE_ELEMENTS" in str(e.value)


GEMM_CHILD = r"""
import json, resource, sys, torch
import flashgnn.dfg as dfg
sa, sb = json.loads(sys.argv[1])
g = dfg.Graph()
g.create_out("Y", g.create_op("GEMM", [g.create_in("A"), g.create_in("B")]))
r = dfg.Runner(output_device=None)
feed = {"A": torch.ones(*sa), "B": torch.ones(*sb)}
r.run(g, {"A": torch.ones(*[min(x, 2) for x in sa]), "B": torch.ones(*[min(x, 2) for x in sb])})  # warm-up
plan = r.plan(g, feed)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
r.run(g, feed, plan=plan)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"grew": after - before, "peak": plan.peak_bytes, "inputs": plan.input_bytes}))
"""


@pytest.mark.parametrize("sa, sb", [([8, 1, 64, 128], [1, 512, 128, 1]), ([8, 64, 64, 128], [1, 1, 128, 64]),
                                    ([512, 256, 256], [256, 4])])
def test_batched_gemm_plan_bounds_the_copies_matmul_makes(sa, sb):
    """torch.matmul with batch dimensions on both sides expands and reshapes its operands: when an operand's own
    batch dimension meets a broadcast one, that is a copy of the *expanded* operand (256 MiB for a 1 MiB output
    in the first case). The plan counts it: a fresh process's peak RSS grows by no more than the plan's peak,
    and folding cases (a 2-D operand) are not over-counted into a refusal."""
    p = subprocess.run([sys.executable, "-c", GEMM_CHILD, json.dumps([sa, sb])], capture_output=True, text=True,
                       env=cli_env(), timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    budget = r["peak"] - r["inputs"]
    assert r["grew"] <= budget + SLACK, f"peak RSS grew {r['grew'] / MiB:.0f} MiB > plan {budget / MiB:.0f} MiB"
    assert budget <= 4 * max(r["grew"], 64 * MiB), f"plan {budget / MiB:.0f} MiB far above the real {r['grew'] / MiB:.0f}"


def test_plan_bounds_and_liveness_of_the_attack():
    """The plan's figures for the attack: values freed after their last reader (peak = the last Concat's input
    and output), versus the no-freeing sum; a Slice view keeps its base alive."""
    reg, calls = counting_registry()
    p = dfg.Runner(reg).plan(attack_graph(3), {"Batch": torch.tensor([1])})
    assert calls == []
    sizes = [128 * MiB, 256 * MiB, 512 * MiB, 1024 * MiB]
    assert [n.outputs[0].nbytes for n in p.nodes] == sizes
    assert p.peak_bytes == 8 + sizes[2] + sizes[3] and p.peak_seq == 4
    assert p.sum_bytes == 8 + sum(sizes)
    # a 1-row Slice of a large value keeps all of it alive until the Slice's reader is done
    g = dfg.Graph()
    x = g.create_op("ReLU", [g.create_in("X")])
    s = g.create_op("Slice", [x], attrs={"stop": 1})
    g.create_out("Y", g.create_op("Tanh", [g.create_op("Sigmoid", [s])]))
    p = dfg.Runner().plan(g, {"X": torch.ones(1000, 100)})
    x_b, row = 400_000, 400  # X (held all run) and ReLU's output are 400,000 bytes each; one row is 400
    assert [n.live_bytes for n in p.nodes] == [
        2 * x_b,  # ReLU: X + its output
        2 * x_b,  # Slice: a view, no new bytes, but ReLU's output stays alive
        2 * x_b + row,  # Sigmoid reads the view: ReLU's output is still alive while it runs
        x_b + 2 * row,  # Tanh: ReLU's output (and the view) are gone
    ]


REAL_CHILD = r"""
import json, resource, sys, torch
import flashgnn.dfg as dfg
case = sys.argv[1]
gen = torch.Generator().manual_seed(0)


def graph(ops):  # [(op, [input refs or names], attrs)] -> Graph with inputs S, X, W, B and output Y
    g = dfg.Graph()
    names = {n: g.create_in(n) for n in ("S", "X", "W", "B")}
    h = None
    for op, ins, attrs in ops:
        h = g.create_op(op, [names[i] if i in names else h for i in ins], attrs=attrs)
    g.create_out("Y", h)
    return g


def inputs(n, e, d):
    col = torch.randint(0, n // 4, (e,), generator=gen)
    row = torch.randint(0, n, (e,), generator=gen)
    sub = dfg.SubGraph(torch.arange(n), torch.stack([row, col]), [n // 4, n - n // 4], [e], n // 4)
    return {"S": sub, "X": torch.randn(n, d, generator=gen), "W": torch.randn(d, 4 * d, generator=gen),
            "B": torch.randn(4 * d, generator=gen)}


CASES = {
    "spmm_mean": [("SpMM_Mean", ["S", "X"], {})],
    "gcn_spmm": [("GCNNorm", ["S"], {}), ("SpMM_Sum", [None, "X"], {})],
    "sddmm": [("SDDMM", ["S", "X", "X"], {"op": "dot"})],
    "gemm_concat": [("GEMM", ["X", "W", "B"], {}), ("Concat", [None, None], {}), ("ReLU", [None], {})],
    "normalize": [("L2Normalize", ["X"], {}), ("Softmax", [None], {"dim": 0}), ("Tanh", [None], {})],
}
g = graph(CASES[case])
r = dfg.Runner(output_device=None)
r.run(g, inputs(64, 256, 8))  # warm-up: the same kernels on small inputs
big = inputs(200_000, 500_000, 64)
plan = r.plan(g, big)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
out = r.run(g, big, plan=plan)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"grew": after - before, "peak": plan.peak_bytes, "inputs": plan.input_bytes}))
"""


def test_plan_peak_bounds_the_real_memory(suite_report):
    """The bound is real: for aggregation, normalisation, SDDMM and dense chains on inputs of hundreds of MiB,
    a fresh process's peak RSS grows by no more than the plan's peak (less the inputs it already held)."""
    cases = ["spmm_mean", "gcn_spmm", "sddmm", "gemm_concat", "normalize"]
    procs = {c: subprocess.Popen([sys.executable, "-c", REAL_CHILD, c], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=cli_env()) for c in cases}
    lines = []
    for c, p in procs.items():
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        r = json.loads(out.strip().splitlines()[-1])
        budget = r["peak"] - r["inputs"]
        lines.append(f"{c} {r['grew'] / MiB:.0f}/{budget / MiB:.0f} MiB")
        assert r["grew"] <= budget + SLACK, f"{c}: peak RSS grew {r['grew'] / MiB:.0f} MiB > plan {budget / MiB:.0f} MiB"
    suite_report.append("dfg memory suite: real peak RSS growth / planned peak (less inputs): " + ", ".join(lines))


# ---------------------------------------------------------------------------------------------
# the in-flight sum


def _hold_registry():
    """Built-ins plus "Hold": identity-shaped, its kernel blocks until the test releases it."""
    reg, calls = counting_registry()
    gate = threading.Event()
    entered = threading.Event()

    def hold(ctx, x, **attrs):
        entered.set()
        assert gate.wait(30)
        return x * 2

    reg.register_op("Hold", "CPU", hold, arity=1,
                    shape=lambda sctx, x, **attrs: shapes.TensorSpec(x.shape, x.dtype, x.exact))
    return reg, calls, gate, entered


def _hold_graph():
    g = dfg.Graph()
    g.create_out("Y", g.create_op("Hold", [g.create_in("X")]))
    return g


def test_inflight_bytes_sum_bound_waits_or_refuses():
    reg, calls, gate, entered = _hold_registry()
    x = torch.ones(256, 1024)  # 1 MiB; the plan's peak is input + output = 2 MiB
    g = _hold_graph()
    need = dfg.Runner(reg).plan(g, {"X": x}).peak_bytes
    assert need == 2 * MiB
    ledger = dfg.ByteLedger(3 * MiB, "--max-inflight-bytes")  # one fits, two do not
    results = {}

    def run_a():
        results["a"] = dfg.Runner(reg, max_request_bytes=2 * MiB, ledger=ledger).run(g, {"X": x})["Y"]

    a = threading.Thread(target=run_a)
    a.start()
    assert entered.wait(30)
    assert ledger.used == need and ledger.holders == 1
    # B is under the per-request bound, but A + B is over the sum: refused after its wait, nothing ran
    n_calls = len(calls)
    with pytest.raises(dfg.LedgerFull) as e:
        dfg.Runner(reg, max_request_bytes=2 * MiB, ledger=ledger, ledger_wait_s=0.2).run(g, {"X": x})
    refused(len(calls) == n_calls)
    assert len(calls) == n_calls
    assert_error(e, f"needs {need} bytes", f"{need} of --max-inflight-bytes {3 * MiB} are reserved by 1 run(s)",
                 "retry later")
    # C waits instead, and runs once A gives its bytes back
    def run_c():
        results["c"] = dfg.Runner(reg, ledger=ledger, ledger_wait_s=30).run(g, {"X": x})["Y"]

    c = threading.Thread(target=run_c)
    c.start()
    deadline = time.monotonic() + 30
    while ledger.waited < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ledger.waited == 2 and "c" not in results  # B and C both had to wait
    gate.set()
    a.join(30)
    c.join(30)
    assert torch.equal(results["a"], x * 2) and torch.equal(results["c"], x * 2)
    refused(False)  # C: tried, waited for room, ran within the sum
    assert ledger.used == 0 and ledger.holders == 0
    # a reservation larger than the whole ledger is refused at once (waiting could not help)
    with pytest.raises(dfg.LedgerFull) as e:
        dfg.ByteLedger(MiB, "--max-inflight-bytes").acquire(2 * MiB, 30, "Run")
    refused(True)
    assert_error(e, f"needs {2 * MiB} bytes at its peak > --max-inflight-bytes {MiB}")


def test_ledger_released_when_a_kernel_fails():
    reg, calls = counting_registry()
    ledger = dfg.ByteLedger(MiB)
    g = dfg.Graph()
    g.create_out("Y", g.create_op("Take", [g.create_in("X"), g.create_in("I")]))
    with pytest.raises(dfg.NodeError, match="outside 0..1"):  # data-dependent: only the kernel can see it
        dfg.Runner(reg, ledger=ledger).run(g, {"X": torch.ones(2, 2), "I": torch.tensor([5])})
    assert calls == ["Take"] and ledger.used == 0 and ledger.holders == 0


# ---------------------------------------------------------------------------------------------
# shape functions against the real kernels


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    return generated_dataset(tmp_path_factory.mktemp("dfgmem"), scale=10, edge_factor=8, dim=16, classes=4, seed=5,
                             split=(0.3, 0.1, 0.6))


_subgraph = random_subgraph  # the synthetic 2-hop subgraph test_dfg.py builds


def _cases():
    """(op, inputs, attrs) covering every built-in op but BatchPre (which needs a dataset, below)."""
    gen = torch.Generator().manual_seed(7)
    a, b = torch.randn(4, 3, generator=gen), torch.randn(3, 5, generator=gen)
    a3 = torch.randn(2, 4, 3, generator=gen)
    sub, x = _subgraph()
    i32 = torch.tensor([[1, 2, 3]], dtype=torch.int32)
    return [
        ("GEMM", [a, b], {}), ("GEMM", [a, b.t().contiguous()], {"transpose_b": True}),
        ("GEMM", [a.t().contiguous(), b], {"transpose_a": True, "transpose_b": False}),
        ("GEMM", [a, b, torch.ones(5)], {}), ("GEMM", [a3, b], {}), ("GEMM", [a, b[:, 0].contiguous()], {}),
        ("GEMM", [a[0].contiguous(), b], {}), ("GEMM", [a[0].contiguous(), a[1].contiguous()], {}),
        ("ElementWise", [a, torch.tensor([2.0])], {"op": "mul"}), ("ElementWise", [a3, a], {"op": "max"}),
        ("ElementWise", [i32, i32], {"op": "div"}), ("ElementWise", [i32, torch.ones(2, 1)], {"op": "sub"}),
        ("Add", [a, torch.ones(3, dtype=torch.float64)], {}), ("Add", [i32, i32], {}),
        ("Bias", [a3, torch.ones(3)], {}),
        ("ReLU", [a], {}), ("ReLU", [i32], {}), ("LeakyReLU", [a3], {"negative_slope": 0.3}), ("Sigmoid", [i32], {}),
        ("Tanh", [a], {}),
        ("Reduce", [a], {"op": "max", "dim": 1}), ("Reduce", [a3], {"op": "mean", "dim": -1, "keepdim": True}),
        ("Reduce", [i32], {"op": "sum", "dim": 1}), ("Reduce", [torch.tensor(3.0)], {"op": "sum"}),
        ("Slice", [a], {"start": 1, "stop": 3}), ("Slice", [a3], {"start": 1, "dim": 2}),
        ("Take", [a, torch.tensor([3, 0, 3])], {}), ("Take", [x, sub], {}),
        ("Concat", [a, a, a], {}), ("Concat", [a, b.t()], {"dim": 0}), ("Concat", [a, a.double()], {}),
        ("Softmax", [a], {"dim": 0}), ("LogSoftmax", [a3], {}), ("L2Normalize", [a3], {"dim": 1}),
        ("SpMM_Sum", [sub, x], {}), ("SpMM_Sum", [sub, x], {"layer": 1}), ("SpMM_Mean", [sub, x], {"layer": 0}),
        ("GCNNorm", [sub], {"layer": 1}), ("GCNNorm", [sub], {"self_loops": False}),
        ("SDDMM", [sub, x, x], {}), ("SDDMM", [sub, x, x], {"op": "mul", "layer": 1}),
        ("SDDMM", [sub, x, x[:, :1]], {"op": "add"}),
        ("Trim", [sub, x], {"layer": 1}), ("Trim", [sub, x], {}),
        ("Features", [dfg.SubGraph(sub.n_id, sub.edge_index, sub.num_sampled_nodes, sub.num_sampled_edges, 4, x)], {}),
    ]


def _compare(spec, real) -> None:
    """inferred == actual where the spec is exact; within its bounds where it is not."""
    assert shapes.fits(real, spec) is None, shapes.fits(real, spec)
    if isinstance(spec, shapes.TensorSpec):
        if spec.exact:
            assert (tuple(real.shape), real.dtype) == (spec.shape, spec.dtype), (spec, real.shape, real.dtype)
            COUNTS["inferred_exact"] += 1
        else:
            COUNTS["inferred_bound"] += 1
    else:
        assert real.batch_size == spec.batch_size
        if spec.exact:
            assert (real.num_nodes, real.edge_index.shape[1]) == (spec.num_nodes, spec.num_edges)
            COUNTS["inferred_exact"] += 1
        else:
            COUNTS["inferred_bound"] += 1


def _plan_and_run(op, inputs, attrs, registry=None, context=None):
    g = dfg.Graph()
    hs = [g.create_in(f"in{i}") for i in range(len(inputs))]
    out = g.create_op(op, hs, attrs=attrs)
    outs = out if isinstance(out, tuple) else (out,)
    for k, h in enumerate(outs):
        g.create_out(f"Out{k}", h)
    r = dfg.Runner(registry=registry, context=context, output_device=None)
    feed = {f"in{i}": v for i, v in enumerate(inputs)}
    p = r.plan(g, feed)
    res = r.run(g, feed, plan=p)
    return [(p.specs[h.ref], res[f"Out{k}"]) for k, h in enumerate(outs)]


def test_shape_inference_equals_every_builtin_kernel(ds_path):
    reg = dfg.builtin_registry()
    covered = set()
    for op, inputs, attrs in _cases():
        for spec, real in _plan_and_run(op, inputs, attrs, registry=reg):
            _compare(spec, real)
        covered.add(op)
    # BatchPre: the worst case B * (1 + f1 + f1 f2) nodes, features [N, F] in the attr's dtype
    seeds = torch.arange(0, 400, 13)
    ctx = dfg.SamplerContext(ds_path)
    for fanouts, dtype in (([4, 2], "float32"), ([3], "float64"), ([0], "float32")):
        (ss, sub), (xs, x) = _plan_and_run("BatchPre", [seeds], {"fanouts": fanouts, "dtype": dtype}, reg, ctx)
        per = 1 + sum(math.prod(fanouts[:i + 1]) for i in range(len(fanouts)))
        assert ss.num_nodes == len(seeds) * per and xs.shape == (len(seeds) * per, 16)
        assert ss.hop_nodes[0] == len(seeds) and x.dtype == getattr(torch, dtype)
        _compare(ss, sub)
        _compare(xs, x)
        assert xs.exact == (fanouts == [0])
    covered.add("BatchPre")
    assert covered == set(reg.ops()), f"ops without a shape test case: {sorted(set(reg.ops()) - covered)}"
    assert all(reg.op(o).shape is not None for o in reg.ops())


def test_builtin_models_plan_within_their_bounds(ds_path):
    """Each built-in DFG on a real batch: every node's real output fits its inferred spec (the runner checks)
    and the sampled sizes are within the plan's bounds."""
    from torch_geometric.nn import GCN, GraphSAGE

    ctx = dfg.SamplerContext(ds_path)
    seeds = torch.arange(0, 520, 13)
    for g in (dfg.models.gcn(GCN(16, 12, 2, 4).state_dict(), [5, 3]),
              dfg.models.sage(GraphSAGE(16, 12, 2, 4).state_dict(), [5, 3])):
        r = dfg.Runner(context=ctx, max_request_bytes=64 * MiB)
        out = r.run(g, {"Batch": seeds})["Result"]
        assert out.shape == (len(seeds), 4)
        plan = r.last_plan
        assert plan.bounded and 0 < plan.peak_bytes <= plan.sum_bytes <= 64 * MiB * 4
        assert plan.specs[g.outputs["Result"]].shape == (len(seeds), 4)


# ---------------------------------------------------------------------------------------------
# ops without a shape function, and shape functions that lie

NOSHAPE_PLUGIN = '''
def double(ctx, x, **attrs):
    return x.repeat(2, 1)

def register(registry):
    registry.register_op("Double", "CPU", double, arity=1, doc="rows twice, no shape function")
'''


def _double_graph():
    g = dfg.Graph()
    g.create_in("Batch")
    r = g.create_op("Reduce", [g.create_in("X")], attrs={"dim": 0, "keepdim": True})
    g.create_out("Result", g.create_op("Double", [r]))
    return g


def test_plugin_op_without_shape_refused_under_a_bound():
    base = dfg.builtin_registry()
    dfg.load_plugin_source("noshape", NOSHAPE_PLUGIN, registry=base)
    reg, calls = counting_registry(base)
    g = dfg.Graph.from_bytes(_double_graph().to_bytes())
    feed = {"Batch": torch.tensor([1]), "X": torch.ones(3, 4)}
    with pytest.raises(dfg.ShapeError) as e:
        dfg.Runner(reg, max_request_bytes=MiB).run(g, feed)
    refused(calls == [])
    assert calls == [], "a kernel ran before the refusal"
    assert_error(e, "node 2 (Double on CPU)", "refused before running", "op Double has no shape function")
    # without a bound (a local, trusted caller) it runs; its output is unknown to the plan
    assert dfg.Runner(reg).run(g, feed)["Result"].shape == (2, 4)
    assert [(seq, op) for seq, op, _ in dfg.Runner(reg).plan(g, feed).unknown] == [(2, "Double")]
    # with a shape function it runs under the bound, and its output is checked against it
    reg.register_shape("Double", lambda sctx, x: shapes.TensorSpec((2 * x.shape[0], *x.shape[1:]), x.dtype, x.exact))
    calls.clear()
    assert dfg.Runner(reg, max_request_bytes=MiB).run(g, feed)["Result"].shape == (2, 4)
    assert calls == ["Reduce", "Double"]


def test_lying_shape_function_is_caught_at_runtime():
    base = dfg.builtin_registry()
    base.register_op("Grow", "CPU", lambda ctx, x: torch.zeros(1000, 1000), arity=1,
                     shape=lambda sctx, x: shapes.TensorSpec((1, 1), torch.float32))
    reg, calls = counting_registry(base)
    g = dfg.Graph()
    g.create_out("Y", g.create_op("ReLU", [g.create_op("Grow", [g.create_in("X")])]))
    with pytest.raises(dfg.NodeError) as e:
        dfg.Runner(reg, max_request_bytes=MiB).run(g, {"X": torch.ones(1)})
    assert_error(e, "node 1 (Grow on CPU): output 0 is float32[1000, 1000], which does not fit its inferred "
                    "float32[1, 1]", "shape function is wrong")
    assert calls == ["Grow"]  # the value never reached ReLU
    # a plugin kernel for a built-in op is held to the op's shape function
    reg.register_device("Liar", 300)
    reg.register_op("GEMM", "Liar", lambda ctx, a, b, bias=None: torch.ones(a.shape[0] + 1, b.shape[1]), arity=(2, 3))
    with pytest.raises(dfg.NodeError) as e:
        one = dfg.Graph()
        one.create_out("Y", one.create_op("GEMM", [one.create_in("A"), one.create_in("B")]))
        dfg.Runner(reg).run(one, {"A": torch.ones(2, 3), "B": torch.ones(3, 4)})
    assert_error(e, "node 1 (GEMM on Liar): output 0 is float32[3, 4], which does not fit its inferred float32[2, 4]")


def test_unbounded_sampling_refused_under_a_bound(ds_path):
    """Fanout -1 (all neighbours) has no bound without a degree bound, and a sampling context that does not
    report its feature width leaves X unbounded: both refused under a bound, both run without one."""
    g = dfg.Graph()
    sub, x = g.create_op("BatchPre", [g.create_in("Batch")], attrs={"fanouts": [-1]})
    g.create_out("X", x)
    seeds = {"Batch": torch.arange(4)}
    reg, calls = counting_registry()
    ctx = dfg.SamplerContext(ds_path)
    with pytest.raises(dfg.ShapeError) as e:
        dfg.Runner(reg, context=ctx, max_request_bytes=MiB).run(g, seeds)
    refused(calls == [])
    assert_error(e, "node 1 (BatchPre on CPU): refused before running", "fanouts[0] = -1 (all neighbours) has no bound")
    assert dfg.Runner(reg, context=ctx).run(g, seeds)["X"].shape[1] == 16

    class Opaque:  # samples, but says nothing about sizes
        def sample(self, seeds, fanouts, seed):
            return ctx.sample(seeds, fanouts, seed)

    g2 = dfg.Graph()
    g2.create_out("X", g2.create_op("BatchPre", [g2.create_in("Batch")], attrs={"fanouts": [2]})[1])
    with pytest.raises(dfg.ShapeError) as e:
        dfg.Runner(reg, context=Opaque(), max_request_bytes=MiB).run(g2, seeds)
    refused(True)
    assert_error(e, "node 1 (BatchPre on CPU)", "does not report feature_dim")


@pytest.mark.parametrize("op, inputs, attrs, frag", [
    ("GEMM", [torch.ones(2, 5), torch.ones(3, 4)], {}, "shapes [2, 5] @ [3, 4] do not chain"),
    ("GEMM", [torch.ones(2, 3), torch.ones(3, 4, dtype=torch.float64)], {}, "dtypes float32 @ float64 differ"),
    ("ElementWise", [torch.ones(2, 3), torch.ones(4)], {"op": "add"}, "shapes [2, 3] and [4] do not broadcast"),
    ("Concat", [torch.ones(2, 3), torch.ones(3, 3)], {}, "do not concatenate along -1"),
    ("Bias", [torch.ones(2, 3), torch.ones(2)], {}, "bias of shape [2]"),
    ("Slice", [torch.ones(4, 2)], {"start": 9}, "attr start = 9"),
    ("Reduce", [torch.ones(0, 2)], {"op": "max"}, "max over an empty dimension 0"),
    ("ReLU", [torch.ones(2)], {"inplace": True}, "unknown attr(s) inplace"),
])
def test_static_errors_refused_before_any_kernel(op, inputs, attrs, frag):
    reg, calls = counting_registry()
    g = dfg.Graph()
    g.create_out("Y", g.create_op(op, [g.create_in(f"in{i}") for i in range(len(inputs))], attrs=attrs))
    with pytest.raises(dfg.ShapeError) as e:
        dfg.Runner(reg).run(g, {f"in{i}": v for i, v in enumerate(inputs)})
    refused(calls == [])
    assert calls == []
    assert_error(e, f"node 1 ({op} on CPU): ", frag, "inferred before running")


def test_limits_flags_and_defaults():
    """--max-request-bytes / --max-inflight-bytes: parsed as sizes, defaults 1 GiB / 4 GiB, and a per-request
    bound above the in-flight sum (a request that could never run) is refused at start."""
    import argparse

    from flashgnn.cli import parse_size
    from flashgnn.serve.cli import add_parsers
    from flashgnn.serve.limits import Limits

    d = Limits()
    assert (d.max_request_bytes, d.max_inflight_bytes) == (1 << 30, 4 << 30)
    d.check()
    p = argparse.ArgumentParser()
    add_parsers(p.add_subparsers(dest="cmd"), parse_size)
    a = p.parse_args(["serve", "ds", "--token-file", "t", "--max-request-bytes", "64MiB", "--max-inflight-bytes", "1G"])
    assert (a.max_request_bytes, a.max_inflight_bytes) == (64 * MiB, 1 << 30)
    with pytest.raises(ValueError) as e:
        Limits(max_request_bytes=2 << 30, max_inflight_bytes=1 << 30).check()
    assert_error(e, "--max-request-bytes 2147483648 > --max-inflight-bytes 1073741824")
    with pytest.raises(ValueError, match="--max-request-bytes: 0 < 1"):
        Limits(max_request_bytes=0).check()


# ---------------------------------------------------------------------------------------------
# through the real gRPC server

grpc = pytest.importorskip("grpc")
TOKEN = SERVE_TOKEN


@pytest.fixture(scope="module")
def base_dataset(tmp_path_factory) -> Path:
    return generated_dataset(tmp_path_factory.mktemp("servemem"), scale=9, edge_factor=8, dim=8, classes=4, seed=3)


def _hwm_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_server_run_refuses_the_attack_before_any_kernel(server, suite_report):
    from torch_geometric.nn import GCN

    from flashgnn.serve.client import Client, ServerError

    srv = server("--max-request-bytes", "64MiB", "--max-inflight-bytes", "128MiB", "--allow-plugins")
    with Client(srv.address, token=TOKEN) as c:
        torch.manual_seed(0)
        warm = dfg.models.gcn(GCN(8, 16, 2, 4).state_dict(), [5, 3])
        assert c.run(warm, [1, 2, 3])["Result"].shape == (3, 4)  # a real request still runs under the bound
        limits = c.stats()["limits"]
        assert limits["max_request_bytes"] == 64 * MiB and limits["max_inflight_bytes"] == 128 * MiB
        before = _hwm_bytes(srv.proc.pid)
        for concats in (0, 3):
            blob = attack_graph(concats).to_bytes()
            assert len(blob) < 64 * 1024
            with pytest.raises(ServerError) as e:
                c.run(blob, [1])
            refused(e.value.code_name == "INVALID_ARGUMENT")
            assert e.value.code_name == "INVALID_ARGUMENT"
            if concats == 0:  # the GEMM alone (128 MiB) is over the bound
                assert_error(e.value.details(), "node 1 (GEMM on", "float32[4096, 8192]",
                             "> --max-request-bytes 67108864", "refused before running")
            else:
                assert_error(e.value.details(), "node 4 (Concat on", "float32[4096, 65536]",
                             "> --max-request-bytes 67108864")
        after = _hwm_bytes(srv.proc.pid)
        suite_report.append(f"dfg memory suite: server VmHWM {before // MiB} MiB -> {after // MiB} MiB across the "
                            f"attack Runs (bound --max-request-bytes 64 MiB)")
        assert after - before <= BOUND + SLACK, f"server peak RSS grew {(after - before) / MiB:.0f} MiB"
        # a plugin op without a shape function is refused for a network-submitted DFG
        c.plugin("noshape", NOSHAPE_PLUGIN)
        with pytest.raises(ServerError) as e:
            c.run(_double_graph_batch_only(), [1])
        refused(e.value.code_name == "INVALID_ARGUMENT")
        assert_error(e.value.details(), "(Double on CPU)", "no shape function")
        assert c.run(warm, [4])["Result"].shape == (1, 4)


def _double_graph_batch_only():
    g = dfg.Graph()
    b = g.create_in("Batch")
    g.create_out("Result", g.create_op("Double", [g.create_op("Reduce", [b], attrs={"dim": 0, "keepdim": True})]))
    return g


SLOW_PLUGIN = '''
import time
import torch
from flashgnn.dfg.shapes import TensorSpec

def slow(ctx, batch, rows=1, cols=1, sleep=0.0):
    time.sleep(sleep)
    return torch.zeros(rows, cols)

def slow_shape(sctx, batch, rows=1, cols=1, sleep=0.0):
    return TensorSpec((rows, cols), torch.float32)

def register(registry):
    registry.register_op("Slow", "CPU", slow, arity=1, shape=slow_shape, doc="zeros after a sleep")
'''


def test_server_inflight_bytes_bound_across_concurrent_runs(server):
    """Each Run needs ~32 MiB (under --max-request-bytes 48MiB); two together are over --max-inflight-bytes
    64MiB: while the first holds its bytes, the second waits its 1 s and is refused RESOURCE_EXHAUSTED."""
    from flashgnn.serve.client import Client, ServerError

    srv = server("--max-request-bytes", "48MiB", "--max-inflight-bytes", "64MiB", "--allow-plugins")
    g = dfg.Graph()
    x = g.create_op("Slow", [g.create_in("Batch")], attrs={"rows": 1024, "cols": 8192, "sleep": 4.0})
    g.create_out("Result", g.create_op("Reduce", [x], attrs={"dim": 0}))
    fast = dfg.Graph()
    y = fast.create_op("Slow", [fast.create_in("Batch")], attrs={"rows": 1024, "cols": 8192, "sleep": 0.0})
    fast.create_out("Result", fast.create_op("Reduce", [y], attrs={"dim": 0}))
    got = {}
    with Client(srv.address, token=TOKEN) as c1, Client(srv.address, token=TOKEN) as c2:
        c1.plugin("slow", SLOW_PLUGIN)
        assert c1.run(fast, [1])["Result"].shape == (8192,)  # alone it fits

        def first():
            got["first"] = c1.run(g, [1])["Result"].shape

        t = threading.Thread(target=first)
        t.start()
        time.sleep(1.0)  # the first Run has planned and reserved its bytes by now; it sleeps 4 s holding them
        with pytest.raises(ServerError) as e:
            c2.run(fast, [2])
        t.join(60)
        refused(e.value.code_name == "RESOURCE_EXHAUSTED")
        assert e.value.code_name == "RESOURCE_EXHAUSTED"
        assert_error(e.value.details(), "--max-inflight-bytes 67108864", "reserved by 1 run(s)", "retry later")
        assert got["first"] == (8192,)
        assert c2.run(fast, [2])["Result"].shape == (8192,)  # room again once the first finished
        assert c1.stats()["rejected"].get("memory") == 1
