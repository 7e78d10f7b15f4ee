"""Slurm hostlist expressions: ``gpu[001-003,007]`` for ``gpu001 gpu002 gpu003 gpu007``.

Slurm's configuration files and commands take node and switch names in this compressed form:
a job's ``SLURM_JOB_NODELIST``, the fabric exporters' ``topology.conf``, and the in-job
``scontrol show hostnames`` / ``railyard show hostnames`` that read it back. It lives in the
client (standard library only) so the in-job ``scontrol`` loads nothing else. The rules follow
Slurm's parser:

- top-level commas separate terms: ``a[1-2],b3``;
- a term may hold several bracket groups, expanded left to right (``r[1-2]n[1-2]`` gives
  ``r1n1 r1n2 r2n1 r2n2``);
- in a range ``lo-hi`` the width of ``lo`` as written sets the zero padding of every number in
  it (``[08-10]`` gives ``08 09 10``, ``[8-10]`` gives ``8 9 10``).

:func:`compress_hostlist` keeps the order of its input (Slurm's ``scontrol show hostlist`` does
not sort either), so ``expand_hostlist(compress_hostlist(names)) == names`` for any list of
valid names. :func:`expand_hostlist` stops at :data:`MAX_NAMES` before building the list, so
one short expression (``n[0-999999999]``) cannot fill memory.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence

_NUMBERED = re.compile(r"^(.*?)(\d+)$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_FORBIDDEN = frozenset("[],") | frozenset(" \t\r\n")
MAX_NAMES = 65_536  # names one expression may expand to (Slurm's own hostlists hold ~64k)


def _short(text: str) -> str:
    """``text`` cut for an error message, which must stay one short line."""
    return text if len(text) <= 64 else text[:61] + "..."


class _Run:
    """Names sharing a prefix whose numbers can all be written with one zero-pad width. (A
    plain class: importing dataclasses would cost every ``railyard show hostnames`` call.)"""

    def __init__(self, prefix: str, min_len: int) -> None:
        self.prefix = prefix
        self.width: int | None = None  # set by the first zero-padded number
        self.min_len = min_len  # shortest unpadded number so far (caps a later padding)
        self.numbers: list[int] = []

    def accepts(self, prefix: str, digits: str) -> bool:
        if prefix != self.prefix:
            return False
        padded = len(digits) > 1 and digits[0] == "0"
        if self.width is None:
            return not padded or len(digits) <= self.min_len
        return len(digits) == self.width if padded else len(digits) >= self.width

    def add(self, digits: str) -> None:
        if len(digits) > 1 and digits[0] == "0":
            self.width = len(digits)
        else:
            self.min_len = min(self.min_len, len(digits))
        self.numbers.append(int(digits))

    def render(self) -> str:
        width = self.width or 1
        if len(self.numbers) == 1:
            return f"{self.prefix}{self.numbers[0]:0{width}d}"
        ranges: list[str] = []
        start = prev = self.numbers[0]
        for n in [*self.numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            lo = f"{start:0{width}d}"
            ranges.append(lo if start == prev else f"{lo}-{prev:0{width}d}")
            if n is not None:
                start = prev = n
        return f"{self.prefix}[{','.join(ranges)}]"


def compress_hostlist(names: Sequence[str]) -> str:
    """Shortest hostlist of ``names`` in their order; raises ``ValueError`` for unusable names.

    Consecutive names with the same prefix and compatible zero padding share one bracket;
    a name without a trailing number, or one alone in its run, is written as it is.
    """
    parts: list[str] = []
    run: _Run | None = None
    for name in names:
        if not name or any(c in _FORBIDDEN for c in name):
            raise ValueError(f"cannot put {_short(name)!r} in a hostlist: empty, or [ ] , space")
        match = _NUMBERED.match(name)
        if match is None:
            if run is not None:
                parts.append(run.render())
                run = None
            parts.append(name)
            continue
        prefix, digits = match.group(1), match.group(2)
        if run is None or not run.accepts(prefix, digits):
            if run is not None:
                parts.append(run.render())
            run = _Run(prefix, len(digits))
        run.add(digits)
    if run is not None:
        parts.append(run.render())
    return ",".join(parts)


def _split_top_level(expr: str) -> list[str]:
    """Split on commas outside brackets, checking that brackets balance and do not nest."""
    terms: list[str] = []
    shown = _short(expr)
    depth = 0
    start = 0
    for i, c in enumerate(expr):
        if c == "[":
            if depth:
                raise ValueError(f"nested '[' at column {i + 1} of hostlist {shown!r}")
            depth = 1
        elif c == "]":
            if not depth:
                raise ValueError(f"unmatched ']' at column {i + 1} of hostlist {shown!r}")
            depth = 0
        elif c == "," and not depth:
            terms.append(expr[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"unclosed '[' in hostlist {shown!r}")
    terms.append(expr[start:])
    return terms


def _too_many(expr: str, limit: int) -> ValueError:
    return ValueError(f"hostlist {_short(expr)!r} names over {limit} hosts")


def _expand_brackets(body: str, expr: str, limit: int) -> list[str]:
    """The numbers one bracket group stands for, as strings with their padding."""
    out: list[str] = []
    shown = _short(expr)
    for item in body.split(","):
        match = _RANGE.match(item.strip())
        if match is None:
            raise ValueError(f"bad range {_short(item)!r} in hostlist {shown!r}: want N or LO-HI")
        lo_text, hi_text = match.group(1), match.group(2)
        lo = int(lo_text)
        hi = lo if hi_text is None else int(hi_text)
        if hi < lo:
            raise ValueError(f"range {lo_text}-{hi_text} in hostlist {shown!r} runs backwards")
        if len(out) + hi - lo + 1 > limit:
            raise _too_many(expr, limit)
        width = len(lo_text)
        out.extend(f"{n:0{width}d}" for n in range(lo, hi + 1))
    return out


def expand_hostlist(expr: str, limit: int = MAX_NAMES) -> list[str]:
    """Every name a hostlist expression stands for, in order; raises ``ValueError`` if malformed
    or past ``limit`` names (checked before any list grows past it)."""
    if not expr.strip():
        return []
    names: list[str] = []
    for term in _split_top_level(expr.strip()):
        term = term.strip()
        if not term:
            raise ValueError(f"empty name between commas in hostlist {_short(expr)!r}")
        if len(names) >= limit:  # every term adds a name at least
            raise _too_many(expr, limit)
        pieces: list[list[str]] = []
        rest = term
        while rest:
            open_at = rest.find("[")
            if open_at < 0:
                pieces.append([rest])
                break
            close_at = rest.index("]", open_at)  # balanced: checked by _split_top_level
            if open_at:
                pieces.append([rest[:open_at]])
            pieces.append(_expand_brackets(rest[open_at + 1 : close_at], expr, limit))
            if len(names) + math.prod(len(p) for p in pieces) > limit:
                raise _too_many(expr, limit)  # checked per group: no list of groups can grow either
            rest = rest[close_at + 1 :]
        names.extend("".join(combo) for combo in itertools.product(*pieces))
    return names
