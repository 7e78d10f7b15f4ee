"""Plain-text output of the control-plane commands: aligned columns, Slurm's time formats.

Columns are separated by two spaces and never wrapped, like ``squeue`` and ``sacct``, so
``grep`` and ``awk`` work on them; nothing here imports more than the standard library and
the client. Every cell and value is passed through :func:`printable` here, so no command can
print a user's control characters raw (``railyard.client.printable``).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence

from railyard.client.printable import printable, printable_lines

TYPE_CHECKING = False  # not typing's: main imports this module for every command
if TYPE_CHECKING:
    from typing import BinaryIO, TextIO


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], right: Iterable[str] = ()) -> str:
    """Aligned columns under ``headers``; columns named in ``right`` are right-aligned."""
    body = [[printable(c) for c in r] for r in rows]
    widths = [max([len(h), *(len(r[i]) for r in body)]) for i, h in enumerate(headers)]
    align_right = [h in set(right) for h in headers]
    lines = []
    for cells in [list(headers), *body]:
        padded = [
            c.rjust(w) if r else c.ljust(w)
            for c, w, r in zip(cells, widths, align_right, strict=True)
        ]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def pairs(items: Iterable[tuple[str, str]]) -> str:
    """``key  value`` lines with the values aligned (``railyard show``)."""
    items = [(printable(k), printable(v)) for k, v in items]
    width = max((len(k) for k, _ in items), default=0)
    return "\n".join(f"{k.ljust(width)}  {v}".rstrip() for k, v in items)


def squeue_time(seconds: float | None) -> str:
    """squeue's TIME: ``M:SS``, ``H:MM:SS``, ``D-HH:MM:SS``."""
    if seconds is None:
        return ""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02}:{minutes:02}:{secs:02}"
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


def clock(seconds: float | None) -> str:
    """Slurm's elapsed and time-limit format: ``HH:MM:SS``, ``D-HH:MM:SS`` from a day on."""
    if seconds is None:
        return ""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    hms = f"{hours:02}:{minutes:02}:{secs:02}"
    return f"{days}-{hms}" if days else hms


def iso(t_s: float | None) -> str:
    """A Unix time as an ISO date in local time with its offset, to the second."""
    if t_s is None:
        return ""
    from datetime import datetime  # `show` pays for it, not `queue` or `submit`

    return datetime.fromtimestamp(t_s).astimezone().isoformat(timespec="seconds")


def ranges(indices: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 6]`` -> ``0-3,6``."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def placement(nodes: dict[str, list[int]] | None) -> str:
    """``n01:0-7 n02:0-7``, the GPUs a job holds on each node (``n01`` alone: a CPU job)."""
    return " ".join(f"{n}:{ranges(g)}" if g else n for n, g in sorted((nodes or {}).items()))


class PrintableStream(io.TextIOBase):
    """A text stream that writes through :func:`printable_lines`: what ``railyard`` prints
    by any route (a message, a reason, an event) shows a user's control characters escaped.
    A job's own output (``railyard logs``) is the job's bytes, as ``cat`` would show them:
    it is written to :func:`raw` instead."""

    def __init__(self, under: TextIO) -> None:
        super().__init__()
        self.under = under

    def write(self, text: str) -> int:
        self.under.write(printable_lines(text))
        return len(text)

    def flush(self) -> None:
        self.under.flush()

    def isatty(self) -> bool:
        return self.under.isatty()

    def fileno(self) -> int:
        return self.under.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.under, "encoding", "utf-8")

    @property
    def buffer(self) -> BinaryIO:
        return self.under.buffer


def raw(stream: TextIO) -> TextIO:
    """The stream under a :class:`PrintableStream` (``stream`` itself if it is not one)."""
    return stream.under if isinstance(stream, PrintableStream) else stream
