"""``railyard run``: a job joined to the user's terminal through the control plane (issue 23).

A real ``railyard up`` runs the jobs; the client is the real CLI in a child process, with
pipes for the plain runs and inside Debian's ``tmux`` for ``--pty`` (a real terminal: the
prompt, Ctrl-C to a ``sleep``, a resize, ``exit 3``). The WebSocket's refusals are read by the
client module directly.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.server_proc import ServerProcess
from tests.parts import needs
from tests.waiting import wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
LINGER_S = 2.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    state = tmp_path_factory.mktemp("run") / "state"
    state.mkdir()
    proc = ServerProcess(state, gpus=2, extra=("--terminal-linger", str(LINGER_S)))
    proc.start(timeout_s=120)
    yield proc
    proc.stop()


def cli_env(server: ServerProcess) -> dict[str, str]:
    return {**os.environ, "RAILYARD_URL": server.url, "RAILYARD_TOKEN": server.token}


def railyard(
    server: ServerProcess, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "railyard", *args],
        input=stdin, capture_output=True, text=True, env=cli_env(server), timeout=120,
    )  # fmt: skip


def test_a_command_s_output_input_and_status_come_back(server: ServerProcess) -> None:
    done = railyard(server, "run", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "out\n"
    assert done.stderr.startswith("err\n"), done.stderr  # then srun's "task 0: Exited..."
    killed = railyard(server, "run", "--", "sh", "-c", "kill -9 $$")
    assert killed.returncode == 137
    assert re.search(r"srun: error: \S+: task 0: Killed by signal 9", killed.stderr), killed.stderr
    piped = railyard(server, "run", "--", "sh", "-c", "read line; echo got $line", stdin="hi\n")
    assert (piped.returncode, piped.stdout) == (0, "got hi\n")
    # Two tasks: the first is joined to this terminal (srun's default stdin goes to task 0),
    # the second's output is read from its log as it is written: both print, as srun's do
    two = railyard(server, "run", "--gpus", "2", "--", "sh", "-c", "echo task $SLURM_PROCID")
    assert two.returncode == 0, two.stderr
    assert sorted(two.stdout.splitlines()) == ["task 0", "task 1"], two.stdout
    # -l: each line after its task's rank, a last line without a newline too
    script = "sleep $((SLURM_PROCID * 3)); echo a$SLURM_PROCID; printf b$SLURM_PROCID"
    labelled = railyard(server, "run", "-l", "--gpus", "2", "--", "sh", "-c", script)
    assert labelled.returncode == 0, labelled.stderr
    assert labelled.stdout.splitlines() == ["0: a0", "0: b0", "1: a1", "1: b1"]
    assert railyard(server, "run", "-l", "--", "echo", "x").stdout == "0: x\n"
    # a task other than the first fails: srun's status is the failure's, after all ended
    second = railyard(server, "run", "--gpus", "2", "--", "sh", "-c", "exit $SLURM_PROCID")
    assert second.returncode == 1, second.stderr
    # ... and had the first one stopped (kill-on-bad-exit): still the failure's status
    script = "if [ $SLURM_PROCID = 1 ]; then exit 4; fi; sleep 30"
    stopped = railyard(server, "run", "--gpus", "2", "--", "sh", "-c", script)
    assert stopped.returncode == 4, stopped.stderr


def test_a_batch_job_has_no_terminal_and_another_user_cannot_reach_one(
    server: ServerProcess,
) -> None:
    from railyard.client.client import Client
    from railyard.client.websocket import WebSocket

    batch = server.request("POST", "/v1/jobs", json={"command": ["sleep", "30"]})[0]["id"]
    wait_for(lambda: server.request("GET", f"/v1/jobs/{batch}")["state"] == "running")
    with Client(server.url, server.token) as client:
        ws = client.terminal(batch)
        kind, body = ws.recv(timeout_s=30) or ("", b"")
        assert kind == "text"
        assert b"is a batch job" in body, body
        assert ws.recv(timeout_s=30) is None
        assert ws.close_code == 4409
    name = f"eve{secrets.token_hex(3)}"
    server.request("POST", "/v1/users", json={"name": name, "unix_user": "nobody"})
    eve = server.request("POST", "/v1/tokens", json={"user": name})["token"]
    ws = WebSocket.connect(
        f"{server.url}/v1/jobs/{batch}/terminal", {"Authorization": f"Bearer {eve}"}
    )
    kind, body = ws.recv(timeout_s=30) or ("", b"")
    assert b"no job" in body, body  # another user's job is not even named
    assert ws.recv(timeout_s=30) is None
    assert ws.close_code == 4404
    server.request("DELETE", f"/v1/jobs/{batch}")


class Tmux:
    """One tmux server of this test's own, running one command in a 100x30 window."""

    def __init__(self, tmp: Path, command: str, env: dict[str, str]) -> None:
        self.socket = f"railyard-test-{secrets.token_hex(4)}"
        self.status = tmp / "status"
        shell = f"{command}; echo $? > {self.status}; sleep 30"
        subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", "new-session", "-d",
                        "-s", "t", "-x", "100", "-y", "30", shell],
                       env=env, check=True)  # fmt: skip

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-L", self.socket, "send-keys", "-t", "t", *keys], check=True)

    def screen(self) -> str:
        return subprocess.run(["tmux", "-L", self.socket, "capture-pane", "-p", "-t", "t"],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip

    def shows(self, text: str, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.screen():
            assert time.monotonic() < deadline, f"{text!r} not on the screen:\n{self.screen()}"
            time.sleep(0.1)

    def prompted(self, timeout_s: float = 60.0) -> None:
        """Something (the shell's prompt, whatever its rc files make it) is on the screen."""
        deadline = time.monotonic() + timeout_s
        while not self.screen().strip():
            assert time.monotonic() < deadline, "no prompt"
            time.sleep(0.1)

    def resize(self, cols: int, rows: int) -> None:
        subprocess.run(["tmux", "-L", self.socket, "resize-window", "-t", "t", "-x", str(cols),
                        "-y", str(rows)], check=True)  # fmt: skip

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], check=False)


def test_a_pty_shell_prompts_takes_ctrl_c_resizes_and_exits_with_its_status(
    server: ServerProcess, tmp_path: Path
) -> None:
    env = {**cli_env(server), "TERM": "xterm"}
    cmd = f"{sys.executable} -m railyard run --pty -- bash --norc --noprofile -i"
    tmux = Tmux(tmp_path, cmd, env)
    try:
        tmux.shows("bash-")  # bash's own prompt, from the task's terminal
        tmux.keys("PS1='ry''$ '", "Enter")
        tmux.shows("\nry$")
        tmux.keys("echo job=$SLURM_JOB_ID tty=$(tty)", "Enter")
        tmux.shows("tty=/dev/pts/")
        job_line = next(line for line in tmux.screen().splitlines() if line.startswith("job="))
        job_id = job_line.split()[0].removeprefix("job=")
        assert server.request("GET", f"/v1/jobs/{job_id}")["state"] == "running"
        # Ctrl-C only once the sleep is in the foreground (its shell said so), and 130 says
        # SIGINT ended it: a Ctrl-C typed before it ran could not leave that
        tmux.keys("sh -c 'echo sleeping; exec sleep 300'", "Enter")
        tmux.shows("\nsleeping")
        tmux.keys("C-c")
        tmux.keys("echo status=$?", "Enter")
        tmux.shows("\nstatus=130")
        tmux.resize(120, 40)
        tmux.keys("stty size", "Enter")
        tmux.shows("40 120")
        tmux.keys("exit 3", "Enter")
        wait_for(tmux.status.exists)
        wait_for(lambda: tmux.status.read_text().strip() != "")
        assert tmux.status.read_text().strip() == "3"
        wait_for(lambda: server.request("GET", f"/v1/jobs/{job_id}")["state"] == "failed")
        assert server.request("GET", f"/v1/jobs/{job_id}")["exit_code"] == 3
    finally:
        tmux.kill()


def test_a_lost_client_ends_the_job_after_the_linger(server: ServerProcess) -> None:
    client = subprocess.Popen(
        [sys.executable, "-m", "railyard", "run", "--", "sleep", "300"],
        env=cli_env(server), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    jobs: list[dict[str, str]] = []

    def running() -> bool:
        jobs[:] = [j for j in server.request("GET", "/v1/jobs") if j["name"] == "sleep"]
        return any(j["state"] == "running" for j in jobs)

    wait_for(running)
    (job,) = [j for j in jobs if j["state"] == "running"]
    time.sleep(1)  # connected
    client.kill()  # no goodbye: the connection is lost
    client.wait()
    began = time.monotonic()
    wait_for(lambda: server.request("GET", f"/v1/jobs/{job['id']}")["state"] != "running", 60)
    assert time.monotonic() - began >= LINGER_S - 0.5  # tolerated for the linger, then ended
    ended = server.request("GET", f"/v1/jobs/{job['id']}")
    assert ended["state"] in ("failed", "cancelled"), ended


def test_alloc_gives_a_shell_whose_srun_starts_steps_and_exit_releases_it(
    server: ServerProcess, tmp_path: Path
) -> None:
    env = {**cli_env(server), "TERM": "xterm", "SHELL": "/bin/bash"}
    tmux = Tmux(tmp_path, f"{sys.executable} -m railyard alloc --gpus 2 --name alloc", env)
    try:
        tmux.prompted()
        tmux.keys("PS1='in-alloc$ '", "Enter")
        tmux.shows("\nin-alloc$")
        step = "srun sh -c 'echo step=$SLURM_STEP_ID job=$SLURM_JOB_ID gpus=$CUDA_VISIBLE_DEVICES'"
        tmux.keys(step, "Enter")
        tmux.shows("\nstep=0 job=")
        tmux.keys(step, "Enter")
        tmux.shows("\nstep=1 job=")
        via_run = "sh -c 'echo step=$SLURM_STEP_ID job=$SLURM_JOB_ID via-run'"
        tmux.keys(f"{sys.executable} -m railyard run -- {via_run}", "Enter")  # a step too
        tmux.shows("via-run\n")
        lines = [line for line in tmux.screen().splitlines() if line.startswith("step=")]
        assert len({line.split()[1] for line in lines}) == 1  # every step in one job
        assert lines[0].endswith("gpus=0,1"), lines
        (alloc,) = [j for j in server.request("GET", "/v1/jobs") if j["name"] == "alloc"]
        assert alloc["state"] == "running"
        tmux.keys("exit", "Enter")
        wait_for(lambda: tmux.status.exists() and tmux.status.read_text().strip() == "0")
        wait_for(lambda: server.request("GET", f"/v1/jobs/{alloc['id']}")["state"] == "completed")
    finally:
        tmux.kill()


def test_alloc_reads_piped_commands_with_a_plain_shell(server: ServerProcess) -> None:
    """salloc with a pipe for stdin: the shell reads the commands without a prompt or job
    control, its srun starts steps, and its exit status is alloc's."""
    commands = "echo in-alloc\nsrun sh -c 'echo step=$SLURM_STEP_ID'\nexit 3\n"
    done = railyard(server, "alloc", "--gpus", "1", stdin=commands)
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines() == ["in-alloc", "step=0"]
    assert "job control" not in done.stderr, done.stderr


@needs("tracking-cgroup")
def test_attach_opens_a_shell_in_a_running_job_s_rank_and_only_for_its_owner(
    server: ServerProcess, tmp_path: Path
) -> None:
    from railyard.client.websocket import WebSocket

    body = {"command": ["sleep", "300"], "gpus": 2, "name": "attached-to"}
    job = server.request("POST", "/v1/jobs", json=body)[0]["id"]
    wait_for(lambda: server.request("GET", f"/v1/jobs/{job}")["state"] == "running")
    env = {**cli_env(server), "TERM": "xterm"}
    tmux = Tmux(tmp_path, f"{sys.executable} -m railyard attach {job} --rank 1", env)
    try:
        tmux.prompted()
        tmux.keys("PS1='att$ '", "Enter")
        tmux.shows("\natt$")
        tmux.keys(
            "echo rank=$SLURM_PROCID job=$SLURM_JOB_ID gpus=$CUDA_VISIBLE_DEVICES "
            "ranks=$(pgrep -xc sleep) cg=$(grep -c job_${SLURM_JOB_ID}_0_ /proc/self/cgroup)",
            "Enter",
        )
        tmux.shows("\nrank=1 ")
        line = next(x for x in tmux.screen().splitlines() if x.startswith("rank=1 "))
        fields = dict(item.split("=", 1) for item in line.split())
        assert fields["job"] == job
        assert fields["gpus"] == "0,1"  # the rank's own view of the job's GPUs
        assert int(fields["ranks"]) >= 2  # it sees the job's tasks
        assert int(fields["cg"]) >= 1  # it is in the job's step cgroup: it ends with the job
        tmux.keys("exit", "Enter")
        wait_for(lambda: tmux.status.exists() and tmux.status.read_text().strip() == "0")
        assert server.request("GET", f"/v1/jobs/{job}")["state"] == "running"  # the job runs on
    finally:
        tmux.kill()
    # Input that is not a terminal: the commands run and the shell ends with the input.
    piped = railyard(server, "attach", job, stdin="echo piped $SLURM_JOB_ID\nexit 4\n")
    assert (piped.returncode, piped.stdout) == (4, f"piped {job}\n"), piped.stderr
    ended = railyard(server, "attach", job, stdin="echo eof\n")
    assert (ended.returncode, ended.stdout) == (0, "eof\n"), ended.stderr
    name = f"mallory{secrets.token_hex(3)}"
    server.request("POST", "/v1/users", json={"name": name, "unix_user": "nobody"})
    other = server.request("POST", "/v1/tokens", json={"user": name})["token"]
    url = f"{server.url}/v1/jobs/{job}/attach?rank=0"
    ws = WebSocket.connect(url, {"Authorization": f"Bearer {other}"})
    message = ws.recv(timeout_s=30)
    assert message is not None
    assert b"no job" in message[1], message
    assert ws.recv(timeout_s=30) is None
    assert ws.close_code == 4404
    server.request("DELETE", f"/v1/jobs/{job}")


def test_a_session_left_idle_past_its_queue_s_limit_ends(server: ServerProcess) -> None:
    """The queue's idle limit (issue 23): what the client sends is the session's activity
    (its end of input here, at the start), and nothing after it for 3 s ends the job."""
    body = {"name": f"quick{secrets.token_hex(2)}", "idle_limit_s": 3}
    assert server.request("POST", "/v1/queues", json=body)["idle_limit_s"] == 3
    started = time.monotonic()
    done = railyard(server, "run", "--queue", body["name"], "--", "sleep", "60")
    assert time.monotonic() - started < 50  # stopped long before its sleep ends
    assert done.returncode != 0
    job = server.request("GET", "/v1/jobs", params={"queue": body["name"]})[0]
    assert (job["state"], job["reason"], job["interactive"]) == ("timeout", "IdleLimit", "pipes")
    assert job["active_t_s"] is not None  # the bridge wrote the client's activity
    assert job["start_t_s"] <= job["active_t_s"] <= job["end_t_s"] - 3
    assert "IdleLimit" in done.stderr, done.stderr


@needs("tracking-cgroup")
def test_run_in_a_container_relays_input_and_output(server: ServerProcess) -> None:
    """`railyard run --container-image` (issue 24): the interactive task is the runtime's, and
    its input and output still cross the bridge."""
    from tests.exec.container_image import OS_NAME, imported_image
    from tests.parts import require

    require("podman")
    server.request("PATCH", "/v1/queues/default", json={"container_mounts": ["/usr"]})
    done = railyard(
        server, "run", "--container-image", imported_image(), "--container-mounts",
        "/usr:/usr:ro", "--", "sh", "-c", "grep NAME /etc/os-release; read x; echo got $x; exit 5",
        stdin="hi\n",
    )  # fmt: skip
    assert done.returncode == 5, done.stderr
    assert f'NAME="{OS_NAME}"' in done.stdout
    assert done.stdout.endswith("got hi\n"), done.stdout
