"""The one rule for a string a user chose on its way to someone's terminal or page: every
character that would act instead of show is written as its escape, as ``ls -b`` and ``squeue``
show a file or job name (``\\e`` for ESC, ``\\x07`` for BEL, ``\\u202e`` for a bidi override).

A job's command, paths, environment, comment and the reasons it carries are bob's bytes; an
admin running ``railyard queue`` must not have them set the window title, clear the screen,
rewrite the line above (CR) or reverse what follows (bidi). What acts: the C0 controls, DEL,
the C1 controls (8-bit CSI and OSC among them), the bidi embeddings, overrides and isolates,
and the line and paragraph separators. The CLI applies :func:`printable` to every value it
lays out (``railyard.cli.text``, ``railyard.cli.jobformat``) and :func:`printable_lines` to
all else it writes (``railyard.cli.main``); the dashboard escapes through its own ``esc``,
which applies :func:`printable_lines` before HTML escaping; the log header the wrapper writes
applies :func:`printable`. Backslashes stay as they are, so ordinary paths and commands read
unchanged (``ls -b`` doubles them; squeue does not).

On the standard library alone: the client imports nothing else.
"""

from __future__ import annotations

import re

_NAMED = {"\x1b": "\\e", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_ACTS = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}\u2028\u2029]")
_ACTS_IN_LINES = re.compile(f"\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI}\u2028\u2029]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` for one line of a table or a field: every character that acts is escaped,
    newlines and tabs too (a value must not forge a row)."""
    if _ACTS.search(text) is None:
        return text  # the common case: nothing to copy
    return _ACTS.sub(_escape, text)


def printable_lines(text: str) -> str:
    """``text`` that may span lines (a message, a stream of output lines): as
    :func:`printable`, but newlines, tabs and CRLF line ends stay (a lone carriage return
    does not: it rewrites the line on screen)."""
    if _ACTS_IN_LINES.search(text) is None:
        return text
    return _ACTS_IN_LINES.sub(_escape, text)
