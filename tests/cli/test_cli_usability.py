"""`flashgnn train` as a person uses it: defaults in --help, every flag
checked before any I/O, advice that points at the fix, --quiet, progress that
degrades to plain lines in logs, --max-batches bounding evaluation too; and
the library under it: one TrainConfig the parser is generated from, errors
as TrainError (exit 2 only at the command line), unknown options refused."""
from __future__ import annotations

import re

import pytest

from conftest import generated_dataset, run_cli
from flashgnn.train import TrainConfig, TrainError, Trainer
from flashgnn.train.config import FIELDS, flag


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
    (["--eval-batches", "-1"], "--eval-batches -1: must be >= 1"),
    (["--hot-fraction", "2"], "--hot-fraction 2.0: must be in [0, 1]"),
    (["--fanout", "a,b"], "--fanout 'a,b'"),
    (["--resume"], "--resume needs --checkpoint DIR"),
])
def test_bad_flags_refused_before_any_io(tmp_path, flags, words):
    # The dataset does not exist: a flag error (not "no such dataset") proves the flags are checked first.
    from flashgnn.train.trainer import parser, run

    with pytest.raises(TrainError) as e:
        run(parser().parse_args([str(tmp_path / "nope"), *flags]))
    assert words in str(e.value) and "flashgnn train: error" not in str(e.value), e.value


def test_bad_flag_from_the_command_line(tmp_path):
    p = run_cli("train", tmp_path / "nope", "--epochs", "0")
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1] == "flashgnn train: error: --epochs 0: must be >= 1"


def test_bad_flag_through_the_module_entry_point(tmp_path):
    """`python -m flashgnn.train` (what torchrun runs) prints the same line and exits 2."""
    import subprocess
    import sys

    from conftest import cli_env

    p = subprocess.run([sys.executable, "-m", "flashgnn.train", str(tmp_path / "nope"), "--epochs", "0"],
                       capture_output=True, text=True, env=cli_env(), timeout=120)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1] == "flashgnn train: error: --epochs 0: must be >= 1"


def test_help_lists_every_config_field_with_its_default():
    """The parser is generated from TrainConfig: each field is an option of `flashgnn train --help`
    (the dataset the positional), shown with its default; a None default is explained in words."""
    text = run_cli("train", "--help").stdout
    # One block per option: from its flag at the line start to the next option's.
    blocks = dict(re.findall(r"^  (--[a-z-]+)(.*?)(?=^  -|\Z)", text, re.M | re.S))
    assert "dataset" in text.split("positional arguments:")[1].split("options:")[0]
    for name, f in FIELDS.items():
        if name == "dataset":
            continue
        block = " ".join(blocks.get(flag(name), "").split())
        assert flag(name) in blocks, f"{flag(name)} missing from --help"
        if isinstance(f.default, bool):
            assert f.default is False and "=" not in block and flag(name).upper() not in block  # a flag, off
        elif f.default is None:
            assert "default:" in block, (name, block)
        else:
            assert f"(default: {f.default})" in block, (name, block)
    assert set(blocks) == {flag(n) for n in FIELDS if n != "dataset"}  # and no option outside the config


def test_config_refuses_unknown_options_naming_the_accepted_ones():
    with pytest.raises(TrainError, match="unknown option.s. epoch, lr_rate; accepted: dataset, model, .*batch_size"):
        TrainConfig(dataset="d", epoch=3, lr_rate=0.1)
    from flashgnn.train import fit

    with pytest.raises(TrainError, match="symetrize"):
        fit("d", symetrize=True)
    c = TrainConfig("d", fanout=[10, 5], cache_budget="1MiB")  # the API takes what the command line would
    assert c.fanout == "10,5" and c.cache_budget == 1 << 20 and c.epochs == FIELDS["epochs"].default
    with pytest.raises(Exception):
        c.epochs = 5  # frozen: derived values live on the Trainer


def test_trainer_raises_train_error_not_system_exit(tmp_path):
    with pytest.raises(TrainError, match="--epochs 0: must be >= 1") as e:
        Trainer(TrainConfig(dataset=str(tmp_path / "nope"), epochs=0))
    assert isinstance(e.value, ValueError) and not isinstance(e.value, SystemExit)
    with pytest.raises(TrainError, match="--model 'sagex': expected one of sage"):
        Trainer(TrainConfig(dataset=str(tmp_path / "nope"), model="sagex"))  # choices hold without argparse
    with pytest.raises(TrainError, match="--batch-size '8': must be an integer"):
        Trainer(TrainConfig(dataset=str(tmp_path / "nope"), batch_size="8"))


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
    assert int(m.group(2)) == 4, p.stderr  # the demo-sized fixture has more than 2 batches per split
    # --eval-batches bounds evaluation alone (a timed run that needs only a sample of val/test).
    p = run_cli("train", ds, "--epochs", "1", "--batch-size", "16", "--max-batches", "2", "--eval-batches", "1",
                timeout=300)
    assert p.returncode == 0, p.stderr
    assert re.search(r"^epoch 1/1: 2/2 batch \(100%\)", p.stderr, re.M), p.stderr
    m = re.search(r"^eval 1/1: (\d+)/(\d+) batch", p.stderr, re.M)
    assert m and int(m.group(1)) == int(m.group(2)) == 2, p.stderr  # 1 val + 1 test batch


def test_fit_returns_the_summary_the_command_line_prints(ds, tmp_path):
    """`flashgnn.train.fit(dataset, **options)` and `flashgnn train DATASET --options` are one run: the same
    seed gives the same final loss, accuracies and weights (their digest), in another process."""
    from flashgnn.train import fit

    opts = dict(epochs=2, fanout="4,2", batch_size=64, seed=5, threads=1, no_progress=True)
    argv = [f"{flag(k)}={v}" for k, v in opts.items() if v is not True] + ["--no-progress"]
    p = run_cli("train", ds, *argv, "--metrics-json", tmp_path / "m.json", timeout=300)
    assert p.returncode == 0, p.stderr
    import json

    cli = json.loads((tmp_path / "m.json").read_text())
    assert cli["args"] == TrainConfig(dataset=str(ds), metrics_json=str(tmp_path / "m.json"), **opts).as_dict()
    ours = fit(str(ds), quiet=True, **opts)
    t = Trainer(TrainConfig(dataset=str(ds), quiet=True, **opts))
    assert t.fit()["rank_weight_digests"] == ours["rank_weight_digests"]
    ev = t.evaluate("test")  # the model fit() leaves is the best-validation one: its test accuracy is the summary's
    assert ev["total"] > 0 and ev["acc"] == ev["correct"] / ev["total"] == ours["test_acc"]
    with pytest.raises(TrainError, match="already run fit"):
        t.fit()
    for key in ("train_loss", "test_acc", "val_acc", "best_epoch", "epochs", "train_nodes", "rank_weight_digests"):
        assert ours[key] == cli["summary"][key], key
    assert [e["train_loss"] for e in ours["history"]] == [e["train_loss"] for e in cli["epochs"]]
    other = fit(str(ds), quiet=True, **dict(opts, seed=6))  # the comparison can fail: another seed differs
    assert other["rank_weight_digests"] != ours["rank_weight_digests"]


def test_no_system_exit_below_the_command_line():
    """Library code raises exceptions; only `flashgnn.cli` and `__main__` modules exit (a walk of every
    module's syntax tree, so a lazy `raise SystemExit(...)` inside a function counts)."""
    import ast
    from pathlib import Path

    pkg = Path(__file__).resolve().parents[2] / "python" / "flashgnn"
    assert (pkg / "train" / "trainer.py").exists(), pkg

    def exits(tree) -> list[int]:
        return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Raise) and n.exc is not None
                and "SystemExit" in ast.unparse(n.exc)]

    assert exits(ast.parse("def f():\n    raise SystemExit('x: error')\n")) == [2]  # the walk can fail
    found = [f"{f.relative_to(pkg)}:{line}" for f in sorted(pkg.rglob("*.py"))
             if "cli" not in f.relative_to(pkg).parts[:1] and f.name != "__main__.py"
             for line in exits(ast.parse(f.read_text(), str(f)))]
    assert not found, found
