"""Power-loss crash states of a recorded run, under the ext4 ``data=ordered``
persistence model and a stricter per-directory one (docs/reliability.md
§ *Power-loss crash states*).

A SIGKILL leaves the page cache intact, so it cannot tell a durable update
protocol from one that forgot an fsync; a power loss can. This module does
what ALICE and CrashMonkey do, small:

1. **Record** (:func:`record`): run a command under ``strace -f -y -xx -s N``
   and keep, in order, every data write (``write``, ``pwrite64``,
   ``writev``, ``pwritev``, with the bytes: strace prints them in full at
   ``-s`` = 64 MiB, hex-escaped by ``-xx``), size change (``ftruncate``,
   ``fallocate``, ``O_TRUNC``), directory operation (create, ``mkdir``,
   ``rename``/``renameat2`` incl. ``RENAME_EXCHANGE``, ``unlink``,
   ``rmdir``) and sync (``fsync``, ``fdatasync``, ``sync``, ``syncfs``)
   under one directory, ``root``, plus the *acknowledgements* the program
   writes to ``ack_path`` (outside ``root``): what it promised at that
   point. Recording the bytes (rather than offsets plus snapshots) is the
   simplest correct choice: a file rewritten, patched in place or deleted
   later needs no snapshot. The recorder refuses what it cannot see —
   a shared writable ``mmap``, ``copy_file_range``, ``sendfile``, hard
   links, ``O_TMPFILE`` under ``root`` — and proves it missed nothing
   else: replaying every recorded operation over the starting tree must
   give exactly the tree the run left (:meth:`Trace.check_complete`).
   ``O_DIRECT`` writes are ordinary ``pwrite64`` calls to strace (bytes
   included) and are modelled like buffered ones: not durable before an
   fsync. flashgnn's ``io_uring`` ring submits reads only
   (``crates/flashgnn-io/src/uring.rs``: ``opcode::Read``), so no write is
   hidden in it.
2. **Replay** (:func:`crash_states`): the model below says which subsets
   of the recorded operations may be on the disk after a power loss at a
   given point; the states are generated, bounded and seeded, and each is
   materialised as a directory for a protocol's checker.

The model (docs/reliability.md has it in full; conservative where ext4
gives more):

- a regular file's data and size changes are durable once an
  ``fsync``/``fdatasync`` of that file that started after them returned
  (or ``sync``); an earlier, un-synced one may independently be on disk,
  lost, or torn at 512-byte sector granularity (any subset of its sectors,
  aligned to the file offset) — the un-synced writes of an epoch may
  reach the disk in any order. Never-written bytes read as zeros, never as
  stale data (``data=ordered``);
- directory operations (create, mkdir, rename, unlink, rmdir), in two
  models a protocol must both pass: ``ext4`` — they reach the disk in
  program order (one journal), so a crash keeps a *prefix* of them, which
  reaches at least the last fsync of *any directory* (or ``sync``) started
  before the crash point; ``strict`` — each directory's operations persist
  as a prefix of that directory's own, forced only by an fsync of that
  directory (a rename belongs to its destination). In both, an fsync of a
  regular file is not counted as making its directory entry durable, and
  ``auto_da_alloc`` (ext4 flushing a file renamed over another) is not
  relied on.

Crash points are the instants just before each sync and the end of the
run; per point and model the states are: everything kept (the SIGKILL
state), only what is forced, bounded sets of directory-operation prefixes
with the un-synced data all kept and all lost, and ``samples`` seeded
random choices (prefixes, and keep / lose / tear per un-synced write).
States with the same tree and the same acknowledgements are checked once.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

SECTOR_BYTES = 512  # the unit a torn write keeps or loses (a disk sector)
STRACE_STRING_BYTES = 64 << 20  # -s: the largest write recorded whole (a truncated one is refused)
SYSCALLS = ("open,openat,creat,write,pwrite64,writev,pwritev,pwritev2,lseek,ftruncate,fallocate,fsync,fdatasync,"
            "sync,syncfs,rename,renameat,renameat2,unlink,unlinkat,mkdir,mkdirat,rmdir,link,linkat,symlink,"
            "symlinkat,fcntl,dup,dup2,dup3,mmap,copy_file_range,sendfile,io_uring_setup,clone,clone3,fork,vfork")


class Unsupported(Exception):
    """The run did something under ``root`` the recorder cannot model."""


# ---------------------------------------------------------------------------
# strace output


_LINE = re.compile(r"^(\d+) +(?:<\.\.\. (\w+) resumed>(.*)|(\w+)\((.*))$")
_RET = re.compile(r"\)\s+=\s+(-?\d+|\?)(?:<([^>]*)>)?(.*)$")
_HEX = re.compile(r"\\x([0-9a-f]{2})")


def _unhex(s: str) -> bytes:
    """A ``-xx`` string body (every byte as \\xNN) to bytes."""
    return bytes(int(h, 16) for h in _HEX.findall(s))


def _split_args(s: str) -> list[str]:
    """Top-level comma-separated arguments (brackets, braces, quotes and <...> kept whole)."""
    out, depth, cur, quote = [], 0, [], False
    for ch in s:
        if quote:
            cur.append(ch)
            quote = ch != '"'
            continue
        if ch == '"':
            quote = True
        elif ch in "[{<":
            depth += 1
        elif ch in "]}>":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if cur:
        out.append("".join(cur).strip())
    return out


def _string(arg: str) -> bytes:
    if not arg.startswith('"'):
        raise Unsupported(f"expected a string argument, got {arg[:80]!r}")
    end = arg.index('"', 1)
    if arg[end + 1:].startswith("..."):
        raise Unsupported(f"a write longer than strace -s {STRACE_STRING_BYTES} bytes was truncated")
    return _unhex(arg[1:end])


def _fd(arg: str) -> tuple[int | None, str | None]:
    """``3<\\x2f...>`` -> (3, '/...'); ``AT_FDCWD<...>`` -> (None, cwd)."""
    m = re.match(r"^(AT_FDCWD|-?\d+)(?:<(.*)>)?$", arg)
    if not m:
        raise Unsupported(f"cannot read a descriptor from {arg[:80]!r}")
    path = _unhex(m.group(2)).decode("utf-8", "surrogateescape") if m.group(2) else None
    return (None if m.group(1) == "AT_FDCWD" else int(m.group(1))), path


def _calls(text: str):
    """(pid, name, args, ret, ret_path, started) for each completed call, in
    completion order; ``started`` is how many calls had completed when it was issued."""
    pending: dict[tuple[str, str], tuple[str, int]] = {}
    done = 0
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        pid = m.group(1)
        if m.group(2):  # "<... name resumed>rest"
            name = m.group(2)
            head, started = pending.pop((pid, name), ("", done))
            body = head + m.group(3)
        else:
            name, body = m.group(4), m.group(5)
            if body.endswith("<unfinished ...>"):
                pending[(pid, name)] = (body[: -len("<unfinished ...>")].rstrip(), done)
                continue
            started = done
        r = _RET.search(body)
        if not r or r.group(1) == "?":
            continue
        ret = int(r.group(1))
        ret_path = _unhex(r.group(2)).decode("utf-8", "surrogateescape") if r.group(2) else None
        yield int(pid), name, _split_args(body[: r.start()]), ret, ret_path, started
        done += 1


# ---------------------------------------------------------------------------
# The recorded operations


@dataclass
class Trace:
    """What a run did under ``root``, as operations on inodes.

    ``ops`` entries (``i`` = the op's index):
    ``("link", parent, name, ino, kind)`` a new entry for a new inode (kind
    ``f``/``d``); ``("unlink", parent, name, ino)``; ``("rename", sp, sn, dp,
    dn, exchange, ino, ino_replaced)``; ``("write", ino, offset, bytes)``; ``("trunc", ino,
    length)``; ``("sync", ino, before)`` an fsync/fdatasync of ``ino`` that
    covers ops with index < ``before``; ``("syncall", before)``; ``("ack",
    bytes)`` a line the program wrote to ``ack_path``.
    """

    root: Path
    initial: dict  # ino -> ("d", {name: ino}) | ("f", bytes); ino 0 is root
    kinds: dict  # ino -> "f" | "d" for every inode ever seen
    ops: list = field(default_factory=list)

    def acks(self, upto: int) -> list[bytes]:
        return [op[1] for op in self.ops[:upto] if op[0] == "ack"]

    def final_tree(self) -> dict:
        return materialise_tree(self, len(self.ops), keep=None, meta_keep=None)

    def check_complete(self) -> None:
        """Replaying every op over the starting tree gives the tree on disk now:
        nothing under ``root`` changed that the recorder did not see."""
        want = read_tree(self.root)
        got = self.final_tree()
        if got != want:
            diff = sorted(set(got) ^ set(want)) or sorted(p for p in got if got[p] != want.get(p))
            raise Unsupported(f"replayed trace differs from the files under {self.root}: first difference "
                              f"{diff[:3]} (a write the recorder cannot see: mmap, io_uring, a read moving "
                              f"the offset?)")

    def summary(self) -> dict:
        kinds = {}
        for op in self.ops:
            kinds[op[0]] = kinds.get(op[0], 0) + 1
        return kinds


def read_tree(root: Path) -> dict:
    """{relative path: bytes for a file, None for a directory} under ``root``."""
    out = {}
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel != ".":
            out[rel] = None
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p):
                raise Unsupported(f"{p}: symbolic links under the recorded root are not modelled")
            out[os.path.normpath(os.path.join(rel, f))] = Path(p).read_bytes()
    return out


def _snapshot(root: Path) -> tuple[dict, dict, dict]:
    """Initial inode table of ``root``: (inodes, kinds, path -> ino)."""
    inodes, paths = {0: ("d", {})}, {str(root): 0}
    for d, dirs, files in os.walk(root):
        parent = paths[d]
        for name in sorted(dirs) + sorted(files):
            p = os.path.join(d, name)
            ino = len(inodes)
            paths[p] = ino
            if name in dirs:
                inodes[ino] = ("d", {})
            else:
                inodes[ino] = ("f", Path(p).read_bytes())
            inodes[parent][1][name] = ino
    return inodes, {i: v[0] for i, v in inodes.items()}, paths


class _Recorder:
    """Turns strace calls into :class:`Trace` ops, simulating the namespace."""

    def __init__(self, root: Path, ack_path: Path):
        self.root, self.ack = str(root), str(ack_path)
        inodes, kinds, _ = _snapshot(root)
        self.trace = Trace(root, inodes, dict(kinds))
        # The live namespace (directory entries only) and file sizes, as the run proceeds.
        self.dirs = {i: dict(v[1]) for i, v in inodes.items() if v[0] == "d"}
        self.size = {i: len(v[1]) for i, v in inodes.items() if v[0] == "f"}
        # Descriptor tables: tid -> {fd: description {"ino", "pos", "append"}}; a
        # description's ino is None outside root and "ack" for the ack file.
        # Threads (CLONE_FILES) share their table; a forked child gets a copy.
        self.tables: dict[int, dict] = {}
        self.clones: dict[int, tuple[int, bool]] = {}  # child tid -> (parent tid, shares the table)

    # -- paths
    def _under(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + os.sep)

    def _parent(self, path: str) -> tuple[int, str] | None:
        """(parent inode, name) of a path under root whose parent exists."""
        if not self._under(path) or path == self.root:
            return None
        rel = os.path.relpath(path, self.root).split(os.sep)
        ino = 0
        for part in rel[:-1]:
            ino = self.dirs.get(ino, {}).get(part)
            if ino is None or ino not in self.dirs:
                return None
        return ino, rel[-1]

    def _lookup(self, path: str) -> int | None:
        if path == self.root:
            return 0
        pn = self._parent(path)
        return None if pn is None else self.dirs[pn[0]].get(pn[1])

    @staticmethod
    def _resolve(dirfd_arg: str | None, path: bytes) -> str:
        p = path.decode("utf-8", "surrogateescape")
        if not os.path.isabs(p):
            base = _fd(dirfd_arg)[1] if dirfd_arg else None
            if base is None:
                raise Unsupported(f"relative path {p!r} without a directory descriptor: give the run absolute paths")
            p = os.path.join(base, p)
        return os.path.normpath(p)

    # -- ops
    def _emit(self, *op):
        self.trace.ops.append(op)

    def _new(self, parent: int, name: str, kind: str) -> int:
        ino = len(self.trace.kinds)
        self.trace.kinds[ino] = kind
        self.dirs[parent][name] = ino
        if kind == "d":
            self.dirs[ino] = {}
        else:
            self.size[ino] = 0
        self._emit("link", parent, name, ino, kind)
        return ino

    def _write(self, fd: int, fdpath: str | None, data: bytes, offset: int | None):
        desc = self.fds.get(fd)
        if desc is None:
            if fdpath == self.ack:
                desc = self.fds[fd] = {"ino": "ack", "pos": 0}
            elif fdpath and self._under(fdpath):
                raise Unsupported(f"write to {fdpath} through a descriptor opened before recording")
            else:
                return
        if desc["ino"] == "ack":
            self._emit("ack", data)
            return
        if desc["ino"] is None:
            return
        at = desc["pos"] if offset is None else offset
        if desc.get("append"):
            at = self.size[desc["ino"]]
        self._emit("write", desc["ino"], at, data)
        self.size[desc["ino"]] = max(self.size[desc["ino"]], at + len(data))
        if offset is None:
            desc["pos"] = at + len(data)

    def call(self, name: str, a: list[str], ret: int, ret_path: str | None, started: int):
        if ret < 0:
            return
        # What a sync covers: the ops recorded before it was issued (a write that
        # completed while it ran, on another thread, may or may not be in it).
        started_ops = self._ops_at_call.get(started, len(self.trace.ops))
        if name in ("open", "openat", "creat"):
            if name == "openat":
                dirfd, path, flags = a[0], _string(a[1]), a[2]
            else:
                dirfd, path, flags = None, _string(a[0]), (a[1] if name == "open" else "O_CREAT|O_WRONLY|O_TRUNC")
            full = self._resolve(dirfd, path)
            if full == self.ack:
                self.fds[ret] = {"ino": "ack", "pos": 0}
                return
            if not self._under(full):
                self.fds[ret] = {"ino": None, "pos": 0}
                return
            if "O_TMPFILE" in flags:
                raise Unsupported(f"O_TMPFILE under {self.root}")
            ino = self._lookup(full)
            if ino is None:
                if "O_CREAT" not in flags:
                    raise Unsupported(f"{full}: opened but unknown to the recorder")
                pn = self._parent(full)
                ino = self._new(pn[0], pn[1], "f")
            elif "O_TRUNC" in flags and self.trace.kinds[ino] == "f" and self.size[ino] > 0:
                self._emit("trunc", ino, 0)
                self.size[ino] = 0
            self.fds[ret] = {"ino": ino, "pos": 0, "append": "O_APPEND" in flags}
        elif name in ("fcntl", "dup", "dup2", "dup3"):
            if name == "fcntl" and "F_DUPFD" not in a[1]:
                return
            src = _fd(a[0])[0]
            if src in self.fds:
                self.fds[ret] = self.fds[src]
        elif name == "lseek":
            fd = _fd(a[0])[0]
            if fd in self.fds:
                self.fds[fd]["pos"] = ret
        elif name in ("write", "pwrite64"):
            fd, fdpath = _fd(a[0])
            data = _string(a[1])[:ret]
            self._write(fd, fdpath, data, int(a[3]) if name == "pwrite64" else None)
        elif name in ("writev", "pwritev", "pwritev2"):
            fd, fdpath = _fd(a[0])
            data = b"".join(_string(m) for m in re.findall(r'iov_base=("[^"]*"(?:\.\.\.)?)', a[1]))[:ret]
            self._write(fd, fdpath, data, int(a[3]) if name != "writev" else None)
        elif name == "ftruncate" or name == "fallocate":
            fd, fdpath = _fd(a[0])
            desc = self.fds.get(fd)
            if desc is None or desc["ino"] in (None, "ack"):
                if fdpath and self._under(fdpath):
                    raise Unsupported(f"{name} of {fdpath} through an unknown descriptor")
                return
            ino = desc["ino"]
            if name == "ftruncate":
                length = int(a[1])
            else:
                if "KEEP_SIZE" in a[1] or "PUNCH_HOLE" in a[1]:
                    raise Unsupported(f"fallocate mode {a[1]} on {fdpath}")
                length = max(self.size[ino], int(a[2]) + int(a[3]))
            self._emit("trunc", ino, length)
            self.size[ino] = length
        elif name in ("fsync", "fdatasync"):
            fd, fdpath = _fd(a[0])
            desc = self.fds.get(fd)
            ino = desc["ino"] if desc else (self._lookup(fdpath) if fdpath else None)
            if ino not in (None, "ack"):
                self._emit("sync", ino, started_ops)
        elif name in ("sync", "syncfs"):
            self._emit("syncall", started_ops)
        elif name in ("mkdir", "mkdirat"):
            dirfd, path = (a[0], _string(a[1])) if name == "mkdirat" else (None, _string(a[0]))
            full = self._resolve(dirfd, path)
            pn = self._parent(full)
            if pn is not None:
                self._new(pn[0], pn[1], "d")
        elif name in ("unlink", "unlinkat", "rmdir"):
            dirfd, path = (a[0], _string(a[1])) if name == "unlinkat" else (None, _string(a[0]))
            full = self._resolve(dirfd, path)
            pn = self._parent(full)
            if pn is not None:
                ino = self.dirs[pn[0]].pop(pn[1])
                self.dirs.pop(ino, None)
                self._emit("unlink", pn[0], pn[1], ino)
        elif name in ("rename", "renameat", "renameat2"):
            if name == "rename":
                src, dst, flags = self._resolve(None, _string(a[0])), self._resolve(None, _string(a[1])), ""
            else:
                src, dst = self._resolve(a[0], _string(a[1])), self._resolve(a[2], _string(a[3]))
                flags = a[4] if len(a) > 4 else ""
            s, d = self._parent(src), self._parent(dst)
            if s is None and d is None:
                return
            if s is None or d is None:
                raise Unsupported(f"rename across the recorded root: {src} -> {dst}")
            exchange = "RENAME_EXCHANGE" in flags
            si = self.dirs[s[0]].pop(s[1])
            di = self.dirs[d[0]].get(d[1])
            if exchange:
                self.dirs[s[0]][s[1]] = di
            elif di is not None and di != si:
                self.dirs.pop(di, None)
            self.dirs[d[0]][d[1]] = si
            self._emit("rename", s[0], s[1], d[0], d[1], exchange, si, di)
        elif name in ("link", "linkat", "symlink", "symlinkat"):
            paths = [x for x in a if x.startswith('"')]
            if any(self._under(self._resolve(None, _string(p))) for p in paths):
                raise Unsupported(f"{name} under {self.root}")
        elif name == "mmap":
            if "MAP_SHARED" in a[3] and "PROT_WRITE" in a[2]:
                fd, fdpath = _fd(a[4])
                if fdpath and self._under(fdpath):
                    raise Unsupported(f"a shared writable mmap of {fdpath}: its writes are invisible to strace")
        elif name in ("copy_file_range", "sendfile"):
            fds = [_fd(x)[1] for x in a if re.match(r"^-?\d+<", x)]
            if any(p and self._under(p) for p in fds):
                raise Unsupported(f"{name} into {self.root}: its bytes are invisible to strace")

    def _table(self, tid: int) -> dict:
        if tid not in self.tables:
            parent, shared = self.clones.get(tid, (None, False))
            if parent is None:
                self.tables[tid] = {}
            else:
                ptab = self._table(parent)
                self.tables[tid] = ptab if shared else dict(ptab)
        return self.tables[tid]

    def feed(self, text: str):
        calls = list(_calls(text))
        # A child's first calls may be printed before its parent's clone returns: find every clone first.
        for pid, name, a, ret, _, _ in calls:
            if name in ("clone", "clone3", "fork", "vfork") and ret > 0:
                self.clones[ret] = (pid, name.startswith("clone") and "CLONE_FILES" in " ".join(a))
        self._ops_at_call = {}
        for n, (pid, name, a, ret, ret_path, started) in enumerate(calls):
            self._ops_at_call[n] = len(self.trace.ops)
            self.fds = self._table(pid)
            self.call(name, a, ret, ret_path, started)


def record(cmd: list[str], root: Path, ack_path: Path, trace_file: Path, env: dict | None = None,
           timeout: float = 300) -> Trace:
    """Run ``cmd`` under strace; the operations it did under ``root``."""
    root, ack_path = Path(os.path.realpath(root)), Path(os.path.realpath(ack_path))
    ack_path.write_bytes(b"")
    rec = _Recorder(root, ack_path)
    r = subprocess.run(["strace", "-f", "--seccomp-bpf", "-y", "-xx", "-s", str(STRACE_STRING_BYTES),
                        "-e", f"trace={SYSCALLS}",
                        "-o", str(trace_file), *cmd], env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"recorded command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    rec.feed(trace_file.read_text(errors="surrogateescape"))
    rec.trace.check_complete()
    return rec.trace


# ---------------------------------------------------------------------------
# Crash states


META = ("link", "unlink", "rename")


def meta_dir(op) -> int:
    """The directory whose entries a directory op changes (a rename: its destination)."""
    return op[3] if op[0] == "rename" else op[1]


def materialise_tree(tr: Trace, upto: int, keep, meta_keep) -> dict:
    """The tree after ops[:upto] where ``meta_keep(i)`` says whether directory
    op i reached the disk and ``keep(i)`` what survives of data op i (True,
    False, or a set of sector indices); None = everything."""
    dirs = {i: dict(v[1]) for i, v in tr.initial.items() if v[0] == "d"}
    data = {i: bytearray(v[1]) for i, v in tr.initial.items() if v[0] == "f"}
    for i, op in enumerate(tr.ops[:upto]):
        k = op[0]
        if k in META:
            if meta_keep is not None and not meta_keep(i):
                continue
            if k == "link":
                _, parent, name, ino, kind = op
                dirs.setdefault(parent, {})[name] = ino
                if kind == "d":
                    dirs.setdefault(ino, {})
                else:
                    data.setdefault(ino, bytearray())
            elif k == "unlink":
                if dirs.setdefault(op[1], {}).get(op[2]) == op[3]:
                    del dirs[op[1]][op[2]]
            else:
                # By the inodes recorded: in the per-directory model the
                # source's own creation may be the one that was lost.
                _, sp, sn, dp, dn, exchange, si, di = op
                src, dst = dirs.setdefault(sp, {}), dirs.setdefault(dp, {})
                if src.get(sn) == si:
                    del src[sn]
                if exchange and di is not None:
                    src[sn] = di
                dst[dn] = si
        elif k in ("write", "trunc"):
            choice = True if keep is None else keep(i)
            if choice is False:
                continue
            buf = data.setdefault(op[1], bytearray())
            if k == "trunc":
                del buf[op[2]:]
                buf.extend(bytes(max(0, op[2] - len(buf))))
                continue
            _, ino, off, b = op
            pieces = [(off, b)] if choice is True else _sectors(off, b, choice)
            for at, piece in pieces:
                if len(buf) < at:
                    buf.extend(bytes(at - len(buf)))
                buf[at:at + len(piece)] = piece
    out = {}

    def walk(ino, rel):
        for name, child in dirs.get(ino, {}).items():
            p = os.path.join(rel, name) if rel else name
            if tr.kinds.get(child) == "d":
                out[p] = None
                walk(child, p)
            else:
                out[p] = bytes(data.get(child, b""))

    walk(0, "")
    return out


def _sectors(off: int, b: bytes, keep: set) -> list[tuple[int, bytes]]:
    """The pieces of a write at ``off`` that fall in the kept sectors."""
    out = []
    first = off // SECTOR_BYTES
    for s in range(first, (off + len(b) + SECTOR_BYTES - 1) // SECTOR_BYTES):
        if s in keep:
            lo, hi = max(off, s * SECTOR_BYTES), min(off + len(b), (s + 1) * SECTOR_BYTES)
            out.append((lo, b[lo - off:hi - off]))
    return out


def _sector_ids(off: int, n: int) -> list[int]:
    return list(range(off // SECTOR_BYTES, (off + n + SECTOR_BYTES - 1) // SECTOR_BYTES))


@dataclass
class CrashState:
    """One state: the crash point (ops[:point] were issued), what was chosen,
    the tree, and the acknowledgements the program had written."""

    point: int
    how: str
    tree: dict
    acks: list[bytes]
    model: str = "ext4"

    def key(self) -> str:
        h = hashlib.sha256()
        for p in sorted(self.tree):
            h.update(p.encode() + b"\0" + (b"D" if self.tree[p] is None else hashlib.sha256(self.tree[p]).digest()))
        h.update(b"acks=%d" % len(self.acks))
        return h.hexdigest()

    def write(self, dest: Path) -> Path:
        """Materialise the state's tree at ``dest`` (created; must not exist)."""
        dest.mkdir(parents=True)
        for p in sorted(self.tree):
            if self.tree[p] is None:
                (dest / p).mkdir(parents=True, exist_ok=True)
        for p, b in self.tree.items():
            if b is not None:
                (dest / p).parent.mkdir(parents=True, exist_ok=True)
                (dest / p).write_bytes(b)
        return dest


def crash_points(tr: Trace) -> list[int]:
    """Just before each sync, and the end of the run."""
    pts = [i for i, op in enumerate(tr.ops) if op[0] in ("sync", "syncall")]
    return sorted(set(pts + [len(tr.ops)]))


def _forced(tr: Trace, point: int, model: str) -> tuple[set[int], list[int], set[int], list[int]]:
    """At ``point``: (forced directory ops, all directory ops, forced data ops, un-forced data ops).

    ``ext4``: an fsync of any directory (or sync) forces every directory op
    issued before it started (one journal, committed in order). ``strict``:
    an fsync of directory D forces only D's own entry operations."""
    ops = tr.ops[:point]
    meta = [i for i, op in enumerate(ops) if op[0] in META]
    data = [i for i, op in enumerate(ops) if op[0] in ("write", "trunc")]
    synced = {}  # ino -> ops before its latest sync; None: sync()
    for op in ops:
        if op[0] == "syncall":
            synced[None] = max(synced.get(None, 0), op[1])
        elif op[0] == "sync":
            synced[op[1]] = max(synced.get(op[1], 0), op[2])
    everything = synced.get(None, 0)
    if model == "ext4":
        upto = max([everything] + [b for ino, b in synced.items() if ino is not None and tr.kinds.get(ino) == "d"])
        forced_meta = {i for i in meta if i < upto}
    else:
        forced_meta = {i for i in meta if i < everything or i < synced.get(meta_dir(ops[i]), 0)}
    forced = {i for i in data if i < everything or i < synced.get(ops[i][1], 0)}
    return forced_meta, meta, forced, [i for i in data if i not in forced]


def _meta_choices(tr, meta, forced_meta, model, rng, prefixes_max):
    """(label, keep-set) of directory ops: ext4 global prefixes; strict per-directory prefixes."""
    if model == "ext4":
        lo = sum(1 for i in meta if i in forced_meta)  # forced ops are a prefix in this model
        ms = list(range(lo, len(meta) + 1))
        if len(ms) > prefixes_max:
            ms = sorted({lo, len(meta), *rng.sample(ms, prefixes_max - 2)})
        return [(f"dir ops {m}/{len(meta)}", set(meta[:m])) for m in ms], lambda: set(meta[:rng.choice(ms)])
    per_dir: dict[int, list[int]] = {}
    for i in meta:
        per_dir.setdefault(meta_dir(tr.ops[i]), []).append(i)
    floor = {d: sum(1 for i in ops if i in forced_meta) for d, ops in per_dir.items()}

    def pick(prefix_of):
        return {i for d, ops in per_dir.items() for i in ops[:prefix_of(d)]}

    out = [("every directory's ops kept", set(meta)), ("every directory's ops only forced", pick(floor.get))]
    loose = [d for d in per_dir if floor[d] < len(per_dir[d])]
    for d in loose[:prefixes_max]:
        n = len(per_dir[d])
        # One directory cut back to its forced ops, the others kept ...
        out.append((f"directory inode {d} ops {floor[d]}/{n}, others kept",
                    pick(lambda x, d=d: floor[x] if x == d else len(per_dir[x]))))
        # ... and one directory at a partial prefix, the others only forced.
        ms = list(range(floor[d] + 1, n))
        for m in (ms if len(ms) <= 4 else sorted(rng.sample(ms, 4))):
            out.append((f"directory inode {d} ops {m}/{n}, others only forced",
                        pick(lambda x, d=d, m=m: m if x == d else floor[x])))
    return out, lambda: pick(lambda x: rng.randint(floor[x], len(per_dir[x])))


def crash_states(tr: Trace, samples: int, seed: int, models=("ext4", "strict"), prefixes_max: int = 8,
                 points=None):
    """Yield the distinct :class:`CrashState` s of ``tr`` (see the module doc);
    ``points(i)`` may restrict the crash points."""
    rng = random.Random(seed)
    seen = set()
    for model in models:
        for point in crash_points(tr):
            if points is not None and not points(point):
                continue
            forced_meta, meta, forced, free = _forced(tr, point, model)
            acks = tr.acks(point)
            metas, random_meta = _meta_choices(tr, meta, forced_meta, model, rng, prefixes_max)
            choices = [("all kept", set(meta), None), ("only forced", forced_meta, set())]
            for label, mk in metas:
                choices += [(f"{label}, data kept", mk, None), (f"{label}, data lost", mk, set())]
            for s in range(samples):
                plan = {}
                for i in free:
                    r = rng.random()
                    if r < 0.5:
                        plan[i] = True
                    elif r < 0.75 or tr.ops[i][0] == "trunc":
                        plan[i] = False
                    else:
                        op = tr.ops[i]
                        plan[i] = {x for x in _sector_ids(op[2], len(op[3])) if rng.random() < 0.5}
                choices.append((f"sample {s} (seed {seed})", random_meta(), plan))
            for how, mk, plan in choices:
                mk = mk | forced_meta
                if plan is None:
                    keep = None
                elif isinstance(plan, set):  # everything un-forced lost
                    keep = forced.__contains__
                else:
                    keep = (lambda plan_: (lambda i: True if i in forced else plan_.get(i, True)))(plan)
                tree = materialise_tree(tr, point, keep, mk.__contains__)
                st = CrashState(point, f"{model} model, point {point}/{len(tr.ops)}, {how}", tree, acks, model)
                k = st.key()
                if k in seen:
                    continue
                seen.add(k)
                yield st


def explore(tr: Trace, check, work: Path, samples: int, seed: int, limit: int | None = None, **select) -> dict:
    """Materialise crash states under ``work`` and run ``check(path, state)`` on
    each (it raises AssertionError naming the violation; any other exception,
    e.g. a dataset that does not open, is a failure too). With ``limit``, a
    seeded uniform sample of ``limit`` states per model (reservoir sampling,
    so every crash point can be drawn), else every distinct state. Returns
    counts per model and the failures (description + message), at most 5.
    ``select``: ``models``, ``points`` of :func:`crash_states`."""
    stats = {"states": 0, "points": len(crash_points(tr)), "distinct": 0, "ext4": 0, "strict": 0, "failures": []}
    chosen: dict[str, list] = {}
    rng = random.Random(seed)
    for st in crash_states(tr, samples, seed, **select):
        stats["distinct"] += 1
        pool = chosen.setdefault(st.model, [])
        seen = stats.setdefault(f"_{st.model}_seen", 0) + 1
        stats[f"_{st.model}_seen"] = seen
        if limit is None or len(pool) < limit:
            pool.append((seen, st))
        elif (j := rng.randrange(seen)) < limit:
            pool[j] = (seen, st)
        if limit is None:
            _check_one(st, check, work, stats)
            pool.clear()
    for model, pool in chosen.items():
        for _, st in sorted(pool, key=lambda x: x[0]):
            _check_one(st, check, work, stats)
    for k in [k for k in stats if k.startswith("_")]:
        del stats[k]
    return stats


def _check_one(st: CrashState, check, work: Path, stats: dict) -> None:
    if len(stats["failures"]) >= 5:
        return
    d = work / f"state-{stats['states']}"
    st.write(d)
    stats["states"] += 1
    stats[st.model] += 1
    try:
        check(d, st)
    except Exception as e:  # noqa: BLE001 - an error opening the state is a failure too
        what = "" if isinstance(e, AssertionError) else f"{type(e).__name__}: "
        stats["failures"].append(f"{st.how} ({len(st.acks)} acks): {what}{e}")
    finally:
        shutil.rmtree(d, ignore_errors=True)
