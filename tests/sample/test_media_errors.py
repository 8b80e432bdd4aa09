"""One unreadable page (FLASHGNN_FAULT_READ: every read of those bytes fails with EIO, as a device reports a
sector it cannot read) costs only what needs it. The memory budget's batch measurement draws smaller
batches that miss the page (scaled up) instead of failing; the cache's static hot set — chosen by one scan of every
slot page and loaded whole at start — leaves the unreadable extents out and says so, instead of failing (a
server then ran without any cache; docs/reliability.md, *Soak*); a batch of seeds away from the page samples
as it does without the fault, and a batch that needs the page fails naming its file and offset.

How: a child process per fault setting (the variable is read once per process)."""

from __future__ import annotations

import json
import subprocess
import sys

import flashgnn
from conftest import cli_env, generated_dataset

CHILD = r"""
import json, sys
import numpy as np
import flashgnn
ds_path, good, bad = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
from flashgnn.sample import budget
cache = flashgnn.Cache(ds_path, [5, 5], 1 << 30)
out = {"static_bytes": cache.stats()["static_bytes"], "batch_bytes": budget.batch_bytes(ds_path, [5, 5], 1024)}
s = flashgnn.Sampler(ds_path, [5, 5], cache=cache)
b = s.sample(np.array(good, dtype=np.int64), seed=7)
out["good"] = [b.n_id.tolist(), b.edge_index.tolist()]
try:
    s.sample(np.array(bad, dtype=np.int64), seed=7)
    out["bad"] = None
except OSError as e:
    out["bad"] = str(e)
print(json.dumps(out))
"""


def _run(ds, good, bad, fault=None):
    env = cli_env(**({"FLASHGNN_FAULT_READ": fault} if fault else {}))
    r = subprocess.run([sys.executable, "-c", CHILD, str(ds), json.dumps(good), json.dumps(bad)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def test_an_unreadable_page_is_left_out_of_the_hot_set(tmp_path):
    ds = generated_dataset(tmp_path, scale=12, dim=16)
    lay = flashgnn.open(ds).layout
    page = lay["page_size"]
    bad_page = 3  # slot page 3 (page 0 is the header)
    per = lay["slots_per_page"]
    bad = [(bad_page - 1) * per + 1]  # a node whose slot is on it
    # Seeds whose two hops never reach that page's nodes.
    d = flashgnn.open(ds)
    on_page = set(range((bad_page - 1) * per, bad_page * per))
    good = [v for v in range(d.num_nodes) if v not in on_page and not on_page & set(d.neighbors(v).tolist())
            and not any(on_page & set(d.neighbors(int(u)).tolist()) for u in d.neighbors(v))][:4]
    assert len(good) == 4
    clean, _ = _run(ds, good, bad)
    faulty, err = _run(ds, good, bad, f"graph.fg@{bad_page * page}+{page}")
    assert clean["bad"] is None and clean["static_bytes"] > 0
    assert faulty["static_bytes"] > 0, "the hot set was loaded, less the unreadable page"
    # The budget's batch measurement draws smaller batches past the page and scales them up (never less).
    assert faulty["batch_bytes"] >= clean["batch_bytes"] * 0.5 and clean["batch_bytes"] > 0
    assert "hot set:" in err and "left out" in err
    assert faulty["good"] == clean["good"], "seeds away from the page sample as without the fault"
    assert faulty["bad"] is not None and "graph.fg" in faulty["bad"] and str(bad_page * page) in faulty["bad"]
