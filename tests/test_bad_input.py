"""The RELIABILITY.md bad-input catalogue, one fixture per row and layout.

Every test builds from a tiny valid input with exactly one thing broken and
checks the error names the file, the position (line/column, or row/byte
offset), the value and the bound where the catalogue asks for them — and that
nothing was published.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

import flashgnn
from conftest import (
    TinyGraph,
    assert_error,
    assert_no_crash,
    build,
    cli_env,
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


def build_fails(inp, out, *fragments, exc=flashgnn.InputError, **opts) -> str:
    """Build must raise ``exc`` whose message holds every fragment; nothing is published."""
    with pytest.raises(exc) as ei:
        build(inp, out, **opts)
    msg = assert_error(ei, *fragments)
    assert_nothing_published(Path(out))
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
    assert "5 input edges -> 2 stored (self-loops dropped 2, added 0; duplicates removed 1); 3 isolated nodes" in r.stdout


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
