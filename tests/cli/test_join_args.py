"""`railyard join` and `railyard up --insecure-ray` argument handling: the token is made or
required before `ray start` runs (here a recorder: no Ray is started), and Ray is started with
token authentication on, its dashboard on loopback, advertising the address named."""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from railyard.cli import join as join_module
from railyard.cli.main import main

DAY_S = 86_400.0
WEEK_S = 7 * DAY_S


class RayStart:
    """Stands in for `ray start`: records its command and environment, succeeds."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], dict[str, str]]] = []

    def __call__(self, command: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append((command, kw["env"]))
        return subprocess.CompletedProcess(command, 0)


@pytest.fixture
def ray_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> RayStart:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "rt"))  # never the machine's own
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    recorder = RayStart()
    monkeypatch.setattr(join_module.subprocess, "run", recorder)
    return recorder


def one_line(err: str) -> str:
    assert err.count("\n") == 1, err
    return err


def test_head_makes_a_0600_token_and_starts_ray_with_token_auth(
    ray_start: RayStart, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["join", "--head", "--bind", "10.0.0.7", "--port", "6380", "--gpus", "0"]) == 0
    token = tmp_path / ".ray" / "auth_token"
    assert token.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / ".ray").stat().st_mode & 0o777 == 0o700
    [(command, env)] = ray_start.calls
    assert env["RAY_AUTH_MODE"] == "token"
    joined = " ".join(command)
    assert "--node-ip-address 10.0.0.7" in joined
    assert "--dashboard-host 127.0.0.1" in joined
    said = capsys.readouterr().out
    assert f"created the cluster token {token}" in said
    assert "railyard join 10.0.0.7:6380" in said


def test_head_keeps_an_existing_token(
    ray_start: RayStart, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / ".ray" / "auth_token"
    token.parent.mkdir()
    token.write_text("a" * 64)
    token.chmod(0o600)
    assert main(["join", "--head", "--gpus", "0"]) == 0
    assert token.read_text() == "a" * 64
    assert "created" not in capsys.readouterr().out
    assert ray_start.calls[0][1]["RAY_AUTH_MODE"] == "token"


def test_head_uses_the_token_path_named(
    ray_start: RayStart, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "cluster" / "token"))
    assert main(["join", "--head", "--gpus", "0"]) == 0
    assert (tmp_path / "cluster" / "token").stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / ".ray").exists()


def test_a_token_file_others_can_read_is_refused(
    ray_start: RayStart, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("b" * 64)
    (tmp_path / ".ray" / "auth_token").chmod(0o644)
    assert main(["join", "--head", "--gpus", "0"]) == 2
    assert "chmod 600" in one_line(capsys.readouterr().err)
    assert ray_start.calls == []


def test_auth_turned_off_is_refused(
    ray_start: RayStart, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert main(["join", "--head", "--gpus", "0"]) == 2
    assert "RAY_AUTH_MODE=disabled" in one_line(capsys.readouterr().err)
    assert ray_start.calls == []


def test_a_worker_without_the_token_is_refused(
    ray_start: RayStart, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["join", "10.0.0.1:6379", "--gpus", "0"]) == 2
    err = one_line(capsys.readouterr().err)
    assert err.startswith("railyard: join: no token for the Ray cluster at 10.0.0.1:6379")
    assert "hint:" in err
    assert ray_start.calls == []
    assert not (tmp_path / ".ray").exists()  # a worker never makes a token


@pytest.mark.parametrize(
    "flag", ["--head", "--address=x:1", "--port 7", "--dashboard-host 0.0.0.0"]
)
def test_ray_start_args_cannot_take_railyards_flags(
    ray_start: RayStart, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["join", "--head", "--gpus", "0", "--ray-start-args", f"--num-cpus 2 {flag}"]) == 2
    assert "is railyard's to set" in one_line(capsys.readouterr().err)
    assert ray_start.calls == []


def test_ray_start_args_are_passed_on(ray_start: RayStart) -> None:
    assert main(["join", "--head", "--gpus", "0", "--ray-start-args", "--num-cpus 2"]) == 0
    assert ray_start.calls[0][0][-2:] == ["--num-cpus", "2"]


def test_insecure_ray_needs_ray(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["up", "--insecure-ray"]) == 2
    assert "--insecure-ray: only with --ray" in one_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--service-levels", "1,x"], "up: --service-levels: '1,x' is not GPU-hours"),
        (["--victim-searches-per-queue", "0"], "up: --victim-searches-per-queue: must be"),
        (["--greedy-hold", "later"], "up: --greedy-hold: bad time 'later'"),
        (["--time-slice-by", "size"], "up: --time-slice-by: 'size' is unknown (hint: one of"),
        (["--starved-unsliced", "-5"], "up: --starved-unsliced: "),
        (["--slice-level-gap", "0"], "up: --slice-level-gap: must be between 1 and"),
        (["--unsliced-after-restarts", "-1"], "up: --unsliced-after-restarts: '-1' is not a"),
        (["--unsliced-after-restarts", "six"], "(hint: e.g. 6, or none)"),
        (["--starvation-limit", "0"], "up: --starvation-limit: must be longer than 0 (hint:"),
        (["--starvation-limit", "a week"], "up: --starvation-limit: bad time 'a week'"),
    ],
)
def test_bad_scheduler_knobs_stop_up_before_it_starts(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert main(["up", *flags]) == 2
    assert message in one_line(capsys.readouterr().err)


LAS_S = 2 * WEEK_S  # time slicing's own starvation limit (sched.config.TIME_SLICING_DEFAULTS)


@pytest.mark.parametrize(
    ("flags", "searches_per_queue", "hold_s", "starvation_limit_s"),
    [
        (["--policy", "las", "--backfill", "none", "--preemption", "las"], 16, 6 * 3600.0, LAS_S),
        (["--preemption", "las", "--victim-searches-per-queue", "2"], 2, 6 * 3600.0, LAS_S),
        (["--preemption", "las", "--no-starving-slices"], 16, 6 * 3600.0, LAS_S),
        (["--preemption", "las", "--starvation-limit", "5-00:00:00"], 16, 6 * 3600.0, 5 * DAY_S),
        (["--policy", "fairshare", "--backfill", "none"], 1, DAY_S, WEEK_S),
        (["--policy", "fairshare", "--starvation-limit", "none"], 1, DAY_S, math.inf),
    ],
)
def test_up_gives_time_slicing_its_own_defaults(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    flags: list[str],
    searches_per_queue: int,
    hold_s: float,
    starvation_limit_s: float,
) -> None:
    """`railyard up --preemption las` runs time slicing at the defaults the simulator's
    `las` has (sched.config.TIME_SLICING_DEFAULTS); a knob given on the command line wins."""
    from railyard.control import server

    served: list[Any] = []
    monkeypatch.setattr(server, "serve", served.append)
    assert main(["up", "--state-dir", str(tmp_path), *flags]) == 0
    (config,) = served
    assert config.scheduler.preemption_searches_per_queue == searches_per_queue
    assert config.scheduler.greedy_hold_after_s == hold_s
    las = config.scheduler.preemption == "las"
    assert config.scheduler.time_slice_by == ("remaining" if las else "attained")
    assert config.scheduler.starved_unsliced_s == (None if las else 0.0)
    assert config.scheduler.slice_level_gap == (3 if las else 1)
    assert config.scheduler.unsliced_after_restarts is None  # opt-in (`--unsliced-after-restarts`)
    assert config.scheduler.starving_slices is ("--no-starving-slices" not in flags)
    assert config.scheduler.starvation_limit_s == starvation_limit_s


def test_ray_keeps_its_sessions_in_a_directory_only_root_can_enter(
    ray_start: RayStart, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ray makes its session directories 0777: they go inside a 0700 base (issue 53, item 2);
    a base of another's mode is made 0700, and --temp-dir is railyard's to set."""
    base = tmp_path / "rt"
    base.mkdir(mode=0o755)
    os.chmod(base, 0o777)
    assert main(["join", "--head", "--gpus", "0"]) == 0
    [(command, env)] = ray_start.calls
    assert command[command.index("--temp-dir") + 1] == str(base / "ray")
    assert env["RAY_TMPDIR"] == str(base)
    assert base.stat().st_mode & 0o777 == 0o700
    assert "made 0700" in capsys.readouterr().out
    args = ["join", "--head", "--gpus", "0", "--ray-start-args", "--num-cpus 1 --temp-dir=/tmp/x"]
    assert main(args) == 2
    err = one_line(capsys.readouterr().err)
    assert err.startswith("railyard: join: --ray-start-args: --temp-dir is railyard's to set")
