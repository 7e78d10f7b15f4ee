"""The CLI and its client against a real uvicorn server on a free loopback port."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import socket
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import uvicorn
from sqlalchemy import select

from railyard.cli.main import main
from railyard.client.client import Client, ClientError, save_config
from railyard.client.config import LOGIN_HINT
from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.paths import log_path
from railyard.control.store.tables import JobRow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def server(store: Store, tmp_path: Path) -> Iterator[str]:
    """The API served by uvicorn in a thread; yields its base URL."""
    app = create_app(store, wake=lambda: None, state_dir=tmp_path / "state")
    config = uvicorn.Config(
        app, host="127.0.0.1", port=_free_port(), log_level="warning", lifespan="off"
    )
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uv.started:
        assert thread.is_alive(), "uvicorn exited"
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    yield f"http://127.0.0.1:{config.port}"
    uv.should_exit = True
    thread.join(10)


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class Cli:
    """``railyard`` as a user would type it, with a token chosen per call (in-process: the
    environment is patched for the call, stdout and stderr captured)."""

    def __init__(self, url: str, tokens: dict[str, str], home: Path) -> None:
        self.url, self.tokens, self.home = url, tokens, home

    def __call__(self, user: str, *args: str) -> Result:
        env = {
            "RAILYARD_URL": self.url,
            "RAILYARD_TOKEN": self.tokens.get(user, user),
            "RAILYARD_HOME": str(self.home),
        }
        out, err = io.StringIO(), io.StringIO()
        with (
            mock.patch.dict(os.environ, env),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            code = main(list(args))
        return Result(code, out.getvalue(), err.getvalue())

    def json(self, user: str, *args: str) -> Any:
        result = self(user, *args, "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)


@pytest.fixture
def cli(server: str, tokens: dict[str, str], tmp_path: Path) -> Cli:
    return Cli(server, tokens, tmp_path / "home")


def test_admin_sets_up_a_user_who_submits_and_cancels(cli: Cli) -> None:
    assert cli("root", "admin", "users", "add", "dave").exit_code == 0
    made = cli("root", "admin", "tokens", "create", "dave", "--label", "laptop")
    assert made.exit_code == 0, made.output
    cli.tokens["dave"] = made.stdout.strip()
    added = cli("root", "admin", "queues", "add", "team", "--parent", "research",
                "--nominal", "H100-SXM-80GB=4", "--borrowing-limit", "H100-SXM-80GB=4",
                "--weight", "2")  # fmt: skip
    assert added.exit_code == 0, added.output
    assert cli("root", "admin", "queues", "members", "add", "team", "dave").exit_code == 0
    users = cli.json("root", "admin", "users", "list")
    assert [u["queues"] for u in users if u["name"] == "dave"] == [["team"]]

    submitted = cli("dave", "submit", "--gpus", "2", "-p", "team", "-J", "hello", "-t", "30",
                    "--", "python", "-c", "print('hi')")  # fmt: skip
    assert submitted.exit_code == 0, submitted.output
    assert submitted.stdout == "Submitted batch job 1\n"  # sbatch's words, byte for byte
    job_id = "1"
    [pending] = cli.json("dave", "queue")
    assert (pending["id"], pending["state"], pending["reason"]) == ("1", "pending", "")
    assert (pending["queue"], pending["gpus"], pending["name"]) == ("team", 2, "hello")
    assert pending["command"] == ["python", "-c", "print('hi')"]
    table = cli("dave", "queue")
    assert "JOBID" in table.stdout
    assert "PENDING" in table.stdout
    assert cli.json("dave", "show", job_id)["walltime_s"] == 1800
    [team] = [q for q in cli.json("dave", "queues") if q["name"] == "team"]
    assert (team["pending_jobs"], team["weight"], team["members"]) == (1, 2.0, ["dave"])

    cancelled = cli("dave", "cancel", job_id)
    assert cancelled.exit_code == 0, cancelled.output
    assert cancelled.stdout.strip() == "1 cancelled"
    # As squeue, a finished job is listed only when asked for: `-t all` lists it for
    # --min-job-age seconds after it ends (Slurm's MinJobAge, 300 s).
    assert cli.json("dave", "queue") == []
    assert [(j["id"], j["state"]) for j in cli.json("dave", "queue", "-t", "all")] == [
        ("1", "cancelled")
    ]
    listed = cli("dave", "queue", "-t", "all").stdout
    assert "CANCELLED" in listed
    assert " 0:00 " in listed  # it never ran: TIME 0:00, as squeue (not its age)
    assert cli.json("dave", "queue", "-t", "all", "--min-job-age", "0") == []
    assert len(cli.json("dave", "queue", "--min-job-age", "300")) == 1
    assert [j["id"] for j in cli.json("dave", "queue", "--state", "cancelled")] == ["1"]
    assert cli.json("root", "queue") == []  # an admin's own jobs by default
    assert len(cli.json("root", "queue", "--all", "--state", "cancelled")) == 1


def test_script_submission_with_flag_override(cli: Cli, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH --nodes=2 --gres=gpu:4\n#SBATCH --time=1:00:00 -J sb\n"
        "#SBATCH --output=slurm.out\n#RAILYARD --preemptible --signal=USR2@45\necho run\n"
    )
    result = cli("alice", "submit", "--time", "2:00:00", "--json", str(script))
    assert result.exit_code == 0, result.output
    [job] = json.loads(result.stdout)
    assert (job["gpus"], job["workers"], job["walltime_s"]) == (8, 2, 7200)
    assert (job["distinct_nodes"], job["output"]) == (True, "slurm.out")
    assert (job["name"], job["preemptible"]) == ("sb", True)
    assert job["command"] == [str(tmp_path / "state" / "jobs" / "1" / "script.sh")]
    array = cli("alice", "submit", "--array", "0-2", "--", "echo")
    assert array.stdout == "Submitted batch job 2\n"  # the array's id, as sbatch prints one


def test_wrap_and_parsable_as_sbatch_chains_them(cli: Cli, store: Store, tmp_path: Path) -> None:
    """``jobid=$(sbatch --parsable --wrap='...')``: the id alone, and the command as a /bin/sh
    batch script named "wrap"; --wrap beside a script, an empty --wrap, or --wrap given to
    ``run`` is one line and exit 2."""
    wrapped = cli("alice", "submit", "--parsable", "-t", "5", "--wrap", "echo $HOSTNAME; sleep 1")
    assert wrapped.exit_code == 0, wrapped.output
    assert wrapped.stdout == "1\n"
    [job] = cli.json("alice", "queue")
    assert (job["name"], job["walltime_s"]) == ("wrap", 300)
    with store.session() as session:
        script = session.get(JobRow, "1").script or ""  # type: ignore[union-attr]
    assert script.startswith("#!/bin/sh\n")
    assert script.endswith("\necho $HOSTNAME; sleep 1\n")
    assert cli("alice", "submit", "--wrap=hostname", "-J", "h").stdout == "Submitted batch job 2\n"
    (tmp_path / "job.sh").write_text("#!/bin/sh\necho run\n")
    for refused in (
        ("submit", "--wrap=hostname", str(tmp_path / "job.sh")),
        ("submit", "--wrap="),
        ("submit", "--wrap"),
        ("run", "--wrap=hostname"),
    ):
        result = cli("alice", *refused)
        assert result.exit_code == 2, refused
        assert result.stderr.startswith("railyard: --wrap: ")
        assert result.stderr.count("\n") == 1
    assert len(cli.json("alice", "queue")) == 2


def test_hold_at_submit_and_wait_for_the_end(
    cli: Cli, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sbatch -H`` submits held (JobHeldUser until released); ``sbatch -W`` returns when the
    job ends, with its exit code (an array's highest)."""
    from railyard.cli import jobs as job_commands

    held = cli("alice", "submit", "--parsable", "-H", "--", "x").stdout.strip()
    [job] = cli.json("alice", "queue", "-j", held)
    assert (job["state"], job["reason"]) == ("pending", "JobHeldUser")
    assert cli("alice", "release", held).exit_code == 0
    assert cli.json("alice", "queue", "-j", held)[0]["reason"] == ""
    monkeypatch.setattr(job_commands, "WAIT_POLL_S", 0.05)

    def finish(ends: dict[str, tuple[str, int]]) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with store.session() as session:
                rows = [session.get(JobRow, job_id) for job_id in ends]
                if all(rows):
                    for row in rows:
                        assert row is not None
                        row.state, row.exit_code = ends[row.id]
                        row.end_t_s = time.time()
                    return
            time.sleep(0.05)

    results: list[Result] = []
    for args, ends, code in (
        (["--", "x"], {"2": ("failed", 3)}, 3),
        (["--array", "0-1", "--", "x"], {"3_0": ("completed", 0), "3_1": ("failed", 2)}, 2),
    ):
        waiter = threading.Thread(
            target=lambda a=args: results.append(cli("alice", "submit", "-W", *a))
        )
        waiter.start()
        finish(ends)
        waiter.join(30)
        assert results[-1].exit_code == code, results[-1].output
    assert [r.stdout for r in results] == ["Submitted batch job 2\n", "Submitted batch job 3\n"]


def test_update_as_scontrol(cli: Cli) -> None:
    """``scontrol update JobId=N TimeLimit=...`` and its option spelling; a plain user's raise
    is a refusal (exit 1), a bad word bad input (exit 2)."""
    job = cli("alice", "submit", "--parsable", "-t", "1:00:00", "--", "x").stdout.strip()
    done = cli("alice", "update", f"JobId={job}", "TimeLimit=30")
    assert (done.exit_code, done.stdout) == (0, f"{job} updated\n")
    assert cli.json("alice", "queue", "-j", job)[0]["walltime_s"] == 1800
    assert cli("alice", "update", job, "--time", "20").exit_code == 0
    raised = cli("alice", "update", job, "TimeLimit=2:00:00")
    assert raised.exit_code == 1
    assert raised.stderr.startswith("railyard: time limit 2:00:00 is above job")
    assert cli("root", "update", job, "--time", "2:00:00").exit_code == 0
    assert cli("alice", "update", job, "TimeLimit=-0:30").exit_code == 0  # 30 s: a minute
    assert cli.json("alice", "queue", "-j", job)[0]["walltime_s"] == 7200 - 60
    assert cli("alice", "update", job, "TimeLimit=+1").exit_code == 1
    assert cli("root", "update", job, "TimeLimit=+1").exit_code == 0
    assert cli.json("alice", "queue", "-j", job)[0]["walltime_s"] == 7200
    assert cli("alice", "update", job, "Nice=5", "JobName=renamed").exit_code == 0
    [row] = cli.json("alice", "queue", "-j", job)
    assert (row["name"], row["priority"]) == ("renamed", 495)
    assert cli("alice", "update", job, "Nice=x").exit_code == 2
    held = cli("alice", "update", job, "Priority=0")  # Slurm's hold
    assert (held.exit_code, held.stdout) == (0, f"{job} held\n")
    assert cli.json("alice", "queue", "-j", job)[0]["hold"] == "user"
    for bad in (["Partition=x"], ["TimeLimit"], [], ["TimeLimit=+0"]):
        wrong = cli("alice", "update", job, *bad)
        assert wrong.exit_code == 2, bad
        assert wrong.stderr.startswith("railyard: update: ")


def test_begin_as_sbatch(cli: Cli) -> None:
    """``sbatch --begin=now+1hour`` (and ``#SBATCH --begin``): stored as the time it names; a
    time that does not parse is one line, exit 2."""
    job = cli("alice", "submit", "--parsable", "--begin", "now+1hour", "--", "x").stdout.strip()
    [row] = cli.json("alice", "queue", "-j", job)
    assert abs(row["begin_t_s"] - (time.time() + 3600)) < 60
    shown = cli("alice", "show", job).stdout
    assert "begin_time" in shown
    wrong = cli("alice", "submit", "--begin", "soonish", "--", "x")
    assert wrong.exit_code == 2
    assert wrong.stderr.startswith("railyard: --begin: bad time 'soonish'")


def test_deadline_as_sbatch(cli: Cli) -> None:
    """``sbatch --deadline=now+1hour``: stored as the time it names and shown; without a time
    limit, or not after ``--begin``, one line, exit 2."""
    job = cli("alice", "submit", "--parsable", "-t", "10", "--deadline", "now+1hour", "--", "x")
    [row] = cli.json("alice", "queue", "-j", job.stdout.strip())
    assert abs(row["deadline_t_s"] - (time.time() + 3600)) < 60
    assert "deadline" in cli("alice", "show", job.stdout.strip()).stdout
    unbounded = cli("alice", "submit", "--deadline", "now+1hour", "--", "x")
    assert unbounded.exit_code == 2
    assert unbounded.stderr.startswith("railyard: deadline_t_s: a deadline needs a time limit")
    crossed = cli("alice", "submit", "-t", "10", "--begin", "now+2hours", "--deadline",
                  "now+1hour", "--", "x")  # fmt: skip
    assert crossed.exit_code == 2
    assert "begin_t_s is not before deadline_t_s" in crossed.stderr


def test_bad_input_exits_2_and_submits_nothing(cli: Cli, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --gpu=8\necho run\n")
    result = cli("alice", "submit", str(script))
    assert result.exit_code == 2
    assert result.stderr == (
        f"railyard: {script}:2: unknown #SBATCH option '--gpu' (hint: did you mean '--gpus'?)\n"
    )
    result = cli("alice", "submit", "--time", "1h", "--", "echo")
    assert result.exit_code == 2
    assert result.stderr.startswith("railyard: --time: bad time '1h'")
    result = cli("alice", "submit", "-p", "nope", "--", "echo")  # refused by the server: 422
    assert result.exit_code == 2
    assert result.stderr.startswith("railyard: queue: unknown queue 'nope' (hint: known queues")
    assert cli("alice", "submit").exit_code == 2
    assert cli.json("alice", "queue") == []


def test_refusals_exit_1_with_the_servers_message(cli: Cli) -> None:
    cases = [
        ("alice", ("admin", "users", "list"), "railyard: user 'alice' is not an admin\n"),
        ("ry_nope", ("queue",), f"railyard: invalid or revoked token (hint: {LOGIN_HINT})\n"),
        ("alice", ("show", "42"), "railyard: no job '42'\n"),
        ("alice", ("nodes", "drain", "n01"), "railyard: user 'alice' is not an admin\n"),
    ]
    for user, args, message in cases:
        result = cli(user, *args)
        assert (result.exit_code, result.stderr) == (1, message), args
    result = cli("alice", "cancel", "42", "43")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == ["railyard: no job '42'", "railyard: no job '43'"]
    cli.url = f"http://127.0.0.1:{_free_port()}"
    result = cli("alice", "queue")
    assert result.exit_code == 1
    assert result.stderr.startswith("railyard: cannot reach railyard at http://127.0.0.1:")


def test_nodes_tokens_and_drain(cli: Cli) -> None:
    nodes = cli.json("alice", "nodes")
    assert [(n["name"], n["gpus"], n["state"]) for n in nodes] == [
        ("n01", 8, "ready"),
        ("n02", 8, "ready"),
    ]
    drained = cli("root", "nodes", "drain", "n02", "--reason", "flaky NIC")
    assert drained.stdout.strip() == "n02 draining"
    assert "flaky NIC" in cli("alice", "nodes").stdout
    assert cli("root", "nodes", "resume", "n02").stdout.strip() == "n02 ready"
    [token] = [t for t in cli.json("root", "admin", "tokens", "list") if t["user"] == "bob"]
    assert cli("root", "admin", "tokens", "revoke", str(token["id"])).exit_code == 0
    assert cli("bob", "queue").exit_code == 1


def test_logs_and_follow(cli: Cli, store: Store, tmp_path: Path) -> None:
    job_id = cli("alice", "submit", "--parsable", "--", "train").stdout.strip()
    path = log_path(tmp_path / "state" / "jobs", job_id, 0)
    path.parent.mkdir(parents=True)
    path.write_text("step 1\n")
    assert cli("alice", "logs", job_id).stdout == "step 1\n"

    def finish() -> None:
        time.sleep(0.3)
        with path.open("a") as f:
            f.write("step 2\ndone\n")
        with store.session() as session:
            row = session.get(JobRow, job_id)
            assert row is not None
            row.state = "completed"

    writer = threading.Thread(target=finish)
    writer.start()
    followed = cli("alice", "logs", job_id, "-f", "--poll", "0.05")
    writer.join()
    assert followed.exit_code == 0, followed.output
    assert followed.stdout == "step 1\nstep 2\ndone\n"


def test_client_reads_its_config_file(
    server: str, tokens: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    env = {"RAILYARD_HOME": str(home)}
    with pytest.raises(ClientError, match="no railyard server configured"):
        Client.from_env(env)
    path = save_config(server, tokens["alice"], home / "client.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with Client.from_env(env) as client:
        assert client.whoami()["name"] == "alice"
        assert client.health()["status"] == "ok"
    with Client.from_env({**env, "RAILYARD_TOKEN": tokens["root"]}) as client:
        assert client.whoami()["is_admin"]
        with pytest.raises(ClientError) as info:
            client.job("7")
        assert (info.value.status, info.value.detail) == (404, "no job '7'")
    monkeypatch.setenv("RAILYARD_HOME", str(home))
    monkeypatch.delenv("RAILYARD_URL", raising=False)
    monkeypatch.delenv("RAILYARD_TOKEN", raising=False)
    with Client.from_env() as client:
        assert client.url == server


ISO_LOCAL = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}"


def test_show_prints_dates_and_slurm_durations(cli: Cli) -> None:
    job_id = cli(
        "alice", "submit", "--parsable", "-t", "1-02:03:04", "-J", "long", "--", "echo"
    ).stdout.strip()
    shown = cli("alice", "show", job_id)
    assert shown.exit_code == 0, shown.output
    fields = dict(line.split(None, 1) for line in shown.stdout.splitlines() if " " in line)
    assert re.fullmatch(ISO_LOCAL, fields["submit_time"]), fields["submit_time"]
    assert fields["time_limit"] == "1-02:04:00"  # whole minutes, rounded up, as Slurm's
    assert re.fullmatch(r"\d{2}:\d{2}:\d{2}", fields["age"])
    assert (fields["name"], fields["state"]) == ("long", "pending")
    assert "start_time" in fields or "start_time" in shown.stdout  # empty until it starts
    assert not re.search(r"\b\d{10}(\.\d+)?\b", shown.stdout)  # no raw Unix times
    history = cli("alice", "show", job_id, "--events")
    assert re.search(ISO_LOCAL + r"  submitted ", history.stdout.splitlines()[-1]), history.stdout
    assert cli.json("alice", "show", job_id, "--events")["events"][0]["kind"] == "submitted"


def test_show_an_array_parent(cli: Cli) -> None:
    assert (
        cli("alice", "submit", "--parsable", "--array", "0-2", "-J", "sweep", "--", "echo").stdout
        == "1\n"
    )
    ids = ["1_0", "1_1", "1_2"]
    cli("alice", "cancel", ids[2])
    shown = cli("alice", "show", "1")
    assert shown.exit_code == 0, shown.output
    head, _, tasks = shown.stdout.partition("\n\n")
    assert "array          1 (3 tasks, indices 0-2)" in head
    assert "states         CANCELLED 1, PENDING 2" in head
    assert [line.split()[0] for line in tasks.splitlines()] == ["JOBID", *ids]
    assert [j["id"] for j in cli.json("alice", "show", "1")] == ids
    assert (cli("bob", "show", "1").exit_code, cli("bob", "show", "1").stderr) == (
        1,
        "railyard: no job '1'\n",
    )


def test_hold_and_release(cli: Cli) -> None:
    job_id = cli("alice", "submit", "--parsable", "--", "echo").stdout.strip()
    held = cli("alice", "hold", job_id)
    assert (held.exit_code, held.stdout) == (0, f"{job_id} held\n")
    assert "JobHeldUser" in cli("alice", "queue").stdout
    assert cli("alice", "release", job_id).stdout == f"{job_id} released\n"
    assert cli("root", "hold", job_id).stdout == f"{job_id} held\n"
    [job] = cli.json("alice", "queue")
    assert (job["hold"], job["reason"]) == ("admin", "JobHeldAdmin")
    refused = cli("alice", "release", job_id)
    assert (refused.exit_code, refused.stderr) == (
        1,
        f"railyard: {job_id}: job {job_id} was held by an admin: only an admin can release it\n",
    )
    assert cli("root", "release", job_id).exit_code == 0
    cli("alice", "cancel", job_id)
    done = cli("alice", "hold", job_id)
    assert (done.exit_code, done.stderr) == (
        1,
        f"railyard: {job_id}: job {job_id} is cancelled: only a pending job can be held\n",
    )


def test_history_like_sacct(cli: Cli, store: Store) -> None:
    now = time.time()
    one_gpu = ("submit", "--parsable", "-G", "1", "--", "x")
    ok, bad, waiting = (cli("alice", *one_gpu).stdout.strip() for _ in range(3))
    bob_job = cli("bob", "submit", "--parsable", "-G", "2", "--", "x").stdout.strip()
    old = cli("alice", *one_gpu).stdout.strip()
    rows = {
        ok: {"state": "completed", "start_t_s": now - 3600, "end_t_s": now - 1800, "exit_code": 0},
        bad: {"state": "failed", "start_t_s": now - 600, "end_t_s": now - 300, "exit_code": 3,
              "restart_count": 2},
        bob_job: {"state": "running", "start_t_s": now - 7200},
        old: {"state": "completed", "submit_t_s": now - 9 * 86400, "start_t_s": now - 9 * 86400,
              "end_t_s": now - 8 * 86400, "exit_code": 0},
    }  # fmt: skip
    with store.session() as session:
        for job_id, values in rows.items():
            row = session.get(JobRow, job_id)
            assert row is not None
            for key, value in values.items():
                setattr(row, key, value)
    window = ["--starttime", "now-1days"]
    mine = cli("alice", "history", *window)
    assert mine.exit_code == 0, mine.output
    lines = mine.stdout.splitlines()
    assert lines[0].split() == ["JOBID", "NAME", "USER", "QUEUE", "STATE", "EXITCODE", "ELAPSED",
                                "GPUS", "GPU-HOURS", "RESTARTS", "START", "END"]  # fmt: skip
    by_id = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(by_id) == {ok, bad, waiting}  # pending too, as sacct; not bob's, not the old one
    assert by_id[ok][4:10] == ["COMPLETED", "0:0", "00:30:00", "1", "0.50", "0"]
    assert by_id[bad][4:10] == ["FAILED", "3:0", "00:05:00", "1", "0.08", "2"]
    assert [j["id"] for j in cli.json("alice", "history", *window, "--state", "pending")] == [
        waiting
    ]
    everyone = {j["id"] for j in cli.json("root", "history", *window)}
    assert everyone == {ok, bad, waiting, bob_job}
    [running] = cli.json("root", "history", *window, "--user", "bob")
    assert running["state"] == "running"
    assert {j["id"] for j in cli.json("alice", "history", "-S", "now-10days")} == {
        ok,
        bad,
        waiting,
        old,
    }
    assert [
        j["id"] for j in cli.json("alice", "history", "-S", "now-10days", "-E", "now-7days")
    ] == [old]
    wrong = cli("alice", "history", "--starttime", "last week")
    assert wrong.exit_code == 2
    assert wrong.stderr.startswith("railyard: history: bad time 'last week' (hint: YYYY-MM-DD")
    # sacct -j and -P
    assert [j["id"] for j in cli.json("alice", "history", *window, "-j", f"{bad},999")] == [bad]
    parsable = cli("alice", "history", *window, "-P", "-j", ok).stdout.splitlines()
    assert parsable[0].startswith("JOBID|NAME|USER|QUEUE|STATE|EXITCODE|ELAPSED|")
    assert parsable[1].split("|")[:7] == [
        ok,
        "x",
        "alice",
        "default",
        "COMPLETED",
        "0:0",
        "00:30:00",
    ]
    assert len(parsable) == 2
    assert cli("alice", "history", "-j", ",").exit_code == 2


def test_queue_by_job_and_user_as_squeue(cli: Cli) -> None:
    """squeue -j (an array's id names its tasks) and -u (another user's jobs: admins only)."""
    single = cli("alice", "submit", "--parsable", "--", "x").stdout.strip()
    array = cli("alice", "submit", "--parsable", "--array", "0-2", "--", "x").stdout.strip()
    bobs = cli("bob", "submit", "--parsable", "--", "x").stdout.strip()
    assert [j["id"] for j in cli.json("alice", "queue", "-j", array)] == [
        f"{array}_{i}" for i in range(3)
    ]
    assert [j["id"] for j in cli.json("alice", "queue", "-j", f"{single},{array}_1")] == [
        single, f"{array}_1"
    ]  # fmt: skip
    assert [j["id"] for j in cli.json("root", "queue", "-u", "bob")] == [bobs]
    assert [j["id"] for j in cli.json("bob", "queue", "-u", "bob")] == [bobs]
    assert cli.json("bob", "queue", "-u", "alice") == []  # a user sees only their own jobs
    told = cli("bob", "queue", "--all", "-t", "running")
    assert told.stderr.startswith("railyard: note: a user sees only their own jobs (an admin")
    # scancel with a list: one request; the refused id is named, the others are cancelled
    many = cli("alice", "cancel", single, array, bobs)
    assert many.exit_code == 1
    assert many.stdout.splitlines() == [f"{single} cancelled", f"{array} cancelled"]
    assert many.stderr == f"railyard: no job '{bobs}'\n"
    assert cli.json("alice", "queue", "-t", "pending") == []
    # squeue -j: a job that ended within MinJobAge is listed; one never seen, another user's,
    # or one that ended longer ago is "Invalid job id specified", exit 1
    assert [j["state"] for j in cli.json("alice", "queue", "-j", single)] == ["cancelled"]
    assert cli("alice", "queue", "-j", array, "-t", "running").exit_code == 0  # an array's id
    for unknown in ("99999", bobs):
        missing = cli("alice", "queue", "-j", unknown)
        assert (missing.exit_code, missing.stderr.split(" (hint")[0]) == (
            1,
            f"railyard: queue: Invalid job id specified: {unknown}",
        )
    assert cli("alice", "queue", "-j", single, "--min-job-age", "0").exit_code == 1
    assert cli("alice", "queue", "-j", f"{single},99999").exit_code == 0  # as squeue: a list


def test_submit_captures_the_environment_and_directory(
    cli: Cli, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As sbatch's default --export=ALL: the submitter's variables and working directory, the
    submit directory and host; never the token."""
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)  # a working directory must exist at submit
    monkeypatch.chdir(work)
    monkeypatch.setenv("TRAIN_DATA", "/data/shards")
    assert cli("alice", "submit", "--gpus", "1", "--", "train").exit_code == 0
    assert cli("alice", "submit", "--export=NONE", "--", "train").exit_code == 0
    assert cli("alice", "submit", "--export=TRAIN_DATA,X=1", "-D", "sub", "--", "t").exit_code == 0
    with store.session() as session:
        rows = {r.id: r for r in session.scalars(select(JobRow))}
    full = rows["1"]
    assert full.export == "ALL"
    assert full.env["TRAIN_DATA"] == "/data/shards"
    assert "RAILYARD_TOKEN" not in full.env
    assert (full.workdir, full.submit_dir) == (str(work), str(work))
    assert full.submit_host == socket.gethostname()
    assert (rows["2"].export, rows["2"].env) == ("NONE", {})
    assert rows["3"].env == {"TRAIN_DATA": "/data/shards", "X": "1"}
    assert (rows["3"].workdir, rows["3"].submit_dir) == (str(work / "sub"), str(work))
    assert (rows["1"].gpus_per_worker, rows["2"].gpus_per_worker) == (1, 0)  # none unless asked


def test_missing_script_and_every_bad_directive_in_one_pass(cli: Cli, tmp_path: Path) -> None:
    missing = cli("alice", "submit", str(tmp_path / "missing.sh"))
    assert missing.exit_code == 2
    assert missing.stderr == (
        f"railyard: no such batch script: {tmp_path / 'missing.sh'} "
        "(hint: check the path; to run a command, put it after --)\n"
    )
    script = tmp_path / "bad.sh"
    script.write_text("#!/bin/bash\n#SBATCH --gpu=1\n#SBATCH --mem=lots --tme=5\nrun\n")
    result = cli("alice", "submit", str(script))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"railyard: {script}:2: unknown #SBATCH option '--gpu' (hint: did you mean '--gpus'?)",
        f"railyard: {script}:3: --mem: bad memory size 'lots' (hint: e.g. 16G, 512M, 64000)",
        f"railyard: {script}:3: unknown #SBATCH option '--tme' (hint: did you mean '--time'?)",
    ]
    assert cli.json("alice", "queue") == []


def test_real_slurm_scripts_are_accepted_with_notes(cli: Cli, tmp_path: Path) -> None:
    script = tmp_path / "real.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH -A proj1 --mail-type=END --mail-user=a@b.c\n"
        "#SBATCH --gres=gpu:h100:8 --exclusive -N 1 -n 8 -c 4 --mem=200G\n"
        "#SBATCH -p default -o logs/%x-%j.out\nsrun python train.py\n"
    )
    result = cli("alice", "submit", "--json", str(script))
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if "note:" in line]
    assert len(notes) == 3  # account, mail-type, mail-user (--exclusive is honoured)
    [job] = json.loads(result.stdout)
    assert (job["flavor"], job["gpus"], job["ntasks_per_node"]) == ("H100-SXM-80GB", 8, 8)
    assert (job["cpus_per_task"], job["mem_per_node_mb"]) == (4, 204800)
    assert (job["name"], job["output"]) == ("real.sh", "logs/%x-%j.out")


def test_admin_maps_users_to_unix_accounts(cli: Cli) -> None:
    added = cli("root", "admin", "users", "add", "gus", "--unix-user", "gsmith")
    assert added.stdout == "user gus added (id 4, Unix account gsmith)\n"
    bad = cli("root", "admin", "users", "add", "hal", "--unix-user", "Hal Smith")
    assert bad.exit_code == 2
    assert bad.stderr.startswith("railyard: unix_user: 'Hal Smith' is not allowed here (hint: ")
    changed = cli("root", "admin", "users", "update", "gus", "--unix-user", "gus")
    assert changed.stdout == "user gus updated (user, Unix account gus)\n"
    listed = cli("root", "admin", "users", "list").stdout
    assert "UNIX USER" in listed.splitlines()[0]


def test_cancel_chooses_jobs_by_name_user_state_and_queue_as_scancel(cli: Cli) -> None:
    """``scancel --name/-u/-t/-p``: every filter must match, among the ids when given; the
    chosen jobs are cancelled together. A plain user's filters never reach another's jobs."""
    for user, name in (("alice", "a"), ("alice", "b"), ("alice", "a"), ("bob", "a")):
        assert cli(user, "submit", "-J", name, "-t", "5", "--", "true").exit_code == 0
    assert cli("alice", "submit", "-J", "a", "--array", "0-1", "-H", "--", "true").exit_code == 0

    named = cli("alice", "cancel", "--name", "a", "2", "3")
    assert (named.exit_code, named.stdout) == (0, "3 cancelled\n")
    held = cli("alice", "cancel", "-n", "a", "-t", "pending", "-p", "default")
    assert (held.exit_code, sorted(held.stdout.splitlines())) == (
        0,
        ["1 cancelled", "5_0 cancelled", "5_1 cancelled"],
    )
    theirs = cli("alice", "cancel", "-u", "bob")
    assert (theirs.exit_code, theirs.stderr) == (0, "railyard: cancel: no job of yours matches\n")
    assert [j["id"] for j in cli.json("alice", "queue")] == ["2"]
    assert [j["id"] for j in cli.json("bob", "queue")] == ["4"]
    nothing = cli("alice", "cancel")
    assert nothing.exit_code == 2
    assert nothing.stderr.startswith("railyard: cancel: name the jobs (hint: ")
    assert cli("root", "cancel", "-u", "bob").stdout == "4 cancelled\n"


def test_queue_and_history_in_slurms_formats(cli: Cli) -> None:
    """``squeue -o`` and ``sacct --format`` through the server, as a script reads them."""
    assert cli("alice", "submit", "-J", "a", "-t", "5", "--", "true").exit_code == 0
    line = cli("alice", "queue", "--noheader", "-o", "%i %j %u %P %T %l %r")
    assert (line.exit_code, line.stdout) == (0, "1 a alice default PENDING 5:00 None\n")
    cli("alice", "cancel", "1")
    done = cli("alice", "history", "-X", "-n", "-P", "-o", "JobID,State,ExitCode", "-s", "all")
    assert done.exit_code == 2  # sacct's states are named; "all" is squeue's
    done = cli("alice", "history", "-X", "-n", "-P", "-o", "JobID,JobName,State,ExitCode")
    assert (done.exit_code, done.stdout) == (0, "1|a|CANCELLED|0:0\n")
    bad = cli("alice", "queue", "-o", "%i %z")
    assert (bad.exit_code, bad.stderr.count("\n")) == (2, 1)
    assert bad.stderr.startswith("railyard: queue: --format: unknown field %z (hint: ")


def test_queue_and_history_take_squeue_and_sacct_spellings(cli: Cli, store: Store) -> None:
    """squeue's -t PD/R codes, -h (no header; help stays at --help), --me, -l, -O, a running
    job's %r "None"; sacct's --name and its pending jobs in the -S window (issue 57 item 7)."""
    for name in ("a", "b"):
        assert cli("alice", "submit", "-J", name, "-t", "5", "--", "true").exit_code == 0
    with store.session() as session:
        running = session.get(JobRow, "2")
        assert running is not None
        running.state, running.placement = "running", {"node-0": [0]}
        running.reason, running.start_t_s = "Fits (borrowing)", time.time()
    pending = cli("alice", "queue", "-h", "-t", "PD", "-o", "%i %t")
    assert (pending.exit_code, pending.stdout) == (0, "1 PD\n"), pending.output
    assert cli("alice", "queue", "-h", "-t", "R,CD", "-o", "%i %t %r").stdout == "2 R None\n"
    assert cli("alice", "queue", "--me", "-h", "-o", "%i").stdout == "1\n2\n"
    assert "usage:" in cli("alice", "queue", "--help").stdout
    fields = cli("alice", "queue", "-O", "JobID:6,Name:.3,StateCompact:3").stdout
    assert fields.splitlines() == ["JOBID NAMST", "1       aPD", "2       bR"]
    long = cli("alice", "queue", "-l").stdout.splitlines()
    assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}", long[0]), long[0]
    assert long[1].split() == ["JOBID", "PARTITION", "NAME", "USER", "STATE", "TIME",
                               "TIME_LIMI", "NODES", "NODELIST(REASON)"]  # fmt: skip
    assert long[2].split()[4:] == ["PENDING", "0:00", "5:00", "1", "(None)"]
    listed = cli("alice", "history", "-n", "-P", "-o", "JobID,JobName,State")
    assert listed.stdout == "1|a|PENDING\n2|b|RUNNING\n2.extern|extern|RUNNING\n2.0|b|RUNNING\n"
    named = cli("alice", "history", "--name", "b", "-nXP", "-o", "JobID,State", "-s", "R")
    assert (named.exit_code, named.stdout) == (0, "2|RUNNING\n"), named.output


def test_cancel_batch_signals_the_batch_shell_as_scancel(cli: Cli, store: Store) -> None:
    """``scancel --signal=USR1 --batch``: the request names the shell (``B:``), which the
    executor sends to the batch shell alone (tests/exec/test_batch_signals.py)."""
    assert cli("alice", "submit", "-J", "b", "--", "true").exit_code == 0
    with store.session() as session:
        row = session.get(JobRow, "1")
        assert row is not None
        row.state = "running"
    sent = cli("alice", "cancel", "--batch", "--signal=USR1", "1")
    assert (sent.exit_code, sent.stdout) == (0, "1 signalled USR1\n"), sent.output
    with store.session() as session:
        assert session.get(JobRow, "1").signal_request == "B:SIGUSR1"  # type: ignore[union-attr]
    again = cli("alice", "requeue", "1")  # scontrol requeue: the loop stops and requeues it
    assert (again.exit_code, again.stdout) == (0, "1 requeued\n"), again.output
    with store.session() as session:
        assert session.get(JobRow, "1").stop_cause == "Requeued"  # type: ignore[union-attr]
    twice = cli("alice", "requeue", "1")
    assert (twice.exit_code, twice.stderr.count("\n")) == (1, 1)
    assert "only a running job can be requeued" in twice.stderr
    alone = cli("alice", "cancel", "-b", "1")
    assert (alone.exit_code, alone.stderr.count("\n")) == (2, 1)
    assert alone.stderr.startswith("railyard: cancel: --batch goes with --signal (hint: ")


def test_cancel_signal_refusals_through_the_api(cli: Cli) -> None:
    """``scancel -s`` of a pending job is refused (409, exit 1), a bad signal is 422 (exit 2),
    each in one line; with filters, --signal chooses running jobs only."""
    assert cli("alice", "submit", "-J", "p", "--", "true").exit_code == 0
    pending = cli("alice", "cancel", "-s", "USR1", "1")
    assert (pending.exit_code, pending.stderr) == (
        1,
        "railyard: 1: job 1 is pending: only a running job can be signalled "
        "(hint: railyard cancel ID ends a pending one)\n",
    )
    bad = cli("alice", "cancel", "-s", "B:USR1", "1")
    assert (bad.exit_code, bad.stderr.count("\n")) == (2, 1)
    assert "bad signal 'B:USR1' (hint: a name or number" in bad.stderr
    none = cli("alice", "cancel", "-s", "USR1", "-n", "p")
    assert (none.exit_code, none.stderr) == (0, "railyard: cancel: no job of yours matches\n")


def test_time_limits_are_whole_minutes_as_sbatch_keeps_them(cli: Cli) -> None:
    """``--time=1:30`` is 2 minutes under Slurm, which rounds up (railyard stopped such a
    job 30 s before Slurm did); ``update TimeLimit=`` rounds the same way."""
    job = cli("alice", "submit", "--parsable", "-t", "1:30", "--", "true").stdout.strip()
    assert cli.json("alice", "show", job)["walltime_s"] == 120
    assert cli("alice", "update", job, "TimeLimit=0:01").exit_code == 0
    assert cli.json("alice", "show", job)["walltime_s"] == 60
    bad = cli("alice", "update", job, "TimeLimit=soon")
    assert (bad.exit_code, bad.stderr.splitlines()[0][:44]) == (
        2,
        "railyard: update: TimeLimit: bad time 'soon'",
    )
