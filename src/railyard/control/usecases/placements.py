"""A placement in words, as squeue and the job pages write it: ``vm:2-3 n02:0-7`` (a node
alone: a CPU job). The loop writes its start events with it, and the pages rewrite events
stored before in the same words, so no Python value (``{'vm': [2, 3]}``) reaches a page."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence

_DICT = re.compile(r"\{[^{}]*\}")


def ranges(indices: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 6]`` -> ``0-3,6``."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def placement_text(nodes: Mapping[str, Sequence[int]] | None) -> str:
    return " ".join(f"{n}:{ranges(g)}" if g else n for n, g in sorted((nodes or {}).items()))


def _as_placement(text: str) -> str | None:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, list | tuple) and all(type(i) is int for i in v)
        for k, v in value.items()
    ):
        return None
    return placement_text(value)


def readable(message: str) -> str:
    """``message`` with each placement written as a Python dict (events stored before this
    rule) in words; anything else left as it is."""
    if "{" not in message:
        return message
    return _DICT.sub(lambda m: _as_placement(m.group(0)) or m.group(0), message)
