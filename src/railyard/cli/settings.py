"""``railyard config check`` and ``config show``: the configuration file checked before a
service is restarted on it, and what ``up`` and ``join`` would run with (as ``scontrol show
config`` says what is in force)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from railyard.cli.args import Command, Parser, emit_json, fail, json_flag, subcommands
from railyard.cli.configfile import check_sections, default_path, load, settable
from railyard.cli.main import command

SECTIONS = ("up", "join")


def _parsers() -> dict[str, Parser]:
    return {name: command(name).parser() for name in SECTIONS}


def config(_: argparse.Namespace) -> None:
    """Check or show the configuration file (/etc/railyard/railyard.toml or --config)."""


def _path(given: Path | None) -> Path | None:
    return given or default_path()


def check(args: argparse.Namespace) -> None:
    """Check a configuration file: TOML, known sections and keys, values each flag accepts."""
    path = _path(args.file)
    if path is None:
        fail("config check: no file given and /etc/railyard/railyard.toml does not exist "
             "(hint: railyard config check FILE)")  # fmt: skip
    data, text = load(path)
    values = check_sections(data, text, path, _parsers())
    counts = ", ".join(f"[{name}] {len(v)}" for name, v in values.items())
    print(f"{path}: ok ({counts} keys set)")


def _check_args(p: Parser) -> None:
    p.add_argument("file", nargs="?", type=Path, metavar="FILE", help="(default: the site's)")


def _shown(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list):
        return [_shown(v) for v in value]
    return value


def show(args: argparse.Namespace) -> None:
    """Every setting of `up` and `join` in force: from the file, else the default."""
    path = _path(args.config)
    parsers = _parsers()
    data: dict[str, Any] = {}
    values: dict[str, dict[str, Any]] = {name: {} for name in parsers}
    if path is not None:
        data, text = load(path)
        values = check_sections(data, text, path, parsers)
    shown: dict[str, list[dict[str, Any]]] = {}
    for name, parser in parsers.items():
        rows = []
        for key, action in settable(parser).items():
            from_file = action.dest in values[name]
            value = values[name][action.dest] if from_file else action.default
            source = str(path) if from_file else "default"
            rows.append({"key": key, "value": _shown(value), "source": source})
        shown[name] = rows
    if args.json:
        emit_json({"file": str(path) if path else None, **shown})
        return
    print(f"# configuration file: {path or 'none (defaults only)'}")
    for name, rows in shown.items():
        print(f"\n[{name}]")
        width = max(len(row["key"]) for row in rows)
        for row in rows:
            value = "(unset)" if row["value"] is None else json.dumps(row["value"])
            print(f"{row['key']:<{width}} = {value}   # {row['source']}")


def _show_args(p: Parser) -> None:
    p.add_argument("--config", type=Path, metavar="FILE", help="(default: the site's)")
    json_flag(p)


def _config_args(p: Parser) -> None:
    subcommands(p, Command("check", check, _check_args), Command("show", show, _show_args))


COMMANDS = (Command("config", config, _config_args),)
