"""Real data in without glue: a SNAP edge list with a separate
labels file (and a features file) goes from text to a trained model with
`flashgnn build` + `flashgnn train`; bad labels files are refused naming
file, line, value and bound; a dataset without features is refused by
`train` instead of training on zero-width input; `--symmetrize` on an input
that is already symmetric says so and `--dedup` counts only true duplicates;
`--make-splits` is stratified by class; list options take negative-leading
values (`--fanout -1,-1`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import flashgnn

from conftest import assert_error, build, run_cli, write_snap


@pytest.fixture(scope="module")
def labelled_graph(tmp_path_factory):
    """A generated graph written the way SNAP ships labelled sets: a directed
    text edge list, a `node label` file (lines shuffled, some nodes left
    out), and a features table as .npy and as text rows."""
    d = tmp_path_factory.mktemp("snap")
    flashgnn.generate(d / "gen", progress=False, scale=10, edge_factor=6, dim=12, classes=4, seed=2,
                      split=(0.1, 0.05, 0.05), homophily=0.8, feature_signal=1.0)
    e = np.load(d / "gen" / "edge_index.npy")
    e = e.T if e.shape[0] == 2 and e.shape[1] != 2 else e
    y = np.load(d / "gen" / "node_label.npy")
    x = np.load(d / "gen" / "node_feat.npy").astype(np.float32)
    n = len(y)
    e = e[(e[:, 0] < n) & (e[:, 1] < n)]
    write_snap(d / "edges.txt", e)
    rng = np.random.default_rng(0)
    listed = np.sort(rng.choice(n, size=n - 40, replace=False))  # 40 unlabeled nodes
    lines = [f"{v} {y[v]}" for v in rng.permutation(listed)]
    (d / "labels.txt").write_text("# node label\n" + "\n".join(lines) + "\n")
    np.save(d / "feats.npy", x)
    (d / "feats.txt").write_text("\n".join(" ".join(f"{v:.6g}" for v in row) for row in x) + "\n")
    want = np.full(n, -1, np.int64)
    want[listed] = y[listed]
    return d, n, want, x


def test_snap_edge_list_and_labels_file_to_trained_model_in_two_commands(labelled_graph, tmp_path):
    d, n, want, x = labelled_graph
    out = tmp_path / "ds"
    p = run_cli("build", d / "edges.txt", out, "--symmetrize", "--dedup", "--labels", d / "labels.txt",
                "--features", d / "feats.npy", "--make-splits", "0.6,0.2,0.2")
    assert p.returncode == 0, p.stderr
    assert "stratified by class" in p.stdout
    p = run_cli("train", out, "--model", "sage", "--epochs", "3", "--fanout", "10,5", "--batch-size", "256",
                "--no-progress", "--threads", "1", "--metrics-json", tmp_path / "m.json", timeout=300)
    assert p.returncode == 0, p.stderr
    acc = json.loads((tmp_path / "m.json").read_text())["summary"]["test_acc"]
    assert acc > 0.5, acc  # 4 classes: chance is 0.25
    ds = flashgnn.open(out)
    np.testing.assert_array_equal(ds.labels(np.arange(n)), want)
    np.testing.assert_array_equal(ds.features(np.arange(n)).astype(np.float32), x)
    assert ds.num_classes == 4


def test_labels_npy_and_text_features(labelled_graph, tmp_path):
    d, n, want, x = labelled_graph
    np.save(tmp_path / "labels.npy", want)
    build(d / "edges.txt", tmp_path / "ds", labels=tmp_path / "labels.npy", features=d / "feats.txt")
    ds = flashgnn.open(tmp_path / "ds")
    np.testing.assert_array_equal(ds.labels(np.arange(n)), want)
    np.testing.assert_allclose(ds.features(np.arange(n)).astype(np.float32), x, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "text, fragments",
    [
        ("0 1\n1 0\n9 2\n", ["labels.txt", "line 3", "node 9 is not in the graph", "[0, 4)"]),
        ("0 1\n1 0\n0 2\n", ["labels.txt", "line 3", "node 0 is labelled twice", "line 1"]),
        ("0 1\n1 x\n", ["labels.txt", "line 2, column 3", '"x"', "class id"]),
        ("0 1\n1.5 0\n", ["labels.txt", "line 2, column 1", '"1.5"', "node id"]),
        ("0 1\n1 -3\n", ["labels.txt", "line 2, column 3", "label -3", "[0, "]),
        ("0 1\n1 0 7\n", ["labels.txt", "line 2", "3 field(s)", "node label"]),
    ],
)
def test_bad_labels_file_is_refused_with_file_line_value_and_bound(tmp_path, text, fragments):
    edges = write_snap(tmp_path / "e.txt", [[0, 1], [1, 2], [2, 3]])
    (tmp_path / "labels.txt").write_text(text)
    with pytest.raises(flashgnn.InputError) as e:
        build(edges, tmp_path / "ds", labels=tmp_path / "labels.txt")
    assert_error(e, *fragments)
    assert not (tmp_path / "ds").exists()


def test_labels_and_features_flags_refused_for_directory_inputs(tmp_path):
    from conftest import write_npy_dir

    inp = write_npy_dir(tmp_path / "in", [[0, 1], [1, 2]])
    (tmp_path / "l.txt").write_text("0 1\n")
    with pytest.raises(Exception) as e:
        build(inp, tmp_path / "ds", labels=tmp_path / "l.txt")
    assert_error(e, "--labels", "only for edge-list inputs")
    with pytest.raises(flashgnn.InputError) as e:
        build(write_snap(tmp_path / "e.txt", [[0, 1], [1, 2], [2, 3]]), tmp_path / "ds2",
              features=np.save(tmp_path / "f.npy", np.zeros((3, 2), np.float32)) or tmp_path / "f.npy")
    assert_error(e, "e.txt", "line 5", "node id 3", "declared node count 3")


def test_train_refuses_a_dataset_without_features(labelled_graph, tmp_path):
    d, _, _, _ = labelled_graph
    build(d / "edges.txt", tmp_path / "bare", symmetrize=True, dedup=True, labels=d / "labels.txt",
          make_splits=(0.6, 0.2, 0.2))
    p = run_cli("train", tmp_path / "bare", "--epochs", "1", "--no-progress")
    assert p.returncode != 0
    assert_error(p, "no node features", "feature dim 0", "--features FILE", "--synthetic-features D", "N x N")
    build(d / "edges.txt", tmp_path / "synth", symmetrize=True, dedup=True, labels=d / "labels.txt",
          make_splits=(0.6, 0.2, 0.2), synthetic_features=8)
    p = run_cli("train", tmp_path / "synth", "--epochs", "1", "--no-progress", "--fanout", "5,3", timeout=300)
    assert p.returncode == 0, p.stderr
    p = run_cli("build", d / "edges.txt", tmp_path / "nolab", "--make-splits", "0.6,0.2,0.2",
                "--synthetic-features", "4")
    assert p.returncode == 0 and "random per node" in p.stdout and "no labels to stratify by" in p.stdout
    p = run_cli("train", tmp_path / "nolab", "--epochs", "1", "--no-progress")
    assert p.returncode != 0
    assert_error(p, "no labels", "--labels FILE")


# ---------------------------------------------------------------------------------------------
# --symmetrize / --dedup counts


SYMMETRIC = [[0, 1], [1, 0], [1, 2], [2, 1], [2, 3], [3, 2], [0, 1]]  # symmetric, with one repeated edge


def test_symmetrize_on_a_symmetric_input_is_reported_and_counts_mean_what_they_say(tmp_path):
    inp = write_snap(tmp_path / "sym.txt", SYMMETRIC)
    b = build(inp, tmp_path / "a", symmetrize=True, dedup=True)["manifest"]
    m = b["build"]
    assert b["num_edges"] == 6
    assert m["duplicates_removed"] == 1  # the repeated 0 -> 1, and nothing else
    assert m["reverse_duplicates_removed"] == 7  # every added reverse copy met an edge already there
    assert (m["input_edges_distinct"], m["input_edges_with_reverse"]) == (6, 6)
    p = run_cli("build", inp, tmp_path / "b", "--symmetrize", "--dedup")
    assert p.returncode == 0, p.stderr
    assert "duplicates removed 1;" in p.stdout and "reverse copies already present 7" in p.stdout
    assert "input already symmetric" in p.stdout and "6 reverse edges already present" in p.stdout
    p = run_cli("build", inp, tmp_path / "c", "--symmetrize")
    assert p.returncode == 0, p.stderr
    assert "input already symmetric" in p.stdout and "stored twice" in p.stdout and "--dedup" in p.stdout
    assert flashgnn.open(tmp_path / "c").num_edges == 14
    # half symmetric: 2 of 4 distinct edges have their reverse
    part = write_snap(tmp_path / "part.txt", [[0, 1], [1, 2], [2, 3], [0, 1], [2, 1]])
    m = build(part, tmp_path / "d", symmetrize=True, dedup=True)["manifest"]
    assert (m["num_edges"], m["build"]["duplicates_removed"], m["build"]["reverse_duplicates_removed"]) == (6, 1, 3)
    assert (m["build"]["input_edges_distinct"], m["build"]["input_edges_with_reverse"]) == (4, 2)
    # without --symmetrize: dedup counts duplicates as before, no reverse figures
    m = build(inp, tmp_path / "e", dedup=True)["manifest"]["build"]
    assert (m["duplicates_removed"], m["reverse_duplicates_removed"], m["input_edges_with_reverse"]) == (1, 0, 0)


# ---------------------------------------------------------------------------------------------
# --make-splits


def test_make_splits_is_stratified_by_class(tmp_path):
    from conftest import write_npy_dir

    n = 600
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(5), [300, 200, 80, 17, 3])
    labels = labels[rng.permutation(n)]
    labels[rng.choice(n, 20, replace=False)] = -1  # unlabeled nodes
    edges = np.stack([np.arange(n), (np.arange(n) + 1) % n], 1)
    inp = write_npy_dir(tmp_path / "in", edges, rng.standard_normal((n, 4)).astype(np.float32), labels)
    p = run_cli("build", inp, tmp_path / "ds", "--make-splits", "0.1,0.2,0.3", "--seed", "4")
    assert p.returncode == 0, p.stderr
    assert "stratified by class" in p.stdout and "at least one training node" in p.stdout
    ds = flashgnn.open(tmp_path / "ds")
    assert ds.manifest["build"]["splits_made"] == "stratified"
    sets = {s: ds.split(s) for s in ("train", "val", "test")}
    every = np.concatenate(list(sets.values()))
    assert len(np.unique(every)) == len(every)  # disjoint
    assert (labels[every] >= 0).all()  # unlabeled nodes are in no split
    for c in range(5):
        count = int((labels == c).sum())
        got = [int((labels[sets[s]] == c).sum()) for s in ("train", "val", "test")]
        want = [max(1, round(count * 0.1)), round(count * 0.2), round(count * 0.3)]
        assert got == want, (c, count, got, want)  # every class in train, each in its fractions


# ---------------------------------------------------------------------------------------------
# negative-leading list values


def test_list_options_take_negative_leading_values():
    from flashgnn.cli import _parser
    from flashgnn.train.config import parser as train_parser

    p = _parser()
    a = p.parse_args(["train", "d", "--fanout", "-1,-1", "--eval-fanout", "-1,5"])
    assert (a.fanout, a.eval_fanout) == ("-1,-1", "-1,5")
    assert p.parse_args(["presample", "d", "o", "--fanout", "-1,-1"]).fanout == "-1,-1"
    assert p.parse_args(["bench", "d", "--fanout", "-1,10"]).fanout == "-1,10"
    assert train_parser().parse_args(["d", "--fanout", "-1"]).fanout == "-1"
    with pytest.raises(SystemExit):  # an unknown option is still an option
        p.parse_args(["train", "d", "--fanout", "-x"])
