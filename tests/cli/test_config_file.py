"""The configuration file (issue 58, item 2): every `up` and `join` flag is a key, flags
override the file, a bad key or value is one line naming the file, line and key (exit 2), and
`railyard config check` / `config show` say what is in force."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.integration.server_proc import ServerProcess

from railyard.cli.configfile import settable
from railyard.cli.main import command, main


def sample(action: argparse.Action) -> Any:
    """A value the flag accepts, as TOML would hold it."""
    if isinstance(action, argparse._StoreTrueAction | argparse.BooleanOptionalAction):
        return True
    if action.choices is not None:
        return next(iter(action.choices))
    if action.default is not None and not isinstance(action.default, bool):
        value = action.default
        return [str(v) for v in value] if isinstance(value, list) else value
    if isinstance(action, argparse._AppendAction):
        return ["x"]
    return {int: 1, float: 1.5}.get(action.type, "1")  # type: ignore[call-overload]


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(str(value) if not isinstance(value, int | float | list) else value)


@pytest.mark.parametrize("section", ["up", "join"])
def test_every_flag_of_up_and_join_is_a_key_the_file_may_set(
    tmp_path: Path, section: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = command(section).parser()
    keys = settable(parser)
    missed = [a.dest for a in parser._actions if a.dest not in ("help", "config")]
    assert [dest for dest in missed if all(a.dest != dest for a in keys.values())] == []
    lines = [f"[{section}]", *(f"{k} = {toml_value(sample(a))}" for k, a in keys.items())]
    path = tmp_path / "railyard.toml"
    path.write_text("\n".join(lines) + "\n")
    assert main(["config", "check", str(path)]) == 0, capsys.readouterr().err
    assert f"[{section}] {len(keys)}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[up]\nhost = '::'\ngpu = 2\n", ":3: [up] unknown key 'gpu' (hint: did you mean 'gpus'"),
        ("[up]\ngpus = 'two'\n", ":2: [up] gpus: 'two'"),
        ("[up]\ninsecure-ray = 'yes'\n", ":2: [up] insecure-ray: expected true or false"),
        ("[upp]\nport = 1\n", ":1: unknown section [upp] (hint: settings go under [up] or [join])"),
        ("port = 1\n", ":1: key 'port' (hint: settings go under [up] or [join])"),
        ("[up]\nport = \n", ": not valid TOML: Invalid value"),
    ],
)  # fmt: skip
def test_a_bad_file_is_one_line_naming_file_line_and_key(
    tmp_path: Path, text: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "railyard.toml"
    path.write_text(text)
    assert main(["config", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"railyard: {path}{said}" in err


def test_up_refuses_an_unknown_key_before_starting(tmp_path: Path) -> None:
    path = tmp_path / "railyard.toml"
    path.write_text("[up]\nstate-dir = '/nonexistent/x'\ncycle-intervall = 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "railyard", "up", "--config", str(path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert f"{path}:3: [up] unknown key 'cycle-intervall'" in done.stderr
    assert not Path("/nonexistent/x").exists()


def test_show_says_what_is_in_force_and_where_it_came_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "railyard.toml"
    path.write_text("[up]\nport = 9000\npartition = ['PartitionName=debug']\n")
    assert main(["config", "show", "--config", str(path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    up = {row["key"]: row for row in shown["up"]}
    assert up["port"] == {"key": "port", "value": 9000, "source": str(path)}
    assert up["partition"]["value"] == ["PartitionName=debug"]
    assert up["host"] == {"key": "host", "value": "127.0.0.1", "source": "default"}
    join = {row["key"]: row for row in shown["join"]}
    assert join["port"]["value"] == 6379


def test_up_runs_with_the_file_and_a_flag_overrides_it(tmp_path: Path) -> None:
    path = tmp_path / "railyard.toml"
    path.write_text("[up]\ngpus = 3\nflavor = 'from-file'\nport = 1\n")
    server = ServerProcess(tmp_path / "state", gpus=None, extra=("--config", str(path)))
    server.state_dir.mkdir()
    server.start(timeout_s=120)  # --port (the test's free port) overrides the file's port 1
    try:
        nodes = server.request("GET", "/v1/nodes")
        assert sum(n["gpus"] for n in nodes) == 3
        assert {n["flavor"] for n in nodes} == {"from-file"}
    finally:
        server.stop()
