"""save_checkpoint publishes checkpoint.pt atomically and leaves nothing
behind when it fails (no partial checkpoint.pt, no temporary left over).

How: torch.save is made to fail the ways a run meets — an unpicklable value
in the state, ENOSPC (a monkeypatched torch.save writing a few bytes then
raising OSError), fsync failing with EIO, KeyboardInterrupt mid-write — and
after each the directory is listed: no temporary file, the previous
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
