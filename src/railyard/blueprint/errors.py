"""One error type for every blueprint problem: where it is, what is wrong, how to fix it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

FieldPath = tuple[str | int, ...]


def format_path(path: FieldPath) -> str:
    """``("fabric", "tiers", 0, "switch")`` -> ``fabric.tiers[0].switch``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text or "(top level)"


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The closest known spelling, for 'did you mean' hints."""
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return matches[0] if matches else None


@dataclass(frozen=True)
class Problem:
    """A problem found at a field of the blueprint, before a file and line are known."""

    path: FieldPath
    message: str
    hint: str = ""


class BlueprintError(Exception):
    """A blueprint that cannot be used; ``str()`` is the one line the CLI prints."""

    def __init__(
        self,
        message: str,
        *,
        file: str = "",
        line: int | None = None,
        field: str = "",
        hint: str = "",
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.field = field
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file or "<blueprint>"
        if self.line is not None:
            where += f":{self.line}"
        text = f"{where}: "
        if self.field:
            text += f"{self.field}: "
        text += self.message
        if self.hint:
            text += f" (hint: {self.hint})"
        return text
