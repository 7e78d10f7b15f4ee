"""The small frame every control-plane command shares: argparse with one-line errors, the exit
codes, a connected client, and ``--json``.

Exit codes: 0 done, 1 refused (401, 403, 404, 409) or the server unreachable, 2 bad input (a
flag, a script, a 400/422 from the server). Every failure is one line on stderr starting with
``railyard:``. Standard library only at import time: a command pays for what it uses.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

if TYPE_CHECKING:
    from railyard.client.client import Client

Run = Callable[[argparse.Namespace], int | None]


def describe(run: Run) -> str | None:
    """A function's docstring as help text: the first line, then the rest dedented."""
    first, _, rest = (run.__doc__ or "").strip().partition("\n")
    return (first + "\n" + textwrap.dedent(rest)).strip() or None


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr, then exit: 2 for bad input, 1 for a refusal."""
    print(f"railyard: {message}", file=sys.stderr)
    raise SystemExit(code)


def terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``, without importing shutil (and with it zlib,
    bz2 and lzma): argparse builds a formatter for every ``add_argument``, so each command
    would pay for it. ``COLUMNS`` first, then the terminal on stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0 and sys.__stdout__ is not None:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's help layout (descriptions as written), its width found without shutil."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        width = terminal_columns() - 2 if width is None else width
        super().__init__(prog, indent_increment, max_help_position, width)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the command and how to get help."""

    dash_values: frozenset[str] = frozenset()
    """Options whose value may start with ``-`` (squeue's ``-S -p``: descending priority);
    argparse would read it as an option, so :func:`glue_dash_values` joins the two first."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("railyard").strip()
        where = f"{command}: " if command else ""
        fail(f"{where}{message} (hint: {self.prog} --help)")


class Command(NamedTuple):
    """One ``railyard NAME``: ``arguments`` adds its flags (and sub-commands) to a parser;
    ``run`` is called with the parsed namespace and returns the exit code (None: 0). With
    ``arguments`` None the command reads its own words from ``namespace.argv``."""

    name: str
    run: Run
    arguments: Callable[[Parser], None] | None

    def invoke(self, argv: list[str], prog: str = "railyard") -> int:
        if self.arguments is None:
            namespace = argparse.Namespace(argv=argv, prog=f"{prog} {self.name}")
        else:
            parser = self.parser(prog)
            namespace = parser.parse_args(glue_dash_values(argv, parser.dash_values))
        run: Run = namespace.run if self.arguments is not None else self.run
        return run(namespace) or 0

    @property
    def summary(self) -> str:
        return (describe(self.run) or "").partition("\n")[0]

    def parser(self, prog: str = "railyard") -> Parser:
        parser = Parser(
            prog=f"{prog} {self.name}",
            description=describe(self.run),
            formatter_class=HelpFormatter,
        )
        parser.set_defaults(run=self.run)
        if self.arguments is not None:
            self.arguments(parser)
        return parser


def glue_dash_values(argv: list[str], options: frozenset[str]) -> list[str]:
    """``-S -p`` as ``-S-p`` and ``--sort -p`` as ``--sort=-p``, for each of ``options``."""
    if not options:
        return argv
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return out + argv[i:]
        if word in options and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(f"{word}={argv[i + 1]}" if word.startswith("--") else word + argv[i + 1])
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def subcommands(parser: Parser, *commands: Command, required: bool = True) -> None:
    """Nested commands (``railyard admin users add``), each with its own flags."""
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", required=required)
    for command in commands:
        child = sub.add_parser(
            command.name,
            help=command.summary,
            description=describe(command.run),
            formatter_class=HelpFormatter,
        )
        child.set_defaults(run=command.run)
        if command.arguments is not None:
            command.arguments(child)


def json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


_DURATION = re.compile(r"^(\d{1,9})([smhdw]?)$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str, option: str) -> float:
    """``30d``, ``12h``, ``90m``, ``3600s`` or ``3600`` (seconds) to seconds; exit 2 else."""
    match = _DURATION.match(text.strip())
    if not match or int(match.group(1)) == 0:
        fail(f"{option}: bad duration {text!r} (hint: e.g. 30d, 12h, 90m or 3600s)")
    return float(int(match.group(1)) * _UNIT_S[match.group(2)])


def emit_json(data: Any) -> None:
    print(json.dumps(data, indent=2))


@contextmanager
def connect() -> Iterator[Client]:
    """A client from the environment; server refusals become one-line exits."""
    from railyard.client.client import Client, ClientError
    from railyard.client.config import LOGIN_HINT

    try:
        with Client.from_env() as client:
            yield client
    except ClientError as exc:
        hint = f" (hint: {LOGIN_HINT})" if exc.status == 401 and "hint:" not in exc.detail else ""
        fail(exc.detail + hint, 2 if exc.status in (400, 422) else 1)
