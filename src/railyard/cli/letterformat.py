"""Slurm's ``-o FORMAT`` of letters (``%.18i %9P %N``), one parser and layout for squeue's
and sinfo's: ``%[.][WIDTH]LETTER`` (``.`` right-justifies, WIDTH pads and cuts), ``%%`` a
percent sign, anything else as written."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from railyard.client.printable import printable

Row = TypeVar("Row")
_SPEC = re.compile(r"%(\.)?(\d*)([A-Za-z%])")


def letter_lines(
    fmt: str,
    rows: Sequence[Row],
    fields: Mapping[str, Callable[[Row], str]],
    headers: Mapping[str, str],
    *,
    option: str,
) -> list[str]:
    """A header line (``headers``, else the letter in upper case), then a line per row, each
    value made printable. ValueError: one line naming ``option`` and the letters it takes."""
    parts: list[str | tuple[bool, int | None, str]] = []
    at = 0
    for match in _SPEC.finditer(fmt):
        parts.append(fmt[at : match.start()])
        right, width, letter = match.groups()
        if letter == "%":
            parts.append("%")
        elif letter not in fields:
            raise ValueError(
                f"{option}: unknown field %{letter} (hint: one of %{' %'.join(fields)})"
            )
        else:
            parts.append((bool(right), int(width) if width else None, letter))
        at = match.end()
    parts.append(fmt[at:])

    def line(value_of: Callable[[str], str]) -> str:
        out = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
                continue
            right, width, letter = part
            text = value_of(letter)
            if width is not None:
                text = text[:width]
                text = text.rjust(width) if right else text.ljust(width)
            out.append(text)
        return "".join(out).rstrip()

    def values(row: Row) -> Callable[[str], str]:
        return lambda letter: printable(fields[letter](row))

    header = line(lambda letter: headers.get(letter, letter.upper()))
    return [header, *(line(values(row)) for row in rows)]
