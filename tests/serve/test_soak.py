"""A short run of `make soak` (benchmarks/soak.py): a real server under load — unit reads, durable writes,
`Run` — with background scrub and compaction, one unreadable 4 KiB page of graph.fg (FLASHGNN_FAULT_READ)
until it is repaired late in the run and, where the test may loop-mount an ext4 image, the file system
filled to its last block and freed again. Asserted: no acknowledged write lost after a restart; reads go on
while the disk is full; writes fail there with RESOURCE_EXHAUSTED and resume once space is freed, without a
restart; the bad page fails exactly the reads of the nodes on it and `Run`s that need it, naming it, and
nothing after its repair; the scrubber reports that page alone; no compaction succeeds while the page cannot
be read, and one does after; nothing is stuck past its deadline. The ten-minute run with the memory figures
is `make soak` (docs/reliability.md, *Soak*)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from benchmarks.soak import soak  # noqa: E402


def test_short_soak_keeps_every_invariant(tmp_path):
    clients = {"get_neighbors": 1, "get_embed": 1, "add_edge": 2, "run": 1}
    r = soak(tmp_path, minutes=0.4, scale=12, clients=clients, scrub_rate="20MB/s", compact_delta="64KiB")
    assert r["bad_nodes"] > 0, "the bad page holds some slots"
    assert r["lost_acknowledged_writes"] == 0 and r["acknowledged_writes"] > 100
    assert r["wrong_answers"] == 0, r["wrong_examples"]
    assert r["stuck_requests"] == 0 and r["in_flight_at_end"] == 0
    phases = r["phases"]
    page = int(r["bad_sector"].split("@")[1].split("+")[0])
    assert r["scrub_damage_seen"] == [("graph.fg", "read", page)], r["scrub_damage_seen"]
    comp = r["compaction"]
    assert comp["generation_at_repair"] == 0, "no compaction can fold a page it cannot read"
    assert comp["generation_at_end"] >= 1 and comp["failures"] >= 1, comp
    assert phases["sector repaired"]["get_neighbors"]["ok"] > 0 and phases["sector repaired"]["add_edge"]["ok"] > 0
    if r["disk_full_phase"]:
        full, freed = phases["disk full"], phases["space freed"]
        assert full["add_edge"]["errors"].get("RESOURCE_EXHAUSTED", 0) > 0, full["add_edge"]
        assert full["get_neighbors"]["ok"] > 0 and full["run"]["ok"] > 0, "reads go on while the disk is full"
        assert freed["add_edge"]["ok"] > 0, "writes resume once space is freed"
        assert r["log_space_rollbacks"] > 0
    else:
        pytest.skip("no loop-mounted file system here: the disk-full phase did not run (the rest passed)")
