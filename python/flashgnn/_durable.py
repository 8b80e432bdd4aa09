"""The few durability and safety steps the Python layer needs when it reads
or publishes files: fsync a file or a directory, write-then-rename, open only
regular files, and publish an output directory (embed, presample) under the
same rules as the Rust builder's publish (``flashgnn_io::publish``):

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
  the old one is removed; where the kernel lacks the call, the old directory
  is renamed aside first (``out`` is then briefly absent, never half-written).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import stat
import sys
import time
from pathlib import Path

# (file, key, value): the same list as flashgnn_io::publish::OUTPUT_MARKERS.
OUTPUT_MARKERS = (
    ("manifest.json", "magic", "flashgnn-dataset"),
    ("embed.json", "flashgnn_output", "embed"),
    ("presample.json", "flashgnn_output", "presample"),
    ("generate.json", "flashgnn_output", "generate"),
)
OWNER_FILE = ".flashgnn-owner"


def fsync_path(p: str | os.PathLike) -> None:
    """fsync a file or directory by path (a directory fsync makes renames in it durable)."""
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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


def is_flashgnn_output(d: str | os.PathLike) -> bool:
    """Whether directory ``d`` holds one of :data:`OUTPUT_MARKERS` (a regular
    file whose JSON has the marker's key and value)."""
    for name, key, value in OUTPUT_MARKERS:
        p = Path(d) / name
        try:
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode) or st.st_size > 64 << 20:
                continue
            doc = json.loads(read_regular(p))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get(key) == value:
            return True
    return False


def check_output(out: str | os.PathLike, force: bool, inputs=()) -> None:
    """The ``--force`` rule (see the module docstring); raises FileExistsError naming ``out``.

    ``inputs`` (paths the command reads: its dataset, a checkpoint) must survive the publication: ``out`` may be
    neither one of them nor a directory holding one (compared after resolving links and ``..``), as the Rust
    ``flashgnn_io::check_not_input``."""
    raw = os.fspath(out)
    out = Path(out)
    if out.name in ("", ".", "..") or raw.rstrip("/").endswith("/.") or raw.rstrip("/") in (".", ""):
        raise FileExistsError(f"{raw}: the output path must end in a directory name (not '.', '..' or '/'): it is "
                              "published by renaming a new directory onto it")
    if os.path.lexists(out):
        o = os.path.realpath(out)
        for inp in inputs:
            if inp is None or not os.path.lexists(inp):
                continue
            i = os.path.realpath(inp)
            if i == o or i.startswith(o.rstrip("/") + "/"):
                what = "is the input" if i == o else f"holds the input {inp}"
                raise FileExistsError(f"{out}: the output {what}: publishing would delete what is being read; it was "
                                      "left untouched (choose another output path)")
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        raise FileExistsError(
            f"{out}: the output path is {kind_of(st.st_mode)}, not a flashgnn output directory; it was left "
            "untouched (choose another output path or move it away)")
    if not any(os.scandir(out)):
        return
    if not force:
        raise FileExistsError(f"{out}: exists (use --force to replace it; the old output stays intact until the new "
                              "one is complete)")
    if not is_flashgnn_output(out):
        raise FileExistsError(
            f"{out}: is a non-empty directory but not flashgnn output (no manifest.json, embed.json, presample.json or "
            "generate.json of flashgnn's): --force replaces only flashgnn output; it was left untouched")


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _start_time(pid: int) -> int | None:
    """Process start time (clock ticks since boot, /proc/PID/stat field 22), or None if no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        return int(s[s.rindex(")") + 1:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _write_owner(d: Path) -> None:
    pid = os.getpid()
    (d / OWNER_FILE).write_text(json.dumps({"pid": pid, "start_time": _start_time(pid) or 0, "boot_id": _boot_id()}))


def _tmp_name(out: str | os.PathLike) -> Path:
    out = Path(out)
    return out.parent / f".{out.name}.tmp-{os.getpid()}-{time.time_ns() % 1_000_000_000}"


def create_tmp_dir(out: str | os.PathLike) -> Path:
    """``.OUT.tmp-PID-NANOS`` beside ``out`` with an owner marker (the same form as the Rust builder's)."""
    tmp = _tmp_name(out)
    tmp.mkdir()
    try:
        _write_owner(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp


def _owner_gone(d: Path) -> int | None:
    """The owner's pid when the marker in ``d`` names a process that is gone, else None."""
    p = d / OWNER_FILE
    try:
        st = os.lstat(p)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 4096:
            return None
        doc = json.loads(read_regular(p))
        pid, start, boot = int(doc["pid"]), int(doc["start_time"]), str(doc["boot_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if boot != _boot_id():
        return pid
    now = _start_time(pid)
    return pid if now is None or now != start else None


def remove_stale_tmps(out: str | os.PathLike, report: bool = True) -> list[str]:
    """Remove ``.OUT.tmp-*`` directories beside ``out`` that carry an owner
    marker whose process is gone; a temporary without a marker, or whose owner
    still runs, is kept. Says what it removed on stderr; returns the paths."""
    out = Path(out)
    prefix = f".{out.name}.tmp-"
    removed = []
    try:
        entries = list(os.scandir(out.parent))
    except OSError:
        return removed
    for e in entries:
        if not e.name.startswith(prefix) or not e.is_dir(follow_symlinks=False):
            continue
        pid = _owner_gone(Path(e.path))
        if pid is None:
            continue
        shutil.rmtree(e.path, ignore_errors=True)
        if not os.path.lexists(e.path):
            removed.append(e.path)
            if report:
                print(f"flashgnn: removed stale temporary {e.path} (left by process {pid}, which is no longer running)",
                      file=sys.stderr)
    return sorted(removed)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _rename_exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically with renameat2(RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, f"swapping in {b}: {os.strerror(err)}")


def publish_dir(tmp: str | os.PathLike, out: str | os.PathLike) -> None:
    """Publish the fully written (files fsynced) directory ``tmp`` as ``out``,
    atomically; ``out`` is re-checked with :func:`check_output` (force: the
    caller checked the flag before any work)."""
    tmp, out = Path(tmp), Path(out)
    try:
        (tmp / OWNER_FILE).unlink()
    except FileNotFoundError:
        pass
    fsync_path(tmp)
    check_output(out, True)
    if not os.path.lexists(out):
        os.rename(tmp, out)
        fsync_path(out.parent)
        return
    if not _rename_exchange(tmp, out):
        # No renameat2: move the old output aside (a marked temporary), then rename.
        aside = _tmp_name(out)
        os.rename(out, aside)
        os.rename(tmp, out)
        tmp = aside
    fsync_path(out.parent)
    # ``tmp`` now holds the previous output: mark it ours so that a crash
    # before it is gone leaves a temporary the next run may remove.
    try:
        _write_owner(tmp)
    except OSError:
        pass
    shutil.rmtree(tmp)
