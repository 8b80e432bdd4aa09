"""The whole command line as a newcomer walks it, beyond
`flashgnn train`: `flashgnn --help` lists the commands in groups; every
option of every command shows its default once (0 and sizes included);
bad values are refused by name before any work (argparse types, or the
command's checks before it opens or writes anything); `compact` on a plain
dataset writes nothing; `presample` takes train's defaults and `train
--presampled` checks the pre-sample's flags before any I/O; `--quiet` on
every long command leaves the summary line alone; progress off a terminal
is plain lines; no torch FutureWarning reaches the screen.

How: the parser is walked in process (flashgnn.cli._parser, every
subcommand and sub-subcommand); commands run in process through
flashgnn.cli.main with captured output (not a terminal), except the one
that checks warnings, which runs the real `flashgnn train` in a child.
"""

from __future__ import annotations

import argparse
import json
import os
import re

import pytest

import flashgnn
from flashgnn.cli import COMMAND_GROUPS, _parser, main
from flashgnn.train import TrainConfig, TrainError
from flashgnn.train.config import FIELDS, default

from conftest import generated_dataset, run_cli


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return generated_dataset(tmp_path_factory.mktemp("walk"), scale=9, edge_factor=6, dim=8, classes=3, seed=2)


def _commands(p: argparse.ArgumentParser, prefix=()):
    """(command words, parser) for every command and sub-command."""
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield (*prefix, name), sp
                yield from _commands(sp, (*prefix, name))


def _run(capsys, *argv) -> tuple[int, str, str]:
    try:
        rc = main([str(x) for x in argv])
    except SystemExit as e:  # argparse
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


# ---------------------------------------------------------------------------------------------
# --help


def test_top_level_help_lists_every_command_once_under_its_group(capsys):
    rc, out, _ = _run(capsys, "--help")
    assert rc == 0
    top = {name for (name, *rest), _ in _commands(_parser()) if not rest}
    listed = re.findall(r"^  ([a-z][a-z-]*) {2,}\S", out, re.M)
    assert sorted(listed) == sorted(top)  # each exactly once
    for title, cmds in COMMAND_GROUPS:
        block = out.split(f"\n{title}:\n")[1].split("\n\n")[0]
        assert re.findall(r"^  ([a-z-]+) ", block, re.M) == list(cmds), title
    assert "{generate,build" not in out  # argparse's flat choice list is gone


def test_every_option_of_every_command_shows_its_default_once():
    checked = 0
    for words, sp in _commands(_parser()):
        text = sp.format_help()
        blocks = dict(re.findall(r"^  (--[a-z-]+)(.*?)(?=^  -|^\S|\Z)", text, re.M | re.S))
        for a in sp._actions:
            if not a.option_strings or a.default in (None, argparse.SUPPRESS) or a.default is False \
                    or isinstance(a, (argparse._HelpAction, argparse._VersionAction)):
                continue
            block = " ".join(blocks[a.option_strings[0]].split())
            assert "(default" in block, (words, a.option_strings[0], block)
            assert block.count("(default") == 1, (words, a.option_strings[0], block)
            checked += 1
    assert checked > 80


def test_falsy_defaults_sizes_and_lists_print_as_the_option_reads_them():
    p = _parser()
    sub = dict(_commands(p))
    build = " ".join(sub[("build",)].format_help().split())
    assert "hard cap on builder memory (default: 2GiB)" in build  # not 2147483648
    assert "--seed SEED seed of the random choices (splits, synthetic features) (default: 0)" in build
    gen = " ".join(sub[("generate", "rmat")].format_help().split())
    assert "(default: 0.1,0.05,0.05)" in gen and "(default: 16) (default" not in gen
    assert "(default: 64KiB)" in " ".join(sub[("stripe",)].format_help().split())


def test_each_command_help_says_what_it_does():
    for words, sp in _commands(_parser()):
        if len(words) == 1:
            assert sp.description, words


# ---------------------------------------------------------------------------------------------
# Bad values: refused by name, before any work


@pytest.mark.parametrize("argv, words", [
    (["generate", "rmat", "{tmp}/g", "--scale", "-1"], "argument --scale: -1 is out of range: must be >= 1"),
    (["generate", "rmat", "{tmp}/g", "--dim", "-1"], "argument --dim: -1 is out of range: must be >= 0"),
    (["generate", "rmat", "{tmp}/g", "--seed", "-1"], "argument --seed: -1 is out of range: must be >= 0"),
    (["generate", "rmat", "{tmp}/g", "--homophily", "2"], "argument --homophily: 2 is out of range: must be in [0, 1]"),
    (["build", "{tmp}/raw", "{tmp}/b", "--num-nodes", "-4"], "argument --num-nodes: -4 is out of range"),
    (["bench", "{tmp}/nope", "--batch-size", "0"], "argument --batch-size: 0 is out of range: must be >= 1"),
    (["bench", "{tmp}/nope", "--batches", "0"], "argument --batches: 0 is out of range: must be >= 1"),
    (["bench", "{tmp}/nope", "--fanout", "-3"], "--fanout '-3': hop 1 is -3"),
    (["bench", "{tmp}/nope", "--max-seconds", "0"], "argument --max-seconds: 0 is out of range"),
    (["trace", "{tmp}/nope", "{tmp}/t.fgt", "--batches", "0"], "argument --batches: 0 is out of range"),
    (["trace", "{tmp}/nope", "{tmp}/t.fgt", "--fanout", "0"], "--fanout '0': hop 1 is 0"),
    (["embed", "{tmp}/nope", "{tmp}/e", "--checkpoint", "{tmp}", "--engine", "warp"], "--engine 'warp': expected one"),
    (["embed", "{tmp}/nope", "{tmp}/e", "--checkpoint", "{tmp}", "--device", "gpu"], "--device 'gpu': expected cpu"),
    (["embed", "{tmp}/nope", "{tmp}/e", "--checkpoint", "{tmp}", "--batch-size", "0"],
     "argument --batch-size: 0 is out of range: must be >= 1"),
    (["presample", "{tmp}/nope", "{tmp}/ps", "--epochs", "0"], "argument --epochs: 0 is out of range: must be >= 1"),
    (["presample", "{tmp}/nope", "{tmp}/ps", "--workers", "0"], "argument --workers: 0 is out of range"),
    (["presample", "{tmp}/nope", "{tmp}/ps", "--fanout", "10,0"], "--fanout '10,0': hop 2 is 0"),
    (["presample", "{tmp}/nope", "{tmp}/ps", "--engine", "warp"], "--engine 'warp': expected one of auto, uring"),
    (["presample", "{tmp}/nope", "{tmp}/ps"], "no such dataset directory"),
    (["train", "{tmp}/nope", "--fanout", "0"], "--fanout '0': hop 1 is 0; each hop must be >= 1, or -1"),
    (["train", "{tmp}/nope", "--eval-fanout", "-3"], "--eval-fanout '-3': hop 1 is -3"),
    (["train", "{tmp}/nope", "--fanout", ",".join(["2"] * 17)], "17 hops; at most 16"),
    (["train", "{tmp}/nope", "--presampled", "{tmp}/nope-ps"], "--presampled {tmp}/nope-ps: has no presample.json"),
    (["train", "{tmp}/nope", "--metrics-json", "{tmp}/afile/m.json"],
     "--metrics-json {tmp}/afile/m.json: {tmp}/afile is not a directory"),
    (["train", "{tmp}/nope", "--metrics-json", "{tmp}/no/such/m.json"], "{tmp}/no/such does not exist"),
    (["train", "{tmp}/nope", "--checkpoint", "{tmp}/afile/ck"], "--checkpoint {tmp}/afile/ck: {tmp}/afile is not a "
                                                                "directory"),
    (["train", "{tmp}/nope"], "{tmp}/nope: no such dataset directory"),
    (["scrub", "{tmp}/nope", "--state", "{tmp}/afile"], "--state {tmp}/afile: is not a directory"),
])
def test_bad_values_are_refused_by_name_before_any_work(tmp_path, capsys, argv, words):
    (tmp_path / "afile").write_text("x")
    before = sorted(p.name for p in tmp_path.iterdir())
    rc, out, err = _run(capsys, *[w.replace("{tmp}", str(tmp_path)) for w in argv])
    assert rc == 2, (rc, out, err)
    assert words.replace("{tmp}", str(tmp_path)) in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_flags_are_checked_before_the_dataset(tmp_path, capsys):
    # The dataset does not exist either: the flag error comes first (it is the one a user fixes first).
    rc, _, err = _run(capsys, "train", tmp_path / "nope", "--presampled", tmp_path, "--epochs", "0")
    assert rc == 2 and "--epochs 0: must be >= 1" in err


def test_raw_input_and_dataset_swapped_point_at_the_fix(ds, tmp_path, capsys):
    rc, _, err = _run(capsys, "presample", ds.parent / "raw", tmp_path / "ps")
    assert rc == 2 and "import it first with `flashgnn build" in err
    rc, _, err = _run(capsys, "embed", ds.parent / "raw", tmp_path / "e", "--checkpoint", tmp_path)
    assert rc == 2 and "import it first with `flashgnn build" in err
    rc, _, err = _run(capsys, "build", ds, tmp_path / "b")
    assert rc == 2 and "is already a flashgnn dataset (it holds manifest.json)" in err
    assert not (tmp_path / "b").exists()


def test_embed_without_a_checkpoint_is_refused_before_any_work(ds, tmp_path, capsys):
    rc, _, err = _run(capsys, "embed", ds, tmp_path / "e", "--checkpoint", tmp_path / "none")
    assert rc == 2 and f"--checkpoint {tmp_path / 'none'}: does not exist" in err
    (tmp_path / "empty").mkdir()
    rc, _, err = _run(capsys, "embed", ds, tmp_path / "e", "--checkpoint", tmp_path / "empty")
    assert rc == 2 and "holds no checkpoint.pt (train with `flashgnn train" in err
    assert not (tmp_path / "e").exists()


def test_compact_on_a_plain_dataset_writes_nothing(ds, capsys):
    before = sorted(os.listdir(ds))
    rc, _, err = _run(capsys, "compact", ds)
    assert rc == 2 and "no mutable store" in err and "nothing to compact" in err
    assert sorted(os.listdir(ds)) == before and not (ds / "mut").exists()


# ---------------------------------------------------------------------------------------------
# presample and train: one set of defaults, checked against each other before any I/O


def test_presample_takes_trains_defaults():
    sub = dict(_commands(_parser()))
    ps = {a.dest: a.default for a in sub[("presample",)]._actions}
    for name in ("epochs", "fanout", "batch_size", "seed", "engine"):
        assert ps[name] == default(name), name
        assert sub[("train",)].get_default(name) == FIELDS[name].default


def test_presample_with_defaults_then_train_presampled_with_defaults(ds, tmp_path, capsys):
    out = tmp_path / "ps"
    rc, stdout, err = _run(capsys, "presample", ds, out, "--epochs", "2", "--batch-size", "64")
    assert rc == 0, err
    # Plain lines off a terminal: no carriage returns or escape codes, one line when the bar closes.
    assert "\r" not in err and "\x1b" not in err
    assert re.search(r"^presample: (\d+)/\1 batch \(100%\)", err, re.M), err
    TrainConfig(str(ds), presampled=str(out), epochs=2, batch_size=64).validate()  # the same flags: accepted
    for kw, words in ((dict(batch_size=32), "stored with --batch-size 64, this run has --batch-size 32"),
                      (dict(fanout="5,5"), "stored with --fanout 25,10, this run has --fanout 5,5"),
                      (dict(seed=1), "stored with --seed 0, this run has --seed 1"),
                      (dict(epochs=3), "holds 2 epoch(s), --epochs is 3; train with --epochs 2"),
                      (dict(model="mlp"), "with --model mlp: an MLP samples no neighbors")):
        with pytest.raises(TrainError) as e:
            TrainConfig(str(ds), presampled=str(out), **{"epochs": 2, "batch_size": 64, **kw}).validate()
        assert words in str(e.value), (kw, e.value)
    (out / "presample.json").write_text("{not json")
    with pytest.raises(TrainError, match="presample.json: not a readable pre-sample description"):
        TrainConfig(str(ds), presampled=str(out), epochs=2, batch_size=64).validate()


# ---------------------------------------------------------------------------------------------
# --quiet, progress lines, warnings


def test_quiet_leaves_only_the_summary_line(ds, tmp_path, capsys):
    runs = [
        (["generate", "rmat", tmp_path / "raw", "--scale", "7", "--dim", "4", "--quiet"], "generated "),
        (["build", tmp_path / "raw", tmp_path / "ds", "--symmetrize", "-q"], "built "),
        (["verify", tmp_path / "ds", "--quiet"], "verified "),
        (["presample", ds, tmp_path / "ps", "--epochs", "1", "--batch-size", "64", "--quiet"], "presampled "),
    ]
    for argv, head in runs:
        rc, out, err = _run(capsys, *argv)
        assert rc == 0, (argv, err)
        assert len(out.strip().splitlines()) == 1 and out.startswith(head), (argv, out)
        assert err == "", (argv, err)
        loud = _run(capsys, *[a for a in argv if a not in ("--quiet", "-q")], *(
            ["--force"] if argv[0] in ("generate", "build", "presample") else []))
        assert loud[0] == 0 and (len(loud[1].splitlines()) > 1 or loud[2]), argv  # without it: more


def test_no_torch_future_warning_on_screen(ds):
    p = run_cli("train", ds, "--epochs", "1", "--max-batches", "1", "--batch-size", "32", timeout=300)
    assert p.returncode == 0, p.stderr
    assert "Warning" not in p.stderr, p.stderr


def test_unwritable_checkpoint_and_metrics_directories_are_refused(tmp_path, monkeypatch):
    """As root every directory passes os.access, so the check is driven through it: a directory the
    process may not write is refused by name before anything runs."""
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if os.fspath(p) == str(ro) else real(p, mode, **kw))
    for kw, words in ((dict(checkpoint=str(ro / "ck")), f"--checkpoint {ro / 'ck'}: {ro} is not writable"),
                      (dict(checkpoint=str(ro)), f"--checkpoint {ro}: {ro} is not writable"),
                      (dict(metrics_json=str(ro / "m.json")), f"--metrics-json {ro / 'm.json'}: {ro} is not writable")):
        with pytest.raises(TrainError) as e:
            TrainConfig(str(tmp_path / "nope"), **kw).validate()
        assert words in str(e.value)
