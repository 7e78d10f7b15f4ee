"""The control-plane commands stay cheap to start: they must not import the server, the
database layer, pydantic, numpy, the scheduler or typer (a fresh interpreter per case, as a
user's shell starts one). How fast they are is measured in benchmarks/bench_cli.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from railyard.cli.main import CONTROL, command

HEAVY = ["fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic", "pydantic", "numpy",
         "httpx", "typer", "rich", "railyard.sched", "railyard.control", "railyard.exec",
         "railyard.sim", "railyard.web", "difflib", "dataclasses",
         "encodings.idna", "shutil"]  # fmt: skip

PROBE = """
import contextlib, io, json, sys
from railyard.cli.main import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["queue", "--help"],
        ["submit", "--help"],
        ["history", "--help"],
        ["admin", "queues", "add", "--help"],
        # a submit with every value a parser checks; it fails to connect, which is fine
        [
            "submit",
            "-G",
            "2",
            "-t",
            "1:00:00",
            "--priority",
            "high",
            "--topology",
            "leaf-group",
            "--array",
            "0-3",
            "--",
            "true",
        ],
        ["queue"],
        ["cancel", "12"],
        ["logs", "12"],
        ["show", "hostnames", "gpu[01-02]"],
    ],
)
def test_control_commands_import_nothing_heavy(argv: list[str]) -> None:
    env = {"RAILYARD_URL": "http://127.0.0.1:9", "RAILYARD_TOKEN": "x", "PATH": "/usr/bin"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env, check=True
    )
    report = json.loads(out.stdout)
    assert report["code"] in (0, 1), out.stderr  # 1: nothing listens on port 9
    loaded = [m for m in report["modules"] if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert loaded == []


def test_a_design_command_still_gets_typer() -> None:
    """The probe can see a heavy import: `presets` loads typer and the blueprints."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, "presets"], capture_output=True, text=True, check=True
    )
    report = json.loads(out.stdout)
    assert report["code"] == 0
    assert "typer" in report["modules"]


@pytest.mark.parametrize("name", sorted(CONTROL))
def test_the_root_help_says_what_each_command_says(name: str) -> None:
    """`railyard --help` spells the summaries itself so that it imports no command: each
    must stay the first line of the command's own docstring."""
    assert CONTROL[name][1] == command(name).summary


FAST = {
    ("version",): {"railyard", "railyard.cli", "railyard.cli.main", "railyard.cli.text",
                   "railyard.client", "railyard.client.printable"},
    ("queue",): {"railyard", "railyard.cli", "railyard.cli.main", "railyard.cli.text",
                 "railyard.cli.args", "railyard.cli.jobs", "railyard.cli.jobsel",
                 "railyard.client", "railyard.client.printable", "railyard.client.client",
                 "railyard.client.config", "railyard.client.transport", "railyard.client.wire",
                 "railyard.client.bounds"},  # the API's page size: constants alone
    ("submit", "--wrap", "true"): {
        "railyard", "railyard.cli", "railyard.cli.main", "railyard.cli.text",
        "railyard.cli.args", "railyard.cli.jobs", "railyard.cli.jobsel", "railyard.client",
        "railyard.client.printable", "railyard.client.client", "railyard.client.config",
        "railyard.client.transport", "railyard.client.wire", "railyard.client.scripts",
        "railyard.client.values", "railyard.client.bounds"},
    ("run", "--", "true"): {
        "railyard", "railyard.cli", "railyard.cli.main", "railyard.cli.text",
        "railyard.cli.args", "railyard.cli.jobs", "railyard.cli.jobsel", "railyard.cli.run",
        "railyard.client", "railyard.client.printable", "railyard.client.client",
        "railyard.client.config", "railyard.client.transport", "railyard.client.wire",
        "railyard.client.scripts", "railyard.client.values", "railyard.client.bounds"},
}  # fmt: skip
"""Every railyard module each fast command imports, and no more: another command's module
(``history``'s, with datetime and the time parser, once came with ``queue``) shows here."""
NOT_FAST = {
    ("version",): {"typing", "argparse", "importlib", "warnings", "socket"},  # json: PROBE's
    ("queue",): {"datetime", "shutil", "zlib", "bz2", "lzma", "shlex", "signal", "threading"},
    ("submit", "--wrap", "true"): {"datetime", "shutil", "zlib", "bz2", "lzma", "threading"},
    ("run", "--", "true"): {"datetime", "shutil", "zlib", "bz2", "lzma"},
}
"""Standard-library modules each one does without (`python -X importtime`'s costly ones)."""


@pytest.mark.parametrize("argv", sorted(FAST))
def test_each_fast_command_imports_its_own_modules_only(argv: tuple[str, ...]) -> None:
    env = {"RAILYARD_URL": "http://127.0.0.1:9", "RAILYARD_TOKEN": "x", "PATH": "/usr/bin"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env, check=True
    )
    report = json.loads(out.stdout)
    assert report["code"] in (0, 1), out.stderr  # 1: nothing listens on port 9
    loaded = set(report["modules"])
    assert {m for m in loaded if m.split(".")[0] == "railyard"} == FAST[argv]
    assert loaded & NOT_FAST[argv] == set()
