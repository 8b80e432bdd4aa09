"""save_checkpoint publishes checkpoint.pt atomically and leaves nothing
behind when it fails (no partial checkpoint.pt, no temporary left over).

How: torch.save is made to fail the ways a run meets — an unpicklable value
in the state, ENOSPC (a monkeypatched torch.save writing a few bytes then
raising OSError), fsync failing with EIO, KeyboardInterrupt mid-write — and
after each the directory is listed (ENOSPC also from a file
whose writes fail under the real torch.save, which hides the errno): no temporary file, the previous
checkpoint byte-identical, directories the call created removed again.
A temporary left by a SIGKILLed writer (a pid that no longer runs) is
removed by the next save; one whose writer still runs is kept.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from flashgnn.nn import checkpoint as ck  # noqa: E402
from flashgnn.nn.checkpoint import CHECKPOINT_FILE, load_checkpoint, save_checkpoint  # noqa: E402


def _state(epoch: int) -> dict:
    return {"format": ck.CHECKPOINT_FORMAT, "version": ck.CHECKPOINT_VERSION, "epoch": epoch,
            "model": {"w": torch.arange(6.0).reshape(2, 3) * epoch}}


def _enospc(obj, f, *a, **kw):
    f.write(b"partial pickle bytes")
    raise OSError(errno.ENOSPC, "No space left on device")


def _interrupt(obj, f, *a, **kw):
    f.write(b"partial")
    raise KeyboardInterrupt


def _eio(fd):
    raise OSError(errno.EIO, "Input/output error")


FAILURES = {
    "unpicklable": (None, None, Exception),  # pickle.PicklingError or AttributeError, by Python version
    "enospc": ("save", _enospc, OSError),
    "interrupt": ("save", _interrupt, KeyboardInterrupt),
    "fsync_eio": ("fsync", _eio, OSError),
}


@pytest.mark.parametrize("how", sorted(FAILURES))
def test_failed_save_leaves_no_temporary_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch, how):
    d = tmp_path / "ck"
    save_checkpoint(d, _state(1))
    before = (d / CHECKPOINT_FILE).read_bytes()
    target, fake, exc = FAILURES[how]
    state = _state(2)
    if how == "unpicklable":
        state["hook"] = lambda: None  # a local lambda cannot be pickled
    elif target == "save":
        monkeypatch.setattr(torch, "save", fake)
    else:
        monkeypatch.setattr(os, "fsync", fake)
    with pytest.raises(exc):
        save_checkpoint(d, state)
    monkeypatch.undo()
    assert sorted(p.name for p in d.iterdir()) == [CHECKPOINT_FILE]
    assert (d / CHECKPOINT_FILE).read_bytes() == before
    assert load_checkpoint(d)["epoch"] == 1


def test_failed_first_save_removes_the_directories_it_made(tmp_path, monkeypatch):
    monkeypatch.setattr(torch, "save", _enospc)
    with pytest.raises(OSError, match="No space left"):
        save_checkpoint(tmp_path / "runs" / "a" / "ck", _state(1))
    assert list(tmp_path.iterdir()) == []
    # An existing directory (the user's) is kept, empty as it was.
    (tmp_path / "mine").mkdir()
    with pytest.raises(OSError):
        save_checkpoint(tmp_path / "mine", _state(1))
    assert (tmp_path / "mine").is_dir() and list((tmp_path / "mine").iterdir()) == []


class _FullDisk:
    """A file whose writes fail with ENOSPC after ``room`` bytes, as a full filesystem's do."""

    def __init__(self, f, room: int):
        self.f, self.room = f, room

    def write(self, b) -> int:
        if len(b) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(b)
        return self.f.write(b)

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def test_enospc_inside_the_real_torch_save_names_errno_and_checkpoint(tmp_path, monkeypatch):
    """torch.save itself turns a failed write into RuntimeError("unexpected pos N vs M"), naming neither the
    errno nor the file: save_checkpoint raises the write's OSError (errno kept, the checkpoint named), and
    leaves the previous checkpoint as it was."""
    d = tmp_path / "ck"
    save_checkpoint(d, _state(1))
    before = (d / CHECKPOINT_FILE).read_bytes()
    real_fdopen = os.fdopen
    monkeypatch.setattr(ck.os, "fdopen", lambda fd, mode: _FullDisk(real_fdopen(fd, mode), room=200))
    with pytest.raises(OSError) as e:
        save_checkpoint(d, _state(2))
    monkeypatch.undo()
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(d / CHECKPOINT_FILE)
    assert "No space left on device" in str(e.value) and "unexpected pos" not in str(e.value)
    assert sorted(p.name for p in d.iterdir()) == [CHECKPOINT_FILE]
    assert (d / CHECKPOINT_FILE).read_bytes() == before


def test_save_replaces_and_round_trips(tmp_path):
    d = tmp_path / "ck"
    for e in (1, 2):
        save_checkpoint(d, _state(e))
    assert load_checkpoint(d)["epoch"] == 2
    assert torch.equal(load_checkpoint(d)["model"]["w"], _state(2)["model"]["w"])
    assert sorted(p.name for p in d.iterdir()) == [CHECKPOINT_FILE]


def test_temporaries_of_dead_writers_are_removed_live_ones_kept(tmp_path):
    d = tmp_path / "ck"
    d.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)
    stale = d / f".{CHECKPOINT_FILE}.tmp{dead_pid}-0000"
    live = d / f".{CHECKPOINT_FILE}.tmp{os.getppid()}-0000"  # our parent runs (and is not this process)
    other = d / "notes.txt"
    for p in (stale, live, other):
        p.write_bytes(b"x")
    save_checkpoint(d, _state(1))
    assert sorted(p.name for p in d.iterdir()) == sorted([CHECKPOINT_FILE, live.name, other.name])


def test_planted_symlink_at_a_temporary_name_is_never_followed(tmp_path, monkeypatch):
    """An attacker who can write the directory and predicts the temporary's
    name cannot make the save write through a link (O_EXCL|O_NOFOLLOW)."""
    d = tmp_path / "ck"
    d.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    monkeypatch.setattr("secrets.token_hex", lambda n: "feedbeef")
    (d / f".{CHECKPOINT_FILE}.tmp{os.getpid()}-feedbeef").symlink_to(victim)
    with pytest.raises(FileExistsError):
        save_checkpoint(d, _state(1))
    assert victim.read_bytes() == b"precious"
    assert not (d / CHECKPOINT_FILE).exists()


def _sage_state() -> dict:
    from flashgnn.nn.zoo import build_model

    config = dict(model="sage", in_dim=8, hidden=16, out_dim=4, num_layers=2, dropout=0.5)
    model = build_model("sage", 8, 16, 4, 2, 0.5)
    return {"format": ck.CHECKPOINT_FORMAT, "version": ck.CHECKPOINT_VERSION, "epoch": 1, "model_config": config,
            "model": model.state_dict()}


def _hostile(state: dict, what: str) -> dict:
    s = {**state, "model_config": dict(state["model_config"]), "model": dict(state["model"])}
    c, w = s["model_config"], s["model"]
    first = sorted(w)[0]
    if what == "huge hidden":
        c["hidden"] = 10**12
    elif what == "bool width":
        c["in_dim"] = True
    elif what == "hidden within bounds, weights of another":
        c["hidden"] = 1 << 20  # built for real this would be terabytes; on the meta device it is shapes only
    elif what == "foreign weight":
        w["evil.weight"] = torch.zeros(3)
    elif what == "missing weight":
        del w[first]
    elif what == "reshaped weight":
        w[first] = torch.zeros(*w[first].shape, 2)
    elif what == "unknown model":
        c["model"] = "nope"
    elif what == "config not a dict":
        s["model_config"] = [1, 2]
    elif what == "weights not tensors":
        w[first] = "x"
    return s


HOSTILE = {
    "huge hidden": r"model_config\.hidden = 1000000000000 is out of bounds \(must be an integer in \[1, 1048576\]\)",
    "bool width": r"model_config\.in_dim = True is out of bounds",
    "hidden within bounds, weights of another": r"weight 'convs\.0\.lin_l\.bias' has shape \(16,\); the 'sage' model "
                                                r".* has \(1048576,\)",
    "foreign weight": r"weight 'evil\.weight' \(shape \(3,\)\) is not a weight of the 'sage' model",
    "missing weight": r"weight '.*' of the 'sage' model its model_config describes is missing \(shape",
    "reshaped weight": r"weight '.*' has shape \(.*, 2\); the 'sage' model",
    "unknown model": r"model_config does not describe a model flashgnn builds",
    "config not a dict": r"model_config is a list beside the weights",
    "weights not tensors": r"model is a dict, expected a dict of named tensors",
}


@pytest.mark.parametrize("what", sorted(HOSTILE))
def test_hostile_checkpoint_is_refused_by_name_before_any_model_is_allocated(tmp_path, what):
    """Every reader of a checkpoint (embed, serve, query run, recommend, --resume) goes through load_checkpoint:
    a model_config that does not describe the stored weights is refused naming the file, the key, the value and
    the bound, and the model it describes is only ever built on the meta device (shapes, no memory)."""
    good = _sage_state()
    save_checkpoint(tmp_path / "ok", good)
    model = ck.model_from_checkpoint(load_checkpoint(tmp_path / "ok"))
    assert all(torch.equal(model.state_dict()[k], v) for k, v in good["model"].items())
    d = tmp_path / "bad"
    save_checkpoint(d, _hostile(good, what))
    with pytest.raises(ValueError, match=HOSTILE[what]) as e:
        load_checkpoint(d)
    assert str(d / CHECKPOINT_FILE) in str(e.value)
