"""The bearer token file (``flashgnn serve --token-file``, ``flashgnn query --token-file``, ``Client(token_file=)``).

One rule on both sides, so that a server and its clients never read different tokens from the same file:

- the file must be a **regular file**. It is opened with ``O_NONBLOCK`` and checked with ``fstat`` before
  anything is read, so a FIFO, a device or a directory is refused by name instead of blocking the command;
- the token is the file's only line. Whitespace around it (a final newline, blank lines) is ignored; a
  second non-blank line is refused rather than guessed at (which line would the clients send?);
- at least :data:`MIN_TOKEN_CHARS` printable ASCII characters (gRPC metadata carries nothing else);
- the server also refuses a file that others may read or write (``private=True``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .._durable import kind_of

MIN_TOKEN_CHARS = 16
# A token file holds one line; anything longer is not one (and is not read into memory).
TOKEN_FILE_MAX_BYTES = 4096


def read_token_file(path: str | os.PathLike, *, private: bool = True, flag: str = "--token-file") -> str:
    """The bearer token in ``path``; ``ValueError`` naming ``flag``, the file and what is wrong otherwise."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise ValueError(f"{flag} {p}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{flag} {p}: not a regular file ({kind_of(st.st_mode)}); put the token in a regular file")
        if private and st.st_mode & (stat.S_IROTH | stat.S_IWOTH):
            raise ValueError(
                f"{flag} {p}: mode {stat.filemode(st.st_mode)} is readable or writable by others; "
                f"run `chmod 600 {p}` (the token grants read and write access to the graph)"
            )
        if st.st_size > TOKEN_FILE_MAX_BYTES:
            raise ValueError(f"{flag} {p}: {st.st_size} bytes > {TOKEN_FILE_MAX_BYTES}; a token file holds one line")
        data = os.read(fd, TOKEN_FILE_MAX_BYTES + 1)
    finally:
        os.close(fd)
    return parse_token(data, f"{flag} {p}")


def parse_token(data: bytes, where: str) -> str:
    """The one line of a token file's bytes ``data``; ``where`` prefixes the error messages."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as e:
        raise ValueError(f"{where}: byte {e.start} (0x{data[e.start]:02x}) is not ASCII; "
                         "use e.g. `openssl rand -hex 32`") from None
    token = text.strip()
    if not token:
        raise ValueError(f"{where}: empty; put one line of at least {MIN_TOKEN_CHARS} random characters in it")
    lines = token.splitlines()
    if len(lines) > 1:
        raise ValueError(f"{where}: {len(lines)} lines (the token must be the file's only line; refused rather "
                         "than guess which line the clients send)")
    for i, ch in enumerate(token):
        if not " " <= ch <= "~":
            raise ValueError(f"{where}: character {i} ({ch!r}) is not printable ASCII")
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(f"{where}: token of {len(token)} characters < {MIN_TOKEN_CHARS}; use e.g. `openssl rand -hex 32`")
    return token
