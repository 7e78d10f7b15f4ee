"""The ``railyard`` command: a table of commands, each loaded only when it runs.

Users call ``submit``, ``queue`` and ``show`` in loops and scripts, as they call Slurm's
commands, so a call must cost milliseconds: the control-plane commands are plain
:mod:`argparse` over a standard-library HTTP client, and nothing here imports FastAPI,
SQLAlchemy, pydantic, numpy or the scheduler unless the command needs it
(``benchmarks/bench_cli.py`` measures it; ``tests/cli/test_cli_imports.py`` keeps it so).
The design commands (``plan``, ``perf``, ``simulate`` ...) compute for seconds and keep their
typer apps (:mod:`railyard.cli.design`).
"""

from __future__ import annotations

import importlib
import os
import sys
from difflib import get_close_matches

from railyard import __version__
from railyard.cli.args import Command

# name -> module defining it (its COMMANDS), in the order `railyard --help` lists them.
CONTROL = {
    "up": "up",
    "join": "join",
    "submit": "jobs",
    "queue": "jobs",
    "show": "jobs",
    "history": "history",
    "cancel": "jobs",
    "hold": "jobs",
    "release": "jobs",
    "logs": "jobs",
    "nodes": "cluster",
    "queues": "cluster",
    "health": "health",
    "admin": "admin",
}
DESIGN = {
    "plan": "Bill of materials, cost, power and network figures of a cluster.",
    "topology": "Export the topology tree the scheduler places on (Slurm, Kueue, or plain).",
    "presets": "List the blueprints shipped with railyard.",
    "perf": "Predict collectives, training steps and checkpoints.",
    "simulate": "Simulate scheduling policies on a virtual clock (the digital twin).",
}
ABOUT = "railyard: plan, predict, schedule and operate shared GPU training clusters."


def command(name: str) -> Command:
    module = importlib.import_module(f"railyard.cli.{CONTROL[name]}")
    commands: tuple[Command, ...] = module.COMMANDS
    return next(c for c in commands if c.name == name)


def root_help() -> str:
    def section(title: str, rows: list[tuple[str, str]]) -> list[str]:
        return [f"{title}:", *(f"  {name:<10}{summary}" for name, summary in rows), ""]

    lines = ["usage: railyard COMMAND [ARGS...]", "", ABOUT, ""]
    lines += section("operate a cluster", [(n, command(n).summary) for n in CONTROL])
    lines += section("plan and predict", list(DESIGN.items()))
    lines += section("other", [("version", "Print the railyard version.")])
    lines.append("`railyard COMMAND --help` shows a command's options.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run ``railyard ARGV``; returns the exit code (0 done, 1 refused, 2 bad input)."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        if not args or args[0] in ("-h", "--help", "help"):
            print(root_help())
            return 0 if args else 2
        name, rest = args[0], args[1:]
        if name in ("version", "--version"):
            print(__version__)
            return 0
        if name in DESIGN:
            from railyard.cli import design

            return design.run(args)
        if name not in CONTROL:
            close = get_close_matches(name, [*CONTROL, *DESIGN, "version"], n=1)
            hint = f"did you mean {close[0]!r}?" if close else "see railyard --help"
            print(f"railyard: unknown command {name!r} (hint: {hint})", file=sys.stderr)
            return 2
        return command(name).invoke(rest)
    except SystemExit as exc:  # argparse's --help and errors, and fail()
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `railyard history | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # what a shell reports for SIGPIPE


def entry() -> None:
    """The console script: ``railyard``."""
    sys.exit(main())
