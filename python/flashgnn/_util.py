"""Small helpers every layer may use: sizes in and out (``parse_size``,
``human_bytes``), JSON reports (``print_json``) and the argument parser that
reads negative-leading number lists. They live here, not in the CLI, so the
library never imports the command line (the CLI imports the library)."""

from __future__ import annotations

import argparse
import copy
import json
import re

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([KMGT]?)(i?)B?\s*$", re.IGNORECASE)
# A value that starts with a minus sign and is a number or a comma list of
# numbers: "-1", "-1,-1", "-1,10", "-0.5,0.2". argparse's own test only knows
# "-1" and "-.5", and takes "-1,-1" for an option ("expected one argument").
_NEGATIVE_VALUE = re.compile(r"^-(\d+|\d*\.\d+)(,\s*-?(\d+|\d*\.\d+))*$")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows every option's default — options without a help text
    and falsy defaults such as 0 too; none for flags, for options whose
    default is None (their help says in words what happens) and for help
    texts that already say ``(default ...)``. Sizes print in binary units
    (``2GiB``, not 2147483648) and tuples as the comma list the option takes."""

    def _format_action(self, action):
        if action.option_strings and not (action.help or "").strip() and _shows_default(action):
            action = copy.copy(action)
            action.help = "(default: %(default)s)"
        return super()._format_action(action)

    def _get_help_string(self, action):
        text = action.help or ""
        if not action.option_strings or not _shows_default(action) or "%(default)" in text or "(default" in text:
            return text
        return f"{text} (default: %(default)s)"  # an empty help got "(default: ...)" in _format_action

    def _expand_help(self, action):
        shown = _default_text(action)
        if shown is not None:
            action = copy.copy(action)
            action.default = shown
        return super()._expand_help(action)


# The argparse types whose values are byte counts (shown as 2GiB in --help).
_SIZE_TYPES = ("parse_size", "parse_budget", "_size")


def _shows_default(action) -> bool:
    d = action.default
    return not (d is None or d is False or d is argparse.SUPPRESS)


def _default_text(action) -> str | None:
    """How ``--help`` writes ``action``'s default, where ``str()`` would not do."""
    d = action.default
    if getattr(action.type, "__name__", "") in _SIZE_TYPES and isinstance(d, int) and not isinstance(d, bool):
        return format_size(d)
    if isinstance(d, (tuple, list)):
        return ",".join(str(v) for v in d)
    return None


def format_size(n: int) -> str:
    """Bytes as the size parser reads them back: ``2147483648`` -> ``2GiB``, ``1536`` -> ``1536``
    (exact: the largest binary unit that divides ``n``)."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


class ArgumentParser(argparse.ArgumentParser):
    """argparse, where an option's value may be a negative-leading number
    list: ``--fanout -1,-1`` works like ``--fanout=-1,-1``. (No flashgnn
    option name looks like a number, so nothing is shadowed.) Subparsers
    made with ``add_subparsers`` are of this class too."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_VALUE


def parse_size(text: str) -> int:
    """'2GiB', '512M', '1.5G', '1000000' -> bytes (K/M/G/T are binary multiples)."""
    m = _SIZE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"cannot parse size {text!r} (examples: 2GiB, 512M, 1048576)")
    value, unit = float(m.group(1)), m.group(2).upper()
    return int(value * (1024 ** " KMGT".index(unit or " ")))


def parse_rate(text: str) -> int:
    """'100MB/s', '1.5GiB/s', '0' -> bytes per second (the size parser's
    units; a trailing '/s' is optional). 0 means unlimited."""
    t = text.strip()
    if t.lower().endswith("/s"):
        t = t[:-2]
    try:
        return parse_size(t)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"cannot parse rate {text!r} (examples: 100MB/s, 1GiB/s, 0 = unlimited)") from None


def human_bytes(n: float) -> str:
    for unit in ["B", "KiB", "MiB", "GiB", "TiB"]:
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def print_json(obj) -> None:
    """Print ``obj`` as the indented, key-sorted JSON every ``--json`` report uses."""
    print(json.dumps(obj, indent=2, sort_keys=True))


def proc_status_bytes(key: str) -> int:
    """A size field of ``/proc/self/status`` (``VmHWM``: peak resident memory;
    ``RssFile``: resident mapped file pages), bytes; 0 when unreadable."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0
