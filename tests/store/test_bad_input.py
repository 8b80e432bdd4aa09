"""The docs/reliability.md bad-input catalogue, one fixture per row and layout.

Every test builds from a tiny valid input with exactly one thing broken and
checks the error names the file, the position (line/column, or row/byte
offset), the value and the bound where the catalogue asks for them — and that
nothing was published.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import flashgnn
from flashgnn import _core
from flashgnn.store.jobs import run_job
from conftest import (
    TinyGraph,
    assert_error,
    assert_no_crash,
    build,
    cli_cmd,
    cli_env,
    generated_dataset,
    csv_rows,
    expected_neighbors,
    run_cli,
    tmp_leftovers,
    write_gz_text,
    write_igb,
    write_npy_dir,
    write_ogb,
    write_snap,
)


def npy_data_offset(path: Path) -> int:
    """Byte offset where an .npy file's data starts."""
    a = np.load(path, mmap_mode="r")
    return path.stat().st_size - a.nbytes


def assert_nothing_published(out: Path) -> None:
    assert not out.exists(), f"{out} was published despite the error"
    assert tmp_leftovers(out.parent, out.name) == []


# Hostile cases tried by this suite and how many ended in a clean error
# (printed in the terminal summary like the corruption suite's figure).
CASES: list[tuple[str, bool]] = []


def record(case: str, clean: bool) -> None:
    CASES.append((case, clean))


@pytest.fixture(scope="module", autouse=True)
def _importer_counts(suite_report):
    yield
    clean = sum(1 for _, c in CASES if c)
    suite_report.append(f"importer suite: {len(CASES)} hostile cases, {clean} clean errors, "
                        f"{len(CASES) - clean} not clean (hangs, crashes, wrong error or lost user data)")


def build_fails(inp, out, *fragments, exc=flashgnn.InputError, **opts) -> str:
    """Build must raise ``exc`` whose message holds every fragment; nothing is published."""
    ok = False
    try:
        with pytest.raises(exc) as ei:
            build(inp, out, **opts)
        msg = assert_error(ei, *fragments)
        assert_nothing_published(Path(out))
        ok = True
    finally:
        record(f"build:{Path(str(inp)).name}:{fragments[:2]}", ok)
    return msg


# ---------------------------------------------------------------------------
# node id >= declared node count: error names file, position, value, bound


def test_npy_node_id_at_or_above_feature_row_count(tmp_path, tiny):
    """An npy edge naming node 6 when node_feat.npy declares 6 nodes: file, edge row/column, byte offset, value, bound."""
    edges = np.vstack([tiny.edges, [[6, 1]]])
    inp = write_npy_dir(tmp_path / "in", edges, tiny.features)
    off = npy_data_offset(inp / "edge_index.npy") + (len(edges) - 1) * 2 * 8
    build_fails(
        inp, tmp_path / "out",
        "edge_index.npy", f"edge {len(edges) - 1}, column 0", f"byte offset {off}", "node id 6", "declared node count 6",
    )


def test_npy_transposed_int32_id_above_declared_num_nodes(tmp_path, tiny):
    """A [2, E] int32 edge array with dst 9 and num_nodes=6: the byte offset accounts for the transposed layout."""
    edges = np.vstack([tiny.edges, [[1, 9]]])
    inp = write_npy_dir(tmp_path / "in", edges, edge_dtype=np.int32, transposed=True)
    e = len(edges)
    off = npy_data_offset(inp / "edge_index.npy") + (1 * e + (e - 1)) * 4
    build_fails(
        inp, tmp_path / "out",
        "edge_index.npy", f"edge {e - 1}, column 1", f"byte offset {off}", "node id 9", "declared node count 6",
        num_nodes=6,
    )


def test_npy_uint32_id_at_or_above_feature_row_count(tmp_path, tiny):
    """A uint32 [E, 2] edge array (what `generate --edge-dtype uint32` writes) naming node 4294967295 with 6
    feature rows: file, edge row/column, byte offset (4-byte ids), value, bound."""
    edges = np.vstack([tiny.edges, [[2, 2**32 - 1]]])
    inp = write_npy_dir(tmp_path / "in", edges, tiny.features, edge_dtype=np.uint32)
    e = len(edges)
    off = npy_data_offset(inp / "edge_index.npy") + ((e - 1) * 2 + 1) * 4
    build_fails(
        inp, tmp_path / "out",
        "edge_index.npy", f"edge {e - 1}, column 1", f"byte offset {off}", "node id 4294967295",
        "declared node count 6",
    )


def test_snap_node_id_above_declared_num_nodes(tmp_path):
    """SNAP with --num-nodes 3 and an edge to node 5: line and column of the id, value and bound."""
    inp = write_snap(tmp_path / "g.txt", text="# header\n0 1\n1 5\n")
    build_fails(inp, tmp_path / "out", "g.txt", "line 3, column 3", "node id 5", "declared node count 3", num_nodes=3)


def test_snap_cli_node_id_above_declared_num_nodes(tmp_path):
    """The same error through the CLI: exit code 2 and one line naming file, line, column, value, bound."""
    inp = write_snap(tmp_path / "g.txt", text="0 1\n1 2\n7\t0\n")
    out = tmp_path / "out"
    r = run_cli("build", inp, out, "--num-nodes", "4")
    assert_no_crash(r)
    assert r.returncode == 2
    assert_error(r, "flashgnn build: error:", "g.txt", "line 3, column 1", "node id 7", "declared node count 4")
    assert_nothing_published(out)


def test_ogb_node_id_above_num_node_list(tmp_path, tiny):
    """OGB edge.csv.gz naming node 9 while num-node-list.csv.gz says 6: gz file, line, column, value, bound."""
    edges = np.vstack([tiny.edges[:3], [[2, 9]], tiny.edges[3:]])
    inp = write_ogb(tmp_path / "ogb", edges, 6, tiny.features, tiny.labels)
    build_fails(inp, tmp_path / "out", "edge.csv.gz", "line 4, column 3", "node id 9", "declared node count 6")


def test_igb_node_id_above_feature_rows(tmp_path, tiny):
    """IGB edges naming node 6 with a 6-row feature table: IGB edge file, row, byte offset, value and bound."""
    edges = np.vstack([[[6, 0]], tiny.edges])
    inp = write_igb(tmp_path / "igb", edges, tiny.features, tiny.labels)
    ef = inp / "processed" / "paper__cites__paper" / "edge_index.npy"
    build_fails(
        inp, tmp_path / "out",
        "paper__cites__paper/edge_index.npy", "edge 0, column 0", f"byte offset {npy_data_offset(ef)}", "node id 6",
        "declared node count 6",
    )


# ---------------------------------------------------------------------------
# negative ids and ids overflowing the id type


def test_npy_negative_int64_id(tmp_path, tiny):
    """A negative int64 source id: file, edge row, column, byte offset and the value."""
    edges = tiny.edges.copy()
    edges[3, 0] = -5
    inp = write_npy_dir(tmp_path / "in", edges, tiny.features)
    off = npy_data_offset(inp / "edge_index.npy") + 3 * 2 * 8
    build_fails(inp, tmp_path / "out", "edge_index.npy", "edge 3, column 0", f"byte offset {off}", "negative node id -5", ">= 0")


def test_npy_negative_int32_id(tmp_path, tiny):
    """A negative int32 destination id is caught with the int32 byte offset."""
    edges = tiny.edges.copy()
    edges[1, 1] = -2147483648
    inp = write_npy_dir(tmp_path / "in", edges, edge_dtype=np.int32)
    off = npy_data_offset(inp / "edge_index.npy") + (1 * 2 + 1) * 4
    build_fails(inp, tmp_path / "out", "edge_index.npy", "edge 1, column 1", f"byte offset {off}", "negative node id -2147483648")


def test_snap_negative_id(tmp_path):
    """A negative id in a SNAP file: line and column of the field, and the value."""
    inp = write_snap(tmp_path / "g.txt", text="0 1\n# c\n2   -3\n")
    build_fails(inp, tmp_path / "out", "g.txt", "line 3, column 5", "negative node id -3")


def test_snap_id_overflowing_supported_range(tmp_path):
    """2**40 in a SNAP file overflows the 32-bit id range: line, column, value and the bound."""
    inp = write_snap(tmp_path / "g.txt", text="0 1\n1 1099511627776\n")
    build_fails(
        inp, tmp_path / "out", "g.txt", "line 2, column 3", "node id 1099511627776", "overflows the supported id range",
        "< 4294967295",
    )


def test_snap_id_too_long_for_any_integer_type(tmp_path):
    """A 40-digit id cannot be represented at all: reported as unparseable with line and column."""
    big = "9" * 40
    inp = write_snap(tmp_path / "g.txt", text=f"0 1\n{big} 2\n")
    build_fails(inp, tmp_path / "out", "g.txt", "line 2, column 1", "cannot parse", "as a node id")


def test_npy_id_overflowing_supported_range(tmp_path, tiny):
    """2**40 in an int64 npy edge array without a declared count: row, byte offset, value and bound."""
    edges = tiny.edges.copy()
    edges[2, 1] = 2**40
    inp = write_npy_dir(tmp_path / "in", edges)
    off = npy_data_offset(inp / "edge_index.npy") + (2 * 2 + 1) * 8
    build_fails(
        inp, tmp_path / "out", "edge_index.npy", "edge 2, column 1", f"byte offset {off}", "node id 1099511627776",
        "overflows the supported id range", "< 4294967295",
    )


def test_npy_uint64_max_id_overflows_signed_types(tmp_path, tiny):
    """A uint64 edge array holding 2**64-1 is reported with its exact (unsigned) value, not wrapped to -1."""
    edges = tiny.edges.astype(np.uint64)
    edges[0, 0] = np.uint64(2**64 - 1)
    inp = write_npy_dir(tmp_path / "in", edges, edge_dtype=np.uint64)
    build_fails(inp, tmp_path / "out", "edge_index.npy", "edge 0, column 0", "node id 18446744073709551615", "overflows")


def test_npy_id_at_sentinel_bound_is_refused(tmp_path):
    """Id 4294967295 (u32::MAX, the reserved sentinel) is refused, not silently truncated."""
    inp = write_npy_dir(tmp_path / "in", np.array([[0, 4294967295]], dtype=np.int64))
    build_fails(inp, tmp_path / "out", "edge_index.npy", "edge 0, column 1", "node id 4294967295", "< 4294967295")


# ---------------------------------------------------------------------------
# unparseable / short lines; opt-in skip mode


def test_snap_unparseable_line(tmp_path):
    """A non-numeric field: physical line number (comments counted), column of the field, and the field text."""
    inp = write_snap(tmp_path / "g.txt", text="# comment\n0 1\n1\tx7\n")
    build_fails(inp, tmp_path / "out", "g.txt", "line 3, column 3", 'cannot parse "x7" as a node id')


def test_snap_short_line(tmp_path):
    """A line with a single id: line, column just past the end, the line text and what was expected."""
    inp = write_snap(tmp_path / "g.txt", text="0 1\n12\n")
    build_fails(inp, tmp_path / "out", "g.txt", "line 2, column 3", 'short line "12"', "expected two node ids, found 1")


def test_snap_comma_separated_float_field(tmp_path):
    """A comma-separated line with a float id: reported at the float's column."""
    inp = write_snap(tmp_path / "g.txt", text="0,1\n1,2.5\n")
    build_fails(inp, tmp_path / "out", "g.txt", "line 2, column 3", 'cannot parse "2.5"')


def test_ogb_gz_unparseable_line(tmp_path, tiny):
    """A bad field inside a gzipped OGB edge list: the .gz file, line and column."""
    inp = write_ogb(tmp_path / "ogb", tiny.edges, 6, tiny.features, tiny.labels)
    write_gz_text(inp / "raw" / "edge.csv.gz", "0,1\n1,2\n2,abc\n")
    build_fails(inp, tmp_path / "out", "edge.csv.gz", "line 3, column 3", 'cannot parse "abc"')


def test_skip_bad_lines_reports_count_and_first_examples(tmp_path):
    """skip_bad_lines=True skips 12 malformed lines, reports the count and the first 5 examples in order, keeps the rest."""
    lines = ["# header", "0 1"]
    bad_lines = []
    for i in range(12):
        lines.append(f"{i} oops" if i % 2 else "7")
        bad_lines.append(len(lines))
        lines.append(f"{i} {i + 1}")
    inp = write_snap(tmp_path / "g.txt", text="\n".join(lines) + "\n")
    rep = build(inp, tmp_path / "out", skip_bad_lines=True)
    assert rep["skipped_lines"] == 12
    ex = rep["skipped_examples"]
    assert 1 <= len(ex) <= 5
    for e, line in zip(ex, bad_lines):
        assert_error(e, "g.txt", f"line {line}, column")
    assert "short line" in ex[0] and "cannot parse" in ex[1]
    assert rep["manifest"]["build"]["input_edges"] == 13  # good lines only
    assert flashgnn.open(tmp_path / "out").num_edges == 13


def test_skip_bad_lines_cli_prints_count_and_examples(tmp_path):
    """The CLI's skip mode prints the skipped-line count and examples (line and column) on stderr and succeeds."""
    inp = write_snap(tmp_path / "g.txt", text="0 1\nfoo bar\n1 2\n3\n2 0\n")
    r = run_cli("build", inp, tmp_path / "out", "--skip-bad-lines")
    assert_no_crash(r)
    assert r.returncode == 0, r.stderr
    assert_error(r, "skipped 2 malformed lines", 'line 2, column 1: cannot parse "foo"', 'line 4, column 2: short line "3"')


def test_skip_bad_lines_never_skips_out_of_range_ids(tmp_path):
    """Skip mode is for malformed lines only: an id >= --num-nodes still fails the build (the count is wrong)."""
    inp = write_snap(tmp_path / "g.txt", text="0 1\nbad line\n1 8\n")
    build_fails(inp, tmp_path / "out", "line 3, column 3", "node id 8", "declared node count 4", skip_bad_lines=True, num_nodes=4)


# ---------------------------------------------------------------------------
# self-loops and duplicates


def test_self_loops_and_duplicates_kept_by_default(tmp_path, tiny):
    """Default build keeps the self-loop (2,2) and the duplicate (0,1); counts in the manifest are zero."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features)
    m = build(inp, tmp_path / "out")["manifest"]
    b = m["build"]
    assert (b["self_loops"], b["dedup"]) == ("keep", False)
    assert (b["input_edges"], m["num_edges"]) == (8, 8)
    assert (b["self_loops_dropped"], b["self_loops_added"], b["duplicates_removed"]) == (0, 0, 0)
    ds = flashgnn.open(tmp_path / "out")
    assert list(ds.neighbors(2)) == [1, 2]
    assert list(ds.neighbors(1)) == [0, 0]


@pytest.mark.parametrize(
    "opts, edges, dropped, added, dups, nbrs_of_2, nbrs_of_1",
    [
        (dict(self_loops="drop"), 7, 1, 0, 0, [1], [0, 0]),
        (dict(dedup=True), 7, 0, 0, 1, [1, 2], [0]),
        (dict(self_loops="add"), 13, 1, 6, 0, [1, 2], [0, 0, 1]),
        (dict(self_loops="add", dedup=True), 12, 1, 6, 1, [1, 2], [0, 1]),
        (dict(self_loops="drop", dedup=True), 6, 1, 0, 1, [1], [0]),
    ],
)
def test_self_loop_and_dedup_flags_report_counts(tmp_path, tiny, opts, edges, dropped, added, dups, nbrs_of_2, nbrs_of_1):
    """drop/dedup/add do exactly what they say and report their counts in manifest['build']."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features)
    m = build(inp, tmp_path / "out", **opts)["manifest"]
    b = m["build"]
    assert (m["num_edges"], b["self_loops_dropped"], b["self_loops_added"], b["duplicates_removed"]) == (edges, dropped, added, dups)
    ds = flashgnn.open(tmp_path / "out")
    assert list(ds.neighbors(2)) == nbrs_of_2
    assert list(ds.neighbors(1)) == nbrs_of_1
    assert flashgnn.verify(tmp_path / "out", progress=False)["slots"] == 6


def test_cli_summary_line_reports_normalisation_counts(tmp_path):
    """The CLI's summary line reports input edges, stored edges, self-loops dropped, duplicates removed and isolated nodes."""
    inp = write_snap(tmp_path / "g.txt", text="0 0\n0 1\n0 1\n1 2\n2 2\n")
    r = run_cli("build", inp, tmp_path / "out", "--self-loops", "drop", "--dedup", "--num-nodes", "5")
    assert_no_crash(r)
    assert r.returncode == 0, r.stderr
    # Stored 0->1 and 1->2 over 5 nodes: 3 and 4 have no edge at all; 0 has an out-edge but no stored neighbor.
    assert ("5 input edges -> 2 stored (self-loops dropped 2, added 0; duplicates removed 1); "
            "2 isolated nodes (no edge either way), 3 with no stored neighbor") in r.stdout


@pytest.mark.parametrize("symmetrize", [False, True])
def test_isolated_means_no_edge_either_way(tmp_path, symmetrize):
    """On a directed chain 0->1->2 plus node 3, only node 3 is isolated; node 0 (an out-edge only) has no stored
    neighbor without --symmetrize. The manifest, the build line and `info` agree."""
    inp = write_snap(tmp_path / "g.txt", text="0 1\n1 2\n")
    args = ["--num-nodes", "4"] + (["--symmetrize"] if symmetrize else [])
    r = run_cli("build", inp, tmp_path / "out", *args)
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    no_nbr = 1 if symmetrize else 2
    assert (m["degree"]["isolated"], m["degree"]["no_neighbors"]) == (1, no_nbr)
    want = f"1 isolated nodes (no edge either way), {no_nbr} with no stored neighbor"
    assert want in r.stdout
    info = run_cli("info", tmp_path / "out")
    assert info.returncode == 0, info.stderr
    assert want in info.stdout


# ---------------------------------------------------------------------------
# one-direction edge lists


def test_one_direction_edges_are_not_symmetrized_by_default(tmp_path):
    """A list where every edge goes low->high stays directed: no reverse edges appear unless asked for."""
    edges = np.array([[0, 1], [0, 2], [1, 2], [2, 3]])
    inp = write_snap(tmp_path / "g.txt", edges)
    m = build(inp, tmp_path / "out")["manifest"]
    assert m["build"]["symmetrize"] is False
    assert m["num_edges"] == 4
    ds = flashgnn.open(tmp_path / "out")
    assert [list(ds.neighbors(v)) for v in range(4)] == [[], [0], [0, 1], [2]]


def test_symmetrize_adds_every_reverse_edge(tmp_path):
    """symmetrize=True stores both directions of every non-loop edge (self-loops once)."""
    edges = np.array([[0, 1], [0, 2], [1, 2], [2, 3], [3, 3]])
    inp = write_snap(tmp_path / "g.txt", edges)
    m = build(inp, tmp_path / "out", symmetrize=True)["manifest"]
    assert m["build"]["symmetrize"] is True
    assert m["num_edges"] == 9
    ds = flashgnn.open(tmp_path / "out")
    assert [sorted(ds.neighbors(v)) for v in range(4)] == [[1, 2], [0, 2], [0, 1, 3], [2, 3]]


# ---------------------------------------------------------------------------
# NaN / Inf in features


def test_npy_nan_feature_reports_row_column_and_offset(tmp_path, tiny):
    """A NaN in node_feat.npy: file, row, its byte offset, column, and how to opt in to replacement."""
    feat = tiny.features.copy()
    feat[4, 2] = np.nan
    inp = write_npy_dir(tmp_path / "in", tiny.edges, feat)
    off = npy_data_offset(inp / "node_feat.npy") + 4 * 3 * 4
    build_fails(inp, tmp_path / "out", "node_feat.npy", f"row 4 (byte offset {off}), column 2", "NaN", "--nan zero")


def test_npy_inf_float64_feature(tmp_path, tiny):
    """-Inf in a float64 table (the conversion path): row, byte offset, column and value."""
    feat = tiny.features.astype(np.float64)
    feat[1, 0] = -np.inf
    inp = write_npy_dir(tmp_path / "in", tiny.edges, feat)
    off = npy_data_offset(inp / "node_feat.npy") + 1 * 3 * 8
    build_fails(inp, tmp_path / "out", "node_feat.npy", f"row 1 (byte offset {off}), column 0", "-inf", "not finite")


def test_npy_inf_float16_feature(tmp_path, tiny):
    """+Inf in a float16 table: row and column."""
    feat = tiny.features.astype(np.float16)
    feat[5, 1] = np.inf
    inp = write_npy_dir(tmp_path / "in", tiny.edges, feat)
    build_fails(inp, tmp_path / "out", "node_feat.npy", "row 5", "column 1", "inf", "not finite")


def test_ogb_csv_nan_feature(tmp_path, tiny):
    """A 'nan' in OGB node-feat.csv.gz: row, line and column."""
    rows = tiny.features.astype(object)
    rows[3, 1] = "nan"
    inp = write_ogb(tmp_path / "ogb", tiny.edges, 6, None, tiny.labels)
    write_gz_text(inp / "raw" / "node-feat.csv.gz", csv_rows(rows))
    build_fails(inp, tmp_path / "out", "node-feat.csv.gz", "row 3 (line 4), column 1", "NaN", "not finite")


def test_float16_conversion_overflow_is_refused(tmp_path, tiny):
    """feature_dtype='float16' with a value beyond 65504 would become Inf: refused with row, column, value and bound."""
    feat = tiny.features.copy()
    feat[2, 2] = 1e6
    inp = write_npy_dir(tmp_path / "in", tiny.edges, feat)
    build_fails(inp, tmp_path / "out", "node_feat.npy", "row 2", "column 2", "1000000", "overflows float16", "65504", feature_dtype="float16")


def test_nan_zero_replaces_and_reports(tmp_path, tiny):
    """nan='zero' replaces NaN/Inf with 0, counts them in the report, and the stored rows read back as 0 there."""
    feat = tiny.features.copy()
    feat[0, 0], feat[3, 2], feat[5, 1] = np.nan, np.inf, -np.inf
    inp = write_npy_dir(tmp_path / "in", tiny.edges, feat)
    rep = build(inp, tmp_path / "out", nan="zero")
    assert rep["nan_replaced"] == 3
    got = flashgnn.open(tmp_path / "out").features(np.arange(6))
    want = np.where(np.isfinite(feat), feat, 0).astype(np.float32)
    np.testing.assert_array_equal(got, want)


def test_nan_zero_cli_reports_count(tmp_path, tiny):
    """The CLI prints how many non-finite values were replaced."""
    feat = tiny.features.copy()
    feat[1, 1] = np.nan
    inp = write_npy_dir(tmp_path / "in", tiny.edges, feat)
    r = run_cli("build", inp, tmp_path / "out", "--nan", "zero")
    assert_no_crash(r)
    assert r.returncode == 0, r.stderr
    assert "replaced 1 non-finite feature values with 0" in r.stderr


# ---------------------------------------------------------------------------
# feature rows / label rows != node count


def test_npy_feature_rows_disagree_with_num_nodes(tmp_path, tiny):
    """A 6-row feature table with num_nodes=8: names the table and shows both counts."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features)
    build_fails(inp, tmp_path / "out", "node_feat.npy", "has 6 rows", "declared node count is 8", num_nodes=8)


def test_npy_label_rows_disagree_with_feature_rows(tmp_path, tiny):
    """8 labels vs 6 feature rows: both files and both counts are named."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features, np.zeros(8, np.int64))
    build_fails(inp, tmp_path / "out", "node_label.npy", "has 8 rows", "node_feat.npy (6 rows)")


def test_ogb_feature_rows_fewer_than_node_count(tmp_path, tiny):
    """OGB node-feat.csv.gz with 4 rows but 6 nodes: both counts."""
    inp = write_ogb(tmp_path / "ogb", tiny.edges, 6, tiny.features[:4], tiny.labels)
    build_fails(inp, tmp_path / "out", "node-feat.csv.gz", "feature table has 4 rows", "node count is 6")


def test_ogb_feature_rows_more_than_node_count(tmp_path, tiny):
    """OGB node-feat.csv.gz with 8 rows but 6 nodes: the first extra row and the node count."""
    feat = np.vstack([tiny.features, tiny.features[:2]])
    inp = write_ogb(tmp_path / "ogb", tiny.edges, 6, feat, tiny.labels)
    build_fails(inp, tmp_path / "out", "node-feat.csv.gz", "row 6 (line 7)", "more rows than the node count 6")


def test_ogb_label_rows_fewer_than_node_count(tmp_path, tiny):
    """OGB node-label.csv.gz with 3 rows but 6 nodes: both counts."""
    inp = write_ogb(tmp_path / "ogb", tiny.edges, 6, tiny.features, tiny.labels[:3])
    build_fails(inp, tmp_path / "out", "node-label.csv.gz", "label array has 3 rows", "node count is 6")


def test_igb_label_rows_disagree_with_feature_rows(tmp_path, tiny):
    """IGB node_label_19.npy with 4 rows vs 6 feature rows: both files and counts."""
    inp = write_igb(tmp_path / "igb", tiny.edges, tiny.features, tiny.labels[:4])
    build_fails(inp, tmp_path / "out", "node_label_19.npy", "has 4 rows", "node_feat.npy (6 rows)")


# ---------------------------------------------------------------------------
# missing file, wrong dtype, headerless raw file without a shape


def test_npy_missing_edge_file(tmp_path, tiny):
    """format='npy' on a directory without edge_index.npy: names the file and the expected array."""
    inp = tmp_path / "in"
    inp.mkdir()
    np.save(inp / "node_feat.npy", tiny.features)
    build_fails(inp, tmp_path / "out", "edge_index.npy", "missing file", "edge array [E, 2] or [2, E]", format="npy")


def test_igb_missing_feature_file(tmp_path, tiny):
    """IGB root without processed/paper/node_feat.npy: names the file and says it is the IGB feature table."""
    inp = write_igb(tmp_path / "igb", tiny.edges, None, tiny.labels)
    build_fails(inp, tmp_path / "out", "processed/paper/node_feat.npy", "missing file", "IGB feature table")


def test_ogb_missing_edge_file(tmp_path, tiny):
    """format='ogb' without raw/edge.csv.gz: names the file and the expected OGB edge list."""
    inp = tmp_path / "ogb"
    write_gz_text(inp / "raw" / "num-node-list.csv.gz", "6\n")
    build_fails(inp, tmp_path / "out", "raw/edge.csv.gz", "missing file", "OGB edge list", format="ogb")


def test_ogb_missing_node_count(tmp_path, tiny):
    """OGB without num-node-list.csv.gz and no --num-nodes: says which file is missing and what to pass."""
    inp = write_ogb(tmp_path / "ogb", tiny.edges, None)
    build_fails(inp, tmp_path / "out", "num-node-list.csv.gz", "--num-nodes")


def test_missing_input_path(tmp_path):
    """A nonexistent input path is named."""
    build_fails(tmp_path / "nope", tmp_path / "out", "nope", "does not exist")


def test_unrecognised_input_directory(tmp_path):
    """An empty directory: names it and lists the layouts that were expected."""
    (tmp_path / "empty").mkdir()
    build_fails(tmp_path / "empty", tmp_path / "out", "empty", "unrecognised input layout", "edge_index.npy", "raw/edge.csv.gz")


def test_float_edge_array_is_refused(tmp_path, tiny):
    """A float32 edge array: names the file, the dtype found and the dtypes expected."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features, edge_dtype=np.float32)
    build_fails(inp, tmp_path / "out", "edge_index.npy", "dtype float32", "expected an integer dtype (int32/int64)")


def test_int_feature_array_is_refused(tmp_path, tiny):
    """An int32 feature table: names the file, the dtype found and the float dtypes expected."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features.astype(np.int32))
    build_fails(inp, tmp_path / "out", "node_feat.npy", "dtype int32", "expected float16, float32 or float64")


def test_edge_array_with_wrong_shape(tmp_path, tiny):
    """An [E, 3] edge array: names the file, the shape found and the shapes expected."""
    inp = write_npy_dir(tmp_path / "in", np.hstack([tiny.edges, tiny.edges[:, :1]]))
    build_fails(inp, tmp_path / "out", "edge_index.npy", "shape [8, 3]", "expected [E, 2] or [2, E]")


def test_fractional_label_is_refused(tmp_path, tiny):
    """A float label 1.5 is not a class id: file, row and byte offset, value, and what is allowed."""
    labels = tiny.labels.astype(np.float64)
    labels[2] = 1.5
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features, labels)
    off = npy_data_offset(inp / "node_label.npy") + 2 * 8
    build_fails(inp, tmp_path / "out", "node_label.npy", f"row 2 (byte offset {off})", "label 1.5 is not a class id")


def test_split_id_out_of_range(tmp_path, tiny):
    """A split index naming node 6 of 6: file, row, value and the valid range."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features, tiny.labels, {"train": [0, 6]})
    build_fails(inp, tmp_path / "out", "train_idx.npy", "row 1", "split id 6", "[0, 6)")


def test_npy_headerless_features_without_shape(tmp_path, tiny):
    """A raw (headerless) node_feat.npy with no shape given: names the file and says to pass --feat-shape/--feat-dtype."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges)
    tiny.features.tofile(inp / "node_feat.npy")
    build_fails(inp, tmp_path / "out", "node_feat.npy", "byte offset 0", "not a .npy file", "no shape was given", "--feat-shape N,D")


def test_npy_headerless_features_with_shape_build(tmp_path, tiny):
    """The same raw file with feat_shape given builds, and the rows read back exactly."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges)
    tiny.features.tofile(inp / "node_feat.npy")
    build(inp, tmp_path / "out", feat_shape=(6, 3), feat_dtype="float32")
    np.testing.assert_array_equal(flashgnn.open(tmp_path / "out").features(np.arange(6)), tiny.features)


def test_npy_headerless_features_with_wrong_shape(tmp_path, tiny):
    """A raw feature file whose size disagrees with the given shape: file, both sizes and the shape."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges)
    tiny.features.tofile(inp / "node_feat.npy")  # 72 bytes
    build_fails(inp, tmp_path / "out", "node_feat.npy", "headerless file is 72 bytes", "shape [6, 2] of float32 is 48 bytes", feat_shape=(6, 2))


def test_igb_headerless_features_without_shape(tmp_path, tiny):
    """IGB large/full style raw features without --num-nodes/--feat-shape: names the file and the options to pass."""
    inp = write_igb(tmp_path / "igb", tiny.edges, tiny.features, headerless=True)
    build_fails(inp, tmp_path / "out", "processed/paper/node_feat.npy", "headerless IGB feature file", "--num-nodes", "--feat-shape")


def test_igb_headerless_with_shape_builds(tmp_path, tiny):
    """IGB raw features + raw labels with feat_shape given: builds; features, labels and default 60/20/20 splits exist."""
    inp = write_igb(tmp_path / "igb", tiny.edges, tiny.features, tiny.labels, headerless=True)
    m = build(inp, tmp_path / "out", feat_shape=(6, 3))["manifest"]
    assert m["build"]["source_format"] == "igb"
    ds = flashgnn.open(tmp_path / "out")
    np.testing.assert_array_equal(ds.features(np.arange(6)), tiny.features)
    np.testing.assert_array_equal(ds.labels(np.arange(6)), tiny.labels)
    assert sum(m["splits"].values()) <= 6 and set(m["splits"]) == {"train", "val", "test"}


# ---------------------------------------------------------------------------
# truncated files and gzip EOF


def test_truncated_npy_edge_file(tmp_path, tiny):
    """An edge_index.npy cut 5 bytes short: byte offset (= file size), bytes needed, bytes present; nothing published."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features)
    p = inp / "edge_index.npy"
    full = p.stat().st_size
    p.write_bytes(p.read_bytes()[:-5])
    build_fails(inp, tmp_path / "out", "edge_index.npy", f"byte offset {full - 5}", "truncated", f"needs {full} bytes", f"file has {full - 5}")


def test_truncated_npy_feature_file(tmp_path, tiny):
    """A node_feat.npy cut inside its last row: byte offset and sizes."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features)
    p = inp / "node_feat.npy"
    full = p.stat().st_size
    p.write_bytes(p.read_bytes()[:-7])
    build_fails(inp, tmp_path / "out", "node_feat.npy", f"byte offset {full - 7}", "truncated", f"needs {full} bytes")


def test_truncated_npy_header(tmp_path, tiny):
    """An .npy file cut inside its header: a clean error naming the file."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features)
    p = inp / "node_feat.npy"
    p.write_bytes(p.read_bytes()[:40])
    build_fails(inp, tmp_path / "out", "node_feat.npy", re.compile(r"truncated|offset"))


def _big_edge_text(n: int = 30000) -> str:
    return "".join(f"{i % 6},{(i * 7) % 6}\n" for i in range(n))


def test_truncated_gzip_ogb_edges(tmp_path, tiny):
    """OGB edge.csv.gz cut in half: gzip EOF is reported with the compressed byte offset and the last good line."""
    inp = write_ogb(tmp_path / "ogb", tiny.edges, 6, tiny.features, tiny.labels)
    p = inp / "raw" / "edge.csv.gz"
    write_gz_text(p, _big_edge_text())
    data = p.read_bytes()
    cut = len(data) // 2
    p.write_bytes(data[:cut])
    msg = build_fails(inp, tmp_path / "out", "edge.csv.gz", "compressed byte offset", "gzip stream", "ends early", "after line")
    off = int(re.search(r"compressed byte offset (\d+)", msg).group(1))
    assert 0 < off <= cut


def test_truncated_gzip_trailer_snap(tmp_path):
    """A SNAP .gz missing only its 8-byte trailer: every line decodes, the missing end is still an error."""
    p = write_snap(tmp_path / "g.txt.gz", text=_big_edge_text(), gz=True)
    data = p.read_bytes()
    p.write_bytes(data[:-8])
    msg = build_fails(p, tmp_path / "out", "g.txt.gz", "compressed byte offset", "gzip stream")
    off = int(re.search(r"compressed byte offset (\d+)", msg).group(1))
    assert 0 < off <= len(data) - 8


def test_truncated_gzip_cli_exit_code(tmp_path):
    """Through the CLI: exit code 2, one error line with the compressed offset, nothing published."""
    p = write_snap(tmp_path / "g.txt.gz", text=_big_edge_text(), gz=True)
    p.write_bytes(p.read_bytes()[:60])
    out = tmp_path / "out"
    r = run_cli("build", p, out)
    assert_no_crash(r)
    assert r.returncode == 2
    assert_error(r, "g.txt.gz", "compressed byte offset")
    assert_nothing_published(out)


# ---------------------------------------------------------------------------
# empty graph, isolated nodes, a hub


def test_empty_snap_graph_is_valid(tmp_path):
    """A SNAP file with only comments builds a 0-node, 0-edge dataset that verifies."""
    inp = write_snap(tmp_path / "g.txt", text="# nothing here\n\n")
    m = build(inp, tmp_path / "out")["manifest"]
    assert (m["num_nodes"], m["num_edges"], m["degree"]["isolated"]) == (0, 0, 0)
    assert flashgnn.verify(tmp_path / "out", progress=False)["slots"] == 0


def test_zero_edges_with_declared_nodes_all_isolated(tmp_path):
    """0 edges and num_nodes=10: valid, every node isolated and reported as such, neighbors empty."""
    inp = write_snap(tmp_path / "g.txt", text="# none\n")
    m = build(inp, tmp_path / "out", num_nodes=10)["manifest"]
    assert (m["num_nodes"], m["num_edges"], m["degree"]["isolated"]) == (10, 0, 10)
    ds = flashgnn.open(tmp_path / "out")
    assert all(len(n) == 0 for n in ds.neighbors(np.arange(10)))
    flashgnn.verify(tmp_path / "out", progress=False)


def test_npy_empty_edge_array_with_features(tmp_path, tiny):
    """An [0, 2] npy edge array with a 6-row feature table: 6 isolated nodes, features intact."""
    inp = write_npy_dir(tmp_path / "in", np.zeros((0, 2), np.int64), tiny.features)
    m = build(inp, tmp_path / "out")["manifest"]
    assert (m["num_nodes"], m["num_edges"], m["degree"]["isolated"]) == (6, 0, 6)
    np.testing.assert_array_equal(flashgnn.open(tmp_path / "out").features(np.arange(6)), tiny.features)


def test_isolated_nodes_counted(tmp_path, tiny):
    """Nodes with no in-edges are counted as isolated in the manifest and by the CLI summary."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features)
    m = build(inp, tmp_path / "out")["manifest"]
    want = sum(1 for n in expected_neighbors(tiny.edges, 6) if len(n) == 0)
    assert m["degree"]["isolated"] == want == 1
    r = run_cli("build", inp, tmp_path / "out2")
    assert r.returncode == 0, r.stderr
    assert "; 1 isolated nodes" in r.stdout


def test_hub_with_two_million_neighbors(tmp_path):
    """One node with 2,000,000 in-neighbors builds fast (no quadratic work), spans many overflow pages, reads back exactly."""
    h = 2_000_000
    e = np.empty((h, 2), np.int64)
    e[:, 0] = np.arange(h, 0, -1)  # reversed order: the sort must do the work
    e[:, 1] = 0
    inp = write_npy_dir(tmp_path / "in", e)
    t = time.perf_counter()
    m = build(inp, tmp_path / "out")["manifest"]
    elapsed = time.perf_counter() - t
    assert elapsed < 30, f"hub build took {elapsed:.1f} s"
    assert (m["num_nodes"], m["num_edges"], m["degree"]["max"], m["degree"]["spilled_nodes"]) == (h + 1, h, h, 1)
    ds = flashgnn.open(tmp_path / "out")
    assert ds.layout["overflow_pages"] >= h * 4 // 4096
    nb = ds.neighbors(0)
    assert len(nb) == h
    np.testing.assert_array_equal(np.sort(nb), np.arange(1, h + 1))
    assert len(ds.neighbors(h)) == 0
    assert flashgnn.verify(tmp_path / "out", progress=False)["overflow_pages"] == ds.layout["overflow_pages"]


# ---------------------------------------------------------------------------
# ENOSPC / EIO mid-build; existing datasets are never damaged


@pytest.fixture(scope="module")
def fault_setup(tmp_path_factory):
    """An npy input (features, labels, splits, a hub) and a previously built dataset at OUT."""
    root = tmp_path_factory.mktemp("fault")
    rng = np.random.default_rng(3)
    n = 3000
    e = rng.integers(0, n, (30000, 2))
    e[:5000, 1] = 7
    inp = write_npy_dir(
        root / "in", e, rng.standard_normal((n, 16)).astype(np.float32), rng.integers(0, 5, n), {"train": np.arange(100)}
    )
    out = root / "published" / "ds"
    out.parent.mkdir()
    rep = build(inp, out)
    written = sum(f["bytes"] for f in rep["manifest"]["files"].values())
    return inp, out, written


@pytest.mark.parametrize("kind, errno_name", [("enospc", "No space left on device"), ("eio", "Input/output error")])
@pytest.mark.parametrize("fraction", [0.0, 0.2, 0.45, 0.7, 0.9, 1.0])
def test_write_fault_mid_build_leaves_previous_dataset_intact(fault_setup, kind, errno_name, fraction):
    """ENOSPC/EIO after N bytes (CLI subprocess, --force over an existing dataset): non-zero exit, the failing file
    is named, no '.<out>.tmp-*' directory remains, and the previous dataset is byte-identical and still verifies."""
    inp, out, written = fault_setup
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    n = int(written * fraction)
    r = run_cli("build", inp, out, "--force", env=cli_env(FLASHGNN_FAULT=f"{kind}-after-bytes:{n}"))
    assert_no_crash(r)
    assert r.returncode == 1, (r.returncode, r.stderr[-1500:])
    msg = r.stderr.strip().splitlines()[-1]
    assert msg.startswith("flashgnn build: I/O error:"), msg
    assert errno_name in msg
    m = re.search(r"writing (\S+)", msg)
    assert m, f"message does not name the file being written: {msg}"
    assert Path(m.group(1)).parent.name.startswith(f".{out.name}.tmp-"), msg
    assert tmp_leftovers(out.parent, out.name) == []
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert after == before
    flashgnn.verify(out, progress=False)


def test_write_fault_on_fresh_output_publishes_nothing(tmp_path, tiny):
    """ENOSPC while building into a new OUT: exit 1, OUT does not appear, no temporary directory remains."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features, tiny.labels)
    out = tmp_path / "fresh"
    r = run_cli("build", inp, out, env=cli_env(FLASHGNN_FAULT="enospc-after-bytes:100"))
    assert_no_crash(r)
    assert r.returncode == 1
    assert_error(r, "No space left on device", "writing")
    assert_nothing_published(out)


def test_existing_dataset_refused_without_force(tmp_path, tiny, npy_input):
    """Building onto an existing dataset without force is refused with a message naming OUT and --force."""
    out = tmp_path / "out"
    build(npy_input, out)
    manifest = (out / "manifest.json").read_bytes()
    with pytest.raises(flashgnn.InputError) as ei:
        build(npy_input, out, self_loops="drop")
    assert_error(ei, str(out), "already exists", "--force")
    assert (out / "manifest.json").read_bytes() == manifest
    assert tmp_leftovers(out.parent, out.name) == []


def test_force_replaces_existing_dataset_atomically(tmp_path, tiny, npy_input):
    """force=True swaps in the new dataset: its content is the new build, the old files are gone, no temp dirs."""
    out = tmp_path / "out"
    build(npy_input, out)
    (out / "stray.txt").write_text("old")
    m = build(npy_input, out, self_loops="drop", force=True)["manifest"]
    assert m["num_edges"] == 7
    assert not (out / "stray.txt").exists()
    assert json.loads((out / "manifest.json").read_text())["build"]["self_loops_dropped"] == 1
    assert flashgnn.open(out).num_edges == 7
    flashgnn.verify(out, progress=False)
    assert tmp_leftovers(out.parent, out.name) == []


def test_failed_force_build_keeps_old_dataset(tmp_path, tiny, npy_input):
    """A --force build that fails on bad input leaves the existing dataset untouched."""
    out = tmp_path / "out"
    build(npy_input, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    bad = write_snap(tmp_path / "bad.txt", text="0 1\nx y\n")
    with pytest.raises(flashgnn.InputError):
        build(bad, out, force=True)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert tmp_leftovers(out.parent, out.name) == []


# ---------------------------------------------------------------------------
# Round two: non-regular files, broken links, CR-only text,
# duplicate npy header keys, float32 overflow, multi-column label files,
# --force over what is not flashgnn output, stale temporaries, labels beyond
# the class count. Every command that could block runs in a subprocess with a
# timeout, so a regression fails instead of hanging the suite.

HANG_TIMEOUT = float(os.environ.get("FLASHGNN_TEST_HANG_TIMEOUT", "60"))  # seconds before a hang fails a test


def run_cli_bounded(*args, env=None) -> subprocess.CompletedProcess:
    """``run_cli`` that turns a hang into a test failure (the child is killed)."""
    try:
        return run_cli(*args, env=env, timeout=HANG_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"flashgnn {' '.join(map(str, args))} hung for {HANG_TIMEOUT} s (blocked on a FIFO?)")


def replace_with_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def cli_fails_cleanly(case: str, *args, fragments=(), rc: int = 2) -> subprocess.CompletedProcess:
    """The CLI exits with ``rc`` and one error line holding every fragment; records the case."""
    ok = False
    try:
        r = run_cli_bounded(*args)
        assert_no_crash(r)
        assert r.returncode == rc, (r.returncode, r.stderr[-2000:])
        assert_error(r.stderr + r.stdout, *fragments)
        ok = True
    finally:
        record(case, ok)
    return r


def _layouts(root: Path, tiny: TinyGraph) -> dict[str, Path]:
    return {
        "npy": write_npy_dir(root / "npy", tiny.edges, tiny.features, tiny.labels, tiny.splits),
        "igb": write_igb(root / "igb", tiny.edges, tiny.features, tiny.labels),
        "ogb": write_ogb(root / "ogb", tiny.edges, tiny.num_nodes, tiny.features, tiny.labels, tiny.splits),
    }


INPUT_FILES = [
    ("npy", "edge_index.npy"),
    ("npy", "node_feat.npy"),
    ("npy", "node_label.npy"),
    ("npy", "train_idx.npy"),
    ("igb", "processed/paper__cites__paper/edge_index.npy"),
    ("igb", "processed/paper/node_feat.npy"),
    ("igb", "processed/paper/node_label_19.npy"),
    ("ogb", "raw/edge.csv.gz"),
    ("ogb", "raw/node-feat.csv.gz"),
    ("ogb", "raw/node-label.csv.gz"),
    ("ogb", "raw/num-node-list.csv.gz"),
    ("ogb", "split/time/train.csv.gz"),
]


@pytest.mark.parametrize("layout, rel", INPUT_FILES, ids=[f"{a}:{b}" for a, b in INPUT_FILES])
def test_fifo_in_place_of_input_file_is_refused(tmp_path, tiny, layout, rel):
    """A FIFO in place of any input file: the build exits 2 at once naming the file and 'FIFO' (never blocks)."""
    inp = _layouts(tmp_path, tiny)[layout]
    replace_with_fifo(inp / rel)
    out = tmp_path / "out"
    cli_fails_cleanly(f"fifo-input:{layout}:{rel}", "build", inp, out,
                      fragments=("flashgnn build: error:", rel, "FIFO"))
    assert_nothing_published(out)


@pytest.mark.parametrize("fmt", ["auto", "snap"])
def test_fifo_as_snap_input_is_refused(tmp_path, fmt):
    """A FIFO given as the text edge list (auto-detected or --format snap): a clean error naming it, no hang."""
    fifo = tmp_path / "edges.txt"
    os.mkfifo(fifo)
    cli_fails_cleanly(f"fifo-input:snap:{fmt}", "build", fifo, tmp_path / "out", "--format", fmt,
                      fragments=("edges.txt", "FIFO"))
    assert_nothing_published(tmp_path / "out")


ENDLESS = ["/dev/zero", "/dev/urandom", "/proc/self/pagemap"]


@pytest.mark.parametrize("target", ENDLESS)
@pytest.mark.parametrize("where", ["snap", "npy:edge_index.npy", "npy:node_feat.npy"])
def test_endless_file_as_input_is_refused(tmp_path, tiny, where, target):
    """An input that is a link to a file that never ends: a device (/dev/zero) or a /proc file that stat()
    calls regular but whose reads run on for hundreds of GiB (/proc/self/pagemap). Refused at once, by name."""
    if not os.path.exists(target):
        pytest.skip(f"{target} not on this system")
    if where == "snap":
        link, inp = tmp_path / "edges.txt", tmp_path / "edges.txt"
    else:
        inp = _layouts(tmp_path, tiny)["npy"]
        link = inp / where.split(":")[1]
        link.unlink()
    os.symlink(target, link)
    frag = "procfs" if target.startswith("/proc") else "device"
    cli_fails_cleanly(f"endless-input:{where}:{target}", "build", inp, tmp_path / "out",
                      *(["--format", "snap", "--num-nodes", "10"] if where == "snap" else []),
                      fragments=(link.name, frag))
    assert_nothing_published(tmp_path / "out")


@pytest.fixture(scope="module")
def full_dataset(tmp_path_factory) -> Path:
    """A dataset with every optional file (separate features, reorder maps, labels, splits)
    and a mutable store with a log (mut/CURRENT, mut/LOCK, mut/wal-*.log)."""
    d = tmp_path_factory.mktemp("full")
    t = TinyGraph()
    inp = write_npy_dir(d / "in", t.edges, t.features, t.labels, t.splits)
    out = d / "ds"
    build(inp, out, feature_layout="separate", reorder="degree", symmetrize=True, dedup=True)
    g = flashgnn.MutableGraph(out)
    g.add_edge(1, 3)
    g.close()
    return out


DATASET_FILES = ["manifest.json", "graph.fg", "overflow.fg", "features.fg", "feature_crc.npy", "labels.npy",
                 "split_train.npy", "node_order.npy", "node_index.npy", "mut/CURRENT", "mut/wal-0.log"]


@pytest.mark.parametrize("rel", DATASET_FILES)
@pytest.mark.parametrize("command", ["verify", "info"])
def test_fifo_in_place_of_dataset_file_is_refused(full_dataset, tmp_path, rel, command):
    """A FIFO in place of any dataset file (incl. the mutable store's CURRENT and log): `verify`/`info`
    end at once with a clean error naming the file and 'FIFO'."""
    ds = tmp_path / "ds"
    shutil.copytree(full_dataset, ds, symlinks=True)
    assert (ds / rel).is_file()
    replace_with_fifo(ds / rel)
    # `info` reports a damaged mutable store in its output (and still describes the base): exit 0.
    rc = 0 if command == "info" and rel.startswith("mut/") else 2
    cli_fails_cleanly(f"fifo-dataset:{command}:{rel}", command, ds, fragments=(rel.split("/")[-1], "FIFO"), rc=rc)


@pytest.mark.parametrize("rel", ["graph.fg", "labels.npy", "mut/CURRENT", "mut/wal-0.log"])
def test_proc_file_in_place_of_dataset_file_is_refused(full_dataset, tmp_path, rel):
    """A dataset file linked to /proc/self/pagemap (a "regular" file whose reads never end): refused by name."""
    ds = tmp_path / "ds"
    shutil.copytree(full_dataset, ds, symlinks=True)
    (ds / rel).unlink()
    os.symlink("/proc/self/pagemap", ds / rel)
    cli_fails_cleanly(f"endless-dataset:verify:{rel}", "verify", ds, fragments=(rel.split("/")[-1], "procfs"))


def test_fifo_dataset_file_python_api(full_dataset, tmp_path):
    """flashgnn.open on a dataset whose labels.npy is a FIFO raises CorruptDatasetError naming it (subprocess, bounded)."""
    ds = tmp_path / "ds"
    shutil.copytree(full_dataset, ds, symlinks=True)
    replace_with_fifo(ds / "labels.npy")
    code = ("import flashgnn, sys\n"
            "try:\n    flashgnn.open(sys.argv[1]).labels([0])\n"
            "except flashgnn.CorruptDatasetError as e:\n    print('CLEAN', e)\n")
    r = subprocess.run([sys.executable, "-c", code, str(ds)], capture_output=True, text=True, timeout=HANG_TIMEOUT,
                       env=cli_env())
    ok = r.returncode == 0 and "CLEAN" in r.stdout and "labels.npy" in r.stdout and "FIFO" in r.stdout
    record("fifo-dataset:api:labels.npy", ok)
    assert ok, (r.stdout, r.stderr[-2000:])


# --- broken and odd symbolic links -----------------------------------------

LINK_TARGETS = {
    "dangling": (lambda d: d / "does-not-exist", "dangling symbolic link"),
    "looping": (None, "loops"),
    "directory": (lambda d: d, "a directory"),
}
LINKED_INPUTS = [("npy", "node_feat.npy"), ("npy", "node_label.npy"), ("npy", "train_idx.npy"),
                 ("npy", "edge_index.npy"), ("ogb", "raw/node-label.csv.gz"), ("igb", "processed/paper/node_label_19.npy")]


@pytest.mark.parametrize("kind", list(LINK_TARGETS))
@pytest.mark.parametrize("layout, rel", LINKED_INPUTS, ids=[f"{a}:{b}" for a, b in LINKED_INPUTS])
def test_broken_symlink_input_is_an_error_not_absent(tmp_path, tiny, layout, rel, kind):
    """An input name that exists but cannot be read (dangling or looping link, link to a directory) is an
    error naming it; it is never silently treated as absent (no build with '0 features' or no labels)."""
    inp = _layouts(tmp_path, tiny)[layout]
    p = inp / rel
    p.unlink()
    target, words = LINK_TARGETS[kind]
    os.symlink(p if target is None else target(tmp_path), p)
    build_fails(inp, tmp_path / "out", rel.split("/")[-1], words)


def test_ogb_split_directory_dangling_link_is_an_error(tmp_path, tiny):
    """An OGB split/<name> that is a dangling link is an error naming it, not 'no splits'."""
    inp = write_ogb(tmp_path / "ogb", tiny.edges, tiny.num_nodes, tiny.features, tiny.labels, tiny.splits)
    shutil.rmtree(inp / "split" / "time")
    os.symlink(tmp_path / "gone", inp / "split" / "time")
    build_fails(inp, tmp_path / "out", "split/time", "dangling symbolic link")


def test_symlinked_inputs_that_resolve_still_build(tmp_path, tiny):
    """Links to regular files are followed (users link big inputs): the build succeeds with the linked features."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features, tiny.labels)
    real = tmp_path / "elsewhere.npy"
    (inp / "node_feat.npy").rename(real)
    os.symlink(real, inp / "node_feat.npy")
    m = build(inp, tmp_path / "out")["manifest"]
    assert m["features"]["dim"] == tiny.dim
    np.testing.assert_allclose(flashgnn.open(tmp_path / "out").features([1]), tiny.features[[1]])


# --- CR-only text, duplicate npy keys, float32 overflow, multi-column values --


@pytest.mark.parametrize("eol", ["\r", "\r\n", "\n"], ids=["cr", "crlf", "lf"])
def test_text_line_endings_all_build_the_same_graph(tmp_path, tiny, eol):
    """CR-only (classic Mac), CRLF and LF edge lists build the same graph; CR-only never builds an empty one."""
    text = eol.join(["# comment", *(f"{s} {d}" for s, d in tiny.edges)]) + eol
    inp = tmp_path / "g.txt"
    inp.write_bytes(text.encode())
    m = build(inp, tmp_path / "out", num_nodes=tiny.num_nodes)["manifest"]
    assert m["num_edges"] == len(tiny.edges)
    ds = flashgnn.open(tmp_path / "out")
    for v, want in enumerate(expected_neighbors(tiny.edges, tiny.num_nodes)):
        np.testing.assert_array_equal(np.sort(ds.neighbors(v)), want)


def test_cr_only_text_errors_name_the_right_line(tmp_path):
    """A bad token on the 3rd CR-terminated line is reported at line 3."""
    inp = tmp_path / "g.txt"
    inp.write_bytes(b"0 1\r1 2\rx 0\r")
    build_fails(inp, tmp_path / "out", "g.txt", "line 3, column 1", '"x"')


def _npy_with_header(path: Path, dict_text: str, payload: bytes) -> None:
    head = dict_text.encode()
    pad = 64 - (10 + len(head) + 1) % 64
    head += b" " * pad + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head + payload)


@pytest.mark.parametrize("key, dict_text", [
    ("shape", "{'descr': '<i8', 'fortran_order': False, 'shape': (8, 2), 'shape': (4, 2), }"),
    ("descr", "{'descr': '<i4', 'fortran_order': False, 'shape': (8, 2), 'descr': '<i8', }"),
])
def test_npy_header_with_duplicate_keys_is_refused(tmp_path, tiny, key, dict_text):
    """numpy reads the last of a repeated header key, the old parser the first: refuse, naming file and key."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges)
    _npy_with_header(inp / "edge_index.npy", dict_text, tiny.edges.astype(np.int64).tobytes())
    build_fails(inp, tmp_path / "out", "edge_index.npy", f'"{key}" 2 times')


def test_float32_conversion_overflow_is_refused(tmp_path, tiny):
    """float64 1e39 with --feature-dtype float32 would be stored as inf: refused with row, column, value and bound."""
    f = tiny.features.astype(np.float64)
    f[4, 1] = -1e39
    inp = write_npy_dir(tmp_path / "in", tiny.edges, f)
    build_fails(inp, tmp_path / "out", "node_feat.npy", "row 4", "column 1", "-1e39", "overflows float32",
                "3.4028235e38", feature_dtype="float32")


def test_float32_overflow_cli(tmp_path, tiny):
    """The same through the CLI: exit 2, one line naming the value and float32."""
    f = tiny.features.astype(np.float64)
    f[0, 0] = 1e300
    inp = write_npy_dir(tmp_path / "in", tiny.edges, f)
    cli_fails_cleanly("float32-overflow:cli", "build", inp, tmp_path / "out", "--feature-dtype", "float32",
                      fragments=("node_feat.npy", "row 0", "overflows float32"))


@pytest.mark.parametrize("rel", ["raw/node-label.csv.gz", "split/time/train.csv.gz"])
def test_two_column_value_file_is_refused(tmp_path, tiny, rel):
    """A two-column node-label.csv.gz (or split file) is refused with file, line and column count, not truncated."""
    inp = write_ogb(tmp_path / "ogb", tiny.edges, tiny.num_nodes, tiny.features, tiny.labels, tiny.splits)
    write_gz_text(inp / rel, "".join(f"{i % 3},{i % 2}\n" for i in range(3 if "split" in rel else 6)))
    build_fails(inp, tmp_path / "out", rel.split("/")[-1], "line 1", "2 columns", "expected 1")


# --- labels beyond the class count -----------------------------------------


def test_labels_beyond_declared_num_classes_refused_at_build(tmp_path, tiny):
    """--num-classes 2 with a label 2: refused with file, row, value and bound; the count is recorded when valid."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features, tiny.labels)
    build_fails(inp, tmp_path / "out", "node_label.npy", "row 2", "label 2", "declared class count 2",
                num_classes=2)
    m = build(inp, tmp_path / "ok", num_classes=5)["manifest"]
    assert m["labels"]["num_classes"] == 5


@pytest.mark.parametrize("nc", [0, -1, 2**31, 10**11])
def test_num_classes_out_of_range_refused(tmp_path, tiny, nc):
    """--num-classes must be a class count labels can use, [1, 2^31 - 1]: 10^11 used to be recorded, and
    train then asked for a 51 TB classifier; 0 and negatives named the option's type, not the bound."""
    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features, tiny.labels)
    cli_fails_cleanly(f"num-classes:{nc}", "build", inp, tmp_path / "out", f"--num-classes={nc}",
                      fragments=(f"--num-classes {nc}", "[1, 2147483647]"))
    assert_nothing_published(tmp_path / "out")


def test_manifest_num_classes_beyond_label_range_refused(tmp_path, tiny):
    """A manifest (checksum consistent) declaring more classes than 32-bit labels can name: refused at open."""
    from flashgnn import _core

    inp = write_npy_dir(tmp_path / "in", tiny.edges, tiny.features, tiny.labels)
    out = tmp_path / "ds"
    build(inp, out)
    man = json.loads((out / "manifest.json").read_text())
    man["labels"]["num_classes"] = 10**11
    (out / "manifest.json").write_text(_core.seal_manifest(json.dumps(man, indent=2)))
    with pytest.raises(flashgnn.CorruptDatasetError) as e:
        flashgnn.open(out)
    assert_error(e, "manifest.json", "labels.num_classes = 100000000000", "2147483647")


def test_igb_labels_beyond_declared_classes_refused(tmp_path, tiny):
    """IGB's node_label_19.npy declares 19 classes: a label 25 is refused with file, row, value and bound."""
    lab = tiny.labels.copy()
    lab[3] = 25
    inp = write_igb(tmp_path / "igb", tiny.edges, tiny.features, lab)
    build_fails(inp, tmp_path / "out", "node_label_19.npy", "row 3", "label 25", "declared class count 19")


def _crc32c(data: bytes) -> int:
    from test_corruption import crc32c

    return crc32c(data)


def test_train_names_label_beyond_num_classes(tmp_path):
    """A dataset whose labels.npy holds 99 while the manifest says 4 classes (consistent checksums): `train`
    stops before the first step naming labels.npy, the node, the value and the bound (not torch's 'Target 99')."""
    from flashgnn import _core

    ds = generated_dataset(tmp_path, scale=8, edge_factor=4, dim=8, classes=4, seed=3)
    d = flashgnn.open(ds)
    node = int(d.split("train")[5])
    lab = np.load(ds / "labels.npy")
    lab[node] = 99
    np.save(ds / "labels.npy", lab)
    man = json.loads((ds / "manifest.json").read_text())
    data = (ds / "labels.npy").read_bytes()
    man["files"]["labels.npy"] = {"bytes": len(data), "crc32c": _crc32c(data)}
    (ds / "manifest.json").write_text(_core.seal_manifest(json.dumps(man, indent=2)))
    # The store refuses labels.npy at first use (its side-file range check); train reads the checksummed file
    # itself to name the split node, its position, the value and the bound before any step.
    r = cli_fails_cleanly("labels-beyond-classes:train", "train", ds, "--epochs", "1", "--max-batches", "1",
                          fragments=("flashgnn train: error:", "labels.npy", f"node {node}", "label 99", "[0, 4)"),
                          rc=2)  # train's flag/data errors are TrainError: exit 2, as every bad-input error
    assert "Target 99" not in r.stderr  # torch's own message: the refusal came before any step


# --- --force over what is not flashgnn output, for every publishing command --


def _user_target(tmp_path: Path, kind: str) -> tuple[Path, callable]:
    """Create a user's thing at ``tmp_path/out``; returns (path, check that it is intact)."""
    out = tmp_path / "out"
    if kind == "user-dir":
        out.mkdir()
        (out / "thesis.tex").write_text("mine")
        return out, lambda: (out / "thesis.tex").read_text() == "mine" and sorted(os.listdir(out)) == ["thesis.tex"]
    if kind == "regular-file":
        out.write_text("mine")
        return out, lambda: out.is_file() and out.read_text() == "mine"
    if kind == "symlink":
        real = tmp_path / "real"
        real.mkdir()
        (real / "thesis.tex").write_text("mine")
        os.symlink(real, out)
        return out, lambda: out.is_symlink() and (real / "thesis.tex").read_text() == "mine"
    if kind == "fifo":
        os.mkfifo(out)
        return out, lambda: out.is_fifo()
    raise AssertionError(kind)


FORCE_TARGETS = ["user-dir", "regular-file", "symlink", "fifo"]


@pytest.fixture(scope="module")
def publish_env(tmp_path_factory):
    """A small dataset with splits and a 1-epoch checkpoint (for embed and presample)."""
    d = tmp_path_factory.mktemp("publish")
    ds = generated_dataset(d, scale=7, edge_factor=4, dim=8, classes=3, seed=2)
    ck = d / "ck"
    r = run_cli("train", ds, "--epochs", "1", "--max-batches", "1", "--hidden", "8", "--checkpoint", ck, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return ds, ck


def _publish_args(command: str, out: Path, env) -> list:
    ds, ck = env
    return {
        "build": ["build", ds.parent / "raw", out, "--symmetrize"],
        "generate": ["generate", "rmat", out, "--scale", "6", "--edge-factor", "2", "--dim", "4"],
        "embed": ["embed", ds, out, "--checkpoint", ck],
        "presample": ["presample", ds, out, "--fanout", "2,2", "--batch-size", "64"],
    }[command]


PUBLISHERS = ["build", "generate", "embed", "presample"]


@pytest.mark.parametrize("kind", FORCE_TARGETS)
@pytest.mark.parametrize("command", PUBLISHERS)
def test_force_refuses_what_is_not_flashgnn_output(tmp_path, publish_env, command, kind):
    """`COMMAND ... OUT --force` with OUT a user's directory, regular file, symlink or FIFO: exit 2 before any
    work, the message names OUT, the user's data is intact and no temporary is left."""
    out, intact = _user_target(tmp_path, kind)
    r = cli_fails_cleanly(f"force:{command}:{kind}", *_publish_args(command, out, publish_env), "--force",
                          fragments=(f"flashgnn {command}: error:", str(out)))
    assert intact(), f"{out} was changed"
    assert tmp_leftovers(tmp_path, "out") == [], r.stderr
    if kind != "user-dir":
        assert "not a flashgnn output directory" in r.stderr


def _publish_api(command: str, out: Path, env, force: bool = False) -> None:
    """The library call behind each publishing command (in-process: no interpreter/torch start per call)."""
    ds, ck = env
    if command == "build":
        build(ds.parent / "raw", out, symmetrize=True, force=force)
    elif command == "generate":
        flashgnn.generate(out, progress=False, scale=6, edge_factor=2, dim=4, force=force)
    elif command == "embed":
        from flashgnn.embed import embed

        embed(ds, ck, out, force=force, progress=False)
    else:
        from flashgnn.loader.presample import presample

        presample(ds, out, [2, 2], batch_size=64, force=force, progress=False)


@pytest.mark.parametrize("command", PUBLISHERS)
def test_force_replaces_own_output(tmp_path, publish_env, command):
    """--force over the same command's earlier output replaces it (its marker/manifest is recognised)."""
    out = tmp_path / "out"
    _publish_api(command, out, publish_env)
    (out / "stray").write_text("old")
    with pytest.raises((FileExistsError, flashgnn.InputError), match="--force"):
        _publish_api(command, out, publish_env)
    assert (out / "stray").exists()
    _publish_api(command, out, publish_env, force=True)
    assert not (out / "stray").exists()
    assert not (out / ".flashgnn-owner").exists()
    assert tmp_leftovers(tmp_path, "out") == []


OVERLAPS = ["build:out-is-input", "build:out-holds-input", "embed:out-is-dataset", "embed:out-holds-checkpoint",
            "presample:out-is-dataset", "presample:out-is-dataset-dotted"]


@pytest.mark.parametrize("case", OVERLAPS)
def test_force_never_replaces_its_own_input(tmp_path, publish_env, case):
    """--force whose OUT is the command's own input (or a directory holding it: an input kept inside the old
    output, a checkpoint saved in the embed directory) is refused before any work, naming OUT: publishing would
    otherwise read the input and then delete it. A generated npy directory is flashgnn output (generate.json),
    so `build raw raw --force` used to replace the raw input with the dataset built from it."""
    ds0, ck0 = publish_env
    command, kind = case.split(":")
    ds = tmp_path / "ds"
    shutil.copytree(ds0, ds)
    ck = tmp_path / "ck"
    copy = shutil.copytree if ck0.is_dir() else shutil.copyfile
    copy(ck0, ck)
    raw = tmp_path / "raw"
    shutil.copytree(ds0.parent / "raw", raw)
    if command == "build":
        out = raw if kind == "out-is-input" else ds
        inp = raw if kind == "out-is-input" else ds / "raw"
        if kind == "out-holds-input":
            shutil.copytree(raw, inp)
        before = sorted(os.listdir(out))
        cli_fails_cleanly(f"force-overlap:{case}", "build", inp, out, "--symmetrize", "--force",
                          fragments=(str(out), "the output", "input"))
        assert sorted(os.listdir(out)) == before
        return
    if kind == "out-holds-checkpoint":
        out = tmp_path / "emb"
        _publish_api("embed", out, (ds, ck))
        copy(ck0, out / "ck")
        ck = out / "ck"
    else:
        out = ds if kind == "out-is-dataset" else Path(f"{ds}/.")
    before = sorted(os.listdir(out))
    if command == "presample":
        cli_fails_cleanly(f"force-overlap:{case}", "presample", ds, out, "--fanout", "2,2", "--force",
                          fragments=(str(out), "the output", "input"))
    else:
        from flashgnn.embed import embed

        with pytest.raises(FileExistsError, match="the output (is|holds) the input"):
            embed(ds, ck, out, force=True, progress=False)
    assert sorted(os.listdir(out)) == before
    flashgnn.verify(ds, progress=False)


@pytest.mark.parametrize("command", ["build", "presample"])
@pytest.mark.parametrize("suffix", [".", "/.", "/..", "/./"])
def test_output_path_without_a_name_refused_before_work(tmp_path, publish_env, command, suffix):
    """An OUT ending in '.' or '..' (`build raw . --force` inside a dataset, `ds/.`) cannot be renamed onto:
    refused before any work, naming it, instead of failing with EBUSY after the whole build."""
    ds0, _ = publish_env
    ds = tmp_path / "ds"
    shutil.copytree(ds0, ds)
    out = "." if suffix == "." else f"{ds}{suffix}"
    args = {"build": ["build", ds0.parent / "raw", out, "--symmetrize"],
            "presample": ["presample", ds0, out, "--fanout", "2"]}[command]
    before = sorted(os.listdir(ds))
    r = subprocess.run(cli_cmd(*args, "--force"), capture_output=True, text=True, env=cli_env(), timeout=120, cwd=ds)
    record(f"nameless-out:{command}:{suffix}", r.returncode == 2)
    assert r.returncode == 2, r.stderr[-2000:]
    assert_error(r, "must end in a directory name")
    assert "built" not in r.stdout and sorted(os.listdir(ds)) == before


def test_compact_refuses_foreign_leftover_generation(tmp_path):
    """A user's directory where compaction would publish the next generation (mut/gen-N) is refused by name
    and left intact; the store keeps working."""
    ds = generated_dataset(tmp_path, scale=6, edge_factor=2, dim=4, classes=2, seed=1)
    g = flashgnn.MutableGraph(ds)
    g.add_edge(1, 2)
    gen = g.generation
    g.close()
    user = ds / "mut" / f"gen-{gen + 1}"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    cli_fails_cleanly("force:compact:user-dir", "compact", ds, fragments=(f"gen-{gen + 1}", "not flashgnn output"))
    assert (user / "notes.txt").read_text() == "mine"


def test_python_publish_swaps_atomically(tmp_path):
    """The Python publish (embed, presample) is the Rust one (flashgnn_io::publish_dir, a renameat2 swap: OUT is
    never absent), reached through _core; its refusals come back as FileExistsError naming OUT."""
    from flashgnn import _core, _durable

    assert _durable.OWNER_FILE == _core.OWNER_FILE and list(_durable.OUTPUT_MARKERS) == [tuple(m) for m in _core.OUTPUT_MARKERS]
    user = tmp_path / "user"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    t0 = _durable.create_tmp_dir(user)
    with pytest.raises(FileExistsError, match="user"):
        _durable.publish_dir(t0, user)  # not flashgnn output: refused at publication too
    assert (user / "notes.txt").read_text() == "mine"
    out = tmp_path / "out"
    out.mkdir()
    (out / "presample.json").write_text(json.dumps({"flashgnn_output": "presample"}))
    tmp = _durable.create_tmp_dir(out)
    (tmp / "new").write_text("1")
    _durable.publish_dir(tmp, out)
    assert sorted(os.listdir(out)) == ["new"]
    assert tmp_leftovers(tmp_path, "out") == []


# --- stale temporaries of killed runs --------------------------------------


def _start_time(pid: int) -> int:
    s = Path(f"/proc/{pid}/stat").read_text()
    return int(s[s.rindex(")") + 1:].split()[19])


def _boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def _owned_tmp(parent: Path, outname: str, pid: int, start: int, tag: str) -> Path:
    d = parent / f".{outname}.tmp-{pid}-{tag}"
    d.mkdir()
    (d / "graph.fg").write_bytes(b"\0" * 4096)
    (d / ".flashgnn-owner").write_text(json.dumps({"pid": pid, "start_time": start, "boot_id": _boot_id()}))
    return d


@pytest.fixture
def dead_and_live(tmp_path):
    """A temporary owned by a process that has exited, one owned by a running process, one without a marker."""
    dead = subprocess.Popen(["true"])
    dead_start = _start_time(dead.pid)
    dead.wait()
    live = subprocess.Popen(["sleep", "300"])
    try:
        parent = tmp_path / "pub"
        parent.mkdir()
        t_dead = _owned_tmp(parent, "out", dead.pid, dead_start, "1")
        t_reused = _owned_tmp(parent, "out", live.pid, _start_time(live.pid) - 1, "3")  # pid reused since
        t_live = _owned_tmp(parent, "out", live.pid, _start_time(live.pid), "2")
        t_foreign = parent / ".out.tmp-foreign"
        t_foreign.mkdir()
        yield parent, (t_dead, t_reused), (t_live, t_foreign)
    finally:
        live.kill()
        live.wait()


@pytest.mark.parametrize("command", PUBLISHERS)
def test_stale_tmps_removed_live_ones_kept(dead_and_live, publish_env, command, capfd):
    """Every publishing command removes the '.OUT.tmp-*' of owners that are gone (and says so on stderr),
    keeps one whose owner still runs and one it cannot prove its own."""
    parent, stale, kept = dead_and_live
    _publish_api(command, parent / "out", publish_env)
    err = capfd.readouterr().err
    for t in stale:
        assert not t.exists(), f"{t} left"
        assert f"removed stale temporary {t}" in err
    for t in kept:
        assert t.exists(), f"{t} removed"
    record(f"stale-tmp:{command}", True)


def test_killed_build_leaves_tmp_that_next_build_removes(tmp_path):
    """SIGKILL a build mid-way: its '.OUT.tmp-*' stays (nothing can run on SIGKILL); the next build removes it
    and reports it."""
    flashgnn.generate(tmp_path / "raw", progress=False, scale=15, edge_factor=16, dim=16, classes=4, seed=1)
    out = tmp_path / "out"
    p = subprocess.Popen(cli_cmd("build", tmp_path / "raw", out, "--symmetrize", "--dedup"), env=cli_env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + HANG_TIMEOUT
    left = []
    while time.monotonic() < deadline and p.poll() is None:
        left = [d for d in tmp_leftovers(tmp_path, "out") if (tmp_path / d / ".flashgnn-owner").exists()]
        if left:
            break
        time.sleep(0.002)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert left, "the build finished before it could be killed"
    assert not out.exists() and tmp_leftovers(tmp_path, "out") == left
    r = run_cli_bounded("build", tmp_path / "raw", out, "--symmetrize", "--dedup")
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"removed stale temporary {tmp_path / left[0]}" in r.stderr
    assert tmp_leftovers(tmp_path, "out") == []


def test_ogb_link_prediction_split_is_read_or_refused_never_dropped(tmp_path, tiny):
    """An OGB link-prediction split (split/<name>/*.pt) is imported by `flashgnn build` (the link split's own
    tests); one that is not a tensor dict is refused naming the file, with nothing published; the core build
    alone (no `.pt` reader) names the split in a note rather than dropping it silently."""
    root = write_ogb(tmp_path / "ogbl", tiny.edges, tiny.num_nodes, tiny.features, tiny.labels)
    sdir = root / "split" / "time"
    sdir.mkdir(parents=True)
    for name in ("train.pt", "valid.pt", "test.pt"):
        (sdir / name).write_bytes(b"\x80\x04not a node list")
    pytest.importorskip("torch")
    r = run_cli("build", root, tmp_path / "out")
    assert r.returncode == 2, r.stderr
    assert "train.pt" in r.stderr and "torch.load(weights_only=True)" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
    rep = run_job(_core.start_build(str(root), str(tmp_path / "out2"), {}), progress=False)
    assert any("link-prediction" in n and "split not imported" in n for n in rep["notes"]), rep
    assert rep["manifest"]["splits"] == {}


