"""`flashgnn train` as a person uses it: defaults in --help, every flag
checked before any I/O, advice that points at the fix, --quiet, progress that
degrades to plain lines in logs, --max-batches bounding evaluation too."""
from __future__ import annotations

import re

import pytest

from conftest import generated_dataset, run_cli


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return generated_dataset(tmp_path_factory.mktemp("cli"), scale=9, edge_factor=6, dim=8, classes=3, seed=2)


def test_help_groups_and_defaults():
    p = run_cli("train", "--help")
    assert p.returncode == 0
    for heading in ("model and optimisation:", "sampling and reading:", "memory and caches:",
                    "checkpoints and output:"):
        assert heading in p.stdout
    text = " ".join(p.stdout.split())
    for shown in ("(default: 25,10)", "(default: 1024)", "(default: sage)", "(default: 0.003)", "(default: none)"):
        assert shown in text, shown
    ps = " ".join(run_cli("presample", "--help").stdout.split())
    assert "(default: 25,10)" in ps and "(default: 1024)" in ps  # presample shares train's defaults


@pytest.mark.parametrize("flags, words", [
    (["--epochs", "0"], "--epochs 0: must be >= 1"),
    (["--epochs", "-3"], "--epochs -3: must be >= 1"),
    (["--batch-size", "0"], "--batch-size 0: must be >= 1"),
    (["--dropout", "1.0"], "--dropout 1.0: must be in [0, 1)"),
    (["--lr", "0"], "--lr 0.0: must be a finite number > 0"),
    (["--lr", "nan"], "--lr nan: must be a finite number > 0"),
    (["--weight-decay", "-1"], "--weight-decay -1.0: must be a finite number >= 0"),
    (["--max-batches", "0"], "--max-batches 0: must be >= 1"),
    (["--hot-fraction", "2"], "--hot-fraction 2.0: must be in [0, 1]"),
    (["--fanout", "a,b"], "--fanout 'a,b'"),
    (["--resume"], "--resume needs --checkpoint DIR"),
])
def test_bad_flags_refused_before_any_io(tmp_path, flags, words):
    # The dataset does not exist: a flag error (not "no such dataset") proves the flags are checked first.
    from flashgnn.train.trainer import parser, run

    with pytest.raises(SystemExit) as e:
        run(parser().parse_args([str(tmp_path / "nope"), *flags]))
    assert words in str(e.value.code), e.value.code


def test_bad_flag_from_the_command_line(tmp_path):
    p = run_cli("train", tmp_path / "nope", "--epochs", "0")
    assert p.returncode != 0 and "--epochs 0: must be >= 1" in p.stderr and "no such dataset" not in p.stderr


def test_checkpoint_that_is_a_file_is_refused_before_training(tmp_path, ds):
    f = tmp_path / "ck"
    f.write_text("x")
    p = run_cli("train", ds, "--checkpoint", f, "--epochs", "1")
    assert p.returncode != 0 and f"--checkpoint {f}: exists and is not a directory" in p.stderr
    assert "epoch 1" not in p.stdout


def test_raw_input_as_dataset_points_at_build(tmp_path, ds):
    raw = ds.parent / "raw"
    p = run_cli("train", raw)
    assert p.returncode == 2 and "import it first with `flashgnn build" in p.stderr and "edge_index.npy" in p.stderr
    edges = tmp_path / "edges.txt"
    edges.write_text("0 1\n")
    p = run_cli("info", edges)
    assert p.returncode == 2 and f"flashgnn build {edges} OUT" in p.stderr


def test_quiet_prints_only_the_summary(ds):
    p = run_cli("train", ds, "--epochs", "2", "--quiet", timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trained sage on"), p.stdout
    assert "epoch 1" not in p.stderr and "batch" not in p.stderr


def test_plain_progress_lines_off_a_terminal_and_max_batches_bounds_eval(ds):
    p = run_cli("train", ds, "--epochs", "1", "--batch-size", "16", "--max-batches", "2", timeout=300)
    assert p.returncode == 0, p.stderr
    assert "\r" not in p.stderr and "\x1b" not in p.stderr  # a log, not a terminal: no bar redraws
    assert re.search(r"^epoch 1/1: 2/2 batch \(100%\)", p.stderr, re.M), p.stderr
    m = re.search(r"^eval 1/1: (\d+)/(\d+) batch", p.stderr, re.M)
    assert m and int(m.group(1)) == int(m.group(2)) <= 4, p.stderr  # 2 val + 2 test batches at most
