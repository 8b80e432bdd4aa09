"""The few durability and safety steps the Python layer needs when it reads
or publishes files: fsync a file or a directory, write-then-rename, open only
regular files, and publish an output directory (embed, presample, inference).
Publishing is not re-implemented here: it calls the Rust builder's own code
(``flashgnn_io::publish``, exported by ``_core``), so both languages follow
one rule with one implementation:

- ``check_output(out, force)``: the ``--force`` rule shared by every
  publishing command — nothing at ``out`` or an empty directory may be
  written; a non-empty directory only with ``force`` and only when it is
  flashgnn output (a marker file of :data:`OUTPUT_MARKERS`); a regular file,
  a symbolic link, a FIFO, a device or a directory of other files is refused
  by name, before any work, and never moved or removed.
- ``create_tmp_dir(out)``: ``.OUT.tmp-PID-NANOS`` beside ``out`` holding an
  owner marker (pid, process start time, boot id); ``remove_stale_tmps(out)``
  removes those whose owner is gone (what a killed run left).
- ``publish_dir(tmp, out)``: atomic replacement — ``renameat2(RENAME_EXCHANGE)``
  swaps the new directory in (the old one is never absent from ``out``), then
  the old one is removed.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

from flashgnn import _core

# (file, key, value) marking flashgnn output, and the owner marker of a temporary: flashgnn_io::publish's.
OUTPUT_MARKERS = tuple(tuple(m) for m in _core.OUTPUT_MARKERS)
OWNER_FILE = _core.OWNER_FILE


def fsync_path(p: str | os.PathLike) -> None:
    """fsync a file or directory by path (a directory fsync makes renames in it durable)."""
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def makedirs_durable(d: str | os.PathLike) -> None:
    """``mkdir -p d``, durably: each directory created is fsynced into its
    parent (``flashgnn_io::create_dir_all_durable``), so an output published
    into it cannot vanish with it in a power loss."""
    _core.create_dir_all_durable(os.fspath(d))


def replace_durably(tmp: str | os.PathLike, final: str | os.PathLike) -> None:
    """Rename ``tmp`` (already written and fsynced) over ``final`` and fsync the parent."""
    os.replace(tmp, final)
    fsync_path(Path(final).parent)


def kind_of(mode: int) -> str:
    """Words for a file type in error messages."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISCHR(mode):
        return "a character device"
    return "not a regular file"


class NotRegularFileError(OSError):
    """A path that must be a regular file is a FIFO, device, directory or broken link."""


def _pseudo_fs(dev: int) -> str | None:
    """The kernel pseudo file system (/proc, /sys) a file of device ``dev`` lives on, as the Rust
    ``flashgnn_io::regular`` refuses: "regular" files there read on past their size (/proc/self/pagemap)."""
    for root, name in (("/proc", "procfs (/proc)"), ("/sys", "sysfs (/sys)")):
        try:
            if os.stat(root).st_dev == dev:
                return name
        except OSError:
            pass
    return None


def open_regular(path: str | os.PathLike, mode: str = "rb", **kw):
    """``open(path, mode)`` for reading, refusing anything but a regular file
    without blocking: opened with O_NONBLOCK (a FIFO's open returns at once),
    fstat'ed, refused by name and type, then switched back to blocking mode."""
    if any(c in mode for c in "wax+"):
        raise ValueError(f"open_regular is for reading, got mode {mode!r}")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise NotRegularFileError(errno.ELOOP, f"{path}: is a symbolic link that loops") from None
        if e.errno == errno.ENOENT and os.path.lexists(path):
            raise NotRegularFileError(errno.ENOENT, f"{path}: is a dangling symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFileError(f"{path}: is {kind_of(st.st_mode)}, not a regular file: refusing to open it")
        fs = _pseudo_fs(st.st_dev)
        if fs:
            raise NotRegularFileError(f"{path}: is a file of {fs}, whose size ({st.st_size} B) is not its content (a read "
                                      "may never end): refusing to open it")
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode, **kw)
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike) -> bytes:
    with open_regular(path) as f:
        return f.read()


def load_npy(path: str | os.PathLike, **kw):
    """``numpy.load`` of a regular file only (FIFOs and devices refused by name)."""
    import numpy as np

    with open_regular(path) as f:
        if not kw.get("mmap_mode"):
            return np.load(f, **kw)
    return np.load(path, **kw)  # maps by path; checked regular just above


def check_output(out: str | os.PathLike, force: bool, inputs=()) -> None:
    """The ``--force`` rule (see the module docstring); raises FileExistsError naming ``out``.

    ``inputs`` (paths the command reads: its dataset, a checkpoint) must survive the publication: ``out`` may be
    neither one of them nor a directory holding one (compared after resolving links and ``..``)."""
    _core.check_output(os.fspath(out), bool(force), [os.fspath(i) for i in inputs if i is not None])


def create_tmp_dir(out: str | os.PathLike) -> Path:
    """``.OUT.tmp-PID-NANOS`` beside ``out`` with an owner marker (the Rust builder's own)."""
    return Path(_core.create_tmp_dir(os.fspath(out)))


def remove_stale_tmps(out: str | os.PathLike, report: bool = True) -> list[str]:
    """Remove ``.OUT.tmp-*`` directories beside ``out`` that carry an owner
    marker whose process is gone; a temporary without a marker, or whose owner
    still runs, is kept. Says what it removed on stderr; returns the paths."""
    removed = []
    for path, pid in _core.remove_stale_tmps(os.fspath(out)):
        removed.append(os.fspath(path))
        if report:
            print(f"flashgnn: removed stale temporary {path} (left by process {pid}, which is no longer running)",
                  file=sys.stderr)
    return sorted(removed)


def publish_dir(tmp: str | os.PathLike, out: str | os.PathLike) -> None:
    """Publish the fully written (files fsynced) directory ``tmp`` as ``out``,
    atomically; ``out`` is re-checked with :func:`check_output` (force: the
    caller checked the flag before any work)."""
    _core.publish_dir(os.fspath(tmp), os.fspath(out))
