"""The site's configuration file: ``/etc/railyard/railyard.toml`` (or ``--config FILE``, or
``$RAILYARD_CONFIG``), one TOML table per command, every flag of ``railyard up`` under
``[up]`` and of ``railyard join`` under ``[join]``, named as the flag without its dashes::

    [up]
    host = "0.0.0.0"
    database-url = "postgresql+psycopg://railyard@db/railyard"
    partition = ["PartitionName=debug MaxTime=30:00"]

    [join]
    address = "10.0.0.1:6379"

The keys are read from the commands' own parsers, so a new flag is a key at once and none can
be missed. A flag on the command line overrides the file; an unknown key, a value of the wrong
type or a file that is not TOML is one line naming the file, line and key, exit 2 (a service
that starts with a typo ignored runs a cluster nobody configured).
"""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from railyard.cli.args import Command, Parser, Run, fail

DEFAULT_CONFIG = Path("/etc/railyard/railyard.toml")
CONFIG_ENV = "RAILYARD_CONFIG"
_SECTION = re.compile(r"^\s*\[\s*([A-Za-z0-9_-]+)\s*\]")
_KEY = re.compile(r"""^\s*["']?([A-Za-z0-9_.-]+)["']?\s*=""")


def config_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help=f"settings file (default {DEFAULT_CONFIG} when it exists, or ${CONFIG_ENV}); "
        "flags override it",
    )


def default_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """``$RAILYARD_CONFIG``, else /etc/railyard/railyard.toml when it exists, else None."""
    env = os.environ if environ is None else environ
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV])
    return DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None


def settable(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Each key a section may hold: the long flag without dashes (a positional: its name)."""
    keys: dict[str, argparse.Action] = {}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.dest == "config" or action.dest == argparse.SUPPRESS:
            continue
        longs = [o for o in action.option_strings if o.startswith("--")]
        name = longs[0][2:] if longs else (action.dest if not action.option_strings else "")
        if name:
            keys[name] = action
    return keys


def line_of(text: str, section: str, key: str | None = None) -> int:
    """The line (1-based) where ``[section]`` (or its ``key``) is written; 0 when not found."""
    current = ""
    for number, line in enumerate(text.splitlines(), start=1):
        header = _SECTION.match(line)
        if header:
            current = header.group(1)
            if key is None and current == section:
                return number
            continue
        found = _KEY.match(line)
        if key is not None and current == section and found and found.group(1) == key:
            return number
    return 0


def load(path: Path) -> tuple[dict[str, Any], str]:
    """The parsed file and its text; one line and exit 2 when it cannot be read or parsed."""
    try:
        text = path.read_text()
    except OSError as exc:
        fail(f"{path}: {exc.strerror or exc} (hint: --config FILE, or ${CONFIG_ENV})")
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        fail(f"{path}: not valid TOML: {exc} (hint: key = value, strings quoted)")


def _convert(action: argparse.Action, value: Any) -> Any:
    """``value`` as the flag would have parsed it; ValueError with the reason else."""
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
        if not isinstance(value, bool):
            raise ValueError("expected true or false")
        return value if isinstance(action, argparse._StoreTrueAction) else not value
    if isinstance(action, argparse.BooleanOptionalAction):
        if not isinstance(value, bool):
            raise ValueError("expected true or false")
        return value
    if isinstance(action, argparse._AppendAction):
        items = value if isinstance(value, list) else [value]
        return [_scalar(action, item) for item in items]
    return _scalar(action, value)


def _scalar(action: argparse.Action, value: Any) -> Any:
    if isinstance(value, bool | list | dict):
        raise ValueError(f"expected a {'number' if action.type in (int, float) else 'string'}")
    convert = action.type if callable(action.type) else str
    try:
        converted = convert(str(value))
    except (TypeError, ValueError, argparse.ArgumentTypeError) as exc:
        raise ValueError(f"{value!r}: {exc}") from None
    if action.choices is not None and converted not in action.choices:
        raise ValueError(f"{value!r} is not one of {', '.join(map(str, action.choices))}")
    return converted


def section_values(
    data: Mapping[str, Any], text: str, path: Path, section: str, parser: argparse.ArgumentParser
) -> dict[str, Any]:
    """``[section]``'s keys checked and converted, as argparse dests; exit 2 on the first bad
    one, naming the file, line and key."""
    table = data.get(section, {})
    if not isinstance(table, dict):
        fail(f"{path}:{line_of(text, section)}: {section} must be a table (hint: [{section}])")
    keys = settable(parser)
    values: dict[str, Any] = {}
    for key, value in table.items():
        where = f"{path}:{line_of(text, section, key)}"
        action = keys.get(key)
        if action is None:
            from difflib import get_close_matches  # a typo alone pays for difflib

            close = get_close_matches(key, keys, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            fail(f"{where}: [{section}] unknown key {key!r} (hint: {hint}the keys are the "
                 f"flags of `railyard {section} --help` without their dashes)")  # fmt: skip
        try:
            values[action.dest] = _convert(action, value)
        except ValueError as exc:
            fail(f"{where}: [{section}] {key}: {exc} (hint: as --{key} takes it)")
    return values


def check_sections(
    data: Mapping[str, Any], text: str, path: Path, parsers: Mapping[str, argparse.ArgumentParser]
) -> dict[str, dict[str, Any]]:
    """Every section of the file checked; an unknown section or a key outside one is an error."""
    for name, value in data.items():
        if name not in parsers:
            where = f"{path}:{line_of(text, name) or line_of(text, '', name)}"
            known = " or ".join(f"[{s}]" for s in parsers)
            what = f"unknown section [{name}]" if isinstance(value, dict) else f"key {name!r}"
            fail(f"{where}: {what} (hint: settings go under {known})")
    return {name: section_values(data, text, path, name, p) for name, p in parsers.items()}


def parse_configured(parser: Parser, argv: Sequence[str], section: str) -> argparse.Namespace:
    """Parse ``argv`` over the file's ``[section]``: the file's values become the defaults,
    so any flag given wins."""
    first, _ = parser.parse_known_args(argv)  # --config (and a usage error) first
    path: Path | None = first.config or default_path()
    if path is not None:
        data, text = load(path)
        parser.set_defaults(**section_values(data, text, path, section, parser))
    namespace = parser.parse_args(argv)
    namespace.config = path
    return namespace


class Configured(Command):
    """A command whose flags the configuration file's table of its name may also set."""

    def invoke(self, argv: list[str], prog: str = "railyard") -> int:
        namespace = parse_configured(self.parser(prog), argv, self.name)
        run: Run = namespace.run
        return run(namespace) or 0
